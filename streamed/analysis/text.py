"""The editor's document: ``Text``, a document as its chunks (cut at its headings, ``lang.chunks.cut``), of which an
edit replaces the few it touches and keeps every other chunk the very same string — so that the incremental analysis
finds what changed by identity, at C speed, and recomputes only that.

Also here, because an editor's edits arrive as they do: ``apply_change``, the LSP edit rule on a text addressed by
(line, UTF-16 column), total over any position a client may send; ``offset_at``, an editor position as a ``str``
index; ``clean``, text a client may send (lone surrogates) as text the core can encode. Invariant: ``str(t.edit(s,
e, new)) == apply_change(str(t), s, e, new)`` for every edit, and its chunks are ``cut`` of that text.
"""

from __future__ import annotations

import bisect
import re
from itertools import accumulate, chain

from ..lang.chunks import Chunk, cut
from ..lang.lexer import line_ends


_SURROGATE = re.compile("[\ud800-\udfff]")
_LINE_END = re.compile(r"\r\n?|\n")


def clean(text: str) -> str:
    """Text a client may send (JSON allows lone UTF-16 surrogates) as text the core can encode: each lone surrogate
    becomes U+FFFD."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text)


def _index(line: str, character: int) -> int:
    """The ``str`` index of UTF-16 column ``character`` in ``line``: clamped to the line's end, and a column that
    falls inside a surrogate pair moves to the character's start."""
    if character <= 0:
        return 0
    if line.isascii():
        return min(character, len(line))
    units = 0
    for i, ch in enumerate(line):
        w = 2 if ord(ch) > 0xFFFF else 1
        if units + w > character:
            return i
        units += w
    return len(line)


def offset_at(text: str, line: int, character: int) -> int:
    """The ``str`` index of an editor position. Lines end at ``\\n``, ``\\r\\n`` or ``\\r`` (the lexer's rule); a
    line past the end is the end of the text, a column past a line's end is that line's end (LSP's rule)."""
    if line < 0:
        return 0
    if "\r" not in text:
        parts = text.split("\n", line + 1)  # the lines before, the line itself, and (unsplit) the rest
        if len(parts) <= line:
            return len(text)
        return sum(map(len, parts[:line])) + line + _index(parts[line], character)
    start = 0
    for _ in range(line):
        m = _LINE_END.search(text, start)
        if m is None:
            return len(text)
        start = m.end()
    m = _LINE_END.search(text, start)
    return start + _index(text[start:m.start() if m else len(text)], character)


def apply_change(text: str, start: tuple[int, int] | None, end: tuple[int, int] | None, new: str) -> str:
    """``text`` with the range ``start``–``end`` (editor positions) replaced by ``new``; no range replaces the whole
    text. A reversed range is read in order. Never raises."""
    new = clean(new)
    if start is None or end is None:
        return new
    a, b = offset_at(text, *start), offset_at(text, *end)
    if b < a:
        a, b = b, a
    return text[:a] + new + text[b:]


def chunks(text: str) -> list[Chunk]:
    """The document cut before each heading line (``lang.chunks.cut``)."""
    return cut(text)


