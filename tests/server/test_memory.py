"""A long editing session holds memory flat: 5,000 one-character edits through the real server, each analysed (and
its kinds' lowering checked), and the server's resident memory after them is within 5 MB of what it was after
warm-up. (Each analysis once froze its garbage out of the collector's reach: 48.8 → 66.5 MB over 6,000 edits.)"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest
import pytest_lsp
from pytest_lsp import LanguageClient

from lsphelp import Editor, _get, server_config, session
from repo import example

pytestmark = pytest.mark.asyncio(loop_scope="module")

WARM_UP = 500
EDITS = 5_000


@pytest_lsp.fixture(config=server_config(), scope="module")
async def client(lsp_client: LanguageClient, tmp_path_factory):
    async for _ in session(lsp_client, tmp_path_factory, "memory"):
        yield


def rss_mb(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmRSS:\s+(\d+) kB", status).group(1)) / 1024


def keystrokes(text: str):
    """One-character edits an author makes, each followed by its undo, round the layers: a digit typed into a
    number (the layer leaves its kind, a new kind is lowered, then it returns), a letter typed into a name (the
    layer stops being one program with its siblings), a space typed into a comment."""
    lines = text.split("\n")
    numbers = [(n, line.index("1e-6") + 4) for n, line in enumerate(lines) if "epsilon 1e-6" in line]
    names = [(n, line.index("be") - 2) for n, line in enumerate(lines) if line.startswith("Let ") and " be " in line]
    comments = [(n, len(line)) for n, line in enumerate(lines) if line.startswith("## Layer")]
    k = 0
    while True:
        for places, char in ((numbers, "7"), (names, "q"), (comments, " ")):
            line, col = places[k % len(places)]
            yield (line, col), (line, col), char
            yield (line, col), (line, col + 1), ""
        k += 1


async def test_five_thousand_edits_leave_the_servers_memory_flat(client):
    editor = Editor(client, client.root, "memory")
    text = example("small-gemma3")
    uri = editor.open(text)
    await editor.analysed(uri, 1, timeout=30)
    pid = client._server.pid

    async def edit(start, end, new) -> None:
        version = editor.replace(uri, start, end, new)
        for _ in range(20_000):
            last = client.analyses[-1] if client.analyses else None
            if last is not None and _get(last, "uri") == uri and _get(last, "version") == version:
                return
            await asyncio.sleep(0.001)
        raise AssertionError(f"version {version} was never analysed")

    stream = keystrokes(text)
    for _ in range(WARM_UP):
        await edit(*next(stream))
    before = rss_mb(pid)
    for _ in range(EDITS):
        await edit(*next(stream))
    after = rss_mb(pid)
    assert after - before < 5, f"{before:.1f} MB after warm-up, {after:.1f} MB after {EDITS} more edits"
    # The session ended where it started: the last analysis is of the document as opened.
    assert not [d for d in editor.diagnostics(uri) if d.code == "divergence"]
