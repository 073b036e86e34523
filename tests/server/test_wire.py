"""The server survives any byte stream on its stdin (``streamed_lsp.wire``): framing is bounded (a Content-Length past
the limit is skipped in constant memory, never allocated), a broken message costs only itself (the reader takes up
again at the next header), every request with any JSON id is answered or refused as JSON-RPC says, bodies that are
not JSON-RPC messages are one log line each, and SIGINT/SIGTERM end it at once with 130/143 — idle or analysing.

The hostile-input fuzz of the wire lives here too (fixed seeds): random framing around well-formed messages, and
random bodies and ids into the real process."""

from __future__ import annotations

import json
import re
import signal
import sys
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lsphelp import TINY, deep
from rawclient import RawClient, serving
from streamed.lang.limits import MAX_MESSAGE_BYTES
from streamed_lsp.wire import CHUNK, HEAD_BYTES, MAX_HEADER_BYTES, Frames


def frame(body: bytes) -> bytes:
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def message(n: int) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": n, "method": "shutdown"}).encode()


class Stream:
    """A byte stream read as the server reads stdin — in pieces of at most ``n`` — that may be endless (``tail``
    repeated up to ``tail_bytes``), and that remembers the most the reader ever held."""

    def __init__(self, data: bytes, tail: bytes = b"", tail_bytes: int = 0, piece: int | None = None):
        self.data, self.tail, self.tail_left, self.piece = data, tail, tail_bytes, piece

    def read(self, n: int) -> bytes:
        n = min(n, self.piece or n)
        if self.data:
            out, self.data = self.data[:n], self.data[n:]
            return out
        if self.tail_left > 0:
            k = min(n, self.tail_left)
            self.tail_left -= k
            return (self.tail * (k // len(self.tail) + 1))[:k]
        return b""


def bodies(frames: Frames) -> list:
    out = []
    while (f := frames.next()) is not None:
        out.append(f.body if f.body is not None else f.problem)
    return out


# ---- framing, as a unit -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("length", [b"99999999999999999999", str(2**63 - 1).encode(), b"8000000000", b"-5", b"abc",
                                    b"", b"1e9", b"\xff\xfe", b"0x10", b"9" * 400])
def test_a_false_content_length_costs_only_its_own_message(length):
    """Issue 21: 10^20 ended the server with an OverflowError, 2^63-1 with "byte string is too large", 8e9 allocated
    8 GB; a negative or junk length silently swallowed the next message."""
    stream = Stream(frame(message(1)) + b"Content-Length: " + length + b"\r\n\r\n{}" + frame(message(2)))
    got = bodies(Frames(stream.read))
    assert got[0] == message(1) and got[-1] == message(2), got
    assert len(got) == 3 and isinstance(got[1], str)  # the broken one is a problem, said once


class Watched(Frames):
    """Frames that remember the most bytes they ever held."""

    held = 0

    def _more(self) -> bool:
        more = super()._more()
        self.held = max(self.held, len(self.buf))
        return more


def test_a_length_past_the_limit_is_skipped_in_bounded_memory_however_long_the_stream():
    """A message that says it is 64 MB and is followed by 64 MB of bytes (no header among them): the reader never holds
    more than a chunk and a header, keeps the message's first bytes, and reads on after it."""
    body = b'{"jsonrpc": "2.0", "id": 7, "method": "textDocument/hover", "params": {"x": "' + b"a" * 10_000
    stream = Stream(b"Content-Length: %d\r\n\r\n" % (64 << 20) + body, tail=b"abcdefgh",
                    tail_bytes=(64 << 20) - len(body))
    frames = Watched(stream.read, limit=1 << 20)
    first = frames.next()
    assert first.body is None and first.skipped == 64 << 20
    assert first.head == body[:HEAD_BYTES]
    assert "past the limit of 1,048,576 bytes" in first.problem
    assert frames.next() is None and stream.tail_left == 0  # every byte was read, and dropped
    assert frames.held <= CHUNK + MAX_HEADER_BYTES


def test_a_length_that_overshoots_is_cut_at_the_next_header():
    """A body shorter than its Content-Length (within the limit): the next message's header inside it marks where
    that message starts — a JSON body cannot hold a header line — so the next message is not swallowed."""
    stream = Stream(b"Content-Length: 500\r\n\r\n{}" + frame(message(2)) + frame(message(3)))
    got = bodies(Frames(stream.read))
    assert got[0] == b"{}" and message(2) in got and got[-1] == message(3), got


def test_a_header_without_an_end_is_bounded():
    stream = Stream(b"Content-Length: 5\r\nX-Junk: " + b"x" * 100_000, piece=4096)
    got = bodies(Frames(stream.read))
    assert got == [f"a message header longer than {MAX_HEADER_BYTES:,} bytes"]


def test_a_message_cut_off_by_the_end_of_the_stream_is_said():
    got = bodies(Frames(Stream(b"Content-Length: 100\r\n\r\n{\"a\"").read))
    assert got == ["a message cut off by the end of the stream after 4 of its 100 bytes"]


