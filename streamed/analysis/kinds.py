"""Layer kinds: which layers are one program up to the names they give, and where two that should be are not.

The definitions are the seed's (``streamed.rs``) and LANGUAGE §7, exactly:

- ``tokens``: each maximal run of ASCII letters, digits and ``_``, and each other non-space character;
- ``binders``: every token that follows a ``Let`` token;
- ``shape_digest``: SHA-256 of the token stream with every binder replaced by the order of its first appearance,
  marked when the checkpoint keeps it in blocks with the type it keeps it in (Q8_0, Q4_K, Q6_K, BF16…), every other
  token kept;
- a **kind** is the layers sharing a digest, in order of their first layer;
- ``renaming(a, b)``: the one-to-one map of binders aligning ``a`` to ``b`` token by token, or ``None``.

Invariant: two layers have equal digests exactly when ``renaming`` between them is not ``None`` and maps every
binder to a binder read the same way (kept in the same stored type, or dense in both). Kinds are computed in one pass over the layers: cost is
linear in the document, whatever the depth.
"""

from __future__ import annotations

import bisect
import difflib
import hashlib
import re
from collections import Counter
from dataclasses import dataclass
from operator import attrgetter
from typing import Callable, Iterable, Mapping, Sequence

from ..lang.lexer import Range, tokens as _lex_tokens
from ..lang.shapes import let_binders
from ..lang.syntax import Call, Binary, Set
from ..model.checkpoint import ALL_Q8, Storage, bind
from ..model.program import Program, Programs, unparsed_statements

__all__ = [
    "tokens", "binders", "shape_digest", "renaming", "layer_kinds", "LayerKind", "Divergence", "divergences",
    "describe", "rebind", "rebind_via", "layer_input", "stacked_layer_input", "stored_q8", "stored_kept", "HOST_TABLE",
]


def tokens(text: str) -> list[str]:
    """A program's tokens: each maximal run of letters, digits and ``_``, and each other non-space character."""
    return _lex_tokens(text)


def binders(toks: Sequence[str]) -> set[str]:
    """The names a program binds: every token that follows ``Let``."""
    return set(let_binders(toks if isinstance(toks, (list, tuple)) else list(toks)))


def _texts(program: str | Sequence[str]) -> list[str]:
    if isinstance(program, str):
        return tokens(program)
    if isinstance(program, list) and (not program or isinstance(program[0], str)):
        return program  # a table's token texts, as the parser keeps them
    return [t if isinstance(t, str) else t.text for t in program]


def shape_digest(program: str | Sequence, stored: Iterable[str] | Mapping[str, str] = ()) -> str:
    """The digest of a program up to the names it binds: every binder replaced by the order of its first appearance,
    marked when it is in ``stored`` (read as stored: Q8_0 for a name listed, the type a mapping gives it — Q4_K,
    Q6_K… — otherwise), every other token kept. Hex SHA-256."""
    toks = _texts(program)
    names = binders(toks)
    stored = dict(stored) if isinstance(stored, Mapping) else dict.fromkeys(stored, "Q8_0")
    first = dict.fromkeys(filter(names.__contains__, toks))  # the binders in the order they first appear

    def marked(n: int, t: str) -> str:
        kept = stored.get(t)
        return f"\x01{n}" if kept is None else f"\x01{n}\x02" if kept == "Q8_0" else f"\x01{n}\x02{kept}"

    mark = {t: marked(n, t) for n, t in enumerate(first)}
    return hashlib.sha256(" ".join(map(mark.get, toks, toks)).encode("utf-8")).hexdigest()


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


