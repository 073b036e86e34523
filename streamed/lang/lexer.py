"""Tokens, and positions made only when a range is asked for.

The token rule is the seed's, because the layer-kind digest is defined over it: each maximal run of ASCII letters,
digits and ``_`` is one token, and every other non-space character is a token of its own. Comments (``--`` to the end
of the line) are dropped. Lines end at ``\\n``, ``\\r\\n`` or a lone ``\\r`` (the three line ends LSP names), and a
byte-order mark that opens the document is not a token (an editor does not show it).

Lexing is one compiled ``re.split`` per section: the pieces alternate between whitespace and a token (or a comment),
so every token's character offset is a running sum of the pieces' lengths, taken at C speed. A token is a string and
an offset until something asks where it is; only then is its (line, UTF-16 column) and UTF-8 byte offset computed, by
the ``Source`` of the text it came from. Most tokens are only ever compared by text.

Invariant: for every token ``t`` of a text ``s``, ``s.encode()[t.start_offset:t.end_offset].decode() == t.text``,
and its UTF-16 columns address the same characters. Lexing is linear in the text and never raises.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from itertools import accumulate, islice
from operator import add, sub
from typing import NamedTuple

#: The seed's token rule, as a pattern (what ``tokens`` means; ``_PIECES`` is the same rule with comments kept whole).
TOKEN = re.compile(r"[A-Za-z0-9_]+|\S")
#: Whitespace, then a comment or a token, then whitespace…: ``split`` keeps the comments and tokens at odd indices.
_PIECES = re.compile(r"(--[^\r\n]*|[A-Za-z0-9_]+|\S)")
_LINE_END = re.compile(r"\r\n?|\n")
#: A token that can be a piece of a number (``4096``, the ``1e`` and ``5`` of ``1e-5``, ``1e5``): digits, then an
#: exponent's mark and its digits, if any. The number rule asks of such a piece only which of these it is.
NUMERAL = re.compile(r"[0-9]+(?:[eE][0-9]*)?")
COMMENT = "--"
BOM = "\ufeff"


class Pos(NamedTuple):
    """A place in the text: 0-based line, UTF-16 column within the line, and UTF-8 byte offset in the text.

    Positions, ranges and tokens are named tuples, not dataclasses: a tuple is built several times faster."""

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
    """A token with its place: its text, its line, its UTF-16 columns and its byte offsets. Built only when a
    section's ``tokens`` are asked for (hover, rename, semantic tokens…); the analysis reads token texts."""

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


def line_starts(text: str) -> list[int]:
    """The character index at which each line of ``text`` starts (lines end at ``\\n``, ``\\r\\n`` or ``\\r``)."""
    if "\r" not in text:
        return [0, *accumulate(len(line) + 1 for line in text.split("\n"))][:-1]
    return [0, *(m.end() for m in _LINE_END.finditer(text))]


def split_lines(text: str) -> list[str]:
    """The lines of ``text`` without their line ends, by the lexer's rule."""
    return text.split("\n") if "\r" not in text else _LINE_END.split(text)


def _units(s: str) -> int:
    """UTF-16 code units of ``s``."""
    return len(s) if s.isascii() else len(s.encode("utf-16-le")) // 2


def utf8_length(s: str) -> int:
    """UTF-8 bytes of ``s``."""
    return len(s) if s.isascii() else len(s.encode("utf-8"))


def line_ends(s: str) -> int:
    """How many line ends ``s`` holds (``\r\n`` is one)."""
    if "\r" not in s:
        return s.count("\n")
    return s.count("\n") + s.count("\r") - s.count("\r\n")


class Source:
    """A text placed in a document: it starts at document line ``line`` and UTF-8 byte ``offset``. Turns a
    character index of the text into a ``Pos`` — the only place positions are computed. A section is parsed against
    its own source, so a section moved by an edit above it is the same section at another base."""

    __slots__ = ("text", "line", "offset", "ascii", "_starts", "_line_bytes")

    def __init__(self, text: str, line: int = 0, offset: int = 0):
        self.text = text
        self.line = line
        self.offset = offset
        self.ascii = text.isascii()
        self._starts: list[int] | None = None
        self._line_bytes: dict[int, int] = {}

    @property
    def starts(self) -> list[int]:
        if self._starts is None:
            self._starts = line_starts(self.text)
        return self._starts

    def pos(self, i: int) -> Pos:
        starts = self.starts
        n = bisect_right(starts, i) - 1
        s = starts[n]
        if self.ascii:
            return Pos(self.line + n, i - s, self.offset + i)
        before = self._line_bytes.get(n)
        if before is None:
            before = self._line_bytes[n] = utf8_length(self.text[:s])
        seg = self.text[s:i]
        return Pos(self.line + n, _units(seg), self.offset + before + utf8_length(seg))

    def range(self, i: int, j: int) -> Range:
        return Range(self.pos(i), self.pos(j))

    def line_end(self, n: int) -> Pos:
        """The position just past the last character of line ``n`` (before its line end)."""
        return self.pos(self.line_stop(n))

    def line_stop(self, n: int) -> int:
        """The character index where line ``n``'s text stops (its line end excluded)."""
        starts, text = self.starts, self.text
        if n + 1 >= len(starts):
            return len(text)
        end = starts[n + 1]
        return end - 2 if text[end - 2:end] == "\r\n" else end - 1

    @property
    def lines(self) -> int:
        return len(self.starts)