# Garbage between messages: any bytes, biased towards the pieces of a header, that hold no complete header line of
# their own (one would be a message, and may rightly take the bytes after it as its body).
PIECES = [b"Content-Length:", b" ", b"12", b"99999999999999999999", b"-1", b"\r\n", b"\n", b"\r\n\r\n", b"{", b"}",
          b'"', b"\\", b"\xff", b"Content-Type: x", b":", b"[]", b"null"]
GARBAGE = st.lists(st.sampled_from(PIECES) | st.binary(max_size=12), max_size=8).map(b"".join).filter(
    lambda g: not re.search(rb"Content-Length:[ \t]*\d+\r?\n", g))


@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(parts=st.lists(st.tuples(GARBAGE, st.booleans()), min_size=1, max_size=8),
       piece=st.sampled_from([1, 7, 64, None]))
def test_every_well_formed_message_survives_any_garbage_around_it(parts, piece):
    """The fuzz of the framing: well-formed messages with random garbage before each (or none), read in random piece
    sizes — every one arrives, whole, in order, and the reader's memory stays bounded by the limit."""
    data, expected = b"", []
    for i, (garbage, before) in enumerate(parts):
        data += (garbage if before else b"") + frame(message(i))
        expected.append(message(i))
        if not before:
            data += garbage
    frames = Watched(Stream(data, piece=piece).read, limit=4096)
    got = [b for b in bodies(frames) if isinstance(b, bytes)]
    assert [b for b in got if b in expected] == expected
    assert frames.held <= 4096 + CHUNK + MAX_HEADER_BYTES


# ---- the real process ----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with serving(tmp_path_factory.mktemp("wire")) as client:
        yield client


def raw(client: RawClient, data: bytes) -> None:
    client.process.stdin.write(data)
    client.process.stdin.flush()


_alive = iter(range(10**9))


def alive(client: RawClient) -> None:
    """A well-formed request is answered (its id a string no fuzzed message carries)."""
    got = client.request("textDocument/documentSymbol", {"textDocument": {"uri": "file:///nowhere.lgm"}}, timeout=20,
                         raw_id=f"alive·{next(_alive)}")
    assert "result" in got, got


def log_lines(client: RawClient, after: int) -> list[str]:
    time.sleep(0.3)
    return client.stderr().splitlines()[after:]


@pytest.mark.parametrize("length", [b"99999999999999999999", str(2**63 - 1).encode(), b"8000000000", b"-5", b"junk"])
def test_the_server_survives_any_content_length_and_answers_the_next_request(server, length):
    before = len(server.stderr().splitlines())
    raw(server, b"Content-Length: " + length + b"\r\n\r\n{}")
    alive(server)
    lines = log_lines(server, before)
    assert len(lines) == 1 and lines[0].startswith("streamed-server: WARNING skipped a message"), lines
    assert server.process.poll() is None


@pytest.mark.parametrize("msg_id", [[1], {"a": 1}, True])
def test_a_request_whose_id_is_no_json_rpc_id_is_refused_with_id_null(server, msg_id):
    """Issue 21: an id that is a list or an object got no answer and a TypeError traceback."""
    before = len(server.stderr().splitlines())
    server.send({"jsonrpc": "2.0", "id": msg_id, "method": "shutdown"})
    got = server.answer(None, timeout=10)
    assert got["error"]["code"] == -32600 and "an id is a string, a number or null" in got["error"]["message"]
    assert log_lines(server, before) == [f"streamed-server: WARNING refused a message: {got['error']['message']}"]
    alive(server)


@pytest.mark.parametrize("msg_id", [None, 1.5, "x", -3, 2**70])
def test_a_request_with_any_json_rpc_id_is_answered_with_that_id(server, msg_id):
    server.send({"jsonrpc": "2.0", "id": msg_id, "method": "textDocument/hover",
                 "params": {"textDocument": {"uri": "file:///nowhere.lgm"}, "position": {"line": 0, "character": 0}}})
    got = server.answer(msg_id)
    assert got["id"] == msg_id and ("result" in got or "error" in got), got


@pytest.mark.parametrize("body,code", [(b"[]", -32600), (b"null", -32600), (b"5", -32600), (b'"x"', -32600),
                                       (b"[1, 2]", -32600), (b'{"a', -32700), (b"\xff\xfe", -32700),
                                       (b"[" * 100_000 + b"]" * 100_000, -32700),
                                       (b'{"id": 4, "method": "shutdown"}', -32600), (b"{}", -32600),
                                       (b'{"jsonrpc": "2.0", "id": 4, "method": 5}', -32600)])
def test_a_body_that_is_no_json_rpc_message_is_one_log_line_and_an_error_answer(server, body, code):
    """Issue 21: these each logged a pygls traceback (647 in a storm of 5,000)."""
    before = len(server.stderr().splitlines())
    raw(server, frame(body))
    got = server.answer(4 if b'"id": 4' in body else None, timeout=10)
    assert got["error"]["code"] == code, got
    lines = log_lines(server, before)
    assert len(lines) == 1 and lines[0].startswith("streamed-server: WARNING refused a message: "), lines
    alive(server)