def calls_of(program: Program):
    """Every operation ``program`` calls, statement by statement, outermost first (its frame's: no name or place is
    read)."""
    def walk(e):
        if isinstance(e, Call):
            yield e
            for _, a in e.args:
                yield from walk(a)
        elif isinstance(e, Binary):
            yield from walk(e.left)
            yield from walk(e.right)

    for st in program.section.framed:  # its operations and numbers: no name or place is read
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
    8192``, ``gated deltanet``, ``latent attention``, ``feed-forward`` (nothing mixes positions), ``identity`` (nothing
    at all) — with ``, experts`` when its feed-forward block is a mixture."""
    calls = list(calls_of(program))
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
    elif not calls and not program.weights():
        name = "identity"  # every block removed: the layer returns its input (Nemotron-NAS)
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
    if storage.all_q8:  # no checkpoint: what llama.cpp's quantizer would write (``Storage``, assumed)
        return frozenset(n for n, t in program.assumed_storage(storage.assumed) if t == "Q8_0")
    declared = program.q8_declared()
    entries = programs.document.checkpoint
    return frozenset(n for n in declared if storage.q8(bind(entries, n), True))


def stored_kept(programs: Programs, program: Program, storage: Storage = ALL_Q8) -> dict[str, str]:
    """The weights ``program`` declares that the checkpoint keeps in blocks, each with its type (``Q8_0``, ``Q4_K``,
    ``Q6_K``, ``BF16``… — ``Storage.kept``): what a layer's kind records of its storage."""
    if storage.all_q8:  # no checkpoint: the ones assumed Q8_0 (``stored_q8``)
        return dict.fromkeys(sorted(stored_q8(programs, program, storage)), "Q8_0")
    declared = program.q8_declared()
    entries = programs.document.checkpoint
    out = {}
    for n in declared:
        kept = storage.kept(bind(entries, n), True)
        if kept is not None:
            out[n] = kept
    return out


def stored_as(programs: Programs, name: str, declared_q8: bool, storage: Storage) -> str:
    """How the declared weight ``name`` is stored: as the checkpoint says, or — with none read — as it is assumed
    (``Program.assumed_storage``, by the program that declares it)."""
    if storage.all_q8 and declared_q8:
        for p in programs.all():
            if name in p.q8_declared():
                return dict(p.assumed_storage(storage.assumed))[name]
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


def digest_key(programs: Programs, p: Program, storage: Storage = ALL_Q8):
    """What ``digest_of`` caches layer ``p``'s digest under: its shape and how each of its names is kept
    (``stored_kept``) — with no checkpoint too, where that follows the declared shapes (``Program.assumed_storage``: a weight whose input
    features are not whole blocks is assumed F16), and so the ``## Model`` constants. ``None``: not cached."""
    shape = p.section.shape
    if shape is None or shape.key is None:
        return None
    stored = stored_kept(programs, p, storage)
    return shape.key, tuple(stored.get(n) for n in shape.names)


def digest_of(programs: Programs, p: Program, storage: Storage = ALL_Q8, cache: dict | None = None) -> str:
    """``shape_digest`` of layer ``p`` under ``storage``, computed once per shape and storage pattern (``cache``):
    two layers of one shape (``lang.parser.Shape``) have one digest wherever the checkpoint stores the same of their
    weights Q8_0 — with no checkpoint, always."""
    key = digest_key(programs, p, storage) if cache is not None else None
    if key is None:
        return shape_digest(p.section.texts, stored_kept(programs, p, storage))
    d = cache.get(key)
    if d is None:
        d = cache[key] = shape_digest(p.section.texts, stored_kept(programs, p, storage))
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
    return named_kinds([(digest, tuple(m.section.index for m in members)) for digest, members in groups.items()], names)


def named_kinds(groups: Sequence[tuple[str, tuple[int, ...]]], names: Sequence[str]) -> list[LayerKind]:
    """The kinds of ``groups`` (digest, layers) in that order, each called by its name in ``names``, told apart by
    its first layer when another kind has that name too — counted once, so naming is linear in the kinds."""
    count = Counter(names)
    return [LayerKind(name if count[name] == 1 else f"{name} (layer {layers[0]})", layers, digest)
            for (digest, layers), name in zip(groups, names)]


# ---- rebind ---------------------------------------------------------------------------------------------------

#: Host tables: every layer's that reads them; their index is a rotation's or a width's, never a layer's.
HOST_TABLE = re.compile(r"(Rcos|Rsin|Ones)\d+\Z")


def layer_of_kind(layer: int, kind: str) -> str:
    """``layer 3 (attention)``: a layer with the name of its kind, parenthesised once — a kind told apart by its
    first layer (``attention (layer 3)``) is not printed ``layer 3 (attention (layer 3))``; another layer's mark is
    kept, as ``layer 5 (attention, layer 3)``."""
    m = re.fullmatch(r"(.*) \(layer (\d+)\)", kind)
    if m is None:
        return f"layer {layer} ({kind})"
    return f"layer {layer} ({m.group(1)})" if int(m.group(2)) == layer else f"layer {layer} ({m.group(1)}, layer {m.group(2)})"


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


