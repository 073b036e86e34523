"""The server's lifecycle as the LSP specification says ("Lifecycle Messages"), held against the real server process
over its stdio: before ``initialize`` a request is answered -32002 (ServerNotInitialized) and a notification dropped;
``initialize`` is answered once — a second is -32600; after ``shutdown`` a request is -32600 (InvalidRequest) and a
notification dropped; ``exit`` ends the server, 0 after ``shutdown`` and 1 before. A fixed-seed fuzz of message
orders is held to that rule, written out here on its own (``expected``)."""

from __future__ import annotations

import random

from rawclient import RawClient

SERVER_NOT_INITIALIZED, INVALID_REQUEST = -32002, -32600

HOVER = {"textDocument": {"uri": "file:///nowhere.lgm"}, "position": {"line": 0, "character": 0}}
SYMBOLS = {"textDocument": {"uri": "file:///nowhere.lgm"}}


def initialize_params(client: RawClient) -> dict:
    return {"processId": None, "rootUri": client.root.as_uri(), "capabilities": {},
            "initializationOptions": {"streamed": {"debounceMs": 0}}}


def test_a_request_before_initialize_is_answered_server_not_initialized(tmp_path):
    """Issue 30: a request before `initialize` got `result: null`, as if the server had looked and found nothing."""
    client = RawClient(tmp_path)
    try:
        got = client.request("textDocument/hover", HOVER)
        assert got["error"]["code"] == SERVER_NOT_INITIALIZED and "send `initialize` first" in got["error"]["message"]
        client.notify("textDocument/didOpen", {"textDocument": {"uri": (tmp_path / "a.lgm").as_uri(),
                                                                "languageId": "streamed", "version": 1, "text": "x"}})
        assert "result" in client.request("initialize", initialize_params(client))
        client.notify("initialized", {})
        assert "result" in client.request("textDocument/documentSymbol", SYMBOLS)
        # the document opened before initialize was dropped, as the specification says notifications are
        assert not [m for m in client.received if m.get("method") == "textDocument/publishDiagnostics"]
    finally:
        client.close()


def test_a_second_initialize_is_refused_and_the_session_goes_on(tmp_path):
    client = RawClient(tmp_path)
    try:
        client.initialize()
        got = client.request("initialize", initialize_params(client))
        assert got["error"]["code"] == INVALID_REQUEST and "already initialized" in got["error"]["message"]
        assert "result" in client.request("textDocument/documentSymbol", SYMBOLS)
    finally:
        client.close()


def test_a_request_after_shutdown_is_answered_invalid_request_and_exit_still_ends_the_server_with_0(tmp_path):
    """Issue 30: a request after `shutdown` was never answered — a client waiting for it waited for ever."""
    client = RawClient(tmp_path)
    client.initialize()
    shutdown = client.request("shutdown", None)
    assert "result" in shutdown and shutdown["result"] is None, shutdown
    for method, params in (("textDocument/hover", HOVER), ("shutdown", None), ("initialize", {})):
        got = client.request(method, params)
        assert got["error"]["code"] == INVALID_REQUEST and "has shut down" in got["error"]["message"], got
    client.notify("exit", None)
    assert client.process.wait(timeout=30) == 0


#: The messages the fuzz sends: (method, params, is a request).
MESSAGES = [("initialize", None, True), ("initialized", {}, False), ("textDocument/hover", HOVER, True),
            ("textDocument/documentSymbol", SYMBOLS, True), ("shutdown", None, True),
            ("workspace/didChangeConfiguration", {"settings": {}}, False), ("no/such", {}, True)]


def expected(sequence) -> list[int | None]:
    """The specification's answer to each request of ``sequence`` (``None``: a result, or the method's own error
    after initialize — -32601 for an unknown method), and the exit status ``exit`` then gives."""
    initialized = shut_down = False
    answers: list[int | None] = []
    for method, _, request in sequence:
        if not request:
            continue
        if shut_down:
            answers.append(INVALID_REQUEST)
        elif not initialized:
            answers.append(None if method == "initialize" else SERVER_NOT_INITIALIZED)
            initialized = method == "initialize"
        elif method == "initialize":
            answers.append(INVALID_REQUEST)
        else:
            answers.append(-32601 if method == "no/such" else None)
            shut_down = method == "shutdown"
    answers.append(0 if shut_down else 1)
    return answers


def test_every_order_of_lifecycle_messages_is_answered_as_the_specification_says(tmp_path):
    """A fixed-seed fuzz: random orders of initialize, shutdown, requests and notifications, each into a fresh
    server; every request is answered with the code the specification gives (``expected``), and ``exit`` ends the
    server with 0 after shutdown, 1 before."""
    rng = random.Random(30)
    for round in range(6):
        sequence = [rng.choice(MESSAGES) for _ in range(rng.randrange(3, 9))]
        client = RawClient(tmp_path)
        got: list[int | None] = []
        try:
            for method, params, request in sequence:
                if method == "initialize":
                    params = initialize_params(client)
                if request:
                    answer = client.request(method, params)
                    got.append(answer["error"]["code"] if "error" in answer else None)
                else:
                    client.notify(method, params)
            client.notify("exit", None)
            got.append(client.process.wait(timeout=30))
        finally:
            if client.process.poll() is None:
                client.process.kill()
                client.process.wait()
        assert got == expected(sequence), ([m for m, _, _ in sequence], client.stderr()[-2000:])
        assert "Traceback" not in client.stderr()
