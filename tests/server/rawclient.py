"""A client that speaks raw JSON-RPC to the real server process (``python -m streamed_lsp``) over its stdin and
stdout — what a buggy or hostile editor sends, which a typed client such as pytest-lsp cannot: negative positions,
``params`` null or a list, strings where numbers go. Imported by name (``conftest`` puts this folder on ``sys.path``).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path


class RawClient:
    """The server as a process: ``request`` sends a message and waits for the answer with its id; everything else
    the server sends (notifications, its own requests) is kept in ``received``; its stderr in ``stderr()``."""

    def __init__(self, root: Path, command: list[str] | None = None, unanswered: frozenset = frozenset()):
        self.root = root
        self.unanswered = unanswered  # the methods of the server's requests this client never answers
        self.process = subprocess.Popen(command or [sys.executable, "-m", "streamed_lsp"], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.ids = itertools.count(1)
        self.messages: queue.Queue = queue.Queue()
        self.received: list[dict] = []
        self._stderr: list[bytes] = []
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=lambda: self._stderr.extend(self.process.stderr), daemon=True).start()

    def _read(self) -> None:
        out = self.process.stdout
        while True:
            length = None
            while True:
                line = out.readline()
                if not line:
                    return
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
                if line in (b"\r\n", b"\n"):
                    break
            self.messages.put(json.loads(out.read(length)))

    def send(self, message: dict | bytes) -> None:
        body = message if isinstance(message, bytes) else json.dumps(message).encode()
        self.process.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.process.stdin.flush()

    def request(self, method: str, params, timeout: float = 10.0, raw_id=None) -> dict:
        """The server's answer to ``method`` with ``params`` (sent as they are): its ``result`` or ``error``."""
        msg_id = next(self.ids) if raw_id is None else raw_id
        self.send({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
        return self.answer(msg_id, timeout)

    def answer(self, msg_id, timeout: float = 10.0) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no answer to request {msg_id!r} in {timeout} s")
            try:
                m = self.messages.get(timeout=left)
            except queue.Empty:
                continue
            if "method" not in m and m.get("id") == msg_id:
                return m
            self.received.append(m)
            if "method" in m and "id" in m and m["method"] not in self.unanswered:
                # a request of the server's (a progress token): answered as a client would
                self.send({"jsonrpc": "2.0", "id": m["id"], "result": None})

    def notify(self, method: str, params) -> None:
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def initialize(self, options: dict | None = None, capabilities: dict | None = None) -> None:
        got = self.request("initialize", {"processId": None, "rootUri": self.root.as_uri(), "capabilities": capabilities or {},
                                          "workspaceFolders": [{"uri": self.root.as_uri(), "name": "w"}],
                                          "initializationOptions": {"streamed": {"debounceMs": 0, **(options or {})}}})
        assert "result" in got, got
        self.notify("initialized", {})

    def open(self, name: str, text: str) -> str:
        path = self.root / name
        path.write_text(text)
        uri = path.as_uri()
        self.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "streamed", "version": 1,
                                                              "text": text}})
        return uri

    def published(self, uri: str, timeout: float = 20.0) -> dict:
        """The latest publishDiagnostics for ``uri``, waiting for one if none came yet."""
        deadline = time.monotonic() + timeout
        while True:
            found = [m["params"] for m in self.received
                     if m.get("method") == "textDocument/publishDiagnostics" and m["params"]["uri"] == uri]
            if found:
                return found[-1]
            if time.monotonic() > deadline:
                raise AssertionError(f"no diagnostics published for {uri} in {timeout} s")
            try:
                self.received.append(self.messages.get(timeout=0.05))
            except queue.Empty:
                pass

    def stderr(self) -> str:
        return b"".join(self._stderr).decode("utf-8", "replace")

    def close(self) -> None:
        try:
            self.request("shutdown", None, timeout=5)
            self.notify("exit", None)
            self.process.wait(timeout=5)
        except Exception:  # noqa: BLE001 — a server that does not stop is stopped
            self.process.kill()
            self.process.wait()


@contextlib.contextmanager
def serving(root: Path, options: dict | None = None):
    """An initialised server on a workspace folder ``root``, shut down (or killed) after the block."""
    client = RawClient(root)
    try:
        client.initialize(options)
        yield client
    finally:
        client.close()
