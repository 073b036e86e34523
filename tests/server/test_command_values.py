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


def _lower(tmp_path, folders, obj, settings=None):
    from streamed.analysis.incremental import IncrementalAnalyzer
    from streamed_lsp.commands import lower_bundle
    from streamed_lsp.scheduler import Snapshot
    from streamed_lsp.settings import Settings

    doc = tmp_path / "work" / "m.lgm"
    doc.parent.mkdir(exist_ok=True)
    doc.write_text(TINY)
    snap = Snapshot(doc.as_uri(), 1, 1, IncrementalAnalyzer().analyze(TINY))
    return lower_bundle(snap, {"uri": doc.as_uri(), "mode": "decode", "ctx": 16, **obj}, settings or Settings(), folders,
                        lambda m, p: None, lambda: False)


@pytest.mark.parametrize("field", ["target", "checkpoint"])
def test_a_command_reads_a_target_or_checkpoint_only_inside_the_workspace(tmp_path, field):
    """Issue 21: `lowerBundle {"target": "/etc/shadow"}` opened and parsed any file and described it back, line and
    column; `checkpoint` read from anywhere. A well-formed file outside the workspace is refused before it is read —
    with any workspace folder, with `/` as one, and with none (the document's folder)."""
    from repo import TINY_CHIP

    outside = tmp_path / "outside.toml"
    outside.write_bytes(TINY_CHIP.read_bytes())
    work = tmp_path / "work"
    work.mkdir()
    for folders in ([work], [Path("/")], []):
        for value in (str(outside), "../outside.toml", "/etc/shadow"):
            with pytest.raises(CommandError, match=rf"will not read .* \(`{field}`\): a command reads files inside"):
                _lower(tmp_path, folders, {field: value})
    assert not (work / "m.bundle").exists()


def test_a_target_inside_the_workspace_or_named_by_the_settings_is_read(tmp_path):
    from streamed_lsp.settings import Settings
    from repo import TINY_CHIP

    work = tmp_path / "work"
    work.mkdir()
    (work / "chip.toml").write_bytes(TINY_CHIP.read_bytes())
    assert _lower(tmp_path, [work], {"target": "chip.toml"})["kinds"] >= 1
    outside = tmp_path / "mine.toml"
    outside.write_bytes(TINY_CHIP.read_bytes())
    # The user's own setting is the user's, like a command line: read wherever it is.
    assert _lower(tmp_path, [work], {"target": str(outside)}, Settings(target=str(outside)))["kinds"] >= 1
    assert _lower(tmp_path, [work], {"target": "sn40l"})["kinds"] >= 1
