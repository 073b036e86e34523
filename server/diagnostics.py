"""Diagnostics, pushed after every analysis and pulled with result ids.

Parse and semantic errors, divergences (warnings whose related information points at the representative's token and
heading) and each kind's lowering reject (an error on the representative's statement, with related entries at every
member layer's header) — all are the core's ``Diagnostic`` values converted; nothing is decided here."""

from __future__ import annotations

import hashlib
import json

from lsprotocol import types as lsp

from streamed.analysis.places import Base, placed

from .convert import to_diagnostic, to_json, to_json_lines
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
    as it was), for the last two publications. A chunk's parse diagnostics come relative to their chunk (the runs of
    ``Snapshot.runs``): written once as JSON cut at its line numbers (``convert.to_json_lines``) while the chunk's
    parse is the same, and moved by writing those numbers again — an edit above ten thousand of them writes none.
    What a keystroke costs here follows what it changed, not how many diagnostics the document has."""

    def __init__(self):
        self.current: dict = {}
        self.previous: dict = {}
        self.written = 0  # diagnostics written as JSON (a cache miss) — for tests and benchmarks

    def message(self, snap: Snapshot) -> str:
        """The whole ``textDocument/publishDiagnostics`` notification, as ``publish_params`` would be sent."""
        texts = []
        for base, diags in snap.runs:
            if base is None:
                texts.extend(map(lambda d: self._one(snap.uri, d), diags))
            else:
                texts.append(self._block(snap.uri, base.line, diags))
        self.previous, self.current = self.current, {}
        version = "" if snap.version is None else f',"version":{json.dumps(snap.version)}'
        return (f'{{"jsonrpc":"2.0","method":"{lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS}","params":'
                f'{{"uri":{json.dumps(snap.uri)},"diagnostics":[{",".join(texts)}]{version}}}}}')

    def _get(self, key):
        hit = self.current.get(key)
        return self.previous.get(key) if hit is None else hit

    def _one(self, uri: str, d) -> str:
        """One placed diagnostic's JSON."""
        hit = self._get(id(d))
        if hit is None or hit[0] is not d:
            key = _shown(d)
            seen = self._get(key)
            if seen is None or seen[0] != d.data:
                seen = (d.data, json.dumps(to_json(uri, d)))
                self.written += 1
            self.current[key] = seen
            hit = (d, seen[1])
        self.current[id(d)] = hit
        return hit[1]

    def _block(self, uri: str, line: int, diags: tuple) -> str:
        """A chunk's diagnostics (chunk-relative) placed at document line ``line``, as JSON: their texts around their
        line numbers made once per tuple, the numbers written again only when the chunk moved by lines."""
        hit = self._get((id(diags), line))
        if hit is None or hit[0] is not diags:
            cut = self._get(("cut", id(diags)))
            if cut is None or cut[0] is not diags:
                cut = (diags, to_json_lines(uri, diags))
                self.written += len(diags)
            if cut[1] is None:  # a run that could not be cut: placed and written a diagnostic at a time
                text = ",".join(self._one(uri, d) for d in placed(diags, Base(line, 0)))
            else:
                pieces, lines = cut[1]
                parts = pieces[:]
                parts[1::2] = [str(k + line) for k in lines]
                text = "".join(parts)
            hit = (diags, text, cut)
        self.current[(id(diags), line)] = hit
        self.current["cut", id(diags)] = hit[2]  # kept while the chunk is: it may move later
        return hit[1]


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