def _canon(toks: Sequence[str], names: set | None = None) -> list[str]:
    names = binders(toks) if names is None else names
    return ["\x01" if t in names else t for t in toks]


def _difference(a: Sequence[str], b: Sequence[str]) -> int:
    """How many tokens differ between two programs, binders counted as alike."""
    ca, cb = _canon(a), _canon(b)
    sm = difflib.SequenceMatcher(None, ca, cb, autojunk=False)
    return sum(max(i2 - i1, j2 - j1) for tag, i1, i2, j1, j2 in sm.get_opcodes() if tag != "equal")


MAX_DIFFERENCE = 6


# ---- where two programs part, in whole tokens and whole statements -------------------------------------------------

_NUMERIC = re.compile(r"\d[A-Za-z0-9_]*")
_QUOTE = 60


def _span_text(t, a: int, b: int, rename=None) -> str:
    """Tokens ``a``…``b`` of table ``t`` as written, spaces collapsed and comments left out (each word through
    ``rename``, if given), at most ``_QUOTE`` characters."""
    texts = t.texts if rename is None else [rename(w) for w in t.texts]
    out = [texts[a]]
    for k in range(a + 1, b + 1):
        out.append(texts[k] if t.adjacent(k - 1) else " " + texts[k])
    text = "".join(out)
    return text if len(text) <= _QUOTE else text[:_QUOTE - 1] + "…"


def _whole(t, k: int, names: set) -> tuple[int, int]:
    """The whole of what token ``k`` is part of, as a person reads it: a number joined from its pieces (``1e`` ``-``
    ``6``), preceded by the words that say what it is (``epsilon``, ``heads 4 sharing``, ``scaled by``)."""
    texts, n = t.texts, len(t.texts)
    a = b = k
    if _NUMERIC.match(texts[k]) or texts[k] in ".-+":
        while a > 0 and t.adjacent(a - 1) and (_NUMERIC.match(texts[a - 1]) or texts[a - 1] in ".-+"):
            a -= 1
        while b + 1 < n and t.adjacent(b) and (_NUMERIC.match(texts[b + 1]) or
                                                (texts[b + 1] in ".-+" and b + 2 < n and t.adjacent(b + 1)
                                                 and _NUMERIC.match(texts[b + 2]))):
            b += 1
        for _ in range(3):  # the option or operator words before it
            w = texts[a - 1] if a > 0 else ""
            if not w or w in names or not (w[0].isalnum()) or w in ("be", "of", "to", "Let", "Set", "Return"):
                break
            a -= 1
    return a, b


def _units(section) -> list[tuple[int, int]]:
    """Each sentence of a program (its tokens up to and with a full stop, parsed or not) as ``(first, end)``."""
    from ..lang.parser import split_statements

    return [(a, b) for a, b, _ in split_statements(section.table)]


def _op_name(texts, k: int) -> str | None:
    """The operation (or operator) a program applies at token ``k``, by name."""
    from ..lang import ops as ops_table

    w = texts[k]
    if w in ops_table.BINARY_WORDS:
        return w
    for op in ops_table.OP_BY_FIRST_WORD.get(w, ()):
        if tuple(texts[k:k + len(op.words)]) == op.words:
            return op.name
    return None


def _operands(program: Program, k: int, reads: dict | None = None) -> tuple[str, list[tuple[int, int]]] | None:
    """The innermost operation of ``program`` applied over token ``k``: its name and its operands' token spans. Only
    the statement holding token ``k`` is read (an expression lies within its statement's tokens), and only its
    tokens are placed — in the tree the layer shares (its shape's or frame's first layer: token for token the same
    operations over the same spans), so that ``reads`` (kept by the caller) answers every layer of a frame at once."""
    section = program.section.shared_from or program.section
    key = ("operands", id(section), k)
    hit = reads.get(key) if reads is not None else None
    if hit is None or hit[0] is not section:
        hit = (section, _operands_of(section, k))
        if reads is not None:
            reads[key] = hit
    return hit[1]


