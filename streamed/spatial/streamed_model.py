"""A model as the RDU runs it: one lowered, certified program per LAYER KIND, an embed program, a head, and how every
layer binds to its kind.

Two layers of one kind are one program up to the names they give (``streamed.analysis.kinds``), so they lower to one spatial
program: only each kind's representative (its first layer) is lowered; every other layer is a *binding* — the kind
program's tensor names mapped to that layer's names through the renaming between the two layers' token streams, and
for a name the lowering derives (``xn0__1``, ``Kc0_s1``, ``Wq0_c1__q8``) through the authored name it starts with
(or ``rebind_via`` for a name no layer binds). **Lowering cost is independent of depth**: a 64-layer model of two
kinds lowers two layer programs; the rest is linear arithmetic over the layers (bindings and residency).
``lower_streamed`` reads as those steps, as the seed's ``lower_*_streamed`` family does: the request admitted, the
tables the programs share, the embed, each kind, the head, every layer bound, residency and the estimate, the
identities.

★ A WEIGHT MOVES AS IT IS STORED: a product over a weight the checkpoint stores Q8_0 reads int8 planes and block
scales on chip (``streamed.analysis.kinds.stored_q8`` decides which); every other weight is read dense.

Deployments (``Deployment.mode``) are the cuts of ARCHITECTURE.md: ``forward`` (rows = ctx = the sequence, no embed,
no state carried), ``decode`` (rows 1), ``prefill`` (rows = chunk; the head reads the last row), ``batched`` (rows =
batch; per-sequence positions ``pos_s{b}`` and states ``Kc3_s{b}``), ``tp`` (rows 1 over ``tp`` chips) and
``batched-tp``. The deployments that stack rows (prefill, batched, batched-tp) name their hidden states and token
ids as the seed does: ``X`` into the first layer, ``bxo{l-1}`` into layer l, ``toks``. A bundle that cannot exist is
refused before anything is lowered, as ``StreamedReject(program="bundle")``; a program that does not lower is
refused naming that program and the statement that caused it — every such statement of every program, the first
reject carrying the others in ``more``.

Every program and every layer binding carries an *identity* (the seed's): which part of the model it is, the cut
it was lowered at, and the digest of its exact text with the weights it reads as stored Q8_0 — so two bundles, or a
bundle and the seed's, can be compared program by program and layer by layer.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from typing import Callable

from ..analysis.whole import Analysis
from ..analysis.kinds import layer_input, layer_of_kind, rebind_via, stacked_layer_input, stored_q8
from ..model.checkpoint import Naming, Storage, bind
from .ir import SpatialProgram, authored
from .deployment import Cut, Deployment, modelled_of, past_modelled, past_training, trained_of
from .lower import LoweringError, TPError, lower_program
from .passes.fold_q8 import read_dense, undeclared_dense
from .passes.split_tp import replicas, tp_slices
from .passes.errors import StreamedReject  # noqa: F401 — defined beside the passes' refusals; read from here too
from .residency import ResidencyError, estimate, plan
from .target import SpatialTarget, TargetError, load_target

class Cancelled(Exception):
    """The caller's ``cancelled()`` said stop: raised between programs, nothing half-made is returned."""


@dataclass(frozen=True)
class LayerKindProgram:
    """One lowered, certified layer program standing for every layer of its kind, in its representative's names.
    ``carried``: the state a step hands to the next. ``tp``: the tensor-parallel manifest (chips and the slices of
    each declared weight each chip loads), or ``None``."""

    name: str
    representative: int
    layers: tuple[int, ...]
    program: SpatialProgram
    carried: tuple[str, ...]
    tp: dict | None = None
    identity: dict | None = None


def identity(program: str, deployment: Deployment, cut: Cut, tokens, stored) -> dict:
    """What one program of a bundle is (the seed's ``Identity``): its part of the model (``embed``, ``layer 3``,
    ``head``), the deployment and cut it was lowered at, and the SHA-256 of the cut, ``stored`` (how it reads its
    weights: the stored-Q8_0 names, or a layer's kind digest, which marks them) and its exact token stream."""
    return identified(program, deployment, cut, _identity_prefix(cut, stored), tokens)


def _identity_prefix(cut: Cut, stored) -> "hashlib._Hash":
    """The digest of what every layer of a kind shares in its identity (the cut, how it reads its weights): hashed
    once a kind, copied for each layer."""
    return hashlib.sha256(repr(cut).encode() + b"\x00" + str(stored).encode() + b"\x00")


def identified(program: str, deployment: Deployment, cut: Cut, prefix, tokens) -> dict:
    h = prefix.copy()
    h.update("\x00".join(tokens).encode("utf-8"))  # token texts
    return {"program": program, "mode": deployment.mode, "rows": cut.rows, "ctx": cut.ctx, "batch": cut.batch,
            "tp": cut.tp, "digest": h.hexdigest()}


