"""Between the core's ranges and lsprotocol's: the core already counts lines from 0 and columns in UTF-16 code
units, so a conversion copies numbers; it never searches the text."""

from __future__ import annotations

import json
import re
from itertools import chain

from lsprotocol import types as lsp

from streamed.lang.lexer import Range
from streamed.lang.syntax import Diagnostic, Filled, Severity

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


_string = json.encoder.encode_basestring_ascii  # a string as ``json.dumps`` writes it
_LINE = re.compile(r'"\\u0000(\d+)\\u0000"')


def to_json_lines(uri: str, diags) -> tuple[list[str], list[int]] | None:
    """``json.dumps`` of the diagnostics' ``to_json`` (the items of the array, without its brackets) cut at its line
    numbers: ``pieces``, with every other item left for a line of ``lines`` — so the diagnostics moved by ``n`` lines
    are the pieces with each line plus ``n``: written once, moved at the cost of their numbers. A diagnostic with
    neither related information nor data — a parse error's — is written directly (what ``json.dumps`` writes, field
    for field); any other through ``to_json`` and ``json.dumps``, each line first written as a string of its place
    between NULs, which JSON escapes — no text of a message can stand for one, as a quote inside a JSON string is
    always escaped (``None`` if a value is itself such a string)."""
    texts: list[str] = []
    lines: list[int] = []
    tail = ""  # what follows the last line so far
    rows = ()
    if type(diags) is Filled and not diags.made:  # a shared broken layer's: written from its rows
        diags, rows = diags.head, diags.rows
    error = _SEVERITY[Severity.ERROR].value
    for d in chain(diags, rows):
        if texts:
            tail += ", "
        if type(d) is tuple:
            if not d[7]:  # a syntax error with no replacement: no data
                plain = (d[1], d[2], d[4], d[5], d[6], error, "syntax")
            else:
                d, plain = Filled.diagnostic(d), None
        elif not d.related and d.data is None and type(d.code) is str:
            r = d.range
            plain = (r.start.line, r.start.character, r.end.line, r.end.character, d.message,
                     _SEVERITY[d.severity].value, d.code)
        else:
            plain = None
        if plain is not None:
            start, start_character, end, end_character, message, severity, code = plain
            texts += [tail + '{"range": {"start": {"line": ', f', "character": {start_character}}}, "end": {{"line": ']
            lines += [start, end]
            tail = (f', "character": {end_character}}}}}, "message": {_string(message)}, "severity": '
                    f'{severity}, "code": {_string(code)}, "source": "{SOURCE}"}}')
            continue
        obj = to_json(uri, d)
        mine: list[int] = []
        for r in [obj["range"], *(x["location"]["range"] for x in obj.get("relatedInformation", ()))]:
            for end in (r["start"], r["end"]):
                mine.append(end["line"])
                end["line"] = f"\0{len(mine) - 1}\0"
        pieces = _LINE.split(json.dumps(obj))
        if pieces[1::2] != [str(k) for k in range(len(mine))]:
            return None
        texts += [tail + pieces[0], *pieces[2:-1:2]]
        lines += mine
        tail = pieces[-1]
    texts.append(tail)
    out = [""] * (2 * len(texts) - 1)
    out[0::2] = texts
    return out, lines


def contains(r: lsp.Range, line: int, character: int) -> bool:
    return (r.start.line, r.start.character) <= (line, character) <= (r.end.line, r.end.character)


def overlaps(a: lsp.Range, b: lsp.Range) -> bool:
    return not ((a.end.line, a.end.character) < (b.start.line, b.start.character)
                or (b.end.line, b.end.character) < (a.start.line, a.start.character))
