"""What a client without streamed's own extension gets (Neovim, Helix, Emacs): a code lens or a quick fix whose
command shows something shows it through the protocol — ``window/showDocument`` for the representative, a diff as a
document, the manifest — and ``window/showMessage`` says what a lowering wrote; a bundle is never lowered from text
that is not the file's. The client here declares ``window.showDocument`` as VS Code does; a client with views of its
own (the extension) sends ``"show": false`` and gets the answer alone."""

import hashlib
import json
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest
from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcInvalidParams

from lsphelp import DIVERGENT, TINY, doc, position_of, request

pytestmark = pytest.mark.asyncio(loop_scope="module")


async def lenses_of(client, uri):
    return await request(client.text_document_code_lens_async(lsp.CodeLensParams(doc(uri))))


async def run(client, command: lsp.Command, timeout=20.0):
    return await request(client.workspace_execute_command_async(
        lsp.ExecuteCommandParams(command.command, list(command.arguments or []))), timeout)


async def shown_after(client, before: int, count: int = 1) -> list[lsp.ShowDocumentParams]:
    """The documents the server asked to show since ``before`` (its requests arrive beside the command's answer)."""
    import asyncio

    for _ in range(500):
        if len(client.shown_documents) >= before + count:
            break
        await asyncio.sleep(0.01)
    return client.shown_documents[before:]


async def test_a_layer_lens_shows_the_representative_heading_through_show_document(editor, client):
    uri = editor.open(TINY)
    await editor.analysed(uri)
    line2 = position_of(TINY, "## Layer 2")[0]
    (lens,) = [l for l in await lenses_of(client, uri) if l.range.start.line == line2]
    before = len(client.shown_documents)
    await run(client, lens.command)
    (shown,) = await shown_after(client, before)
    line0 = position_of(TINY, "## Layer 0")[0]
    assert shown.uri == uri and shown.take_focus and shown.selection.start == lsp.Position(line0, 0)
    assert shown.selection.end == lsp.Position(line0, len("## Layer 0"))


async def test_a_command_told_not_to_show_answers_alone(editor, client):
    uri = editor.open(TINY)
    await editor.analysed(uri)
    before = len(client.shown_documents)
    got = await run(client, lsp.Command("go", "streamed.goToRepresentative", arguments=[{"uri": uri, "position": {"line": position_of(TINY, "## Layer 2")[0], "character": 0}, "show": False}]))
    assert got["uri"] == uri
    import asyncio

    await asyncio.sleep(0.2)
    assert len(client.shown_documents) == before
    with pytest.raises(JsonRpcInvalidParams, match="`show` is true or false"):
        await run(client, lsp.Command("go", "streamed.goToRepresentative", arguments=[{"uri": uri, "position": {"line": 0, "character": 0}, "show": "no"}]))


async def test_the_compare_lens_opens_the_two_layers_as_a_unified_diff_document(editor, client):
    uri = editor.open(DIVERGENT)
    await editor.analysed(uri)
    (lens,) = [l for l in await lenses_of(client, uri) if l.command.command == "streamed.compareWithRepresentative"]
    before = len(client.shown_documents)
    got = await run(client, lens.command)
    (shown,) = await shown_after(client, before)
    assert shown.uri == got["document"]
    diff = Path(unquote(urlparse(shown.uri).path)).read_text()
    marked = [l for l in diff.splitlines() if l[:1] in "+-" and not l.startswith(("+++", "---"))]
    assert marked == ["-Let xn0 be rmsnorm of x with g0, epsilon 0.00001.", "+Let xn0 be rmsnorm of x with g0, epsilon 0.001."]
    assert diff.startswith("# ") and "layer 4 beside layer 0" in diff.splitlines()[0] and got["why"] in diff


async def test_the_model_lens_lowers_then_says_so_and_shows_the_manifest_taking_focus(editor, client):
    uri = editor.open(TINY)
    await editor.analysed(uri)
    (lens,) = [l for l in await lenses_of(client, uri) if l.command.command == "streamed.lowerBundle"]
    before, said = len(client.shown_documents), len(client.messages)
    got = await run(client, lens.command)
    manifest = Path(got["manifest"])
    (shown,) = await shown_after(client, before)
    assert shown.uri == manifest.as_uri() and shown.take_focus is True
    news = [m.message for m in client.messages[said:]]
    assert news == [f"streamed: bundle written — 1 kind, 4 layers: {manifest}"]
    before = len(client.shown_documents)
    opened = await run(client, lsp.Command("open", "streamed.openManifest", arguments=[{"uri": uri}]))
    (shown,) = await shown_after(client, before)
    assert shown.uri == Path(opened["manifest"]).as_uri() == manifest.as_uri()


async def test_a_bundle_is_not_lowered_from_text_that_is_not_saved_and_records_the_saved_text(editor, client):
    uri = editor.open(TINY)
    await editor.analysed(uri)
    path = Path(unquote(urlparse(uri).path))
    line = position_of(TINY, "## Layer 3")[0]
    editor.replace(uri, (line, 0), (line, 0), "-- an unsaved comment\n")
    await editor.analysed(uri)
    with pytest.raises(JsonRpcInvalidParams, match="has changes that are not saved: save it, then lower"):
        await run(client, lsp.Command("lower", "streamed.lowerBundle", arguments=[{"uri": uri, "show": False}]))
    assert not path.with_suffix(".bundle").exists()
    # Saved, it lowers, and the manifest's SHA-256 is the file's.
    lines = TINY.split("\n")
    path.write_text("\n".join(lines[:line] + ["-- an unsaved comment"] + lines[line:]))
    got = await run(client, lsp.Command("lower", "streamed.lowerBundle", arguments=[{"uri": uri, "show": False}]))
    document = json.loads(Path(got["manifest"]).read_text())["document"]
    assert document == {"name": path.name, "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}
