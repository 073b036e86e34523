"""Layer kinds: which layers are one program up to the names they give, and where two that should be are not.

The definitions are the seed's (``streamed.rs``) and LANGUAGE §7, exactly:

- ``tokens``: each maximal run of ASCII letters, digits and ``_``, and each other non-space character;
- ``binders``: every token that follows a ``Let`` token;
- ``shape_digest``: SHA-256 of the token stream with every binder replaced by the order of its first appearance,
  marked when the checkpoint stores it Q8_0, every other token kept;
- a **kind** is the layers sharing a digest, in order of their first layer;
- ``renaming(a, b)``: the one-to-one map of binders aligning ``a`` to ``b`` token by token, or ``None``.

Invariant: two layers have equal digests exactly when ``renaming`` between them is not ``None`` and maps every
binder to a binder read the same way (stored Q8_0 or not). Kinds are computed in one pass over the layers: cost is
linear in the document, whatever the depth.
"""

from __future__ import annotations

import difflib
import hashlib
import re
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

from ..lang.lexer import Range, tokens as _lex_tokens
from ..lang.syntax import Call, Binary, Let, SectionKind
from ..model.checkpoint import ALL_Q8, Storage, bind
from ..model.program import Program, Programs

__all__ = [
    "tokens", "binders", "shape_digest", "renaming", "layer_kinds", "LayerKind", "Divergence", "divergences",
    "describe", "rebind", "rebind_via", "layer_input", "stacked_layer_input", "stored_q8", "HOST_TABLE",
]


def tokens(text: str) -> list[str]:
    """A program's tokens: each maximal run of letters, digits and ``_``, and each other non-space character."""
    return _lex_tokens(text)


def binders(toks: Sequence[str]) -> set[str]:
    """The names a program binds: every token that follows ``Let``."""
    return {toks[i + 1] for i in range(len(toks) - 1) if toks[i] == "Let"}


def _texts(program: str | Sequence[str]) -> list[str]:
    if isinstance(program, str):
        return tokens(program)
    return [t if isinstance(t, str) else t.text for t in program]


def shape_digest(program: str | Sequence, stored: Iterable[str] = ()) -> str:
    """The digest of a program up to the names it binds: every binder replaced by the order of its first appearance,
    marked when it is in ``stored`` (read as stored, Q8_0), every other token kept. Hex SHA-256."""
    toks = _texts(program)
    names = binders(toks)
    stored = set(stored)
    order: dict[str, int] = {}
    parts: list[str] = []
    for t in toks:
        if t in names:
            n = order.setdefault(t, len(order))
            parts.append(f"\x01{n}\x02" if t in stored else f"\x01{n}")
        else:
            parts.append(t)
    return hashlib.sha256(" ".join(parts).encode("utf-8")).hexdigest()


def renaming(a: str | Sequence, b: str | Sequence) -> dict[str, str] | None:
    """The renaming that turns program ``a`` into program ``b``, binder by binder: the tokens aligned position by
    position, every other token kept exactly. ``None`` when they are not one program up to the names they bind."""
    ta, tb = _texts(a), _texts(b)
    if len(ta) != len(tb):
        return None
    na, nb = binders(ta), binders(tb)
    forward: dict[str, str] = {}
    back: dict[str, str] = {}
    for x, y in zip(ta, tb):
        bx, by = x in na, y in nb
        if bx != by:
            return None
        if bx:
            if forward.setdefault(x, y) != y or back.setdefault(y, x) != x:
                return None
        elif x != y:
            return None
    return forward


# ---- naming layers after what they do ----------------------------------------------------------------------------


def _calls(program: Program):
    def walk(e):
        if isinstance(e, Call):
            yield e
            for _, a in e.args:
                yield from walk(a)
        elif isinstance(e, Binary):
            yield from walk(e.left)
            yield from walk(e.right)

    for st in program.statements:
        value = getattr(st, "value", None)
        if value is not None and not hasattr(value, "role"):
            yield from walk(value)


def _num(program_constants: dict[str, float], n) -> str:
    if n is None:
        return "?"
    if hasattr(n, "value"):
        v = n.value
    else:
        v = program_constants.get(n.text)
        if v is None:
            return n.text
    return f"{int(v)}" if v == int(v) else f"{v:g}"