class Text:
    """A document as its chunks: ``texts[i]`` and the line end ``seps[i]`` after it (``""`` for the last). An edit
    replaces the chunks it touches and keeps every other chunk the very same string, and remembers which: since the
    text last analysed, how many chunks at its start and at its end are untouched — so the next analysis reads only
    what changed without comparing the lists. Immutable (but for that bookkeeping); ``str(t)`` is the whole text."""

    __slots__ = ("texts", "seps", "lines", "chars", "_line_starts", "_string", "_since", "_analysed")

    def __init__(self, texts: list[str], seps: list[str], lines: list[int], line_starts: list[int] | None = None,
                 since: "tuple[Text, int, int] | None" = None, chars: int | None = None):
        self.texts = texts
        self.seps = seps
        self.lines = lines  # line ends in each chunk and its separator
        self.chars = sum(map(len, texts)) + sum(map(len, seps)) if chars is None else chars
        self._line_starts = line_starts
        self._string: str | None = None
        # (the text last analysed that this one was edited from, chunks untouched at its start, at its end)
        self._since = since
        self._analysed = False

    @classmethod
    def of(cls, text: str) -> "Text":
        cs = cut(text)
        texts = [c.text for c in cs]
        seps = [c.sep for c in cs]
        return cls(texts, seps, [line_ends(t + s) for t, s in zip(texts, seps)])

    def __str__(self) -> str:
        if self._string is None:
            self._string = "".join(chain.from_iterable(zip(self.texts, self.seps)))
        return self._string

    def __contains__(self, needle: str) -> bool:
        """Whether ``needle`` occurs in the text, as for the ``str`` it is."""
        return needle in str(self)

    @property
    def line_starts(self) -> list[int]:
        """The document line each chunk starts on."""
        if self._line_starts is None:
            self._line_starts = list(accumulate(self.lines, initial=0))[:-1]
        return self._line_starts

    def untouched_since(self, other: "Text") -> tuple[int, int] | None:
        """How many chunks at the start and at the end this text shares with ``other`` (the text an analyzer read
        last), when this text was edited from it; else ``None``."""
        if self is other:
            return len(self.texts), len(self.texts)
        if self._since is not None and self._since[0] is other:
            return self._since[1], self._since[2]
        return None

    def _locate(self, line: int, character: int) -> tuple[int, int]:
        """(chunk, ``str`` index in its text) of an editor position, clamped as ``offset_at`` clamps."""
        if line < 0:
            return 0, 0
        k = bisect.bisect_right(self.line_starts, line) - 1
        return k, offset_at(self.texts[k], line - self.line_starts[k], character)

    def edit(self, start: tuple[int, int] | None, end: tuple[int, int] | None, new: str) -> "Text":
        """The text with ``start``–``end`` replaced by ``new`` (``apply_change``'s rule). Only the chunks from the
        one before the edit to the one after it are cut again: a heading line is one whose first character is
        ``#``, which an edit elsewhere cannot change."""
        new = clean(new)
        if start is None or end is None:
            return Text.of(new)
        (k1, i1), (k2, i2) = self._locate(*start), self._locate(*end)
        if (k2, i2) < (k1, i1):
            (k1, i1), (k2, i2) = (k2, i2), (k1, i1)
        a, b = max(k1 - 1, 0), min(k2 + 2, len(self.texts))
        texts, seps = self.texts, self.seps
        before = sum(len(texts[j]) + len(seps[j]) for j in range(a, k1)) + i1
        upto = sum(len(texts[j]) + len(seps[j]) for j in range(a, k2)) + i2
        region = "".join(texts[j] + seps[j] for j in range(a, b - 1)) + texts[b - 1]
        region = region[:before] + new + region[upto:]
        pieces = cut(region)
        new_texts = [c.text for c in pieces]
        new_seps = [c.sep for c in pieces[:-1]] + [seps[b - 1]]
        # Keep the very same string for a chunk the edit did not change (the analysis compares by identity first).
        for j, t in enumerate(new_texts):
            k = a + j
            if k < b and texts[k] == t:
                new_texts[j] = texts[k]
        new_lines = [line_ends(t + s) for t, s in zip(new_texts, new_seps)]
        lines = self.lines[:a] + new_lines + self.lines[b:]
        # The chunks' first lines are the same when the region holds as many chunks of as many lines.
        same_lines = len(new_lines) == b - a and new_lines == self.lines[a:b]
        kept_start, kept_end = a, len(texts) - b
        if not self._analysed and self._since is not None:
            base, start_, end_ = self._since
            kept_start, kept_end = min(start_, kept_start), min(end_, kept_end)
        else:
            base = self
        chars = self.chars - sum(len(texts[j]) + len(seps[j]) for j in range(a, b)) + \
            sum(map(len, new_texts)) + sum(map(len, new_seps))
        return Text(texts[:a] + new_texts + texts[b:], seps[:a] + new_seps + seps[b:], lines,
                    self._line_starts if same_lines else None, (base, kept_start, kept_end), chars)