class LayerBinding:
    """How layer ``layer`` runs: its kind (by name), and every name of the kind program mapped to this layer's.

    A lowering binds a layer by its renaming alone and materialises ``tensors`` (one lookup per name of the kind
    program) the first time it is read — when the manifest is written, or a test asks — so lowering a deep model
    costs the kinds' lowering plus a constant per layer. Immutable once made."""

    __slots__ = ("layer", "kind", "_tensors", "_template", "_tokens", "_identity", "_identify")

    def __init__(self, layer: int, kind: str, tensors: dict | None = None, template: "_Template | None" = None,
                 tokens=None, identity: dict | None = None, identify: Callable[[int, object], dict] | None = None):
        self.layer = layer
        self.kind = kind
        self._tensors = tensors
        self._template = template
        self._tokens = tokens
        self._identity = identity
        self._identify = identify

    @property
    def tensors(self) -> dict:
        if self._tensors is None:
            self._tensors = self._template.bind(self.layer, self._tokens)
            self._template = None
        return self._tensors

    @property
    def identity(self) -> dict | None:
        """The layer's own identity (``identity``: its text, not its kind's), made the first time it is read."""
        if self._identity is None and self._identify is not None:
            self._identity = self._identify(self.layer, self._tokens)
            self._identify = None
        return self._identity

    def __eq__(self, other) -> bool:
        if not isinstance(other, LayerBinding):
            return NotImplemented
        return (self.layer, self.kind, self.tensors) == (other.layer, other.kind, other.tensors)

    def __repr__(self) -> str:
        return f"LayerBinding(layer={self.layer}, kind={self.kind!r}, tensors={self.tensors!r})"


@dataclass(frozen=True)
class StreamedModel:
    embed: SpatialProgram | None
    kinds: tuple[LayerKindProgram, ...]
    head: SpatialProgram
    layers: tuple[LayerBinding, ...]
    residency: dict
    estimate: dict
    deployment: Deployment
    target: SpatialTarget
    title: str | None = None
    embed_identity: dict | None = None
    head_identity: dict | None = None
    #: Which checkpoint tensor every weight reads, by each layer's own name (the manifest's table), and how it is stored.
    naming: Naming | None = None
    #: The SHA-256 of the document's text (UTF-8) the model was lowered from.
    document_sha256: str | None = None
    #: The statements behind each program's ops, by the program's name (``programs()``): ``{"index", "line",
    #: "text"}`` for each statement an op of it was lifted from — its index in the program (``Op.statement``), its
    #: 1-based line in the document (the representative's, for a kind) and its text on one line.
    statements: dict | None = None
    #: The context the model was trained at (the document's ``trained``), when it says.
    trained: int | None = None

    @property
    def past_training(self) -> str | None:
        """The warning for a context past the one the model was trained at (``deployment.past_training``)."""
        return past_training(self.deployment.ctx, self.trained)

    def kind(self, name: str) -> LayerKindProgram:
        return next(k for k in self.kinds if k.name == name)

    @property
    def summary(self) -> dict:
        """What a person reads first: the deployment, each kind and how many layers it serves, where state and
        weights live, the tiles of each program that does not fit SRAM whole, and the estimate."""
        d = self.deployment
        return {
            "mode": d.mode, "target": self.target.name, "ctx": d.ctx, "rows": d.rows, "tp": d.chips,
            "kinds": [{"name": k.name, "layers": len(k.layers), "representative": k.representative}
                      for k in self.kinds],
            "layers": len(self.layers),
            "states": dict(self.residency["states"]), "weights": dict(self.residency["weights"]),
            "tiles": {name: tiling(p) for name, p in self.programs() if p.tiles},
            "tokens_per_second": self.estimate["tokens_per_second"],
        }

    def programs(self) -> list[tuple[str, SpatialProgram]]:
        out = [("embed", self.embed)] if self.embed is not None else []
        out += [(k.name, k.program) for k in self.kinds]
        return out + [("head", self.head)]


# ---- binding -------------------------------------------------------------------------------------------------


def _binder_positions(texts) -> dict[str, int]:
    """Each binder of a program (given as its token texts) and the index of its first token: where any program of
    its kind names it."""
    binders = {texts[i + 1] for i in range(len(texts) - 1) if texts[i] == "Let"}
    first: dict[str, int] = {}
    for i, t in enumerate(texts):
        if t in binders and t not in first:
            first[t] = i
    return first


class _Template:
    """A kind program's names, each split once into the authored binder it starts with and the suffix the lowering
    added — so binding a layer costs one lookup per name, whatever the program."""

    def __init__(self, names, binders: dict[str, int], rep: int, input_fn):
        self.rep = rep
        self.positions = binders
        self.input_fn = input_fn
        # Each name as (name, the index of its binder's first token in any layer of the kind, suffix): a layer's
        # name is the token at that index plus the suffix. A name no binder starts is rebound by ``rebind_via``.
        self.parts: list[tuple[str, int | None, str]] = []
        for n in names:
            stem, suffix = self.split(n, binders)
            self.parts.append((n, binders[stem] if stem is not None else None, suffix))

    @staticmethod
    def split(name: str, binders) -> tuple[str | None, str]:
        if name in binders:
            return name, ""
        cuts = [i for i, ch in enumerate(name) if ch == "_"]
        for i in reversed(cuts):
            if name[:i] in binders:
                return name[:i], name[i:]
        return None, name

    def bind(self, layer: int, texts) -> dict[str, str]:
        rep, input_fn = self.rep, self.input_fn
        return {n: texts[i] + suffix if i is not None else rebind_via(n, rep, layer, input_fn)
                for n, i, suffix in self.parts}