class Table:
    """The tokens of a stretch of a source as parallel sequences — texts, start and end character indices — and
    where its comments are. What the parser walks; ``Token`` objects are made from it only on request, and the
    character indices only when first read (a layer that is not parsed may never need them)."""

    __slots__ = ("source", "texts", "first", "stop", "like", "_parts", "_starts", "_ends", "_comments", "_tokens")

    def __init__(self, source: Source, texts, first: int = 0, stop: int | None = None, parts: list[str] | None = None,
                 like: "Table | None" = None):
        self.source = source
        self.texts = texts
        self.first = first  # where in ``source.text`` the stretch starts, and where it stops (``None``: the end)
        self.stop = stop
        # A table whose stretch is this one's but for the spelling of its tokens — the same whitespace and comments
        # between as many tokens (a layer of the same shape or frame): this one is placed from it.
        self.like = like
        self._parts = parts
        self._starts = self._ends = self._comments = None
        self._tokens: tuple[Token, ...] | None = None

    def __len__(self) -> int:
        return len(self.texts)

    def _place(self) -> None:
        like = self.like
        if self._parts is None and like is not None:
            # Placed from a table of the same pieces but for its tokens' spelling: each token moved by how much longer
            # the tokens before it are here, at C speed (no second split of the text).
            self.like = None
            ls, le = like.starts, like.ends
            grow = list(accumulate(map(sub, map(len, self.texts), map(len, like.texts)), initial=self.first - like.first))
            self._starts, self._ends = list(map(add, ls, grow)), list(map(add, le, islice(grow, 1, None)))
            self._comments = tuple((a + grow[c], b + grow[c]) for a, b in like.comments for c in (bisect_left(ls, a),))
            return
        parts = self._parts if self._parts is not None else _PIECES.split(self.source.text[self.first:self.stop])
        cum = list(accumulate(map(len, parts), initial=self.first))
        n = len(parts) // 2
        odd = parts[1::2]
        starts = cum[1::2][:n]
        ends = cum[2::2]
        comments: tuple = ()
        if len(odd) != len(self.texts):
            keep = [k for k, t in enumerate(odd) if t[:2] != COMMENT]
            comments = tuple((starts[k], ends[k]) for k, t in enumerate(odd) if t[:2] == COMMENT)
            starts = [starts[k] for k in keep]
            ends = [ends[k] for k in keep]
        self._starts, self._ends, self._comments = starts, ends, comments
        self._parts = None

    @property
    def starts(self) -> list[int]:
        if self._starts is None:
            self._place()
        return self._starts

    @property
    def ends(self) -> list[int]:
        if self._ends is None:
            self._place()
        return self._ends

    @property
    def comments(self) -> tuple[tuple[int, int], ...]:
        """``(start, end)`` character indices of each comment."""
        if self._comments is None:
            self._place()
        return self._comments

    def adjacent(self, i: int) -> bool:
        """Whether token ``i`` ends exactly where token ``i + 1`` starts (no space, no comment between). Not yet
        placed from a ``like`` table: that table's answer — the pieces between tokens are the same."""
        if self._ends is None and self.like is not None and self._parts is None:
            return self.like.adjacent(i)
        return self.ends[i] == self.starts[i + 1]

    def _grow(self, i: int) -> int:
        """How far token ``i`` (and the whitespace before it) is moved from its place in ``like``: ``_place``'s
        ``grow[i]``, for one token — a layer that reads one or two places never places its every token."""
        like = self.like
        return self.first - like.first + sum(map(len, self.texts[:i])) - sum(map(len, like.texts[:i]))

    def range(self, i: int, j: int) -> Range:
        """From the start of token ``i`` to the end of token ``j`` (inclusive)."""
        if self._starts is None and self.like is not None and self._parts is None:
            like = self.like
            return Range(self.source.pos(like.starts[i] + self._grow(i)), self.source.pos(like.ends[j] + self._grow(j + 1)))
        return Range(self.source.pos(self.starts[i]), self.source.pos(self.ends[j]))

    def places(self, spans) -> list[tuple[int, int, int, int, int, int]]:
        """Where each ``(a, b, line of a, line of b)`` runs, from the start of token ``a`` to the end of token ``b``
        (lines relative to the source), as ``(start offset, start line, start column, end offset, end line, end
        column)`` — ``range(a, b)``'s numbers. A table not yet placed is read from ``like`` (the same pieces, so its
        tokens lie on the same lines) without placing its every token: a broken layer of a known shape places its
        diagnostics alone."""
        like, src = self.like, self.source
        if self._starts is not None or like is None or self._parts is not None or not src.ascii:
            out = []
            for a, b, _, _ in spans:
                s, e = self.range(a, b)
                out.append((s.offset, s.line, s.character, e.offset, e.line, e.character))
            return out
        grow = list(accumulate(map(sub, map(len, self.texts), map(len, like.texts)), initial=self.first - like.first))
        ls, le, lines, line, offset = like.starts, like.ends, src.starts, src.line, src.offset
        out = []
        for a, b, la, lb in spans:
            i, j = ls[a] + grow[a], le[b] + grow[b + 1]
            out.append((offset + i, line + la, i - lines[la], offset + j, line + lb, j - lines[lb]))
        return out

    def token_range(self, i: int) -> Range:
        return Range(self.source.pos(self.starts[i]), self.source.pos(self.ends[i]))

    @property
    def tokens(self) -> tuple[Token, ...]:
        if self._tokens is None:
            pos = self.source.pos
            out = []
            for text, a, b in zip(self.texts, self.starts, self.ends):
                s, e = pos(a), pos(b)
                out.append(Token(text, s.line, s.character, e.character, s.offset, e.offset))
            self._tokens = tuple(out)
        return self._tokens


