"""The commands' work off the event loop, called directly: cancellation and where a bundle may be written."""


from pathlib import Path

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
    doc.parent.mkdir()
    assert output_folder({}, doc, [tmp_path]) == tmp_path / "models" / "gemma.bundle"
    assert output_folder({"out": "../b"}, doc, [tmp_path]) == tmp_path / "b"
    with pytest.raises(CommandError, match="outside the workspace folders"):
        output_folder({"out": "../../escape"}, doc, [tmp_path])
    with pytest.raises(CommandError, match="outside the workspace folders"):
        output_folder({"out": "/etc/x.bundle"}, doc, [tmp_path])


def test_a_root_workspace_folder_confines_nothing_so_bundles_stay_beside_the_document(tmp_path):
    """Issue 11: adding `/` as a workspace folder let lowerBundle write anywhere."""
    doc = tmp_path / "models" / "m.lgm"
    doc.parent.mkdir()
    for folders in ([Path("/")], [Path("/"), tmp_path / "elsewhere"]):
        with pytest.raises(CommandError, match="outside the workspace folders"):
            output_folder({"out": str(tmp_path / "other" / "x.bundle")}, doc, folders)
    with pytest.raises(CommandError, match="outside the workspace folders"):
        output_folder({"out": "/etc/x.bundle"}, doc, [Path("/")])
    assert output_folder({}, doc, [Path("/")]) == doc.parent / "m.bundle"


def test_a_bundle_is_never_written_for_an_unsaved_document_nor_into_a_folder_that_does_not_exist(tmp_path):
    """With no workspace folder, lowerBundle created any missing directories beside any file:// address, even for a
    document never saved."""
    from streamed.analysis.incremental import IncrementalAnalyzer
    from streamed_lsp.commands import lower_bundle
    from streamed_lsp.scheduler import Snapshot
    from streamed_lsp.settings import Settings

    never_saved = tmp_path / "a" / "b" / "untitled.lgm"
    snap = Snapshot(never_saved.as_uri(), 1, 1, IncrementalAnalyzer().analyze(TINY))
    with pytest.raises(CommandError, match="is not a file on disk; save it first"):
        lower_bundle(snap, {"uri": never_saved.as_uri(), "mode": "decode"}, Settings(), [], lambda m, p: None,
                     lambda: False)
    assert list(tmp_path.iterdir()) == []
    doc = tmp_path / "m.lgm"
    doc.write_text(TINY)
    with pytest.raises(CommandError, match="its folder .*deep.* does not exist"):
        output_folder({"out": "deep/er/x.bundle"}, doc, [])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.lgm"]
    # Inside a workspace folder the user opened, the folders leading to the bundle may be made.
    assert output_folder({"out": "deep/er/x.bundle"}, doc, [tmp_path]) == tmp_path / "deep" / "er" / "x.bundle"


def test_open_manifest_reads_only_inside_the_workspace_folders(tmp_path):
    from streamed_lsp.commands import open_manifest

    outside = tmp_path / "outside.bundle"
    outside.mkdir()
    (outside / "manifest.json").write_text("{}")
    work = tmp_path / "work"
    work.mkdir()
    for folders in ([work], [Path("/")], []):
        with pytest.raises(CommandError, match=f"will not read {outside}: manifests are read inside"):
            open_manifest({"bundle": str(outside)}, folders)