def layer_namer(program: SpatialProgram, representative: int, rep_texts) -> Callable[[int, object], dict[str, str]]:
    """``names(layer, texts)``: what the lowering names, in layer ``layer`` (its token texts ``texts``), each name of
    its kind's ``program`` lowered at ``representative`` (whose texts are ``rep_texts``) — as ``_bind_layers`` binds
    it: so a bundle read back can be held to the document it claims to lower, state by state."""
    return _Template(program_names(program), _binder_positions(rep_texts), representative, layer_input).bind


def tiling(p: SpatialProgram) -> dict | None:
    """A program's tiles in brief (``None`` when it runs whole): how many, of how many rows (and columns), and
    whether its weights stay on chip across them."""
    if not p.tiles:
        return None
    return {"tiles": len(p.tiles), "row_tiles": len({t.rows for t in p.tiles}), "rows": p.tile_rows,
            "cols": p.tile_cols, "of_cols": p.cols, "weights_on_chip": p.weights_on_chip}


def program_names(p: SpatialProgram) -> list[str]:
    """Every name a program refers to: its tensors, and the declared weights its slices and Q8_0 parts come from."""
    names = [t.name for t in p.tensors]
    seen = set(names)
    for t in p.tensors:
        if t.of and t.of not in seen:
            seen.add(t.of)
            names.append(t.of)
    return names


def rename_program(p: SpatialProgram, fn: Callable[[str], str], name: str) -> SpatialProgram:
    """The same program under other names (a cached kind program served to a renamed representative; a stacked
    deployment's hidden states)."""
    tensors = tuple(replace(t, name=fn(t.name), of=fn(t.of) if t.of else None) for t in p.tensors)
    ops = tuple(replace(o, inputs=tuple(map(fn, o.inputs)), outputs=tuple(map(fn, o.outputs))) for o in p.ops)
    tiles = tuple(replace(t, reads=tuple(replace(a, tensor=fn(a.tensor)) for a in t.reads),
                          writes=tuple(replace(a, tensor=fn(a.tensor)) for a in t.writes)) for t in p.tiles)
    certificate = p.certificate
    if certificate and certificate.get("read_dense"):
        certificate = {**certificate, "read_dense": {fn(n): why for n, why in certificate["read_dense"].items()}}
    placement = p.placement and replace(p.placement, pmus=tuple((c, fn(n), a, b) for c, n, a, b in p.placement.pmus))
    return replace(p, name=name, tensors=tensors, ops=ops, carried=tuple(map(fn, p.carried)), tiles=tiles,
                   certificate=certificate, placement=placement)


def stack_names(p: SpatialProgram, names: dict[str, str]) -> SpatialProgram:
    """``p`` with its hidden-state and token names as a stacked deployment gives them (``names``: ``x`` → ``X``,
    ``xo3`` → ``bxo3``, ``tok`` → ``toks``), and every name the lowering derived from one (``x__last``) alike."""
    def fn(name: str) -> str:
        if name in names:
            return names[name]
        stem, sep, rest = name.partition("__")
        return f"{names[stem]}{sep}{rest}" if sep and stem in names else name
    return rename_program(p, fn, p.name)


# ---- the deployment ----------------------------------------------------------------------------------------------


def q8_weights(progs, program, storage: Storage) -> frozenset[str]:
    """``stored_q8``, without reading the checkpoint section when there is no checkpoint (every q8 weight stored
    Q8_0): the same answer, at a cost that does not grow with the document."""
    if storage.all_q8:
        return frozenset(n for n, t in program.assumed_storage(storage.assumed) if t == "Q8_0")
    return stored_q8(progs, program, storage)


#: The dtype a weight assumed stored other than Q8_0 is held in (``lift``): its bytes as stored.
_HELD_AS = {"F32": "f32", "F16": "f16", "MXFP4": "mxfp4"}


def dense_dtypes(program, storage: Storage) -> tuple[tuple[str, str], ...]:
    """The weights ``program`` declares ``q8`` that the storage assumed keeps other than Q8_0 and bf16, with the
    dtype each is held in: a router F32, a narrow weight F16, an expert bank MXFP4 (none when a checkpoint is read:
    its dense tensors are read as bf16)."""
    if not storage.all_q8:
        return ()
    return tuple((n, _HELD_AS[t]) for n, t in program.assumed_storage(storage.assumed) if t in _HELD_AS)


