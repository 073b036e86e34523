"""Diagnostics, pushed after every analysis and pulled with result ids.

Parse and semantic errors, divergences (warnings whose related information points at the representative's token and
heading) and each kind's lowering reject (an error on the representative's statement, with related entries at every
member layer's header) — all are the core's ``Diagnostic`` values converted; nothing is decided here."""

from __future__ import annotations

import hashlib
import json

from lsprotocol import types as lsp

from .convert import to_diagnostic, to_json
from .scheduler import Snapshot


def diagnostics_of(snap: Snapshot) -> list[lsp.Diagnostic]:
    return [to_diagnostic(snap.uri, d) for d in snap.diagnostics]


def publish_params(snap: Snapshot) -> lsp.PublishDiagnosticsParams:
    """The push notification, carrying the version of exactly the text it describes."""
    return lsp.PublishDiagnosticsParams(uri=snap.uri, diagnostics=diagnostics_of(snap), version=snap.version)


class Published:
    """One document's push notifications as JSON text, each diagnostic written once: kept by the core diagnostic it
    is (the core keeps a diagnostic nothing moved — a divergence of a layer an edit did not touch — as the very same
    value), and by what the client reads of it (an edit above it that moves it by bytes, not lines, leaves its JSON
    as it was), for the last two publications. What a keystroke costs here follows what it changed, not how many
    diagnostics the document has."""

    def __init__(self):
        self.current: dict = {}
        self.previous: dict = {}

    def message(self, snap: Snapshot) -> str:
        """The whole ``textDocument/publishDiagnostics`` notification, as ``publish_params`` would be sent."""
        texts = []
        current, previous = self.current, self.previous
        for d in snap.diagnostics:
            hit = current.get(id(d)) or previous.get(id(d))
            if hit is None or hit[0] is not d:
                key = _shown(d)
                seen = current.get(key) or previous.get(key)
                hit = (d, seen[1] if seen is not None and seen[0] == d.data else json.dumps(to_json(snap.uri, d)))
                current[key] = (d.data, hit[1])
            current[id(d)] = hit
            texts.append(hit[1])
        self.previous, self.current = current, {}
        version = "" if snap.version is None else f',"version":{json.dumps(snap.version)}'
        return (f'{{"jsonrpc":"2.0","method":"{lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS}","params":'
                f'{{"uri":{json.dumps(snap.uri)},"diagnostics":[{",".join(texts)}]{version}}}}}')


def result_id(diags: list[lsp.Diagnostic]) -> str:
    """A result id that changes exactly when the diagnostics do: a digest of their content."""
    h = hashlib.sha256()
    for d in diags:
        h.update(repr((d.range, d.message, d.severity, d.code, d.related_information)).encode())
    return h.hexdigest()[:16]


def pull_report(snap: Snapshot | None, previous: str | None) -> lsp.DocumentDiagnosticReport:
    if snap is None:
        return lsp.RelatedFullDocumentDiagnosticReport(items=[], result_id=None)
    diags = diagnostics_of(snap)
    rid = result_id(diags)
    if previous is not None and previous == rid:
        return lsp.RelatedUnchangedDocumentDiagnosticReport(result_id=rid)
    return lsp.RelatedFullDocumentDiagnosticReport(items=diags, result_id=rid)


def _shown(d) -> tuple:
    """What a client reads of a diagnostic but its ``data``: where (lines and UTF-16 columns), what, how bad."""
    r = d.range
    return (d.message, d.code, d.severity, r.start.line, r.start.character, r.end.line, r.end.character,
            tuple((x.range.start.line, x.range.start.character, x.range.end.line, x.range.end.character, x.message)
                  for x in d.related))