def describe(program: Program, constants: dict[str, float]) -> str:
    """What a layer does, as its kind is named: ``attention``, ``attention, window 512``, ``attention, chunks of
    8192``, ``gated deltanet``, ``latent attention`` — with ``, experts`` when its feed-forward block is a mixture."""
    calls = list(_calls(program))
    ops = {c.op for c in calls}
    if "gated delta" in ops:
        name = "gated deltanet"
    elif "latent attention" in ops:
        name = "latent attention"
    elif "attention" in ops:
        att = next(c for c in calls if c.op == "attention")
        name = "attention"
        if "window" in att.options:
            name += f", window {_num(constants, att.number('W'))}"
        if "chunks of" in att.options:
            name += f", chunks of {_num(constants, att.number('C'))}"
    elif "short convolution" in ops:
        name = "convolution"
    else:
        name = "feed-forward"
    if "experts" in ops:
        name += ", experts"
    return name


def family(name: str) -> str:
    """A kind's name with its numbers and its ``(layer N)`` erased: what the program does, not how wide."""
    return re.sub(r"\d+", "#", re.sub(r" \(layer \d+\)$", "", name))


# ---- storage --------------------------------------------------------------------------------------------------


def stored_q8(programs: Programs, program: Program, storage: Storage = ALL_Q8) -> frozenset[str]:
    """The weights ``program`` declares that the checkpoint stores Q8_0 (and so are read as stored)."""
    declared = program.q8_declared()
    if storage.all_q8:
        return frozenset(declared)
    entries = programs.document.checkpoint
    return frozenset(n for n in declared if storage.q8(bind(entries, n), True))


def stored_as(programs: Programs, name: str, declared_q8: bool, storage: Storage) -> str:
    ref = None if storage.all_q8 else bind(programs.document.checkpoint, name)
    return storage.stored_as(ref, declared_q8)


# ---- kinds ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LayerKind:
    """The layers that are one program up to names. ``layers`` ascending; ``representative`` is the first."""

    name: str
    layers: tuple[int, ...]
    digest: str

    @property
    def representative(self) -> int:
        return self.layers[0]


def digest_of(programs: Programs, p: Program, storage: Storage = ALL_Q8, cache: dict | None = None) -> str:
    """``shape_digest`` of layer ``p`` under ``storage``, computed once per shape and storage pattern (``cache``):
    two layers of one shape (``lang.parser.Shape``) have one digest wherever the checkpoint stores the same of their
    weights Q8_0 — with no checkpoint, always."""
    shape = p.section.shape
    if shape is None or shape.key is None or cache is None:
        return shape_digest(p.section.texts, stored_q8(programs, p, storage))
    if storage.all_q8:
        key = shape.key
    else:
        stored = stored_q8(programs, p, storage)
        key = (shape.key, tuple(n in stored for n in shape.names))
    d = cache.get(key)
    if d is None:
        d = cache[key] = shape_digest(p.section.texts, stored_q8(programs, p, storage))
    return d


def layer_kinds(programs: Programs, storage: Storage = ALL_Q8, cache: dict | None = None) -> list[LayerKind]:
    """The model's layer kinds, in the order their first layer appears, each named after what it does; two kinds a
    name does not tell apart are told apart by their first layer (``attention (layer 17)``). ``cache``: digests by
    shape, kept across analyses by the editor (``digest_of``)."""
    cache = {} if cache is None else cache
    groups: dict[str, list[Program]] = {}
    for p in programs.layers:
        groups.setdefault(digest_of(programs, p, storage, cache), []).append(p)
    names = [describe(members[0], programs.constants) for members in groups.values()]
    out = []
    for (digest, members), name in zip(groups.items(), names):
        unique = names.count(name) == 1
        layers = tuple(m.section.index for m in members)
        out.append(LayerKind(name if unique else f"{name} (layer {layers[0]})", layers, digest))
    return out


# ---- rebind ---------------------------------------------------------------------------------------------------

#: Host tables: every layer's that reads them; their index is a rotation's or a width's, never a layer's.
HOST_TABLE = re.compile(r"(Rcos|Rsin|Ones)\d+\Z")


def layer_input(layer: int) -> str:
    """The hidden state layer ``layer`` reads: ``x`` for the first, ``xo{l-1}`` after."""
    return "x" if layer == 0 else f"xo{layer - 1}"


def stacked_layer_input(layer: int) -> str:
    """A batched bundle's stacked hidden state: ``X`` for the first layer, ``bxo{l-1}`` after."""
    return "X" if layer == 0 else f"bxo{layer - 1}"