def _operands_of(section, k: int):
    n = section.statement_at(k)
    if n is None:
        return None
    t = section.table
    first, end = section.spans[n]
    src, starts, ends = t.source, t.starts, t.ends
    if src.ascii:  # a character is a byte: no position to compute
        at_start = {src.offset + starts[i]: i for i in range(first, end)}
        at_end = {src.offset + ends[i]: i for i in range(first, end)}
    else:
        at_start = {src.pos(starts[i]).offset: i for i in range(first, end)}
        at_end = {src.pos(ends[i]).offset: i for i in range(first, end)}

    def span(e) -> tuple[int, int] | None:
        a, b = at_start.get(e.range.start.offset), at_end.get(e.range.end.offset)
        return (a, b) if a is not None and b is not None else None

    best = None

    def walk(e):
        nonlocal best
        if isinstance(e, Binary):
            kids, name = [e.left, e.right], e.op
        elif isinstance(e, Call):
            kids, name = [x for _, x in e.args], e.op
        else:
            return
        sp = span(e)
        if sp is None or not sp[0] <= k <= sp[1]:
            return
        spans = [span(x) for x in kids]
        if all(x is not None for x in spans):
            best = (name, spans)
        for x in kids:
            walk(x)

    st = section.statements[n]
    value = getattr(st, "value", None)
    if value is not None and not hasattr(value, "role"):
        walk(value)
    if isinstance(st, Set) and st.row is not None:
        walk(st.row)
    return best


def _units_read(section, reads: dict) -> list[tuple[int, int]]:
    """``_units`` of the tree ``section`` reads (its own, or the one it shares), once per tree in ``reads``."""
    parsed = section.shared_from or section
    hit = reads.get(("units", id(parsed)))
    if hit is None or hit[0] is not parsed:
        hit = reads[("units", id(parsed))] = (parsed, _units(parsed))
    return hit[1]


class _Side:
    """What ``first_difference`` reads of one program — its tokens, binders, tokens with binders alike, sentences
    (each as a number, one per sentence text: compared as numbers, not tuples of tokens) — computed once: a
    representative is compared with every layer that diverges from it. ``reads``: what several programs share (a
    frame's sentences are one: ``lang.shapes``), kept by the caller."""

    __slots__ = ("table", "texts", "names", "canon", "units", "keys", "reads")

    def __init__(self, program: Program, reads: dict):
        section = program.section
        self.table = t = section.table
        self.texts = t.texts
        self.names = set(section.shape.names) if section.shape is not None else binders(self.texts)
        self.canon = canon = _canon(self.texts, self.names)
        self.units = _units_read(section, reads)
        known = reads.setdefault("sentences", {})
        self.keys = [known.setdefault(tuple(canon[a:b]), len(known)) for a, b in self.units]
        self.reads = reads


def first_difference(
    programs: Programs, layer: Program, rep: Program, storage: Storage = ALL_Q8, rep_side: _Side | None = None
) -> tuple[tuple[int, int] | None, tuple[int, int] | None, str, bool]:
    """Where ``layer`` stops being ``rep`` renamed, and why: the tokens (first, last) in ``layer`` and in ``rep``,
    the sentence, and whether the two spans are counterparts (not when one program has a statement the other
    lacks). In whole statements when a statement is extra or missing, and in whole tokens otherwise: a number as
    written with the words that say what it is, an operation by both its names, reordered operands by both lists, a
    weight stored differently by both storages."""
    ra = rep_side or _Side(rep, {})
    framed = _framed_difference(programs, layer, rep, storage, ra)
    if framed is not None:
        return framed
    lb = _Side(layer, ra.reads)
    ta, tb, xa, xb, na, nb = ra.table, lb.table, ra.texts, lb.texts, ra.names, lb.names
    ca, cb, ua, ub = ra.canon, lb.canon, ra.units, lb.units
    L, R = layer.section.index, rep.section.index
    sm = difflib.SequenceMatcher(None, ra.keys, lb.keys, autojunk=False)
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag == "equal":
            continue
        where = f"after statement {j1}" if j1 else "at its start"
        before_a = (ua[i1 - 1][1] - 1,) * 2 if i1 else None  # the full stop a statement is missing after
        before_b = (ub[j1 - 1][1] - 1,) * 2 if j1 else None
        if tag == "insert":
            extra = _span_text(tb, ub[j1][0], ub[j1][1] - 1)
            count = f"an extra statement `{extra}`" if j2 - j1 == 1 else f"{j2 - j1} extra statements, the first `{extra}`,"
            return (ub[j1][0], ub[j1][1] - 1), before_a, f"layer {L} has {count} {where}", False
        if tag == "delete":
            forward: dict[str, str] = {}  # the binders of the statements the two have alike, aligned
            for a, b, size in sm.get_matching_blocks():
                for (p, q), (u, v) in zip(ua[a:a + size], ub[b:b + size]):
                    forward.update(_forward(xa[p:q], xb[u:v]))
            mine = lambda w: forward.get(w) or rebind(w, R, L) if w in na else w  # noqa: E731
            missing = _span_text(ta, ua[i1][0], ua[i1][1] - 1, mine)
            count = f"the statement `{missing}`" if i2 - i1 == 1 else f"{i2 - i1} statements, the first `{missing}`,"
            return before_b, (ua[i1][0], ua[i1][1] - 1), f"layer {L} lacks {count} that layer {R} has {where}", False
        return _statement_difference(layer, rep, ua[i1], ub[j1], ca, cb, na, nb, L, R, j1, ra.reads)
    return _binding_difference(programs, layer, rep, storage, na, nb, L, R, ra.reads)


