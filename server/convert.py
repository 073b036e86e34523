"""Between the core's ranges and lsprotocol's: the core already counts lines from 0 and columns in UTF-16 code
units, so a conversion copies numbers; it never searches the text."""

from __future__ import annotations

import json
import re

from lsprotocol import types as lsp

from streamed.lang.lexer import Range
from streamed.lang.syntax import Diagnostic, Severity

SOURCE = "streamed"

_SEVERITY = {
    Severity.ERROR: lsp.DiagnosticSeverity.Error,
    Severity.WARNING: lsp.DiagnosticSeverity.Warning,
    Severity.INFORMATION: lsp.DiagnosticSeverity.Information,
    Severity.HINT: lsp.DiagnosticSeverity.Hint,
}


def to_range(r: Range) -> lsp.Range:
    return lsp.Range(lsp.Position(r.start.line, r.start.character), lsp.Position(r.end.line, r.end.character))


def to_diagnostic(uri: str, d: Diagnostic) -> lsp.Diagnostic:
    related = [lsp.DiagnosticRelatedInformation(lsp.Location(uri, to_range(x.range)), x.message) for x in d.related]
    return lsp.Diagnostic(
        range=to_range(d.range), message=d.message, severity=_SEVERITY[d.severity], code=d.code, source=SOURCE,
        related_information=related or None, data=d.data,
    )


def _range_json(r: Range) -> dict:
    return {"start": {"line": r.start.line, "character": r.start.character},
            "end": {"line": r.end.line, "character": r.end.character}}


def to_json(uri: str, d: Diagnostic) -> dict:
    """``to_diagnostic`` as the JSON values lsprotocol's converter makes of it (fields that are ``None`` left out),
    made directly: a document with hundreds of divergences publishes them at every keystroke."""
    out = {"range": _range_json(d.range), "message": d.message, "severity": _SEVERITY[d.severity].value,
           "code": d.code, "source": SOURCE}
    if d.related:
        out["relatedInformation"] = [{"location": {"uri": uri, "range": _range_json(x.range)}, "message": x.message}
                                     for x in d.related]
    if d.data is not None:
        out["data"] = d.data
    return out


_LINE = re.compile(r'"\\u0000(\d+)\\u0000"')


def to_json_lines(uri: str, diags) -> tuple[list[str], list[int]] | None:
    """The diagnostics' ``to_json`` as one JSON text (the items of an array, without its brackets) cut at its line
    numbers: ``pieces``, with every other item left for a line of ``lines`` — so the diagnostics moved by ``n`` lines
    are the pieces with each line plus ``n`` — written once, moved at the cost of their numbers. (Each line is first
    written as a string of its place between NULs, which JSON escapes: no text of a message can stand for one, as a
    quote inside a JSON string is always escaped; ``None`` if a value is itself such a string.)"""
    objs = [to_json(uri, d) for d in diags]
    lines: list[int] = []
    for obj in objs:
        for r in [obj["range"], *(x["location"]["range"] for x in obj.get("relatedInformation", ()))]:
            for end in (r["start"], r["end"]):
                lines.append(end["line"])
                end["line"] = f"\0{len(lines) - 1}\0"
    pieces = _LINE.split(json.dumps(objs)[1:-1])
    if pieces[1::2] != [str(k) for k in range(len(lines))]:
        return None
    pieces[1::2] = [""] * len(lines)
    return pieces, lines


def contains(r: lsp.Range, line: int, character: int) -> bool:
    return (r.start.line, r.start.character) <= (line, character) <= (r.end.line, r.end.character)


def overlaps(a: lsp.Range, b: lsp.Range) -> bool:
    return not ((a.end.line, a.end.character) < (b.start.line, b.start.character)
                or (b.end.line, b.end.character) < (a.start.line, a.start.character))
