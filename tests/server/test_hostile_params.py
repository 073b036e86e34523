"""Arbitrary JSON as the params of every request and notification the server handles, written raw to the real
process: every request is answered — a result, or a JSON-RPC error — within seconds; no notification stops it; and
nothing it refuses puts a traceback on its stderr. Params are drawn from nothing, and by mutating well-formed params
one field at a time (which reaches the handlers behind the type checks)."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lsphelp import TINY
from mutations import mutate
from rawclient import serving

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**40), max_value=2**40) | st.floats(allow_nan=False)
    | st.text(max_size=10) | st.sampled_from([-1, 2**31, "", "file:///etc/passwd", "/", "../x"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)

#: JSON-RPC's and LSP's error codes: an answer is a result or one of these.
CODES = {-32700, -32600, -32601, -32602, -32603, -32800, -32801, -32802, -32803}


def well_formed(uri: str) -> dict:
    """Params each request takes, well formed: what the mutations start from."""
    doc = {"uri": uri}
    pos = {"line": 1, "character": 3}
    rng = {"start": {"line": 0, "character": 0}, "end": {"line": 30, "character": 0}}
    return {
        "textDocument/hover": {"textDocument": doc, "position": pos},
        "textDocument/definition": {"textDocument": doc, "position": pos},
        "textDocument/completion": {"textDocument": doc, "position": pos},
        "textDocument/prepareRename": {"textDocument": doc, "position": pos},
        "textDocument/rename": {"textDocument": doc, "position": pos, "newName": "y"},
        "textDocument/codeLens": {"textDocument": doc},
        "textDocument/documentSymbol": {"textDocument": doc},
        "textDocument/foldingRange": {"textDocument": doc},
        "textDocument/semanticTokens/full": {"textDocument": doc},
        "textDocument/semanticTokens/full/delta": {"textDocument": doc, "previousResultId": "1"},
        "textDocument/inlayHint": {"textDocument": doc, "range": rng},
        "textDocument/codeAction": {"textDocument": doc, "range": rng, "context": {"diagnostics": []}},
        "textDocument/formatting": {"textDocument": doc, "options": {"tabSize": 2, "insertSpaces": True}},
        "textDocument/diagnostic": {"textDocument": doc},
        "workspace/executeCommand:showKinds": {"command": "streamed.showKinds", "arguments": [doc]},
        "workspace/executeCommand:goToRepresentative": {"command": "streamed.goToRepresentative",
                                                        "arguments": [{"uri": uri, "position": pos}]},
        "workspace/executeCommand:openManifest": {"command": "streamed.openManifest", "arguments": [doc]},
        "workspace/executeCommand:lowerBundle": {"command": "streamed.lowerBundle",
                                                 "arguments": [{"uri": uri, "mode": "decode", "ctx": 64}]},
    }


NOTIFICATIONS = ["textDocument/didChange", "workspace/didChangeConfiguration", "textDocument/didClose",
                 "workspace/didChangeWorkspaceFolders", "$/cancelRequest", "textDocument/didOpen"]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with serving(tmp_path_factory.mktemp("hostile")) as client:
        client.uri = client.open("tiny.lgm", TINY)
        client.published(client.uri)
        yield client


@settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_any_params_to_any_request_are_answered_and_nothing_refused_leaves_a_traceback(server, data):
    methods = well_formed(server.uri)
    name = data.draw(st.sampled_from(sorted(methods)))
    params = data.draw(st.one_of(
        JSON,
        st.tuples(st.lists(st.integers(0, 100), min_size=1, max_size=4), JSON).map(
            lambda t: mutate(methods[name], *t)),
    ))
    if data.draw(st.booleans()):  # now and then a notification with such params first
        server.notify(data.draw(st.sampled_from(NOTIFICATIONS)), params)
    got = server.request(name.split(":")[0], params, timeout=20)
    assert "result" in got or got.get("error", {}).get("code") in CODES, (name, json.dumps(params)[:300], got)
    assert "Traceback" not in server.stderr(), server.stderr()[-3000:]


def test_after_all_that_the_server_still_answers_and_publishes(server):
    uri = server.open("after.lgm", TINY)
    assert server.published(uri)["diagnostics"] == []
    got = server.request("textDocument/documentSymbol", {"textDocument": {"uri": uri}})
    assert got["result"], got
    assert server.process.poll() is None
