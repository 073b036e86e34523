"""End-to-end fixtures: a client connected to the real server process, initialised on a fresh workspace folder."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import pytest  # noqa: E402
import pytest_lsp  # noqa: E402
from pytest_lsp import LanguageClient  # noqa: E402

from lsphelp import Editor, server_config, session  # noqa: E402


@pytest_lsp.fixture(config=server_config(), scope="module")
async def client(lsp_client: LanguageClient, tmp_path_factory):
    """One server per test module (starting one costs a second); each test opens its own documents."""
    async for _ in session(lsp_client, tmp_path_factory, "ws"):
        yield


@pytest.fixture
def editor(client, request) -> Editor:
    return Editor(client, client.root, request.node.name)