def _statement_difference(layer: Program, rep: Program, ua, ub, ca, cb, na: set, nb: set, L: int, R: int, n: int,
                          reads: dict):
    """Where statement ``ub`` of ``layer`` parts from statement ``ua`` of ``rep`` (not one up to names); ``ca``,
    ``cb``: the programs' tokens with binders alike."""
    ta, tb = rep.section.table, layer.section.table
    xa, xb = ta.texts, tb.texts
    sm = difflib.SequenceMatcher(None, ca[ua[0]:ua[1]], cb[ub[0]:ub[1]], autojunk=False)
    tag, a1, a2, b1, b2 = next(op for op in sm.get_opcodes() if op[0] != "equal")
    i, j = ub[0] + b1, ua[0] + a1
    if tag == "insert":
        at = (min(j, ua[1] - 1),) * 2
        return (i, ub[0] + b2 - 1), at, (f"layer {L} has `{_span_text(tb, i, ub[0] + b2 - 1)}` in statement "
                                         f"{n + 1}, which layer {R}'s does not have"), True
    if tag == "delete":
        at = (min(i, ub[1] - 1),) * 2
        return at, (j, ua[0] + a2 - 1), (f"layer {L} lacks `{_span_text(ta, j, ua[0] + a2 - 1)}` that layer {R} "
                                         f"has in statement {n + 1}"), True
    x, y = xa[j], xb[i]
    if (x in na) != (y in nb):
        if y in nb:
            return (i, i), (j, j), f"layer {L} binds `{y}` where layer {R} has `{x}`, a word of the language or a shared name", True
        return (i, i), (j, j), f"layer {L} has `{y}` where layer {R} binds the name `{x}`", True
    swapped = _swap(layer, rep, i, j, reads)
    if swapped is not None:
        return swapped
    opa, opb = _op_name(xa, j), _op_name(xb, i)
    if opa is not None and opb is not None and opa != opb:
        return (i, i), (j, j), f"layer {L} uses `{opb}` where layer {R} uses `{opa}`", True
    wa, wb = _whole(ta, j, na), _whole(tb, i, nb)
    return wb, wa, f"layer {L} says `{_span_text(tb, *wb)}` where layer {R} says `{_span_text(ta, *wa)}`", True


def _unique_differences(a: Sequence, b: Sequence, differ: Iterable[int]) -> bool:
    """Whether no value ``a`` or ``b`` holds at a position where they differ (``differ``) is held anywhere by the
    other. Then ``difflib.SequenceMatcher`` (no junk) of two sequences of one length matches exactly their equal runs
    in place, so its first change is a ``replace`` at their first difference:

    No matching block can hold a differing position, so a block lies within one region between differing positions
    in each. A block shifted within one region is shorter than that region; a block from region ``Ri`` of ``a`` to
    region ``Rj`` of ``b`` is at most as long as either. So the longest is a whole region in place, and one of equal
    length that starts as early in ``a`` (the same region) starts later in ``b``, since the first longest region
    comes first — SequenceMatcher takes the block earliest in ``a``, then in ``b``. Each side of it is again two
    windows of one length, and so on down."""
    seen_a = seen_b = None
    for k in differ:
        if seen_a is None:
            seen_a, seen_b = set(a), set(b)
        if a[k] in seen_b or b[k] in seen_a:
            return False
    return True


