"""workspace/executeCommand end to end: showKinds, lowerBundle (with $/progress), openManifest, and what a person
reads when the arguments are wrong."""

import json
import re
from pathlib import Path

import pytest
from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcInvalidParams

from lsphelp import DIVERGENT, TINY, position_of, request

pytestmark = pytest.mark.asyncio(loop_scope="module")

#: Every layer's attention over keys and values it computes (not its caches): a decode step would attend over its own
#: rows only, so the kind does not lower. (d = 48 no longer serves: weights whose input features are not whole Q8_0
#: blocks are kept F16, as llama.cpp's quantizer keeps them, and lower.)
UNLOWERABLE = TINY
for _l in range(4):
    UNLOWERABLE = UNLOWERABLE.replace(
        f"Let a{_l} be attention of q{_l} over Kc{_l} and Vc{_l}",
        f"Let k{_l} be xn{_l} times Wk{_l}.\nLet v{_l} be xn{_l} times Wv{_l}.\n"
        f"Let a{_l} be attention of q{_l} over k{_l} and v{_l}")
NOT_A_STATE = "attention reads its keys from `k0`, which is not a state"


async def run(client, command, *args, timeout=20.0):
    return await request(client.workspace_execute_command_async(lsp.ExecuteCommandParams(command, list(args))), timeout)


async def test_show_kinds_lists_each_kind_with_its_layers_and_representative(editor, client):
    uri = editor.open(DIVERGENT)
    await editor.analysed(uri)
    kinds = await run(client, "streamed.showKinds", {"uri": uri})
    assert kinds == [
        {"name": "attention (layer 0)", "layers": [0, 1, 2, 3, 5], "representative": 0},
        {"name": "attention (layer 4)", "layers": [4], "representative": 4},
    ]


async def test_a_kind_that_does_not_lower_is_an_error_on_its_statement_with_every_member_layer_related(editor, client):
    uri = editor.open(UNLOWERABLE)
    done = await editor.analysed(uri)
    assert done.rejects >= 1
    rejects = [d for d in editor.diagnostics(uri) if d.code == "reject"]
    layer = next(d for d in rejects if "layer 0 (attention)" in d.message)
    assert layer.severity == lsp.DiagnosticSeverity.Error and NOT_A_STATE in layer.message
    assert layer.range.start.line == position_of(UNLOWERABLE, "Let a0 be")[0]
    headers = {r.location.range.start.line for r in layer.related_information}
    assert headers == {position_of(UNLOWERABLE, f"## Layer {l}")[0] for l in range(4)}
    kinds = await run(client, "streamed.showKinds", {"uri": uri})
    assert NOT_A_STATE in kinds[0]["reject"]


async def test_lower_bundle_writes_the_bundle_beside_the_document_and_reports_progress(editor, client):
    uri = editor.open(TINY)
    await editor.analysed(uri)
    token = "lower-progress"
    client.progress_reports[token] = []  # the client's own token, as a client that sends one keeps it
    got = await request(client.workspace_execute_command_async(lsp.ExecuteCommandParams(
        "streamed.lowerBundle", [{"uri": uri, "mode": "decode", "ctx": 256}], work_done_token=token)), 20.0)
    manifest = Path(got["manifest"])
    assert manifest == client.root / f"{editor.test}.bundle" / "manifest.json" and manifest.exists()
    assert got["kinds"] == 1 and got["layers"] == 4 and isinstance(got["estimate"], dict)
    data = json.loads(manifest.read_text())
    assert data["mode"] == "decode" and data["ctx"] == 256 and len(data["layers"]) == 4
    kinds = [getattr(p, "kind", None) for p in client.progress_reports[token]]
    assert kinds[0] == "begin" and kinds[-1] == "end" and "report" in kinds

    opened = await run(client, "streamed.openManifest", {"uri": uri})
    assert opened["manifest"] == str(manifest)
    assert opened["summary"]["layers"] == 4 and opened["summary"]["deployment"]["mode"] == "decode"
    by_folder = await run(client, "streamed.openManifest", {"bundle": str(manifest.parent)})
    assert by_folder["manifest"] == str(manifest)


async def test_lower_bundle_refuses_to_write_outside_the_workspace(editor, client):
    uri = editor.open(TINY)
    await editor.analysed(uri)
    with pytest.raises(JsonRpcInvalidParams, match="outside the workspace folders"):
        await run(client, "streamed.lowerBundle", {"uri": uri, "mode": "decode", "out": "/tmp/elsewhere.bundle"})


async def test_lower_bundle_of_a_kind_that_does_not_lower_names_the_program_and_why(editor, client):
    uri = editor.open(UNLOWERABLE)
    await editor.analysed(uri)
    with pytest.raises(JsonRpcInvalidParams,
                       match=r"layer 0 \(attention\) program does not lower: " + re.escape(NOT_A_STATE)):
        await run(client, "streamed.lowerBundle", {"uri": uri, "mode": "decode"})


