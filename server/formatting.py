"""Formatting of statement spacing: within program and model lines, one space between tokens, none before `,` `.`
`)` or after `(`; words that touch stay touching (a number's `0.125`). The author's layout is kept: indentation,
line breaks and the space before a trailing comment. `be` after binders is aligned or not consistently within a
program: a program written aligned (`Let Wq5   be …`, as `streamed author` writes) has every `be` one space past its
longest binder, any other has one space before each `be` (``be_width``). A line is reformatted only if the result
lexes and splits into statements exactly as before."""

from __future__ import annotations

from lsprotocol import types as lsp

from streamed.analysis.incremental import parse_chunk
from streamed.lang.lexer import lex_line
from streamed.lang.syntax import SectionKind
from .scheduler import Snapshot

_TIGHT_BEFORE = {",", ".", ")"}
_TIGHT_AFTER = {"("}
_FORMATTED = (SectionKind.MODEL, SectionKind.EMBED, SectionKind.LAYER, SectionKind.HEAD)


def _binding(text: str):
    """The binder and the column of `be` (UTF-16 units) of a line that starts ``Let <binder> be``, and whether
    the binder is padded; else ``None``."""
    toks = lex_line(0, 0, text).tokens
    if len(toks) < 3 or toks[0].text != "Let" or toks[2].text != "be":
        return None
    return toks[1].text, toks[2].range.start.character, toks[2].range.start.character > toks[1].range.end.character + 1


def be_width(lines: list[str]) -> int | None:
    """The width binders are padded to in a program written aligned, else ``None`` (one space before `be`).

    A program is written aligned (as ``streamed author`` writes it) when two or more of its ``Let`` lines put `be`
    in one column and one of them reaches it by padding; then every ``Let`` of the program has its `be` one space
    past the longest binder. A lone padded ``Let x     be`` in a program written unaligned is closed up."""
    bindings = [b for b in map(_binding, lines) if b is not None]
    columns: dict[int, list[bool]] = {}
    for _, column, padded in bindings:
        columns.setdefault(column, []).append(padded)
    if not any(len(p) >= 2 and any(p) for p in columns.values()):
        return None
    return max(len(binder) for binder, _, _ in bindings)


def format_line(text: str, width: int | None = None) -> str:
    """``text`` with its statement spacing normalised; ``width``: the binder width a ``Let`` line's `be` is aligned
    past (``be_width``), or ``None`` for one space."""
    line = lex_line(0, 0, text)
    if not line.tokens:
        return text.rstrip()
    toks = line.tokens
    indent = text[: len(text) - len(text.lstrip())]
    out = [toks[0].text]
    for i in range(1, len(toks)):
        prev, t = toks[i - 1], toks[i]
        nxt = toks[i + 1] if i + 1 < len(toks) else None
        touching = prev.range.end.offset == t.range.start.offset
        # ``1 .5`` is a full stop then a number; written ``1.5`` it would be one number: keep that space.
        makes_number = (t.text == "." and prev.text[-1].isdigit() and nxt is not None and nxt.text[0].isdigit()
                        and nxt.range.start.offset == t.range.end.offset)
        aligned = width is not None and t.text == "be" and i == 2 and toks[0].text == "Let"
        if touching or ((t.text in _TIGHT_BEFORE or prev.text in _TIGHT_AFTER) and not makes_number):
            out.append(t.text)
        elif aligned:
            out.append(" " * (width - len(prev.text) + 1) + t.text)
        else:
            out.append(" " + t.text)
    body = indent + "".join(out)
    if line.comment is not None:
        cstart = line.comment.start.character
        units = text.encode("utf-16-le")
        comment = units[cstart * 2:].decode("utf-16-le", "replace")
        before = units[toks[-1].range.end.character * 2:cstart * 2].decode("utf-16-le", "replace")
        body = body + (before if before.strip() == "" and before else " ") + comment
    return body.rstrip()


def _same_program(section, new: str) -> bool:
    b = parse_chunk(new)
    if b.section is None:
        return False
    return [t.text for t in section.tokens] == [t.text for t in b.section.tokens] and section.spans == b.section.spans


def formatting(snap: Snapshot) -> list[lsp.TextEdit]:
    a = snap.analysis
    edits: list[lsp.TextEdit] = []
    for section, base, text in zip(a.document.sections, a.bases, a.chunk_texts):
        if section.kind not in _FORMATTED:
            continue
        lines = text.split("\n")
        bare = [l[:-1] if l.endswith("\r") else l for l in lines[1:]]
        width = be_width(bare)
        new = [lines[0]] + [format_line(b, width) + l[len(b):] for b, l in zip(bare, lines[1:])]
        if new == lines or not _same_program(section, "\n".join(new)):
            continue
        for i, (o, n) in enumerate(zip(lines, new)):
            if o != n:
                end = len(o.encode("utf-16-le")) // 2
                edits.append(lsp.TextEdit(lsp.Range(lsp.Position(base.line + i, 0), lsp.Position(base.line + i, end)), n))
    return edits
