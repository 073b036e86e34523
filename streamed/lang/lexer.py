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
from dataclasses import dataclass

_TOKEN = re.compile(r"[A-Za-z0-9_]+|\S")
_COMMENT = "--"


@dataclass(frozen=True, slots=True)
class Pos:
    """A place in the text: 0-based line, UTF-16 column within the line, and UTF-8 byte offset in the text."""

    line: int
    character: int
    offset: int


@dataclass(frozen=True, slots=True)
class Range:
    start: Pos
    end: Pos

    def contains(self, line: int, character: int) -> bool:
        """Whether the editor position (line, UTF-16 column) falls inside this range (end inclusive)."""
        s, e = self.start, self.end
        return (s.line, s.character) <= (line, character) <= (e.line, e.character)

    @staticmethod
    def cover(a: "Range", b: "Range") -> "Range":
        return Range(a.start, b.end)


@dataclass(frozen=True, slots=True)
class Token:
    text: str
    range: Range

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
    cols, offs = [0], [0]
    c = o = 0
    for ch in text:
        cp = ord(ch)
        c += 2 if cp > 0xFFFF else 1
        o += 1 if cp < 0x80 else 2 if cp < 0x800 else 3 if cp < 0x10000 else 4
        cols.append(c)
        offs.append(o)
    return cols, offs


def lex_line(number: int, offset: int, text: str) -> Line:
    """Tokens of one line (``text`` without its newline) starting at byte ``offset`` of the document."""
    cut = text.find(_COMMENT)
    code = text if cut < 0 else text[:cut]
    table = _columns(text)
    if table is None:
        def pos(i: int) -> Pos:
            return Pos(number, i, offset + i)
    else:
        cols, offs = table

        def pos(i: int) -> Pos:
            return Pos(number, cols[i], offset + offs[i])

    tokens = tuple(Token(m.group(), Range(pos(m.start()), pos(m.end()))) for m in _TOKEN.finditer(code))
    comment = None if cut < 0 else Range(pos(cut), pos(len(text)))
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
