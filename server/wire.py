"""The wire: LSP messages out of whatever bytes arrive on stdin, and the server's life on stdio.

pygls 2.1 reads stdin with ``readline()`` and ``read(Content-Length)`` (``pygls/io_.py``, ``run_async``): a header
line without an end is read into memory whole, the length is taken as written (``99999999999999999999`` is an
``OverflowError`` that ends the server, 8,000,000,000 an 8 GB allocation), a header it cannot read silently swallows
the next message, and a body that is not a JSON-RPC object is a logged traceback. It offers no hook below
``start_io``, so the server reads its own stream here, with these guarantees:

* **Bounded**: a header block is at most ``MAX_HEADER_BYTES``; a body at most ``MAX_MESSAGE_BYTES`` (six times the
  largest document, every byte of it escaped as ``\\u00XX``, and room for the rest) — a longer one is never held: it
  is skipped in chunks, its first ``HEAD_BYTES`` kept to answer it (``Frame.skipped``).
* **In step**: ``Content-Length: <digits>`` then CR LF cannot occur inside a JSON body (JSON strings hold no raw
  line break, and outside a string ``Content-Length`` is no JSON token), so it marks where a message starts. A header
  that gives no valid length, a length that overshoots (the next message's header found inside the body), a stray
  byte between messages: the reader takes up again at the next such mark, losing only the broken message.
* **Every message answered or refused as JSON-RPC says** (``problem_of``, applied by ``handlers.Protocol.take``):
  invalid JSON is -32700 with id null; a body that is not an object (``[]``, ``null``, ``5``), an id that is not a
  string, a number or null, a method that is not a string, is -32600 (with the id when it is one); each is one log
  line, never a traceback.
* **Stopped when told**: SIGINT and SIGTERM end the server at once with 130 and 143 (128 + the signal), idle or
  analysing — pygls caught the interrupt and then waited for its reader thread, blocked on stdin, so the server lived
  until the editor closed the pipe. Nothing is lost by ending at once: the server writes only bundles, whole or not
  at all, and a dead writer's temporaries are removed by the next (``streamed.spatial.bundle``). The ``exit``
  notification ends it with 0 after ``shutdown``, 1 before (the LSP rule; pygls exited 0 either way).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import signal
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable

from streamed.lang.limits import MAX_MESSAGE_BYTES

log = logging.getLogger("streamed_lsp")

#: The most bytes a message's header block may have: LSP sends two short lines (``Content-Length``, and rarely
#: ``Content-Type``).
MAX_HEADER_BYTES = 8192

#: How much of a skipped message is kept, to find its id (a request is answered), its method and its document.
HEAD_BYTES = 4096

#: How much is read at a time.
CHUNK = 1 << 16

#: Where a message starts (see the module docstring): a ``Content-Length`` header with its line end.
_MARK = re.compile(rb"Content-Length:[ \t]{0,8}\d{1,20}\r?\n")
_MARK_MAX = 46  # its longest match
_LENGTH = re.compile(rb"[ \t]*(\d{1,30})[ \t]*")  # no real length has more digits: longer is no count at all
_NAME = re.compile(rb"[A-Za-z0-9!#$%&'*+.^_`|~-]+")  # an HTTP header name
_HEADER_END = re.compile(rb"\r?\n\r?\n")


@dataclass(frozen=True)
class Frame:
    """One message off the wire: its ``body``, or, when none could be taken, ``problem`` (why, for the log) — with
    ``skipped`` the length of a message past the limit and ``head`` its first bytes."""

    body: bytes | None = None
    problem: str | None = None
    skipped: int = 0
    head: bytes = b""


class Frames:
    """The messages of a byte stream ``read(n)`` (``b""`` at its end), one at a time (``next``), in bounded memory.
    Not thread-safe: one reader."""

    def __init__(self, read: Callable[[int], bytes], limit: int = MAX_MESSAGE_BYTES):
        self._read = read
        self.limit = limit
        self.buf = bytearray()
        self.ended = False

    def _more(self) -> bool:
        if self.ended:
            return False
        chunk = self._read(CHUNK)
        if not chunk:
            self.ended = True
            return False
        self.buf += chunk
        return True

    def next(self) -> Frame | None:
        """The next message, or ``None`` once the stream has ended."""
        while True:  # blank lines between messages are tolerated
            blank = len(self.buf) - len(self.buf.lstrip(b"\r\n"))
            del self.buf[:blank]
            if self.buf or not self._more():
                break
        if not self.buf:
            return None
        end = self._header_end()
        if end is None:
            why = "a message header cut off by the end of the stream" if self.ended else \
                f"a message header longer than {MAX_HEADER_BYTES:,} bytes"
            return self._resync(why)
        length, why = _content_length(bytes(self.buf[:end[0]]))
        if why is not None:
            return self._resync(why)
        del self.buf[:end[1]]
        if length > self.limit:
            return self._skip(length)
        # Read up to the length — or to the next message's header, found inside the body as it arrives: a length
        # that overshoots must not wait for bytes that will never come while the editor waits for an answer.
        scanned = 0
        while True:
            at = _mark_in(self.buf, max(0, scanned - _MARK_MAX), length)
            if at is not None or len(self.buf) >= length:
                end = length if at is None else at
                body = bytes(self.buf[:end])
                del self.buf[:end]
                return Frame(body=body)
            scanned = len(self.buf)
            if not self._more():
                got = len(self.buf)
                self.buf.clear()
                return Frame(problem=f"a message cut off by the end of the stream after {got:,} of its {length:,} "
                                     f"bytes")

    def _header_end(self) -> tuple[int, int] | None:
        """(where the header's lines end, where its body starts) — at the first empty line — reading as needed;
        ``None`` when there is none within ``MAX_HEADER_BYTES`` or before the stream ends."""
        searched = 0
        while True:
            m = _HEADER_END.search(self.buf, max(0, searched - 3))
            if m is not None and m.start() <= MAX_HEADER_BYTES:
                return m.start(), m.end()
            if len(self.buf) > MAX_HEADER_BYTES:
                return None
            searched = len(self.buf)
            if not self._more():
                return None

    def _resync(self, why: str) -> Frame:
        """The buffer starts with a broken header: skip to the next header (module docstring), keeping the first
        bytes skipped; ``why`` is the frame's problem."""
        head = bytes(self.buf[:HEAD_BYTES])
        del self.buf[:1]  # the broken header itself may begin with a mark
        while True:
            at = _mark_in(self.buf)
            if at is not None:
                del self.buf[:at]
                return Frame(problem=why, head=head)
            if len(self.buf) > _MARK_MAX:  # a mark split between two reads is found whole in the next search
                del self.buf[:len(self.buf) - _MARK_MAX]
            if not self._more():
                self.buf.clear()
                return Frame(problem=why, head=head)

    def _skip(self, length: int) -> Frame:
        """A message past the limit: its first bytes kept, the rest read and dropped a chunk at a time — up to the
        next header if one comes first (the length was false)."""
        head = bytearray()
        left = length
        while left > 0:
            window = bytes(self.buf[:left])
            at = _mark_in(window)
            if at is not None:
                head += window[:at][:HEAD_BYTES - len(head)]
                del self.buf[:at]
                break
            # The last bytes are kept until the next read unless they end the message: they may begin a mark.
            drop = len(window) if len(window) == left else max(0, len(window) - _MARK_MAX)
            head += window[:drop][:HEAD_BYTES - len(head)]
            del self.buf[:drop]
            left -= drop
            if left > 0 and not self._more():
                self.buf.clear()
                break
        why = f"a message of {length:,} bytes, past the limit of {self.limit:,} bytes a message may have"
        return Frame(problem=why, skipped=length, head=bytes(head))


def _mark_in(data, start: int = 0, end: int | None = None) -> int | None:
    """Where the first mark (a ``Content-Length`` header line, as clients write it) in ``data[start:end]`` begins, or
    ``None``; a mark may run past ``end``."""
    end = len(data) if end is None else min(end, len(data))
    at = data.find(b"Content-Length:", start, end)
    while at >= 0:
        if _MARK.match(data, at):
            return at
        at = data.find(b"Content-Length:", at + 1, end)
    return None


def _content_length(header: bytes) -> tuple[int, str | None]:
    """The length a header block gives, or why it gives none."""
    length = None
    for line in re.split(rb"\r?\n", header):
        name, colon, value = line.partition(b":")
        if not colon or not _NAME.fullmatch(name):
            return 0, f"a message header with a line that is not `Name: value` ({_shown(line)})"
        if name.lower() == b"content-length":
            m = _LENGTH.fullmatch(value)
            if m is None:
                return 0, f"a message header whose Content-Length is not a count of bytes ({_shown(line)})"
            length = int(m.group(1))
    if length is None:
        return 0, f"a message header without a Content-Length ({_shown(header)})"
    return length, None


def _shown(raw: bytes) -> str:
    text = raw.decode("utf-8", "replace")
    return repr(text if len(text) <= 60 else text[:59] + "…")


# ---- messages -------------------------------------------------------------------------------------------------------

PARSE_ERROR, INVALID_REQUEST, SERVER_NOT_INITIALIZED = -32700, -32600, -32002

_ID = re.compile(rb'"id"\s*:\s*(-?\d{1,18}|"(?:[^"\\]|\\.){0,200}")')
_METHOD = re.compile(rb'"method"\s*:\s*"((?:[^"\\]|\\.){0,100})"')
_URI = re.compile(rb'"uri"\s*:\s*"((?:[^"\\]|\\.){0,2000})"')


def problem_of(value) -> tuple[int, str] | None:
    """Why a parsed body is not a JSON-RPC message pygls may be handed — (code, reason) — or ``None``."""
    if isinstance(value, list):
        return INVALID_REQUEST, "a JSON array (a JSON-RPC batch, which LSP does not use); send one object per message"
    if not isinstance(value, dict):
        return INVALID_REQUEST, f"{_kind(value)}, not a JSON-RPC object"
    if value.get("jsonrpc") != "2.0":
        return INVALID_REQUEST, f"`jsonrpc` is {_kind(value.get('jsonrpc')) if 'jsonrpc' in value else 'missing'}; a " \
                                f"JSON-RPC 2.0 message has \"jsonrpc\": \"2.0\""
    if "id" in value and not is_id(value["id"]):
        return INVALID_REQUEST, f"an id that is {_kind(value['id'])}; an id is a string, a number or null"
    if "method" in value and not isinstance(value["method"], str):
        return INVALID_REQUEST, f"a method that is {_kind(value['method'])}, not a string"
    if "method" not in value and "id" not in value:
        return INVALID_REQUEST, "an object with neither a method nor an id"
    return None


class Lifecycle:
    """Where the session is in LSP's lifecycle (the specification's "Lifecycle Messages"), and what each message may
    do there: before ``initialize`` a request is answered -32002 (ServerNotInitialized) and a notification dropped;
    ``initialize`` is received once — a second is -32600; after ``shutdown`` a request is -32600 (InvalidRequest) and
    a notification dropped. ``exit`` and responses to the server's own requests are always taken. ★ pygls answered a
    request before ``initialize`` with ``result: null``, a second ``initialize`` again, and none after ``shutdown``
    (a client waited for ever)."""

    def __init__(self) -> None:
        self.initialized = False
        self.shut_down = False

    def refusal(self, value: dict) -> tuple[int, str] | None:
        """Why ``value`` (a JSON-RPC message ``problem_of`` passed) may not be handled now — (code, reason), the code
        answering a request; a notification is only dropped — or ``None``."""
        method = value.get("method")
        if method is None or method == "exit":
            return None
        shown = method if len(method) <= 60 else method[:59] + "…"
        if self.shut_down:
            return INVALID_REQUEST, f"{shown}: the server has shut down; only `exit` may follow `shutdown`"
        if not self.initialized and method != "initialize":
            return SERVER_NOT_INITIALIZED, f"{shown}: the server is not initialized; send `initialize` first"
        if self.initialized and method == "initialize":
            return INVALID_REQUEST, "initialize: the server is already initialized; `initialize` is sent once"
        return None

    def took(self, value: dict) -> None:
        """The session moves on: an ``initialize`` or ``shutdown`` request was read well enough to be handled (one
        refused for its params leaves the session where it was)."""
        if "id" in value and value.get("method") == "initialize":
            self.initialized = True
        elif "id" in value and value.get("method") == "shutdown":
            self.shut_down = True


def is_id(v) -> bool:
    return v is None or (isinstance(v, (int, float, str)) and not isinstance(v, bool))


def _kind(v) -> str:
    if v is None:
        return "null"
    name = {bool: "a boolean", int: "a number", float: "a number", str: "a string", list: "an array",
            dict: "an object"}.get(type(v), type(v).__name__)
    shown = json.dumps(v)[:40] if not isinstance(v, (list, dict)) else ""
    return f"{name} {shown}".rstrip()


def skipped_head(head: bytes) -> tuple[object, str | None, str | None]:
    """What the first bytes of a skipped message say: its id (``None`` if none is seen before its params), its method
    and the URI of its document."""
    before = head.split(b'"params"', 1)[0]
    msg_id = None
    if (m := _ID.search(before)) is not None:
        try:
            msg_id = json.loads(m.group(1))
        except ValueError:
            msg_id = None
    method = _METHOD.search(before)
    uri = _URI.search(head)
    text = lambda m: json.loads(b'"' + m.group(1) + b'"') if m else None  # noqa: E731
    try:
        return msg_id, text(method), text(uri)
    except ValueError:
        return msg_id, None, None


# ---- the server on stdio ----------------------------------------------------------------------------------------------


def _stop(signum, frame) -> None:
    """End the server now, as its signal says (module docstring)."""
    name = signal.Signals(signum).name
    os.write(2, (f"streamed-server: {'interrupted' if signum == signal.SIGINT else f'stopped by {name}'}\n").encode())
    os._exit(128 + signum)


def _install_stop() -> None:
    loop = asyncio.get_running_loop()
    for s in (signal.SIGINT, signal.SIGTERM):
        # ``add_signal_handler`` makes the kernel's signal wake the event loop wherever it lands; the handler set
        # after it then runs at once on the main thread, even while a callback runs there.
        loop.add_signal_handler(s, lambda: None)
        signal.signal(s, _stop)


class StdoutWriter:
    def __init__(self, stdout):
        self._stdout = stdout

    def close(self) -> None:
        self._stdout.close()

    def write(self, data: bytes) -> None:
        self._stdout.write(data)
        self._stdout.flush()


def serve(server, stdin=None, stdout=None) -> int:
    """Run ``server`` (a pygls ``LanguageServer`` whose protocol has ``receive`` and ``oversized``) on stdio until
    the stream ends or the client says ``exit``; returns the exit status."""
    stdin = stdin if stdin is not None else sys.stdin.buffer
    fd = stdin.fileno() if hasattr(stdin, "fileno") else None
    read = (lambda n: os.read(fd, n)) if fd is not None else stdin.read1 if hasattr(stdin, "read1") else stdin.read
    frames = Frames(read)
    server._stop_event = threading.Event()
    server.protocol.set_writer(StdoutWriter(stdout if stdout is not None else sys.stdout.buffer))
    reading = ThreadPoolExecutor(max_workers=1, thread_name_prefix="stdin")

    async def loop() -> None:
        _install_stop()
        running = asyncio.get_running_loop()
        while not server._stop_event.is_set():
            frame = await running.run_in_executor(reading, frames.next)
            if frame is None:
                break
            server.protocol.take(frame)

    status = 0
    try:
        asyncio.run(loop())
    except SystemExit as e:  # the exit notification
        status = e.code if isinstance(e.code, int) else 0
    except BrokenPipeError:
        log.error("the editor closed the connection; the server stops")
    finally:
        reading.shutdown(wait=False)
        server.shutdown()
    return status
