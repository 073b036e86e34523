"""`streamed serve` starts the same server; settings arrive nested under `streamed` (VS Code) or flat (Neovim's
init_options, Helix's config)."""

import sys

import pytest
import pytest_lsp
from pytest_lsp import ClientServerConfig, LanguageClient

from lsphelp import TINY, Editor, init_params, make_client, session
from streamed_lsp.settings import Settings

@pytest_lsp.fixture(config=ClientServerConfig(server_command=[sys.executable, "-m", "streamed", "serve"],
                                              client_factory=make_client), scope="module")
async def cli_client(lsp_client: LanguageClient, tmp_path_factory):
    async for _ in session(lsp_client, tmp_path_factory, "cli"):
        yield


@pytest.mark.asyncio(loop_scope="module")
async def test_streamed_serve_speaks_lsp_on_stdio(cli_client):
    editor = Editor(cli_client, cli_client.root, "served")
    uri = editor.open(TINY)
    done = await editor.analysed(uri)
    assert (done.kinds, done.layers) == (1, 4)
    assert editor.diagnostics(uri) == []


def test_settings_arrive_nested_or_flat():
    nested, problems = Settings().merged({"streamed": {"target": "sn40l", "debounceMs": 0, "deployment": {"mode": "prefill", "chunk": 256}}})
    flat, problems2 = Settings().merged({"target": "sn40l", "debounceMs": 0, "deployment": {"mode": "prefill", "chunk": 256}})
    assert nested == flat and not problems and not problems2
    assert nested.target == "sn40l" and nested.debounce_ms == 0
    assert nested.deployment == {"mode": "prefill", "ctx": 4096, "chunk": 256, "batch": 8, "tp": 2}


def test_a_bad_setting_keeps_the_previous_value_and_says_why():
    s, problems = Settings().merged({"streamed": {"deployment": {"ctx": "big", "tp": 4}, "checkpoint": 3}})
    assert s.deployment["ctx"] == 4096 and s.deployment["tp"] == 4 and s.checkpoint is None
    assert problems == ["`streamed.checkpoint` must be a path or null, not 3",
                        "`streamed.deployment.ctx` must be a whole number, not 'big'"]


@pytest.mark.asyncio
async def test_a_client_preferring_utf8_is_answered_in_utf16_columns(tmp_path):
    from lsprotocol import types as lsp

    from lsphelp import server_config

    client = await server_config().start()
    try:
        params = init_params(tmp_path)
        params.capabilities.general = lsp.GeneralClientCapabilities(position_encodings=[
            lsp.PositionEncodingKind.Utf8, lsp.PositionEncodingKind.Utf16])
        result = await client.initialize_session(params)
        assert result.capabilities.position_encoding == lsp.PositionEncodingKind.Utf16
        editor = Editor(client, tmp_path, "utf16")
        text = TINY.replace("Let hn1 be rmsnorm of", "Let hn1 be 😀 rmsnorm of")
        uri = editor.open(text)
        await editor.analysed(uri)
        line = next(i for i, l in enumerate(text.split("\n")) if "😀" in l)
        (err,) = [d for d in editor.diagnostics(uri) if d.range.start.line == line and d.severity == lsp.DiagnosticSeverity.Error]
        # The emoji is one character, two UTF-16 units, four UTF-8 bytes: columns are UTF-16.
        assert (err.range.start.character, err.range.end.character) == (11, 13)
        await client.shutdown_session()
    finally:
        await client.stop()