def stored_undeclared(progs, program, storage: Storage) -> frozenset[str]:
    """The weights ``program`` declares without ``q8`` that the checkpoint stores Q8_0 anyway (none without a
    checkpoint: every weight is then stored as declared). No product folds them: the manifest says so."""
    if storage.all_q8:
        return frozenset()
    entries = progs.document.checkpoint
    return frozenset(d.name for d in program.decls.values() if d.role == "weight" and not d.q8
                     and storage.stored_as(bind(entries, d.name), False) == "Q8_0")


def kept_dense(progs, program, storage: Storage) -> dict[str, str]:
    """The weights ``program`` declares ``q8`` that the checkpoint keeps in blocks of a type other than Q8_0
    (``Storage.kept``: Q4_K, Q6_K, Q4_0, BF16, MXFP4…), each with why the chip reads it dense: its products fold Q8_0
    alone (docs/language.md §1.6), so the host dequantises the type's blocks and loads the weight bf16."""
    if storage.all_q8:
        return {}
    entries = progs.document.checkpoint
    out = {}
    for d in program.decls.values():
        if d.role == "weight" and d.q8:
            kept = storage.kept(bind(entries, d.name), True)
            if kept is not None and kept != "Q8_0":
                out[d.name] = (f"stored {kept}: the chip's products fold Q8_0 blocks alone, so the host dequantises "
                               f"its {kept} blocks and loads it bf16")
    return out


def _dense_named(p: SpatialProgram, undeclared: frozenset[str], kept: dict[str, str] | None = None) -> SpatialProgram:
    """``p`` with the weights of ``undeclared`` it reads dense, and those of ``kept`` (with their why), added to its
    certificate's ``read_dense`` — each only where ``p`` holds it."""
    why = undeclared_dense(p, undeclared) if undeclared else {}
    if kept:
        held = {t.of or t.name for t in p.tensors if t.role == "weight" and t.part is None}
        why = {**why, **{n: w for n, w in kept.items() if n in held}}
    if not why:
        return p
    return replace(p, certificate={**p.certificate, "read_dense": {**p.certificate.get("read_dense", {}), **why}})


def _first_error(analysis: Analysis) -> StreamedReject:
    d = analysis.errors[0]
    program = "document"
    for s in analysis.document.sections:
        if s.range.start.offset <= d.range.start.offset <= s.range.end.offset and s.kind.value in ("embed", "layer", "head"):
            program = s.label
    return StreamedReject(program, f"line {d.range.start.line + 1}: {d.message}")


def _reject(program: str, e: LoweringError, layer: int | None = None) -> StreamedReject:
    return StreamedReject(program, e.why, e.statement, e.binder, layer)


def shared_tables(analysis: Analysis, programs, memo: dict | None = None) -> frozenset[str]:
    """★ THE PROGRAMS AGREE ON EVERY TABLE THEY SHARE. A host table (``Rcos1``) is every program's that reads it,
    and the hidden state one program writes is the next one's input: the embedding writes the first hidden state
    and never reads it, so the deployment — not any one program — decides their layout, over all programs. Each
    shared table must be declared alike (shape and fill) everywhere; returns the shared names. ``memo`` (kept by
    the caller): each program's tables, read once per program, and the last answer — the same while the programs
    that changed since declare the same tables and read and write the same names."""
    last = memo.get("last") if memo is not None else None
    chain = [p for _, p in programs]
    if last is not None and len(last[0]) == len(chain) and all(
            _tables(a, memo) == _tables(b, memo) and (a.input, a.output) == (b.input, b.output)
            for a, b in zip(chain, last[0]) if a is not b):
        memo["last"] = (chain, last[1])
        return last[1]
    seen: dict[str, tuple] = {}
    where: dict[str, str] = {}
    for label, p in programs:
        for name, spec, statement in _tables(p, memo):
            if name in seen and seen[name] != spec:
                raise StreamedReject(label, f"`{name}` is {_table(spec)} here but {_table(seen[name])} in "
                                            f"{where[name]}: programs share a table, so they declare it alike",
                                     statement, name)
            seen.setdefault(name, spec)
            where.setdefault(name, label)
    boundary = set()
    for a, b in zip(chain, chain[1:]):
        if a.output and b.input:
            boundary.add(b.input)
    shared = frozenset(seen) | frozenset(boundary)
    if memo is not None:
        memo["last"] = (chain, shared)
    return shared


def _tables(p, memo: dict | None) -> list[tuple[str, tuple, int]]:
    """``p``'s tables as ``(name, (shape, fill), statement)``, kept in ``memo`` by the program."""
    hit = memo.get(("tables", id(p))) if memo is not None else None
    if hit is None or hit[0] is not p:
        hit = (p, [(d.name, (d.shape, d.fill), d.statement) for d in p.decls.values() if d.role == "table"])
        if memo is not None:
            memo[("tables", id(p))] = hit
    return hit[1]