def _framed_difference(programs: Programs, layer: Program, rep: Program, storage: Storage, ra: _Side):
    """``first_difference`` of a layer that differs from its representative only in numbers (with binders alike: as
    many tokens, in the same sentences, each the same but for the numerals — a layer in its representative's frame,
    ``lang.shapes``, or one whose comments differ), without comparing every token: the layer's tokens with binders
    alike and its sentences are the representative's with the differing numbers put in, and the first differing
    sentence is the first that holds one (``_unique_differences``; ``difflib`` over the sentences only when a
    differing sentence is one the other program also has). ``None`` when the two are not so alike (a word differs,
    a statement is extra or missing): then the general comparison answers. Either way the answer is the general one:
    the same sentences and tokens reach the same ``_statement_difference``."""
    xa, xb, ca = ra.texts, layer.section.table.texts, ra.canon
    if len(xa) != len(xb):
        return None
    reads, units = ra.reads, ra.units
    mine = _units_read(layer.section, reads)
    if mine is not units and mine != units:
        return None
    shape = layer.section.shape
    na, nb = ra.names, set(shape.names) if shape is not None else binders(xb)
    # Where ``_canon`` of the two differs: a token written otherwise, unless both are binders; a binder of one only.
    differ = [k for k, y, c in zip(range(len(xb)), xb, ca) if c != ("\x01" if y in nb else y)]
    numeric = _NUMERIC.match
    if not all(numeric(xa[k]) and numeric(xb[k]) for k in differ):
        return None  # a word differs, not only numbers: the general comparison
    L, R = layer.section.index, rep.section.index
    if not differ:
        return _binding_difference(programs, layer, rep, storage, na, nb, L, R, reads)
    cb = list(ca)  # the layer's ``_canon``: the representative's, its numbers put in
    for k in differ:
        cb[k] = xb[k]
    firsts = [a for a, _ in units]
    statements = sorted({bisect.bisect_right(firsts, k) - 1 for k in differ})
    if statements[0] < 0 or any(k >= units[bisect.bisect_right(firsts, k) - 1][1] for k in differ):
        return None  # a number outside every sentence: the general comparison says where
    known, keys = reads.setdefault("sentences", {}), list(ra.keys)
    for n in statements:
        a, b = units[n]
        keys[n] = known.setdefault(tuple(cb[a:b]), len(known))
    if _unique_differences(ra.keys, keys, statements):
        n = m = statements[0]
    else:
        tag, n, _, m, _ = next(op for op in difflib.SequenceMatcher(None, ra.keys, keys, autojunk=False).get_opcodes()
                               if op[0] != "equal")
        if tag != "replace":
            return None  # a statement taken for extra or missing: the general comparison words it
    return _statement_difference(layer, rep, units[n], units[m], ca, cb, na, nb, L, R, m, reads)


def _forward(xa, xb) -> dict[str, str]:
    """Each binder of one program to the other's at the same ``Let`` (the programs read alike up to names)."""
    out: dict[str, str] = {}
    k, last, index = -1, min(len(xa), len(xb)) - 1, xa.index
    try:
        while True:
            k = index("Let", k + 1, last)
            if xb[k] == "Let":
                out.setdefault(xa[k + 1], xb[k + 1])
    except ValueError:
        return out


def _aligned(a: Program, b: Program) -> dict[str, str]:
    """``_forward`` of two programs — read off their binders in the order of their ``Let`` when they are one frame
    (``lang.shapes``: token for token the same but for names and numbers, so their ``Let`` are at the same places)."""
    fa, fb = a.section.shape, b.section.shape
    if fa is not None and fb is not None and fa.frame is not None and fa.frame == fb.frame:
        return dict(zip(fa.names, fb.names))
    return _forward(a.section.texts, b.section.texts)


