"""The document cut at its headings: ``cut`` gives its chunks — each a heading line and the lines under it, up to the
next heading (text before the first heading is a chunk of its own) — and ``heading_ranges`` where a chunk's heading,
its whole range and a layer's number are.

The whole-document parse and the editor's incremental analysis cut alike, so a section parses the same in both; a
section's heading ranges are made from its chunk's ``Source`` whenever they are first asked for. Invariant:
``"".join(c.text + c.sep for c in cut(text)) == text``; a heading is a line whose first character that is not a
space is ``#``.
"""

from __future__ import annotations

from dataclasses import dataclass

from .lexer import _LINE_END, BOM, COMMENT, Range, Source, line_ends, table, utf8_length


@dataclass(frozen=True, slots=True)
class Chunk:
    """A stretch of the document from a heading line (or the start) to the line before the next heading, without
    the line end that separates it from the next chunk (``sep``). ``line`` and ``offset``: where it starts (document
    line, UTF-8 byte). The document is ``"".join(c.text + c.sep for c in chunks)``."""

    text: str
    line: int
    offset: int
    sep: str = ""


def heading_starts(text: str) -> list[int]:
    """Where each heading line starts: a line whose first character that is not a space is ``#`` (a ``--`` comment
    before it makes it a comment). ``#`` is rare outside headings, so finding each one (at C speed) and looking back
    to its line start beats scanning every line. (A text without ``\r`` is searched for ``\n`` alone: a search for a
    character the text lacks reads to its end, once per heading.)"""
    out = []
    cr = "\r" in text
    i = text.find("#")
    while i >= 0:
        start = (max(text.rfind("\n", 0, i), text.rfind("\r", 0, i)) if cr else text.rfind("\n", 0, i)) + 1
        before = text[start:i]
        if not before or before.isspace() or (start == 0 and before[0] == BOM and (len(before) == 1 or before[1:].isspace())):
            out.append(start)
        if cr:
            m = _LINE_END.search(text, i)
            nxt = m.start() if m else -1
        else:
            nxt = text.find("\n", i)
        if nxt < 0:
            break
        i = text.find("#", nxt)
    return out


def cut(text: str) -> list[Chunk]:
    """The document cut before each heading line; text before the first heading is a chunk of its own."""
    starts = heading_starts(text)
    if not starts or starts[0] != 0:
        starts.insert(0, 0)
    out: list[Chunk] = []
    line = offset = 0
    for k, a in enumerate(starts):
        if k + 1 < len(starts):
            nxt = starts[k + 1]
            b = nxt - 2 if text[nxt - 2:nxt] == "\r\n" else nxt - 1
        else:
            nxt = b = len(text)
        piece = text[a:b]
        out.append(Chunk(piece, line, offset, text[b:nxt]))
        whole = text[a:nxt]
        line += line_ends(whole)
        offset += utf8_length(whole)
    return out


def heading_line(line: str) -> tuple[int, str, int] | None:
    """``(level, title, where its ``#`` is)`` when the line is a heading: its first token is ``#`` (``##``: level
    2); the title is the rest of the line, its comment dropped."""
    start = 1 if line.startswith(BOM) else 0
    stripped = line[start:].lstrip()
    if not stripped.startswith("#"):
        return None
    lead = len(line) - len(stripped)
    level = 2 if stripped.startswith("##") else 1
    return level, line.split(COMMENT, 1)[0][lead + level:].strip(), lead


def first_line(text: str) -> tuple[int, int]:
    """Where the first line's text stops and where the next line starts."""
    nl = text.find("\n")
    if "\r" in text[:nl if nl >= 0 else len(text)]:
        m = _LINE_END.search(text)
        return m.start(), m.end()
    return (nl, nl + 1) if nl >= 0 else (len(text), len(text))


def heading_ranges(src: Source) -> tuple[Range, Range, Range | None]:
    """A section's heading, its whole range (heading and body) and the range of a layer's number, in ``src``."""
    stop, _ = first_line(src.text)
    level, _, lead = heading_line(src.text[:stop])
    heading = Range(src.pos(lead), src.pos(stop))
    full = Range(heading.start, src.line_end(src.lines - 1))
    head = table(src, lead, stop)
    k = next((k for k in range(2, len(head.texts)) if head.texts[k][0].isdigit()), None)
    return heading, full, (head.token_range(k) if k is not None else None)