def shared_part(program, shared: frozenset[str]) -> tuple:
    """What of ``shared`` a program names — the part of the deployment's shared tables its cache entry depends on,
    so that a kind joining or leaving elsewhere does not make every other kind's entry new: a layer's binders in it,
    each by its place among the layer's binders (so a kind's programs under any names agree); the embed's or the
    head's names in it."""
    section = program.section
    if section.shape is not None:
        return tuple(i for i, n in enumerate(section.shape.names) if n in shared)
    return tuple(sorted(n for n in (*program.decls, program.input) if n in shared))


def _table(spec) -> str:
    shape, fill = spec
    text = " by ".join(str(d) for d in shape)
    return f"{text}, {fill[0]} of base {fill[1]:g}" if fill else text


def tp_summary(p: SpatialProgram) -> dict | None:
    """A tensor-parallel kind program's chips, all-reduces and the slices of each declared weight each chip loads —
    in the declared weight's coordinates, the same for every layer of the kind (the manifest names each layer's own
    checkpoint tensor) — the weights its chips read dense, and the tensors some chips hold copies of (``replicas``:
    a key/value head replicated on the chips whose query heads read it)."""
    if p.tp <= 1:
        return None
    return {"chips": p.tp, "allreduces": sum(1 for o in p.ops if o.kind == "allreduce"), "slices": tp_slices(p),
            "read_dense": read_dense(p), "replicas": replicas(p)}


def state_declaration(kind_program: SpatialProgram, binding: "LayerBinding", program) -> tuple[int | None, str | None]:
    """The statement declaring a layer's largest carried state, and its name in that layer (``Kc17`` for the kind
    program's ``Kc3_s0``…): where a user shrinks a state that does not fit. ``(None, None)`` if it carries none."""
    carried = [t for t in kind_program.tensors if t.name in set(kind_program.carried)]
    if not carried:
        return None, None
    sizes: dict[str, int] = {}
    for t in carried:  # a batched step's per-sequence caches are one authored state
        name = authored(binding.tensors.get(t.name, t.name))
        sizes[name] = sizes.get(name, 0) + t.bytes
    name = max(sizes, key=sizes.get)
    decl = program.decls.get(name)
    return (decl.statement if decl is not None else None), name


def lower_whole(progs, label: str, program, cut: Cut, target: SpatialTarget, storage: Storage, constants, shared,
                cache: dict) -> SpatialProgram:
    """The embed or the head lowered, or served from ``cache`` (keyed by its exact tokens). A refusal is cached too
    and raised again as the same ``LoweringError``."""
    q8 = q8_weights(progs, program, storage)
    dtypes = dense_dtypes(program, storage)
    key = ("program", label, tuple(program.section.texts), q8, dtypes, cut, target, constants,
           shared_part(program, shared))
    if key not in cache:
        try:
            cache[key] = lower_program(program, progs.constants, cut, target, label, q8, dtypes)
        except LoweringError as e:
            cache[key] = e
    hit = cache[key]
    if isinstance(hit, LoweringError):
        raise hit
    return _dense_named(hit, stored_undeclared(progs, program, storage), kept_dense(progs, program, storage))


def lower_kind(progs, kind, label: str, rep, cut: Cut, target: SpatialTarget, storage: Storage, constants, shared,
               cache: dict) -> SpatialProgram:
    """A layer kind's program, lowered from its representative ``rep`` — or served from ``cache``, keyed by the
    kind's digest (its program up to names), the cut, the target, the constants and the shared tables. A program
    cached under another representative's names is renamed to ``rep``'s (names only: nothing is lowered again); a
    refusal is cached too, its binder renamed likewise."""
    key = ("kind", kind.digest, storage.assumed if storage.all_q8 else None, cut, target, constants,
           shared_part(rep, shared))
    hit = cache.get(key)
    if hit is None:
        try:
            program = lower_program(rep, progs.constants, cut, target, label, q8_weights(progs, rep, storage),
                                    dense_dtypes(rep, storage))
            hit = (program, kind.representative, rep.section.texts)
        except LoweringError as e:
            hit = (e, kind.representative, rep.section.texts)
        cache[key] = hit
    found, old_rep, old_tokens = hit
    tokens = rep.section.texts  # token texts: what names a layer, without making its tokens' ranges
    same = old_rep == kind.representative and (old_tokens is tokens or list(old_tokens) == list(tokens))
    if isinstance(found, LoweringError):
        if same or found.binder is None:
            raise found
        positions = _binder_positions(old_tokens)
        binder = tokens[positions[found.binder]] if found.binder in positions else found.binder
        raise type(found)(found.why.replace(f"`{found.binder}`", f"`{binder}`"), found.statement, binder)
    if not same:
        template = _Template(program_names(found), _binder_positions(old_tokens), old_rep, layer_input)
        found = rename_program(found, template.bind(kind.representative, tokens).__getitem__, label)
    elif found.name != label:
        found = replace(found, name=label)
    return _dense_named(found, stored_undeclared(progs, rep, storage), kept_dense(progs, rep, storage))