def test_an_oversized_request_is_answered_and_an_oversized_document_gets_one_diagnostic(server):
    """A message past the limit is never held: a request is answered "invalid request" with its size, and a document
    whose didOpen was skipped shows why (its text is not known, so nothing else is said about it)."""
    pad = b"x" * (MAX_MESSAGE_BYTES + 1)
    request = b'{"jsonrpc": "2.0", "id": 41, "method": "textDocument/hover", "params": {"p": "' + pad + b'"}}'
    raw(server, frame(request))
    got = server.answer(41, timeout=30)
    assert got["error"]["code"] == -32600
    assert got["error"]["message"].startswith(f"textDocument/hover: a message of {len(request):,} bytes, past the "
                                              f"limit of {MAX_MESSAGE_BYTES:,}")
    uri = (server.root / "huge.lgm").as_uri()
    raw(server, frame(b'{"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": {"uri": "'
                      + uri.encode() + b'", "languageId": "streamed", "version": 1, "text": "' + pad + b'"}}}'))
    (only,) = server.published(uri, timeout=30)["diagnostics"]
    assert f"past the {MAX_MESSAGE_BYTES / 1048576:.1f} MB a message may have; streamed reads model programs up to " \
           f"4.0 MB" in only["message"]
    alive(server)


def test_the_exit_status_is_0_after_shutdown_and_1_without(tmp_path):
    for shutdown, status in ((True, 0), (False, 1)):
        client = RawClient(tmp_path)
        client.initialize()
        if shutdown:
            client.request("shutdown", None)
        client.notify("exit", None)
        assert client.process.wait(timeout=30) == status


# ---- signals ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", [[sys.executable, "-m", "streamed_lsp"], [sys.executable, "-m", "streamed", "serve"]])
@pytest.mark.parametrize("sig,status,said", [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143,
                                                                                   "stopped by SIGTERM")])
@pytest.mark.parametrize("busy", [False, True], ids=["idle", "analysing"])
def test_a_stop_signal_ends_the_server_with_128_plus_its_number(tmp_path, command, sig, status, said, busy):
    """Issue 21: Ctrl-C while it analysed left it running, deaf, until the editor closed stdin; idle it exited 0. The
    editor here keeps stdin open: the server must end of itself."""
    client = RawClient(tmp_path, command=command)
    try:
        client.initialize()
        if busy:
            uri = client.open("big.lgm", deep(TINY, 3000))
            client.request("textDocument/documentSymbol", {"textDocument": {"uri": uri}}, timeout=30)
        client.process.send_signal(sig)
        assert client.process.wait(timeout=30) == status
        time.sleep(0.2)
        assert client.stderr().strip().splitlines()[-1] == f"streamed-server: {said}"
        assert "Traceback" not in client.stderr()
    finally:
        if client.process.poll() is None:
            client.process.kill()
            client.process.wait()


# ---- the fuzz of messages into the real process ----------------------------------------------------------------------

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70) | st.floats(allow_nan=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(["id", "method", "jsonrpc", "params",
                                                                               "result", "error", "x"]), inner,
                                                              max_size=4),
    max_leaves=10,
)
METHODS = st.sampled_from(["initialize", "shutdown", "textDocument/hover", "workspace/executeCommand",
                           "textDocument/didOpen", "$/cancelRequest", "no/such", ""]) | st.text(max_size=6) | JSON
MESSAGES = st.one_of(
    JSON,  # any JSON value as the body
    st.fixed_dictionaries({"jsonrpc": st.sampled_from(["2.0", "1.0", 2]), "method": METHODS},
                          optional={"id": JSON, "params": JSON}),  # shaped like a message, any id and method
    st.fixed_dictionaries({"jsonrpc": st.just("2.0"), "id": JSON}, optional={"result": JSON, "error": JSON}),
)


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory):
    with serving(tmp_path_factory.mktemp("fuzz")) as client:
        yield client


@settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(batch=st.lists(MESSAGES, min_size=1, max_size=6))
def test_any_json_body_is_handled_answered_or_refused_and_the_server_goes_on(fuzzed, batch):
    """Random bodies, ids and methods (``shutdown`` and ``exit`` left out: they end a server on purpose): no traceback,
    the server stays up, and a well-formed request after them is answered."""
    before = len(fuzzed.stderr().splitlines())
    for m in batch:
        if isinstance(m, dict) and m.get("method") in ("shutdown", "exit"):
            m = {**m, "method": "no/such"}
        if isinstance(m, dict) and m.get("method") == "initialize":
            continue  # a second initialize is the client's error, answered; it would only slow the fuzz
        raw(fuzzed, frame(json.dumps(m).encode()))
    alive(fuzzed)
    assert fuzzed.process.poll() is None
    new = "\n".join(fuzzed.stderr().splitlines()[before:])
    assert "Traceback" not in new, new[-3000:]
