"""The syntax tree. Every node carries its range, computed once by the parser and never searched for again.

Nodes are frozen: a parsed document is an immutable value, safe to share between the analysis, the lowering and the
editor's handlers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Union

from .lexer import Range, Token


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


@dataclass(frozen=True)
class Section:
    """One heading and the lines under it, up to the next heading.

    ``tokens`` are the program's tokens (the heading and comments excluded) — exactly what the kind digest reads; each
    statement covers a contiguous run of them, ``spans[i]`` being statement ``i``'s ``(first, end)`` token indices."""

    kind: SectionKind
    heading: Range
    title: str  # the heading's text after the hashes, e.g. ``Layer 3: global``
    index: int | None  # a layer's number
    note: str | None
    range: Range  # the heading and its body
    tokens: tuple[Token, ...] = ()
    statements: tuple[Statement, ...] = ()
    spans: tuple[tuple[int, int], ...] = ()
    constants: tuple[Constant, ...] = ()
    entries: tuple[CheckpointEntry, ...] = ()
    index_range: Range | None = None  # the range of the layer number in the heading

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


@dataclass(frozen=True)
class Document:
    text: str
    title: str | None
    sections: tuple[Section, ...]
    diagnostics: tuple[Diagnostic, ...] = field(default=())

    def of_kind(self, kind: SectionKind) -> list[Section]:
        return [s for s in self.sections if s.kind is kind]

    @property
    def layers(self) -> list[Section]:
        return self.of_kind(SectionKind.LAYER)

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
        return {c.name.text: c.value.value for s in self.of_kind(SectionKind.MODEL) for c in s.constants}

    @property
    def checkpoint(self) -> list[CheckpointEntry]:
        return [e for s in self.of_kind(SectionKind.CHECKPOINT) for e in s.entries]
