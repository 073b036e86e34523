"""The commands' work off the event loop, called directly: cancellation and where a bundle may be written."""


import pytest

from lsphelp import TINY
from streamed_lsp.commands import CommandError, output_folder


def test_a_cancelled_lowering_writes_nothing_and_says_so(tmp_path):
    from streamed.analysis.incremental import IncrementalAnalyzer
    from streamed_lsp.commands import lower_bundle
    from streamed_lsp.scheduler import Snapshot
    from streamed_lsp.settings import Settings

    doc = tmp_path / "m.lgm"
    doc.write_text(TINY)
    snap = Snapshot(doc.as_uri(), 1, 1, IncrementalAnalyzer().analyze(TINY))
    with pytest.raises(CommandError, match="cancelled"):
        lower_bundle(snap, {"uri": doc.as_uri(), "mode": "decode"}, Settings(), [tmp_path], lambda m, p: None, lambda: True)
    assert not (tmp_path / "m.bundle").exists()


def test_the_default_bundle_folder_is_beside_the_document_and_never_outside_the_workspace(tmp_path):
    doc = tmp_path / "models" / "gemma.lgm"
    assert output_folder({}, doc, [tmp_path]) == tmp_path / "models" / "gemma.bundle"
    assert output_folder({"out": "../b"}, doc, [tmp_path]) == tmp_path / "b"
    with pytest.raises(CommandError, match="outside the workspace folders"):
        output_folder({"out": "../../escape"}, doc, [tmp_path])
    with pytest.raises(CommandError, match="outside the workspace folders"):
        output_folder({"out": "/etc/x.bundle"}, doc, [tmp_path])