def lower_streamed(analysis: Analysis, deployment: Deployment, target: SpatialTarget | str | None = None,
                   storage: Storage | None = None, cache: dict | None = None,
                   progress: Callable[[str, int, int], None] | None = None,
                   cancelled: Callable[[], bool] | None = None, to_document=None) -> StreamedModel:
    """Lower ``analysis``'s model for ``deployment``: the embed (except ``forward``), one program per layer kind, the
    head; every layer bound to its kind; residency and the estimate; the statements behind each program's ops
    (``statements_of``, placed in the document by ``to_document`` when the analysis's ranges are chunk-relative).
    Raises ``StreamedReject``, or ``Cancelled``.

    ``cache`` (a dict the caller keeps) serves a kind program lowered before for the same digest, deployment,
    target, constants and shared tables — renamed to the representative's names if they changed."""
    deployment, target, storage = _admitted(analysis, deployment, target, storage)
    d = _Deploying(analysis, deployment, target, storage, cache, progress, cancelled)  # the tables the programs share
    # Every program is lowered, so that the bundle's refusal names every reject of every program, not its first.
    embed = d.whole("embed", d.progs.embed, d.embed_cut) if d.with_embed else None
    kinds, templates = _lower_kinds(d)
    head = d.whole("head", d.progs.head, d.head_cut)
    if d.rejects:
        raise replace(d.rejects[0], more=tuple(d.rejects[1:]))
    if d.stacked is not None:
        if embed is not None:
            embed = stack_names(embed, d.stacked(None, embed))
        head = stack_names(head, d.stacked(len(d.by_layer), head))
    layers, layer_kinds = _bind_layers(d, templates, 1 if embed is not None else 0)
    embed, kinds, head, residency, est = _resident(d, embed, kinds, head, layers, layer_kinds)
    if progress is not None:
        progress("bound", d.total, d.total)
    return _identified(d, embed, kinds, head, layers, residency, est, to_document)


def _admitted(analysis: Analysis, deployment: Deployment, target, storage) -> tuple[Deployment, SpatialTarget, Storage]:
    """The request as it is lowered — the deployment made normal, the target loaded, the storage — or the
    ``StreamedReject`` that refuses it before any program is lowered: a deployment that cannot exist, a document
    with errors, a target that does not load, a model without layers, without a head, or (unless ``forward``)
    without an embed."""
    why = deployment.refusal()
    if why:
        raise StreamedReject("bundle", why)
    deployment = deployment.normal()
    if analysis.errors:
        raise _first_error(analysis)
    why = past_modelled(deployment.ctx, modelled_of(analysis.programs.constants))
    if why:
        raise StreamedReject("bundle", why)
    try:
        target = load_target(target)
    except TargetError as e:
        raise StreamedReject("bundle", str(e)) from None
    storage = storage or analysis.storage
    progs = analysis.programs
    if not progs.layers:
        raise StreamedReject("bundle", "the model has no layers")
    if progs.head is None:
        raise StreamedReject("head", "the document has no `## Head` section")
    if deployment.mode != "forward" and progs.embed is None:
        raise StreamedReject("embed", f"the document has no `## Embed` section; a {deployment.mode} bundle starts "
                                      f"from token ids")
    return deployment, target, storage


class _Deploying:
    """One deployment as it is lowered: the programs of a step in order (the embed unless ``forward``, each kind's
    representative, the head) and the tables they share; the cuts; the kind cache; progress and cancellation between
    programs; and the rejects found so far."""

    def __init__(self, analysis: Analysis, deployment: Deployment, target: SpatialTarget, storage: Storage,
                 cache: dict | None, progress, cancelled):
        self.analysis, self.deployment, self.target, self.storage = analysis, deployment, target, storage
        self.progs = progs = analysis.programs
        self.with_embed = deployment.mode != "forward"
        self.by_layer = {p.section.index: p for p in progs.layers}
        self.reps = [(layer_of_kind(k.representative, k.name), self.by_layer[k.representative]) for k in analysis.kinds]
        chain = ([("embed", progs.embed)] if self.with_embed else []) + self.reps + [("head", progs.head)]
        self.shared = shared_tables(analysis, chain)
        self.constants = tuple(sorted(progs.constants.items()))
        self.cache = cache if cache is not None else {}
        self.total, self.done = len(chain), 0
        self.progress, self.cancelled = progress, cancelled
        self.rejects: list[StreamedReject] = []
        self.embed_cut, self.layer_cut, self.head_cut = (deployment.cut("embed"), deployment.cut("layer"),
                                                         deployment.cut("head"))
        self.stacked = _stacked_names(progs, deployment) if deployment.stacked else None
        self.input_of = stacked_layer_input if self.stacked else layer_input

    def step(self, label: str) -> None:
        """Before each program: stop if the caller said so, and say which program is next."""
        if self.cancelled is not None and self.cancelled():
            raise Cancelled()
        if self.progress is not None:
            self.progress(label, self.done, self.total)
        self.done += 1

    def whole(self, label: str, p, cut: Cut) -> SpatialProgram | None:
        """The embed or the head lowered, or ``None`` with its rejects kept."""
        self.step(label)
        try:
            return lower_whole(self.progs, label, p, cut, self.target, self.storage, self.constants, self.shared,
                               self.cache)
        except LoweringError as e:
            self.rejects.extend(_reject(label, one) for one in e.every)
            return None

    def whole_identity(self, label: str, p, cut: Cut) -> dict:
        return identity(label, self.deployment, cut, p.section.texts, sorted(q8_weights(self.progs, p, self.storage)))


