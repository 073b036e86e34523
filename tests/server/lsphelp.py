"""Helpers of the end-to-end tests: the real server process (``python -m streamed_lsp``) driven over stdio by
pytest-lsp. Imported by name: ``conftest`` puts this folder on ``sys.path`` (pytest runs in importlib mode)."""

from __future__ import annotations

import asyncio
import re
import sys
from pathlib import Path
from typing import Union

from lsprotocol import types as lsp
from pygls.protocol import default_converter
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities
from pytest_lsp.client import DEFAULT_CLIENT_FEATURES, register_lsp_features

from repo import DIVERGENT, ROOT, SIX, TINY, deep  # noqa: F401  (the test documents, for the tests that import them here)


def _converter():
    """pygls's converter, reading a code action as VS Code does: a bare ``Command`` is one whose ``command`` is a
    string (lsprotocol reads any action that carries a command as a bare ``Command``, dropping its kind)."""
    converter = default_converter()

    def code_action(obj, _):
        bare = isinstance(obj.get("command"), str)
        return converter.structure(obj, lsp.Command if bare else lsp.CodeAction)

    converter.register_structure_hook(Union[lsp.Command, lsp.CodeAction], code_action)
    return converter


def make_client() -> LanguageClient:
    def published(ls, params: lsp.PublishDiagnosticsParams):
        ls.published.append(params)
        ls.diagnostics[params.uri] = params.diagnostics

    client = LanguageClient(converter_factory=_converter)
    register_lsp_features(client, {**DEFAULT_CLIENT_FEATURES, lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS: published})
    client.analyses = []
    client.published = []

    @client.feature("streamed/analysisDone")
    def analysis_done(ls, params):
        ls.analyses.append(params)

    return client


def _get(p, k):
    return p[k] if isinstance(p, dict) else getattr(p, k)


class Editor:
    """A test's view of the editor: opens documents, edits them, waits for the analysis of a version."""

    def __init__(self, client: LanguageClient, root: Path, test: str = "model"):
        self.client, self.root = client, root
        self.test = re.sub(r"\W", "_", test)
        self.versions: dict[str, int] = {}

    def open(self, text: str, name: str | None = None) -> str:
        path = self.root / (name or f"{self.test}.lgm")
        path.write_text(text)
        uri = path.as_uri()
        self.versions[uri] = 1
        self.client.text_document_did_open(lsp.DidOpenTextDocumentParams(lsp.TextDocumentItem(uri=uri, language_id="streamed", version=1, text=text)))
        return uri

    def edit(self, uri: str, changes: list[lsp.TextDocumentContentChangeEvent]) -> int:
        self.versions[uri] += 1
        v = self.versions[uri]
        self.client.text_document_did_change(lsp.DidChangeTextDocumentParams(
            lsp.VersionedTextDocumentIdentifier(version=v, uri=uri), changes))
        return v

    def replace(self, uri: str, start: tuple[int, int], end: tuple[int, int], text: str) -> int:
        return self.edit(uri, [lsp.TextDocumentContentChangePartial(
            range=lsp.Range(lsp.Position(*start), lsp.Position(*end)), text=text)])

    async def analysed(self, uri: str, version: int | None = None, timeout: float = 10.0):
        """The ``streamed/analysisDone`` of ``uri`` at ``version`` (the latest sent by default)."""
        version = self.versions[uri] if version is None else version
        for _ in range(int(timeout / 0.01)):
            for p in self.client.analyses:
                if _get(p, "uri") == uri and _get(p, "version") == version:
                    return p
            await asyncio.sleep(0.01)
        raise AssertionError(f"no analysis of {uri} at version {version}")

    def diagnostics(self, uri: str) -> list[lsp.Diagnostic]:
        return list(self.client.diagnostics.get(uri, []))


def server_config() -> ClientServerConfig:
    return ClientServerConfig(server_command=[sys.executable, "-m", "streamed_lsp"], client_factory=make_client)


async def session(lsp_client: LanguageClient, tmp_path_factory, name: str):
    """The body of a module-scoped server fixture: a fresh workspace folder, an initialised session for the test
    module, shut down after it. ``async for _ in session(...): yield`` in a ``pytest_lsp.fixture``."""
    root = tmp_path_factory.mktemp(name)
    lsp_client.root = root
    await lsp_client.initialize_session(init_params(root))
    yield
    await lsp_client.shutdown_session()


def init_params(root: Path, options: dict | None = None) -> lsp.InitializeParams:
    return lsp.InitializeParams(
        capabilities=client_capabilities("visual-studio-code"),
        root_uri=root.as_uri(),
        workspace_folders=[lsp.WorkspaceFolder(root.as_uri(), "work")],
        initialization_options={"streamed": {"debounceMs": 0, **(options or {})}},
    )




def position_of(text: str, needle: str, nth: int = 0, after: str | None = None) -> tuple[int, int]:
    """The (line, column) of the ``nth`` occurrence of ``needle`` (after the first ``after``, if given)."""
    start = text.index(after) if after else 0
    i = start - 1
    for _ in range(nth + 1):
        i = text.index(needle, i + 1)
    line = text.count("\n", 0, i)
    return line, i - (text.rfind("\n", 0, i) + 1)




async def request(coro, timeout: float = 5.0):
    import asyncio

    return await asyncio.wait_for(coro, timeout)


def doc(uri: str) -> lsp.TextDocumentIdentifier:
    return lsp.TextDocumentIdentifier(uri)


def pos(line_col: tuple[int, int]) -> lsp.Position:
    return lsp.Position(*line_col)
