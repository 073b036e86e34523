"""End-to-end fixtures: a client connected to the real server process, initialised on a fresh workspace folder."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import pytest  # noqa: E402
import pytest_lsp  # noqa: E402
from pytest_lsp import LanguageClient  # noqa: E402

from lsphelp import Editor, init_params, server_config  # noqa: E402


@pytest_lsp.fixture(config=server_config(), scope="module")
async def client(lsp_client: LanguageClient, tmp_path_factory):
    """One server per test module (starting one costs a second); each test opens its own documents."""
    root = tmp_path_factory.mktemp("ws")
    lsp_client.root = root
    await lsp_client.initialize_session(init_params(root))
    yield
    await lsp_client.shutdown_session()


@pytest.fixture
def editor(client, request) -> Editor:
    return Editor(client, client.root, request.node.name)