def _lower_kinds(d: _Deploying) -> tuple[list[LayerKindProgram], list[_Template]]:
    """Each kind's program, lowered from its representative (or served from the cache) with its identity, and the
    template that binds every layer of the kind to it. A width the model does not admit refuses the bundle; any
    other reject is the kind program's."""
    kind_programs: list[LayerKindProgram] = []
    templates: list[_Template] = []
    for k, (label, rep) in zip(d.analysis.kinds, d.reps):
        d.step(label)
        try:
            program = lower_kind(d.progs, k, label, rep, d.layer_cut, d.target, d.storage, d.constants, d.shared,
                                 d.cache)
        except TPError as e:
            d.rejects.extend(StreamedReject("bundle", f"tensor parallel over {d.layer_cut.tp} chips: {one.why}",
                                            one.statement, one.binder, k.representative) for one in e.every)
            continue
        except LoweringError as e:
            d.rejects.extend(_reject(label, one, k.representative) for one in e.every)
            continue
        if d.stacked is not None:
            program = stack_names(program, d.stacked(k.representative, program))
        tokens = rep.section.texts
        kind_programs.append(LayerKindProgram(k.name, k.representative, tuple(k.layers), program, program.carried,
                                              tp_summary(program),
                                              identity(f"layer {k.representative}", d.deployment, d.layer_cut, tokens,
                                                       k.digest)))
        templates.append(_Template(program_names(program), _binder_positions(tokens), k.representative, d.input_of))
    return kind_programs, templates


def _bind_layers(d: _Deploying, templates: list[_Template], offset: int) -> tuple[tuple[LayerBinding, ...], list[int]]:
    """Every layer bound to its kind's program by the kind's template (its names made when first read), with its
    own identity; and each layer's program index in the step (``offset``: the programs before the first kind)."""
    bindings: list[LayerBinding | None] = [None] * len(d.by_layer)
    layer_kinds = [0] * len(d.by_layer)
    deployment, layer_cut = d.deployment, d.layer_cut
    for i, k in enumerate(d.analysis.kinds):
        template, name, index = templates[i], k.name, offset + i

        def identify(l: int, tokens, prefix=_identity_prefix(layer_cut, k.digest)) -> dict:
            return identified(f"layer {l}", deployment, layer_cut, prefix, tokens)

        for l in k.layers:
            bindings[l] = LayerBinding(l, name, None, template, d.by_layer[l].section.texts, identify=identify)
            layer_kinds[l] = index
    return tuple(bindings), layer_kinds


def _resident(d: _Deploying, embed, kind_programs: list[LayerKindProgram], head, layers, layer_kinds):
    """Where every state and weight lives over the whole deployment (``residency.plan``: each program's tensors
    carrying their tier) and the estimate; a plan that fits no tier refuses the bundle on the declaration of the
    state that does not fit."""
    entries = ([("embed", None, embed)] if embed is not None else []) + \
              [(kp.name, list(kp.layers), kp.program) for kp in kind_programs] + [("head", None, head)]
    try:
        residency, placed, layer_tiers = plan(entries, layer_kinds, d.target)
    except ResidencyError as e:
        statement, binder = (None, None) if e.layer is None or "states" not in str(e) else \
            state_declaration(entries[e.program][2], layers[e.layer], d.by_layer[e.layer])
        raise StreamedReject("bundle", str(e), statement, binder, e.layer) from None
    est = estimate([(n, ls, p) for (n, ls, _), p in zip(entries, placed)], layer_kinds, layer_tiers,
                   d.deployment.tokens_per_step, d.target)
    offset = 1 if embed is not None else 0
    if embed is not None:
        embed = placed[0]
    kind_programs = [replace(kp, program=p) for kp, p in zip(kind_programs, placed[offset:offset + len(kind_programs)])]
    return embed, kind_programs, placed[-1], residency, est


def _identified(d: _Deploying, embed, kind_programs, head, layers, residency, est, to_document=None) -> StreamedModel:
    """The model with what identifies it: the embed's and the head's identities, which checkpoint tensor every
    weight reads (``Naming``), the document's title and SHA-256, and the statements behind each program's ops."""
    analysis, progs = d.analysis, d.progs
    q8 = {n: t for p in progs.all() for n, t in p.assumed_storage(d.storage.assumed)}  # without renaming every layer's
    naming = Naming.of(analysis.document.checkpoint, d.storage, q8)
    data = analysis.document.text.encode("utf-8")
    statements = {kp.name: statements_of(d.by_layer[kp.representative], kp.program, data, to_document)
                  for kp in kind_programs}
    if embed is not None:
        statements["embed"] = statements_of(progs.embed, embed, data, to_document)
    statements["head"] = statements_of(progs.head, head, data, to_document)
    return StreamedModel(embed, tuple(kind_programs), head, layers, residency, est, d.deployment, d.target,
                         analysis.document.title,
                         d.whole_identity("embed", progs.embed, d.embed_cut) if embed is not None else None,
                         d.whole_identity("head", progs.head, d.head_cut), naming,
                         hashlib.sha256(data).hexdigest(), statements, trained_of(progs.constants))