def pieces(text: str) -> list[str]:
    """``text`` split into whitespace (even indices) and comments or tokens (odd indices): joined, they are ``text``."""
    return _PIECES.split(text)


def texts_of(parts: list[str], text: str) -> list[str]:
    """The token texts among ``pieces`` of ``text`` (comments dropped)."""
    odd = parts[1::2]
    if COMMENT in text:
        return [t for t in odd if t[:2] != COMMENT]
    return odd


def table(source: Source, start: int = 0, end: int | None = None, parts: list[str] | None = None,
          placed: bool = True, texts: list[str] | None = None, like: Table | None = None) -> Table:
    """The tokens of ``source.text[start:end]`` (``parts``: its ``pieces``, when the caller has them). ``placed``:
    compute the character indices now (the parser needs them) rather than on first read; ``like``: a table of the
    same pieces but for its tokens' spelling, to place this one from (``Table.like``)."""
    text = source.text[start:end] if start or end is not None else source.text
    if parts is None:
        parts = _PIECES.split(text)
    t = Table(source, texts_of(parts, text) if texts is None else texts, start, end, parts, like)
    if placed:
        t._place()
    else:
        t._parts = None  # split again if ever placed: a layer read by renaming keeps only its texts
    return t


def decode(data: bytes | str) -> tuple[str, bool]:
    """The text of a document and whether it had to replace invalid UTF-8."""
    if isinstance(data, str):
        return data, False
    try:
        return data.decode("utf-8"), False
    except UnicodeDecodeError:
        return data.decode("utf-8", errors="replace"), True


def tokens(text: str) -> list[str]:
    """The seed's token stream of a program text: words and single non-space characters, comments dropped."""
    if text.startswith(BOM):
        text = text[1:]
    out = _PIECES.split(text)[1::2]
    if COMMENT in text:
        out = [t for t in out if t[:2] != COMMENT]
    return out


# ---- lines: for tools that read a text line by line (formatting, benchmarks) ----------------------------------------


class Line(NamedTuple):
    """One line of a text: its number, byte offset, raw text (without the line end), its tokens (comments dropped)
    and the range of its ``--`` comment, if any."""

    number: int
    offset: int
    text: str
    tokens: tuple[Token, ...]
    comment: Range | None


def lex_line(number: int, offset: int, text: str) -> Line:
    """Tokens of one line (``text`` without its line end) starting at byte ``offset`` of the document."""
    src = Source(text, number, offset)
    t = table(src)
    comment = src.range(*t.comments[0]) if t.comments else None
    return Line(number, offset, text, t.tokens, comment)


def lex(text: str) -> list[Line]:
    """Every line of ``text`` with its tokens."""
    src = Source(text)
    starts = src.starts
    whole = table(src, 1 if text.startswith(BOM) else 0)
    out = []
    k = 0
    toks = whole.tokens
    comments = list(whole.comments)
    for n, a in enumerate(starts):
        b = starts[n + 1] if n + 1 < len(starts) else len(text)
        mine = []
        while k < len(toks) and whole.starts[k] < b:
            mine.append(toks[k])
            k += 1
        comment = None
        if comments and comments[0][0] < b:
            comment = src.range(*comments.pop(0))
        body = text[a:src.line_stop(n)]
        out.append(Line(n, src.pos(a).offset, body, tuple(mine), comment))
    return out


def end_of(text: str) -> Pos:
    """The position just past the last character of ``text``."""
    lines = split_lines(text)
    return Pos(len(lines) - 1, _units(lines[-1]), utf8_length(text))
