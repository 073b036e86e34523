"""Tokens with exact ranges.

The token rule is the seed's, because the layer-kind digest is defined over it: each maximal run of ASCII letters,
digits and ``_`` is one token, and every other non-space character is a token of its own. Comments (``--`` to the end
of the line) are dropped. Every token carries its range twice over: (line, UTF-16 column) for the editor and the UTF-8
byte offset for tools.

Invariant: for every token ``t`` of a text ``s``, ``s.encode()[t.range.start.offset:t.range.end.offset].decode() ==
t.text``, and its UTF-16 columns address the same characters. Lexing is linear in the text and never raises.
"""

from __future__ import annotations

import re
from itertools import accumulate
from dataclasses import dataclass
from typing import NamedTuple

_TOKEN = re.compile(r"[A-Za-z0-9_]+|\S")
_COMMENT = "--"


class Pos(NamedTuple):
    """A place in the text: 0-based line, UTF-16 column within the line, and UTF-8 byte offset in the text.

    Positions, ranges and tokens are named tuples, not dataclasses: a 10 MB document has millions of them, and a
    tuple is built several times faster than a frozen dataclass."""

    line: int
    character: int
    offset: int


class Range(NamedTuple):
    start: Pos
    end: Pos

    def contains(self, line: int, character: int) -> bool:
        """Whether the editor position (line, UTF-16 column) falls inside this range (end inclusive)."""
        s, e = self.start, self.end
        return (s.line, s.character) <= (line, character) <= (e.line, e.character)

    @staticmethod
    def cover(a: "Range", b: "Range") -> "Range":
        return Range(a.start, b.end)


class Token(NamedTuple):
    """A token: its text, its line, its UTF-16 columns and its byte offsets. ``range`` is built on demand: most
    tokens are only ever compared by text, and a flat tuple is the cheapest thing to build millions of."""

    text: str
    line: int
    start_character: int
    end_character: int
    start_offset: int
    end_offset: int

    @property
    def range(self) -> Range:
        return Range(Pos(self.line, self.start_character, self.start_offset), Pos(self.line, self.end_character, self.end_offset))

    @property
    def is_word(self) -> bool:
        c = self.text[0]
        return c.isascii() and (c.isalnum() or c == "_")

    @property
    def is_number(self) -> bool:
        return self.text[0].isdigit()


@dataclass(frozen=True, slots=True)
class Line:
    """One line of the text: its number, byte offset, raw text (without the newline) and its tokens, comments dropped.

    ``comment`` is the range of a ``--`` comment on the line, if any (the editor colours it)."""

    number: int
    offset: int
    text: str
    tokens: tuple[Token, ...]
    comment: Range | None


def decode(data: bytes | str) -> tuple[str, bool]:
    """The text of a document and whether it had to replace invalid UTF-8."""
    if isinstance(data, str):
        return data, False
    try:
        return data.decode("utf-8"), False
    except UnicodeDecodeError:
        return data.decode("utf-8", errors="replace"), True


def _columns(text: str) -> tuple[list[int], list[int]] | None:
    """For a line with non-ASCII characters: the UTF-16 column and the byte offset of every character index
    (one extra entry for the end). ``None`` for an ASCII line, where all three coincide."""
    if text.isascii():
        return None
    cols = [0, *accumulate(2 if c > "\uffff" else 1 for c in text)]
    offs = [0, *accumulate(1 if c < "\x80" else 2 if c < "\u0800" else 3 if c <= "\uffff" else 4 for c in text)]
    return cols, offs


def lex_line(number: int, offset: int, text: str) -> Line:
    """Tokens of one line (``text`` without its newline) starting at byte ``offset`` of the document."""
    cut = text.find(_COMMENT)
    code = text if cut < 0 else text[:cut]
    table = _columns(text)
    if table is None:
        tokens = tuple(Token(m.group(), number, m.start(), m.end(), offset + m.start(), offset + m.end())
                       for m in _TOKEN.finditer(code))
        comment = None if cut < 0 else Range(Pos(number, cut, offset + cut), Pos(number, len(text), offset + len(text)))
    else:
        cols, offs = table
        tokens = tuple(Token(m.group(), number, cols[m.start()], cols[m.end()], offset + offs[m.start()], offset + offs[m.end()])
                       for m in _TOKEN.finditer(code))
        n = len(text)
        comment = None if cut < 0 else Range(Pos(number, cols[cut], offset + offs[cut]), Pos(number, cols[n], offset + offs[n]))
    return Line(number, offset, text, tokens, comment)


def lex(text: str) -> list[Line]:
    """Every line of ``text`` with its tokens. A ``\\r`` before a newline is not part of the line."""
    lines: list[Line] = []
    offset = 0
    for number, raw in enumerate(text.split("\n")):
        body = raw[:-1] if raw.endswith("\r") else raw
        lines.append(lex_line(number, offset, body))
        offset += len(raw.encode("utf-8")) + 1
    return lines


def tokens(text: str) -> list[str]:
    """The seed's token stream of a program text: words and single non-space characters, comments dropped."""
    return [t.text for line in lex(text) for t in line.tokens]


def end_of(text: str) -> Pos:
    """The position just past the last character of ``text``."""
    lines = text.split("\n")
    last = lines[-1]
    return Pos(len(lines) - 1, len(last.encode("utf-16-le")) // 2, len(text.encode("utf-8")))