#: The longest statement text a manifest records (a statement longer than this is cut, with an ellipsis).
STATEMENT_TEXT = 240


def statements_of(program, lowered: SpatialProgram, data: bytes, to_document=None) -> tuple[dict, ...]:
    """The statements of ``program`` (an authored program, in the document ``data``, UTF-8) that ``lowered``'s ops were
    lifted from: index, 1-based line and text on one line — so a picture can say which statement each region of
    the chip serves without the document. ``to_document(section, range)``: where a range of the analysis is in the
    document (the incremental analysis's sections are chunk-relative); the ranges as they are without it."""
    used = {op.statement for op in lowered.ops if op.statement is not None}
    out = []
    for st in program.statements:
        if st.index in used:
            r = to_document(program.section, st.range) if to_document is not None else st.range
            one = " ".join(data[r.start.offset:r.end.offset].decode("utf-8", "replace").split())  # byte offsets
            if len(one) > STATEMENT_TEXT:
                one = one[:STATEMENT_TEXT - 1] + "…"
            out.append({"index": st.index, "line": r.start.line + 1, "text": one})
    return tuple(out)


def _stacked_names(progs, deployment: Deployment) -> Callable[[int | None, SpatialProgram], dict[str, str]]:
    """How a stacked deployment (``Deployment.stacked``) renames a program's hidden states and token ids, as the
    seed's batched cuts name them: the embed's token ids ``toks`` and its output ``X``; layer l's input
    ``stacked_layer_input(l)`` and output ``stacked_layer_input(l + 1)``; the head's input after the last layer.
    Called with the layer index (``None`` for the embed, the layer count for the head) and the lowered program."""
    def names(layer: int | None, p: SpatialProgram) -> dict[str, str]:
        out: dict[str, str] = {}
        hidden = [t.name for t in p.inputs if t.shape != () and t.dtype != "int32"]
        tokens = [t.name for t in p.inputs if t.shape != () and t.dtype == "int32"]
        if layer is None:
            out.update({n: "toks" for n in tokens})
        else:
            out.update({n: stacked_layer_input(layer) for n in hidden})
        if p.output is not None and (layer is None or layer < len(progs.layers)):
            out[p.output] = stacked_layer_input(0 if layer is None else layer + 1)
        return out
    return names


# ---- the six deployments, by name ------------------------------------------------------------------------------


def lower_forward_streamed(analysis: Analysis, ctx: int, **kw) -> StreamedModel:
    """One program per layer kind plus the head over a whole sequence of ``ctx`` rows; no state carried."""
    return lower_streamed(analysis, Deployment("forward", ctx=ctx), **kw)


def lower_decode_streamed(analysis: Analysis, ctx: int, **kw) -> StreamedModel:
    """The embedding lookup, one program per layer kind over KV caches of ``ctx`` positions, and a head emitting the
    next token; ``tok`` and ``pos`` are runtime inputs, so the bundle serves every step."""
    return lower_streamed(analysis, Deployment("decode", ctx=ctx), **kw)


def lower_prefill_streamed(analysis: Analysis, ctx: int, chunk: int, **kw) -> StreamedModel:
    """``chunk`` tokens of one sequence per step over the decode step's own state; the head reads the last row."""
    return lower_streamed(analysis, Deployment("prefill", ctx=ctx, chunk=chunk), **kw)


def lower_batched_decode_streamed(analysis: Analysis, ctx: int, batch: int, **kw) -> StreamedModel:
    """``batch`` sequences per step, each with its own token, position ``pos_s{b}`` and state ``Kc3_s{b}``, every
    weight read once for all of them."""
    return lower_streamed(analysis, Deployment("batched", ctx=ctx, batch=batch), **kw)


def lower_tp_decode_streamed(analysis: Analysis, ctx: int, tp: int, **kw) -> StreamedModel:
    """Decode over ``tp`` chips: each chip its own heads and FFN columns, two all-reduces a layer; embed and head on
    the replicated spine; each kind carries the slices each chip loads."""
    return lower_streamed(analysis, Deployment("tp", ctx=ctx, tp=tp), **kw)


def lower_batched_tp_decode_streamed(analysis: Analysis, ctx: int, batch: int, tp: int, **kw) -> StreamedModel:
    """The serving shape: batched decode with every layer kind over ``tp`` chips."""
    return lower_streamed(analysis, Deployment("batched-tp", ctx=ctx, batch=batch, tp=tp), **kw)
