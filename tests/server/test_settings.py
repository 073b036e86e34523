"""Settings through initializationOptions and workspace/didChangeConfiguration, end to end."""

import asyncio

import pytest
import pytest_lsp
from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcException
from pytest_lsp import LanguageClient

from lsphelp import TINY, Editor, doc, init_params, request, server_config

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_lsp.fixture(config=server_config(), scope="module")
async def tp_client(lsp_client: LanguageClient, tmp_path_factory):
    """A server started with a tensor-parallel deployment over 8 chips in its initializationOptions (tiny-llama's 4
    query heads do not split over 8: the one split no sharing makes)."""
    root = tmp_path_factory.mktemp("tp")
    lsp_client.root = root
    await lsp_client.initialize_session(init_params(root, {"deployment": {"mode": "tp", "tp": 8}, "target": "sn50"}))
    yield
    await lsp_client.shutdown_session()


async def test_the_deployment_in_initialization_options_decides_the_rejects(tp_client):
    editor = Editor(tp_client, tp_client.root, "tp_init")
    uri = editor.open(TINY)
    done = await editor.analysed(uri)
    assert done.rejects == 1
    (reject,) = [d for d in editor.diagnostics(uri) if d.code == "reject"]
    assert "the query heads of attention (4) do not split over 8 chips" in reject.message


async def test_a_refused_deployment_says_why_and_what_lowers_on_the_model_lens_and_when_lowered(tp_client):
    editor = Editor(tp_client, tp_client.root, "tp_refused")
    uri = editor.open(TINY)
    await editor.analysed(uri)
    lenses = await request(tp_client.text_document_code_lens_async(lsp.CodeLensParams(doc(uri))))
    (model,) = [l.command.title for l in lenses if l.command.command == "streamed.lowerBundle"]
    assert model == ("1 kind · Not lowered: tensor parallel over 8 chips: layer 0 (attention): the query heads of "
                     "attention (4) do not split over 8 chips — tp 2 or 4 lower")
    # A client that lowers anyway (the lens's command) is told the same, and no bundle is written.
    with pytest.raises(JsonRpcException, match=r"do not split over 8 chips.*; tp 2 or 4 lower"):
        await request(tp_client.workspace_execute_command_async(
            lsp.ExecuteCommandParams("streamed.lowerBundle", [{"uri": uri}])))
    assert not (tp_client.root / "tp_refused.bundle").exists()


async def test_changing_the_deployment_reanalyses_open_documents(tp_client):
    editor = Editor(tp_client, tp_client.root, "tp_change")
    uri = editor.open(TINY)
    await editor.analysed(uri)
    assert any(d.code == "reject" for d in editor.diagnostics(uri))
    before = len(tp_client.analyses)
    tp_client.workspace_did_change_configuration(lsp.DidChangeConfigurationParams({"streamed": {"deployment": {"mode": "tp", "tp": 2}}}))
    for _ in range(500):
        if any(a.uri == uri for a in tp_client.analyses[before:]):
            break
        await asyncio.sleep(0.01)
    assert not any(d.code == "reject" for d in editor.diagnostics(uri))


async def test_a_bad_setting_is_named_in_a_message_and_the_rest_still_apply(tp_client):
    tp_client.workspace_did_change_configuration(lsp.DidChangeConfigurationParams(
        {"streamed": {"debounceMs": -5, "deployment": {"mode": "warp", "ctx": 1024}, "target": "sn9000"}}))
    for _ in range(300):
        if len(tp_client.messages) >= 3:
            break
        await asyncio.sleep(0.01)
    texts = [m.message for m in tp_client.messages]
    assert any("`streamed.debounceMs` must be a number of milliseconds" in t for t in texts)
    assert any("`streamed.deployment.mode` must be one of" in t and "'warp'" in t for t in texts)
    assert any("target" in t and "sn9000" in t for t in texts)
    editor = Editor(tp_client, tp_client.root, "still_works")
    uri = editor.open(TINY)
    assert (await editor.analysed(uri)).layers == 4


async def test_a_checkpoint_setting_decides_how_weights_are_read(tp_client, tmp_path):
    """A checkpoint storing layer 2's output projection F16: layer 2 reads it dense, so it is not one program with
    its siblings — and the warning says how the checkpoint stores it."""
    import sys

    from lsphelp import ROOT

    sys.path.insert(0, str(ROOT / "tests" / "model"))
    from ggufs import llama_like  # the model tests' GGUF writer

    ckpt = llama_like(tmp_path / "tiny.gguf", types={"blk.2.attn_output.weight": "F16"})
    editor = Editor(tp_client, tp_client.root, "checkpoint")
    uri = editor.open(TINY)
    await editor.analysed(uri)
    assert not any(d.code == "divergence" for d in editor.diagnostics(uri))
    before = len(tp_client.analyses)
    tp_client.workspace_did_change_configuration(lsp.DidChangeConfigurationParams({"streamed": {"checkpoint": str(ckpt)}}))
    for _ in range(500):
        if any(a.uri == uri for a in tp_client.analyses[before:]):
            break
        await asyncio.sleep(0.01)
    (w,) = [d for d in editor.diagnostics(uri) if d.code == "divergence"]
    assert "`Wo2` is stored F16" in w.message
    tp_client.workspace_did_change_configuration(lsp.DidChangeConfigurationParams({"streamed": {"checkpoint": "/nowhere/x.gguf"}}))
    for _ in range(300):
        if any("/nowhere/x.gguf" in m.message for m in tp_client.messages):
            break
        await asyncio.sleep(0.01)
    assert any("/nowhere/x.gguf: no such file" in m.message for m in tp_client.messages)


async def test_the_bundle_lens_names_the_chip_the_target_setting_chooses(tp_client):
    async def model_lens(uri):
        lenses = await request(tp_client.text_document_code_lens_async(lsp.CodeLensParams(doc(uri))))
        return next(l.command.title for l in lenses if l.command.command == "streamed.lowerBundle")

    editor = Editor(tp_client, tp_client.root, "target_lens")
    uri = editor.open(TINY)
    await editor.analysed(uri)
    assert (await model_lens(uri)).endswith("· Lower SN50 bundle")
    tp_client.workspace_did_change_configuration(lsp.DidChangeConfigurationParams({"streamed": {"target": "sn40l"}}))
    try:
        for _ in range(300):
            if (await model_lens(uri)).endswith("· Lower SN40L bundle"):
                break
            await asyncio.sleep(0.01)
        assert (await model_lens(uri)).endswith("· Lower SN40L bundle")
    finally:
        tp_client.workspace_did_change_configuration(lsp.DidChangeConfigurationParams({"streamed": {"target": "sn50"}}))