def rebind_via(name: str, frm: int, to: int, input: Callable[[int], str] = layer_input, tables: Iterable[str] = ()) -> str:
    """The name layer ``to`` gives the tensor layer ``frm`` calls ``name``.

    The hidden-state input is named by position; a host table (``Rcos1``, ``Ones128``, or any name in ``tables``) is
    every layer's; otherwise the part before the first ``_`` carries the layer index as its suffix.

    ★ A derived name carries its parent's index in the middle (``xn0__xsq``, ``Kc3_s1``): renaming only a trailing
    index would leave such names pointing at the representative layer in the manifest."""
    if name == input(frm):
        return input(to)
    if HOST_TABLE.match(name) or name in tables:
        return name
    head, sep, tail = name.partition("_")
    suffix = str(frm)
    if head.endswith(suffix):
        stem = head[: len(head) - len(suffix)]
        if stem and not stem[-1].isdigit():
            return f"{stem}{to}{sep}{tail}"
    return name


def rebind(name: str, frm: int, to: int) -> str:
    return rebind_via(name, frm, to, layer_input)


# ---- divergences ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Divergence:
    """Where ``layer`` stops being one program with ``representative`` (the first layer of the kind it was meant to
    be): the token in each, and why, in a sentence that names both layers."""

    layer: int
    representative: int
    kind: str  # the kind it was meant to be
    own_kind: str  # the kind it fell into
    range: Range  # in the layer
    representative_range: Range  # in the representative
    why: str
    statement: int | None  # the layer's statement that diverges (None past the end)
    representative_statement: int | None


def _canon(toks: Sequence[str]) -> list[str]:
    names = binders(toks)
    return ["\x01" if t in names else t for t in toks]


def _difference(a: Sequence[str], b: Sequence[str]) -> int:
    """How many tokens differ between two programs, binders counted as alike."""
    ca, cb = _canon(a), _canon(b)
    sm = difflib.SequenceMatcher(None, ca, cb, autojunk=False)
    return sum(max(i2 - i1, j2 - j1) for tag, i1, i2, j1, j2 in sm.get_opcodes() if tag != "equal")


MAX_DIFFERENCE = 6


def _stem(name: str) -> str:
    head, sep, tail = name.partition("_")
    return head.rstrip("0123456789") + "…" + (sep + tail if sep else "")


def _insertion(ta: Sequence[str], tb: Sequence[str]) -> tuple[int, int] | None:
    """When ``tb`` is ``ta`` with one run of tokens inserted (or removed), binders counted as alike: the index of the
    run and its length (negative when removed). ``None`` when the two differ otherwise or are as long."""
    n = len(tb) - len(ta)
    if n == 0:
        return None
    ca, cb = _canon(ta), _canon(tb)
    i = 0
    while i < min(len(ca), len(cb)) and ca[i] == cb[i]:
        i += 1
    if n > 0 and cb[i + n:] == ca[i:]:
        return i, n
    if n < 0 and ca[i - n:] == cb[i:]:
        return i, n
    return None