def _swap(layer: Program, rep: Program, i: int, j: int, reads: dict | None = None):
    """When the operation over token ``i`` of ``layer`` (``j`` of ``rep``) takes the same operands in another
    order: the operands' spans in both and a sentence naming both lists."""
    found_a, found_b = _operands(rep, j, reads), _operands(layer, i, reads)
    if found_a is None or found_b is None or found_a[0] != found_b[0]:
        return None
    ta, tb = rep.section.table, layer.section.table
    forward = _aligned(rep, layer)
    canon = lambda t, span, rename: " ".join(rename(w) for w in t.texts[span[0]:span[1] + 1])  # noqa: E731
    mine = [canon(tb, sp, lambda w: w) for sp in found_b[1]]
    theirs = [canon(ta, sp, lambda w: forward.get(w, w)) for sp in found_a[1]]
    if mine == theirs or sorted(mine) != sorted(theirs):
        return None
    op = found_a[0]
    listed = lambda t, spans: ", ".join(_span_text(t, a, b) for a, b in spans)  # noqa: E731
    whole = lambda spans: (spans[0][0], spans[-1][1])  # noqa: E731
    return whole(found_b[1]), whole(found_a[1]), (
        f"layer {layer.section.index}'s `{op}` takes `{listed(tb, found_b[1])}` where layer "
        f"{rep.section.index}'s takes `{listed(ta, found_a[1])}`: the same operands in another order"), True


def _binding_difference(programs: Programs, layer: Program, rep: Program, storage: Storage, na: set, nb: set,
                        L: int, R: int, reads: dict):
    """Two programs that read alike token for token with binders alike: where the renaming stops being one to one
    (a name read where another is bound alike), or where a weight is stored differently."""
    xa, xb = rep.section.table.texts, layer.section.table.texts
    forward = _aligned(rep, layer)
    back = {y: x for x, y in forward.items()}
    for k, (x, y) in enumerate(zip(xa, xb)):
        if x in na and y in nb and (forward.get(x, y) != y or back.get(y, x) != x):
            swapped = _swap(layer, rep, k, k, reads)
            if swapped is not None:
                return swapped
            if forward.get(x, y) != y:
                return (k, k), (k, k), f"layer {L} reads `{y}` where layer {R} reads `{x}`, which is layer {L}'s `{forward[x]}`", True
            return (k, k), (k, k), f"layer {L} reads `{y}` where layer {R} reads `{x}`: layer {L}'s `{y}` is layer {R}'s `{back[y]}`", True
    qa, qb = stored_kept(programs, rep, storage), stored_kept(programs, layer, storage)
    for x, y in forward.items():
        if qa.get(x) != qb.get(y):
            k = next(k for k in range(len(xb) - 1) if xb[k] == "Let" and xb[k + 1] == y) + 1
            sa = stored_as(programs, x, True, storage) if x in rep.decls and rep.decls[x].q8 else "dense"
            sb = stored_as(programs, y, True, storage) if y in layer.decls and layer.decls[y].q8 else "dense"
            reads = "dense" if qb.get(y) is None else f"as stored, {qb[y]}"
            return (k, k), (k, k), f"`{y}` is stored {sb} but `{x}` is stored {sa}: layer {L} reads it {reads}", True
    return None, None, f"layer {L} is layer {R} renamed, but a weight is read differently", False


class _ByIndex:
    """``programs.layer`` as a mapping (no dict over every layer: a keystroke reads a few)."""

    def __init__(self, programs: Programs):
        self.programs = programs

    def __getitem__(self, index: int) -> Program:
        return self.programs.layer(index)


def _in_unparsed(section, mine: tuple[int, int] | None) -> bool:
    """Whether a difference starting at token span ``mine`` (``None``: past the end) lies at or after a statement
    of ``section`` that did not parse — what a misspelt word makes differ, already reported as a syntax error."""
    bad = unparsed_statements(section)
    return bool(bad) and (mine is None or mine[0] >= bad[0][0])


_OWN_LAYER = re.compile(r" \(layer \d+\)$")


def meant(kinds: Sequence[LayerKind], close: Callable[[LayerKind, LayerKind], bool]) -> list[LayerKind | None]:
    """For each kind, the kind it was evidently meant to be, or ``None``: of the kinds larger than it (more layers,
    or as many and earlier) that have its name up to the ``(layer N)`` that tells them apart — or, for a kind of one
    or two layers, that have at least three, its name once numbers are erased, and are ``close`` to it — the first
    with the most layers.

    Linear in the kinds (plus ``close`` for the few kinds of three or more layers that would win): the kinds of
    each name are ranked once, not every kind against every other — a model whose every layer is its own kind
    has as many kinds as layers."""
    base = [_OWN_LAYER.sub("", k.name) for k in kinds]
    top: dict[str, int] = {}  # each name's first kind with the most layers
    for i, k in enumerate(kinds):
        j = top.get(base[i])
        if j is None or len(k.layers) > len(kinds[j].layers):
            top[base[i]] = i
    large: dict[str, list[int]] = {}  # kinds of three or more layers by family, the most layers (then the first) first
    for i in sorted((i for i, k in enumerate(kinds) if len(k.layers) >= 3), key=lambda i: (-len(kinds[i].layers), i)):
        large.setdefault(family(kinds[i].name), []).append(i)
    out: list[LayerKind | None] = []
    for i, k in enumerate(kinds):
        best = top[base[i]]
        best = None if best == i else best
        if large and len(k.layers) <= 2:
            for t in large.get(family(k.name), ()):
                if best is not None and (len(kinds[t].layers), -t) <= (len(kinds[best].layers), -best):
                    break  # neither this kind nor any after it has more layers than the best, or as many and earlier
                if base[t] != base[i] and close(k, kinds[t]):
                    best = t
                    break
        out.append(None if best is None else kinds[best])
    return out


