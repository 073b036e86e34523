"""The syntax tree. Every node carries its range, computed once by the parser and never searched for again.

Nodes are frozen: a parsed document is an immutable value, safe to share between the analysis, the lowering and the
editor's handlers.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Union

from .chunks import heading_ranges
from .lexer import NUMERAL, Pos, Range, Token


class Severity(Enum):
    ERROR = "error"
    WARNING = "warning"
    INFORMATION = "information"
    HINT = "hint"


@dataclass(frozen=True)
class Related:
    range: Range
    message: str


@dataclass(frozen=True)
class Diagnostic:
    """A finding about the text: where, how bad, and a sentence that names what the user wrote.

    ``code`` names the rule (``syntax``, ``unbound``, ``shape``, ``divergence``, ``reject``…) so clients can filter."""

    range: Range
    severity: Severity
    message: str
    code: str = "syntax"
    related: tuple[Related, ...] = ()
    data: dict | None = None


class Filled:
    """A broken layer's diagnostics when it shares its shape's parse (``parser._shared_failures``): its heading's own
    (``head``), then what each statement that failed says — the same tokens of this layer, its shape's message filled
    with its binders — as ``rows`` of plain values, ``(start offset, start line, start column, end offset, end line,
    end column, message, replacement)``: every one a syntax error. They are made into ``Diagnostic`` values only when
    read as such (``made`` says whether they were); the editor's analysis keeps the rows and the server writes them
    as JSON, so opening a document of a thousand such layers makes a ``Diagnostic`` per broken shape, not per layer.
    A sequence equal to the tuple of the diagnostics it stands for; ``in_order``: those are in the report's order as
    they stand (each starts after the one before), so a reader sorts nothing."""

    __slots__ = ("head", "rows", "in_order", "_made")

    def __init__(self, head: tuple[Diagnostic, ...], rows: list[tuple]):
        self.head = head
        self.rows = rows
        starts = [d.range.start.offset for d in head] + [r[0] for r in rows]
        self.in_order = all(map(int.__lt__, starts, starts[1:]))
        self._made: tuple[Diagnostic, ...] | None = None

    @staticmethod
    def diagnostic(row: tuple) -> Diagnostic:
        so, sl, sc, eo, el, ec, message, replacement = row
        return Diagnostic(Range(Pos(sl, sc, so), Pos(el, ec, eo)), Severity.ERROR, message, "syntax",
                          data={"replacement": replacement} if replacement else None)

    @property
    def made(self) -> bool:
        return self._made is not None

    def _all(self) -> tuple[Diagnostic, ...]:
        if self._made is None:
            self._made = self.head + tuple(map(self.diagnostic, self.rows))
        return self._made

    def __len__(self) -> int:
        return len(self.head) + len(self.rows)

    def __iter__(self):
        return iter(self._all())

    def __getitem__(self, k):
        if self._made is None and isinstance(k, int):  # one diagnostic (a block's first and last), made alone
            h, n = len(self.head), len(self)
            k = k + n if k < 0 else k
            if not 0 <= k < n:
                raise IndexError(k)
            return self.head[k] if k < h else self.diagnostic(self.rows[k - h])
        return self._all()[k]

    def __eq__(self, other) -> bool:
        if self is other:
            return True
        if not isinstance(other, (tuple, Filled)):
            return NotImplemented
        return self._all() == tuple(other)

    def __hash__(self) -> int:
        return hash(self._all())

    def __repr__(self) -> str:
        return f"Filled({len(self.head)} + {len(self.rows)} diagnostics)"


# ---- expressions -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Name:
    text: str
    range: Range


@dataclass(frozen=True)
class Number:
    value: float
    text: str
    range: Range


@dataclass(frozen=True)
class Binary:
    """``left OP right``; ``op`` is ``plus``, ``minus``, ``times``, ``multiplied`` or ``scaled``."""

    op: str
    left: "Expr"
    right: "Expr"
    range: Range
    op_range: Range


@dataclass(frozen=True)
class Call:
    """A named operation. ``args`` maps each ``$`` slot of its pattern to its operand, ``numbers`` each ``#`` slot to
    its number or constant; ``options`` is the keys of the options present, in the order written."""

    op: str
    args: tuple[tuple[str, "Expr"], ...]
    numbers: tuple[tuple[str, Union[Name, Number]], ...]
    options: tuple[str, ...]
    range: Range
    op_range: Range

    def arg(self, slot: str) -> "Expr | None":
        return next((e for s, e in self.args if s == slot), None)

    def number(self, slot: str) -> "Name | Number | None":
        return next((e for s, e in self.numbers if s == slot), None)

    def number_list(self, slot: str) -> "tuple[Name | Number, ...]":
        """Every number a list slot (``#*S``) holds, in the order written."""
        return tuple(e for s, e in self.numbers if s == slot)


Expr = Union[Name, Number, Binary, Call]


# ---- statements ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Declaration:
    """``Let NAME be a [q8] ROLE of D by D [by D] [, cosines|sines of base B [, scaling…]]``; or a ``token`` /
    ``position``. A table's fill is read as a call of the fill (``ops.FILLS``): its numbers are ``B`` and the
    scaling's, its options the scaling's keys."""

    role: str  # weight, input, state, table, token, position
    q8: bool
    dims: tuple[Union[Name, Number], ...]
    fill: "Call | None"  # op "cosines" or "sines"
    range: Range


@dataclass(frozen=True)
class Let:
    name: Name
    value: Union[Declaration, "Expr"]
    range: Range
    index: int  # the statement's index within its program


@dataclass(frozen=True)
class Set:
    target: Name
    row: "Expr | None"  # ``Set row P of S to E`` has row P
    value: "Expr"
    range: Range
    index: int


@dataclass(frozen=True)
class Return:
    name: Name
    range: Range
    index: int


@dataclass(frozen=True)
class Constant:
    name: Name
    value: Number
    range: Range


@dataclass(frozen=True)
class CheckpointEntry:
    """``Wq{l} is "blk.{l}.attn_q.weight"[, columns A to B [of every N]][, rows A to B].``"""

    pattern: str  # the declared-name pattern, ``Wq{l}``
    tensor: str  # the checkpoint tensor pattern, ``blk.{l}.attn_q.weight``
    columns: tuple[int, int, int | None] | None  # (start, stop, every)
    rows: tuple[int, int] | None
    range: Range


Statement = Union[Let, Set, Return]


class SectionKind(Enum):
    TITLE = "title"
    MODEL = "model"
    CHECKPOINT = "checkpoint"
    EMBED = "embed"
    LAYER = "layer"
    HEAD = "head"
    NOTE = "note"
    PREAMBLE = "preamble"  # text before the first heading
    UNKNOWN = "unknown"


class Section:
    """One heading and the lines under it, up to the next heading.

    ``texts`` are the program's token texts (the heading and comments excluded) — exactly what the kind digest reads;
    ``tokens`` the same tokens with their ranges, made the first time they are asked for. Each statement covers a
    contiguous run of them, ``spans[i]`` being statement ``i``'s ``(first, end)`` token indices. ``diagnostics`` are
    the parser's findings in this section.

    A layer whose text is another's up to the names it binds (``shape``) is not parsed: ``shared_from`` is that
    layer's section, and its statements are that tree with its own names and ranges, made when first read.
    Immutable once made; equal when every part is equal."""

    __slots__ = ("kind", "title", "index", "note", "constants", "entries", "table", "shape", "diagnostics",
                 "shared_from", "_heading", "_range", "_index_range", "_statements", "_spans", "_tokens",
                 "token_at", "_numerals", "_framed", "broken", "unparsed", "__weakref__")

    def __init__(self, kind: SectionKind, heading: Range | None, title: str, index: int | None, note: str | None,
                 range: Range | None, table=None, statements: tuple | None = (), spans: tuple | None = (),
                 constants: tuple = (), entries: tuple = (), index_range: Range | None = None, shape=None,
                 diagnostics: tuple = (), shared_from: "Section | None" = None, tokens: tuple | None = None):
        self.kind = kind
        self.title = title
        self.index = index
        self.note = note
        self.constants = constants
        self.entries = entries
        self.table = table
        self.shape = shape
        self.diagnostics = diagnostics
        self.shared_from = shared_from
        # ``heading is None``: the heading's ranges are made from ``table.source`` when first read.
        self._heading = heading
        self._range = range
        self._index_range = index_range
        self._statements = statements
        self._spans = spans
        self._tokens = tokens
        self.token_at = None  # (start offset → token, end offset → token), made by the first renaming from it
        self._numerals = None  # its numbers' tokens (``number_tokens``)
        self._framed = None
        #: A layer whose body did not parse cleanly, as the parser keeps it for the other layers of its shape (what
        #: each statement that failed says, ``parser._failures``); ``None`` for any other section.
        self.broken = None
        self.unparsed = None  # the spans of its statements that did not parse (``model.program.unparsed_statements``)

    def _place(self) -> None:
        self._heading, self._range, self._index_range = heading_ranges(self.table.source)

    @property
    def heading(self) -> Range:
        if self._heading is None:
            self._place()
        return self._heading

    @property
    def range(self) -> Range:
        """The heading and its body."""
        if self._heading is None:
            self._place()
        return self._range

    @property
    def index_range(self) -> Range | None:
        """The range of the layer number in the heading."""
        if self._heading is None:
            self._place()
        return self._index_range

    @property
    def texts(self):
        return self.table.texts if self.table is not None else ()

    @property
    def tokens(self) -> tuple[Token, ...]:
        if self._tokens is None:
            self._tokens = self.table.tokens if self.table is not None else ()
        return self._tokens

    @property
    def token_index(self) -> tuple[dict[int, int], dict[int, int]]:
        """Each token's index by its start byte offset and by its end byte offset (made once)."""
        if self.token_at is None:
            toks = self.tokens
            self.token_at = ({t.start_offset: k for k, t in enumerate(toks)}, {t.end_offset: k for k, t in enumerate(toks)})
        return self.token_at

    @property
    def statements(self) -> tuple["Statement", ...]:
        if self._statements is None:
            self._statements = renamed_statements(self.shared_from, self)
        return self._statements

    @property
    def framed(self) -> tuple["Statement", ...]:
        """What this layer computes, up to the names it gives and where it writes them: the statements of the layer
        whose tree it shares (``shared_from``: one of its shape or frame), with this layer's numbers — its own
        statements when it shares none. For readers that ask which operations on which numbers (the check of a layer
        of a known frame, a kind's name), without renaming every statement into its names and places."""
        if self._framed is None:
            frm = self.shared_from
            self._framed = self.statements if frm is None else renumbered(frm, self.texts)
        return self._framed

    @property
    def number_tokens(self) -> tuple[tuple[tuple[int, int, str], ...], tuple[int, ...]]:
        """Every number of this (parsed) program as ``(first token, last token, text)``, in the order written, and
        the numeral pieces (``lang.shapes``) that lie in none — none, in a clean parse: a piece is read only as part
        of a number. Made once: a frame's first layer is read against every layer of its frame."""
        if self._numerals is None:
            starts, ends = self.token_index
            out: list[tuple[int, int, str]] = []
            for st in self.statements:
                for e in _numbers(st):
                    out.append((starts[e.range.start.offset], ends[e.range.end.offset], e.text))
            covered = {k for a, b, _ in out for k in range(a, b + 1)}
            loose = tuple(k for k, t in enumerate(self.texts) if k not in covered and NUMERAL.fullmatch(t))
            self._numerals = (tuple(out), loose)
        return self._numerals

    @property
    def spans(self) -> tuple[tuple[int, int], ...]:
        if self._spans is None:
            self._spans = self.shared_from.spans
        return self._spans

    def __eq__(self, other) -> bool:
        if self is other:
            return True
        if not isinstance(other, Section):
            return NotImplemented
        # The cheap parts first: sections of a document differ in kind, title or place.
        return ((self.kind, self.title, self.index, self.note, self.heading, self.range, self.index_range)
                == (other.kind, other.title, other.index, other.note, other.heading, other.range, other.index_range)
                and (list(self.texts), self.diagnostics, self.constants, self.entries)
                == (list(other.texts), other.diagnostics, other.constants, other.entries)
                and (self.tokens, self.spans, self.statements) == (other.tokens, other.spans, other.statements))

    def __hash__(self) -> int:
        return hash((self.kind, self.title, self.range))

    def __repr__(self) -> str:
        return f"Section({self.kind.value}, {self.title!r}, {self.range.start.line + 1}-{self.range.end.line + 1})"

    @property
    def label(self) -> str:
        if self.kind is SectionKind.LAYER:
            return f"layer {self.index}"
        return self.kind.value

    @property
    def distinct(self) -> bool:
        """The heading says this layer is meant to differ from its siblings (``## Layer 5: distinct …``)."""
        return bool(self.note) and self.note.split()[0].lower().rstrip(",.;:—-") == "distinct"

    def statement_at(self, token_index: int) -> int | None:
        for i, (a, b) in enumerate(self.spans):
            if a <= token_index < b:
                return i
        return None


class Document:
    """A parsed document: its text, its title, its sections in order, and what the parser says about the whole.

    ``text`` may be given as a function that makes it (the editor's text is its chunks, joined only if read).
    ``by_kind``: the sections of each kind, when the caller has them (else found once, when first asked).
    Immutable; equal when text, title, sections and diagnostics are equal."""

    __slots__ = ("_text", "title", "sections", "diagnostics", "_by_kind", "_constants", "_checkpoint", "_layers")

    def __init__(self, text, title: str | None, sections: tuple[Section, ...], diagnostics: tuple[Diagnostic, ...] = (),
                 by_kind: dict | None = None):
        self._text = text
        self.title = title
        self.sections = sections
        self.diagnostics = diagnostics
        self._by_kind = by_kind
        self._constants = self._checkpoint = self._layers = None

    @property
    def text(self) -> str:
        if not isinstance(self._text, str):
            self._text = self._text()
        return self._text

    def __eq__(self, other) -> bool:
        if not isinstance(other, Document):
            return NotImplemented
        return (self.title, self.sections, self.diagnostics, self.text) == (other.title, other.sections, other.diagnostics, other.text)

    __hash__ = None

    def __repr__(self) -> str:
        return f"Document({self.title!r}, {len(self.sections)} sections, {len(self.diagnostics)} diagnostics)"

    def of_kind(self, kind: SectionKind) -> list[Section]:
        if self._by_kind is None:
            by_kind: dict = {}
            for s in self.sections:
                by_kind.setdefault(s.kind, []).append(s)
            self._by_kind = by_kind
        return list(self._by_kind.get(kind, ()))

    @property
    def layers(self) -> list[Section]:
        if self._layers is None:
            self._layers = self.of_kind(SectionKind.LAYER)
        return self._layers

    @property
    def embed(self) -> Section | None:
        found = self.of_kind(SectionKind.EMBED)
        return found[0] if found else None

    @property
    def head(self) -> Section | None:
        found = self.of_kind(SectionKind.HEAD)
        return found[0] if found else None

    @property
    def constants(self) -> dict[str, float]:
        if self._constants is None:
            self._constants = {c.name.text: c.value.value for s in self.of_kind(SectionKind.MODEL) for c in s.constants}
        return self._constants

    @property
    def checkpoint(self) -> tuple[CheckpointEntry, ...]:
        """Every ``## Checkpoint`` entry, read once per document (a weight's storage asks for them per weight)."""
        if self._checkpoint is None:
            self._checkpoint = tuple(e for s in self.of_kind(SectionKind.CHECKPOINT) for e in s.entries)
        return self._checkpoint


# ---- a shared layer's tree, renamed --------------------------------------------------------------------------------


class Renaming:
    """From one section to another of the same shape (or frame: ``lang.shapes``): each binder of ``frm`` to the
    binder of ``to`` at the same place, each range of ``frm`` (which starts and ends at token boundaries) to the range
    of the same tokens in ``to``, and each number to the number ``to`` writes with those tokens."""

    __slots__ = ("names", "_starts", "_ends", "_table")

    def __init__(self, frm: Section, to: Section):
        self.names = dict(zip(frm.shape.names, to.shape.names))
        self._starts, self._ends = frm.token_index
        self._table = to.table

    def name(self, text: str) -> str:
        return self.names.get(text, text)

    def range(self, r: Range) -> Range:
        t = self._table
        pos = t.source.pos
        return Range(pos(t.starts[self._starts[r.start.offset]]), pos(t.ends[self._ends[r.end.offset]]))

    def expr(self, e):
        rng = self.range
        if isinstance(e, Name):
            return Name(self.names.get(e.text, e.text), rng(e.range))
        if isinstance(e, Number):
            a, b = self._starts[e.range.start.offset], self._ends[e.range.end.offset]
            texts = self._table.texts
            text = texts[a] if a == b else "".join(texts[a:b + 1])
            return Number(e.value if text == e.text else float(text), text, rng(e.range))
        if isinstance(e, Binary):
            right = self.expr(e.right)
            return Binary(e.op, self.expr(e.left), right, rng(e.range), rng(e.op_range))
        if isinstance(e, Call):
            return Call(e.op, tuple((s, self.expr(a)) for s, a in e.args), tuple((s, self.expr(n)) for s, n in e.numbers),
                        e.options, rng(e.range), rng(e.op_range))
        if isinstance(e, Declaration):
            fill = self.expr(e.fill) if e.fill is not None else None
            return Declaration(e.role, e.q8, tuple(self.expr(d) for d in e.dims), fill, rng(e.range))
        return e

    def statement(self, st: Statement) -> Statement:
        if isinstance(st, Let):
            return Let(self.expr(st.name), self.expr(st.value), self.range(st.range), st.index)
        if isinstance(st, Set):
            row = self.expr(st.row) if st.row is not None else None
            return Set(self.expr(st.target), row, self.expr(st.value), self.range(st.range), st.index)
        return Return(self.expr(st.name), self.range(st.range), st.index)


def _numbers(e):
    """Every ``Number`` of a statement or expression, in the order written."""
    if isinstance(e, Number):
        yield e
    elif isinstance(e, Binary):
        yield from _numbers(e.left)
        yield from _numbers(e.right)
    elif isinstance(e, Call):
        for _, x in e.args:
            yield from _numbers(x)
        for _, x in e.numbers:
            yield from _numbers(x)
    elif isinstance(e, Declaration):
        for x in e.dims:
            yield from _numbers(x)
        if e.fill is not None:
            yield from _numbers(e.fill)
    elif isinstance(e, Let):
        yield from _numbers(e.value)
    elif isinstance(e, Set):
        if e.row is not None:
            yield from _numbers(e.row)
        yield from _numbers(e.value)


def renumbered(frm: Section, texts) -> tuple[Statement, ...]:
    """``frm``'s statements with the numbers a layer of its frame, whose token texts are ``texts``, writes in their
    place — names and ranges ``frm``'s. Only the statements whose numbers differ are made anew."""
    changed: dict[int, str] = {}
    for a, b, text in frm.number_tokens[0]:
        new = texts[a] if a == b else "".join(texts[a:b + 1])
        if new != text:
            changed[a] = new
    statements = frm.statements
    if not changed:
        return statements
    starts = frm.token_index[0]

    def number(e):
        if isinstance(e, Number):
            new = changed.get(starts[e.range.start.offset])
            return e if new is None else Number(float(new), new, e.range)
        if isinstance(e, Binary):
            return Binary(e.op, number(e.left), number(e.right), e.range, e.op_range)
        if isinstance(e, Call):
            return Call(e.op, tuple((s, number(a)) for s, a in e.args), tuple((s, number(n)) for s, n in e.numbers),
                        e.options, e.range, e.op_range)
        if isinstance(e, Declaration):
            return Declaration(e.role, e.q8, tuple(number(d) for d in e.dims),
                               number(e.fill) if e.fill is not None else None, e.range)
        return e

    out = list(statements)
    spans = frm.spans
    for k, (a, b) in enumerate(spans):
        if any(a <= t < b for t in changed):
            st = statements[k]
            if isinstance(st, Let):
                out[k] = Let(st.name, number(st.value), st.range, st.index)
            elif isinstance(st, Set):
                out[k] = Set(st.target, number(st.row) if st.row is not None else None, number(st.value), st.range,
                             st.index)
    return tuple(out)


def renamed_statements(frm: Section, to: Section) -> tuple[Statement, ...]:
    """``to``'s statements: ``frm``'s (a section of the same shape), renamed into ``to``'s names and ranges."""
    r = Renaming(frm, to)
    return tuple(r.statement(st) for st in frm.statements)