def first_difference(
    programs: Programs, layer: Program, rep: Program, storage: Storage = ALL_Q8
) -> tuple[int | None, int | None, str]:
    """The first token (index in ``layer``, index in ``rep``) where ``layer`` stops being ``rep`` renamed, and why."""
    ta, tb = [t.text for t in rep.tokens], [t.text for t in layer.tokens]
    na, nb = binders(ta), binders(tb)
    qa, qb = stored_q8(programs, rep, storage), stored_q8(programs, layer, storage)
    L, R = layer.section.index, rep.section.index
    shift = _insertion(ta, tb)
    if shift is not None:
        i, n = shift
        if n > 0:
            s = layer.section.statement_at(i - 1) if i else None
            where = f"after statement {s + 1}" if s is not None else "at its start"
            return i, i, f"layer {L} has {n} more token{'s' if n != 1 else ''} {where}, which layer {R} does not have"
        s = rep.section.statement_at(i - 1) if i else None
        where = f"after statement {s + 1}" if s is not None else "at its start"
        return i, i, f"layer {L} has {-n} fewer token{'s' if n != -1 else ''} than layer {R}: layer {R} has them {where}"
    forward: dict[str, str] = {}
    back: dict[str, str] = {}
    for i, (x, y) in enumerate(zip(ta, tb)):
        bx, by = x in na, y in nb
        if bx and by:
            fx, by_ = forward.get(x), back.get(y)
            if fx is not None and fx != y:
                return i, i, (f"layer {L} reads `{y}` where layer {R} reads `{x}` at the same place: "
                              f"`{_stem(x)}` is bound as `{fx}` elsewhere in layer {L}")
            if by_ is not None and by_ != x:
                return i, i, (f"layer {L} reads `{y}` where layer {R} reads `{x}` at the same place: "
                              f"`{y}` already stands for `{by_}` of layer {R}")
            forward[x], back[y] = y, x
            if (x in qa) != (y in qb):
                sa = stored_as(programs, x, True, storage) if x in rep.decls and rep.decls[x].q8 else "dense"
                sb = stored_as(programs, y, True, storage) if y in layer.decls and layer.decls[y].q8 else "dense"
                return i, i, f"`{y}` is stored {sb} but `{x}` is stored {sa}: layer {L} reads it {'dense' if x in qa else 'as stored, Q8_0'}"
        elif bx != by:
            if by:
                return i, i, f"layer {L} binds `{y}` where layer {R} has `{x}`, a word of the language or a shared name"
            return i, i, f"layer {L} has `{y}` where layer {R} binds the name `{x}`"
        elif x != y:
            prev = ta[i - 1] if i > 0 and ta[i - 1] == tb[i - 1] and ta[i - 1][0].isalpha() else None
            say_b = f"{prev} {y}" if prev and y[0].isdigit() else y
            say_a = f"{prev} {x}" if prev and x[0].isdigit() else x
            return i, i, f"layer {L} says `{say_b}` where layer {R} says `{say_a}`"
    if len(tb) != len(ta):
        n = abs(len(tb) - len(ta))
        longer, shorter = (L, R) if len(tb) > len(ta) else (R, L)
        common = min(len(ta), len(tb))
        owner = layer if len(tb) < len(ta) else rep
        last = owner.section.statement_at(common - 1)
        after = f"after statement {last + 1}" if last is not None else "at its start"
        i = common if len(tb) > len(ta) else None
        j = common if len(ta) > len(tb) else None
        return i, j, f"layer {longer} has {n} more token{'s' if n != 1 else ''} than layer {shorter}, {after}"
    return None, None, f"layer {L} is layer {R} renamed, but a weight is read differently"


class _ByIndex:
    """``programs.layer`` as a mapping (no dict over every layer: a keystroke reads a few)."""

    def __init__(self, programs: Programs):
        self.programs = programs

    def __getitem__(self, index: int) -> Program:
        return self.programs.layer(index)


def divergences(programs: Programs, kinds: list[LayerKind], storage: Storage = ALL_Q8) -> list[Divergence]:
    """The layers that were evidently meant to be one kind with another kind's layers, and where they part.

    A kind K diverges from a kind T when K has the same name as T up to the ``(layer N)`` that tells them apart (T
    being the larger), or when K has one or two layers, T at least three, their names agree once numbers are erased,
    and their programs differ in at most ``MAX_DIFFERENCE`` tokens. Kinds whose names say they do different things
    are different by design. A layer whose heading note begins with ``distinct`` is never reported."""
    by_index = _ByIndex(programs)
    out: list[Divergence] = []
    order = {k.name: i for i, k in enumerate(kinds)}
    for k in kinds:
        best = None
        for t in kinds:
            if t is k:
                continue
            same_name = re.sub(r" \(layer \d+\)$", "", t.name) == re.sub(r" \(layer \d+\)$", "", k.name)
            larger = len(t.layers) > len(k.layers) or (len(t.layers) == len(k.layers) and order[t.name] < order[k.name])
            if not larger:
                continue
            rk, rt = by_index[k.representative], by_index[t.representative]
            if same_name:
                close = True
            elif len(k.layers) <= 2 and len(t.layers) >= 3 and family(k.name) == family(t.name):
                close = _difference([x.text for x in rk.tokens], [x.text for x in rt.tokens]) <= MAX_DIFFERENCE
            else:
                close = False
            if close and (best is None or len(t.layers) > len(best.layers)):
                best = t
        if best is None:
            continue
        rep = by_index[best.representative]
        for layer_index in k.layers:
            layer = by_index[layer_index]
            if layer.section.distinct:
                continue
            i, j, why = first_difference(programs, layer, rep, storage)
            lr = layer.tokens[i].range if i is not None and i < len(layer.tokens) else (layer.tokens[-1].range if layer.tokens else layer.section.heading)
            rr = rep.tokens[j].range if j is not None and j < len(rep.tokens) else (rep.tokens[-1].range if rep.tokens else rep.section.heading)
            out.append(Divergence(
                layer_index, best.representative, best.name, k.name, lr, rr, why,
                layer.section.statement_at(i) if i is not None else None,
                rep.section.statement_at(j) if j is not None else None,
            ))
    out.sort(key=lambda d: d.layer)
    return out