def divergences(programs: Programs, kinds: list[LayerKind], storage: Storage = ALL_Q8,
                memo=None) -> list[Divergence]:
    """The layers that were evidently meant to be one kind with another kind's layers, and where they part.

    A kind K diverges from a kind T when K has the same name as T up to the ``(layer N)`` that tells them apart (T
    being the larger), or when K has one or two layers, T at least three, their names agree once numbers are erased,
    and their programs differ in at most ``MAX_DIFFERENCE`` tokens (``meant``). Kinds whose names say they do
    different things are different by design. A layer whose heading note begins with ``distinct`` is never reported,
    nor a difference that starts at a statement that did not parse (one mistake, one diagnostic: the syntax error).

    ``memo`` (a mapping the editor keeps for one storage and checkpoint): where a layer parts from a representative,
    by the two programs — an edit compares again only the layers it touched and the layers of a kind whose
    representative it touched."""
    by_index = _ByIndex(programs)
    memo = {} if memo is None else memo

    def close(k: LayerKind, t: LayerKind) -> bool:
        rk, rt = by_index[k.representative], by_index[t.representative]
        key = ("difference", id(rk), id(rt))
        hit = memo.get(key)
        if hit is None or hit[0] is not rk or hit[1] is not rt:
            hit = memo[key] = (rk, rt, _difference(rk.section.texts, rt.section.texts) <= MAX_DIFFERENCE)
        return hit[2]

    out: list[Divergence] = []
    sides: dict[int, _Side] = {}
    reads: dict = {}
    for k, best in zip(kinds, meant(kinds, close)):
        if best is None:
            continue
        rep = by_index[best.representative]
        for layer_index in k.layers:
            layer = by_index[layer_index]
            if layer.section.distinct:
                continue
            key = (id(layer), id(rep))
            hit = memo.get(key)
            if hit is None or hit[0] is not layer or hit[1] is not rep:
                side = sides.get(id(rep))
                if side is None:
                    side = sides[id(rep)] = _Side(rep, reads)
                hit = (layer, rep, _parting(programs, layer, rep, storage, side), None)
            if hit[2] is None:
                memo[key] = hit
                continue  # the line does not parse: its syntax error is the one diagnostic
            d = hit[3]  # the divergence itself, the same value as long as the kinds' names are (kept as such)
            if d is None or d.layer != layer_index or d.kind != best.name or d.own_kind != k.name:
                d = Divergence(layer_index, best.representative, best.name, k.name, *hit[2])
                hit = (*hit[:3], d)
            memo[key] = hit
            out.append(d)
    out.sort(key=_LAYER)
    return out


_LAYER = attrgetter("layer")


def _parting(programs: Programs, layer: Program, rep: Program, storage: Storage, side: _Side) -> tuple | None:
    """``first_difference`` as a divergence places it: the range in each (section-relative), the sentence, and the
    statement of each — or ``None`` where the difference starts at a statement of the layer that did not parse."""
    mine, theirs, why, paired = first_difference(programs, layer, rep, storage, side)
    if _in_unparsed(layer.section, mine):
        return None
    lr = layer.section.table.range(*mine) if mine is not None else layer.section.heading
    rr = rep.section.table.range(*theirs) if theirs is not None else rep.section.heading
    statement = layer.section.statement_at(mine[0]) if mine is not None else None
    rep_statement = rep.section.statement_at(theirs[0]) if theirs is not None and paired else None
    return lr, rr, why, statement, rep_statement
