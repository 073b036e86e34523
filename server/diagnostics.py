"""Diagnostics, pushed after every analysis and pulled with result ids.

Parse and semantic errors, divergences (warnings whose related information points at the representative's token and
heading) and each kind's lowering reject (an error on the representative's statement, with related entries at every
member layer's header) — all are the core's ``Diagnostic`` values converted; nothing is decided here."""

from __future__ import annotations

import hashlib

from lsprotocol import types as lsp

from .convert import to_diagnostic
from .scheduler import Snapshot


def diagnostics_of(snap: Snapshot) -> list[lsp.Diagnostic]:
    return [to_diagnostic(snap.uri, d) for d in snap.diagnostics]


def publish_params(snap: Snapshot) -> lsp.PublishDiagnosticsParams:
    """The push notification, carrying the version of exactly the text it describes."""
    return lsp.PublishDiagnosticsParams(uri=snap.uri, diagnostics=diagnostics_of(snap), version=snap.version)


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