@pytest.mark.parametrize("command, args, says", [
    ("streamed.lowerBundle", [], "takes one argument"),
    ("streamed.lowerBundle", ["model.lgm"], "takes an object like"),
    ("streamed.lowerBundle", [{"mode": "decode"}], "needs `uri`"),
    ("streamed.lowerBundle", [{"uri": "file:///nowhere/x.lgm", "mode": "decode"}], "is not open in the editor"),
    ("streamed.showKinds", [{"uri": 7}], "needs `uri`"),
    ("streamed.goToRepresentative", [{"uri": "OPEN", "position": {"line": -1}}], "needs `position`"),
    ("streamed.openManifest", [{"bundle": "/nonexistent/x.bundle"}], "will not read /nonexistent/x.bundle"),
    ("streamed.openManifest", [{"bundle": "ROOT/none.bundle"}], "no manifest at"),
    ("streamed.noSuchThing", [{}], "unknown command `streamed.noSuchThing`"),
])
async def test_bad_command_arguments_get_an_error_a_person_understands(editor, client, command, args, says):
    uri = editor.open(TINY)
    await editor.analysed(uri)
    args = [{**a, "uri": uri} if isinstance(a, dict) and a.get("uri") == "OPEN" else a for a in args]
    args = [{"bundle": str(client.root / "none.bundle")} if a == {"bundle": "ROOT/none.bundle"} else a for a in args]
    with pytest.raises(JsonRpcInvalidParams) as e:
        await run(client, command, *args)
    assert says in str(e.value)


async def test_lower_bundle_with_a_bad_mode_names_the_modes(editor, client):
    uri = editor.open(TINY)
    await editor.analysed(uri)
    with pytest.raises(JsonRpcInvalidParams, match="`mode` must be one of forward, decode, prefill"):
        await run(client, "streamed.lowerBundle", {"uri": uri, "mode": "fast"})


async def test_a_command_reports_progress_on_the_client_s_token_from_begin_to_end(editor, client):
    uri = editor.open(TINY)
    await editor.analysed(uri)
    client.progress_reports["kinds-progress"] = []  # the client's own token, as a client that sends one keeps it
    await request(client.workspace_execute_command_async(lsp.ExecuteCommandParams(
        "streamed.showKinds", [{"uri": uri}], work_done_token="kinds-progress")))
    kinds = [getattr(p, "kind", None) for p in client.progress_reports["kinds-progress"]]
    assert kinds[0] == "begin" and kinds[-1] == "end"


async def test_a_command_starts_without_waiting_for_the_client_to_create_its_progress_and_begins_it_when_it_does():
    """What the command waits for before it starts: nothing of the client's (its entry never suspends while the
    create request is unanswered); the progress begins when the answer comes, with the latest report."""
    import asyncio
    from concurrent.futures import Future
    from types import SimpleNamespace

    from streamed_lsp.handlers import Work

    sent, asked = [], Future()
    progress = SimpleNamespace(tokens={}, begin=lambda t, v: sent.append(("begin", t)),
                               report=lambda t, v: sent.append(("report", v.message)),
                               end=lambda t, v: sent.append(("end", v.message)))
    ls = SimpleNamespace(client_capabilities=lsp.ClientCapabilities(window=lsp.WindowClientCapabilities(work_done_progress=True)),
                         protocol=SimpleNamespace(send_request=lambda method, params: asked), work_done_progress=progress)
    work = Work(ls, "Lowering", None)
    entry = work.__aenter__()
    with pytest.raises(StopIteration):
        entry.send(None)  # ran to its end: nothing awaited
    work.report("half way", 50)
    await asyncio.sleep(0)
    assert sent == []  # no progress before the client made the token
    asked.set_result(None)
    assert [x[0] for x in sent] == ["begin", "report"] and sent[1] == ("report", "half way")
    await work.__aexit__(None, None, None)
    assert sent[-1] == ("end", "done")


async def test_lower_bundle_never_replaces_a_bundle_folder_holding_a_file_no_lowering_wrote(editor, client):
    """Issue 11: the command replaced any folder whose manifest.json said streamed-bundle/1, deleting the rest."""
    uri = editor.open(TINY)
    await editor.analysed(uri)
    got = await run(client, "streamed.lowerBundle", {"uri": uri, "mode": "decode", "ctx": 64})
    folder = Path(got["manifest"]).parent
    (folder / "NOTES.md").write_text("mine\n")
    with pytest.raises(JsonRpcInvalidParams, match="holds NOTES.md, which no lowering wrote"):
        await run(client, "streamed.lowerBundle", {"uri": uri, "mode": "decode", "ctx": 128})
    assert (folder / "NOTES.md").read_text() == "mine\n" and json.loads((folder / "manifest.json").read_text())["ctx"] == 64
