"""The language server as an editor meets it, measured over stdio against the real server process, beside a bare
pygls server (the same ``lsprotocol`` import, publishing empty diagnostics): what any Python LSP server costs.

The documents: Gemma 3 27B's config (examples/configs/gemma-3-27b.json) written by ``streamed author`` at 8, 32, 128
and 512 layers — two kinds (sliding window 1024 and global), real widths. The server runs with ``debounceMs: 0``, so
every figure is latency *beyond* the debounce, and with the default deployment (decode), so each analysis includes
each kind's lowering check. CPU time is read from ``/proc/PID/stat`` (what other work on the shared machine does
not change); wall times beside it. Everything alternates in one run: starts between the two servers, cold opens
between depths, and keystrokes round-robin over one server per depth, all open at once.

- *start*: process start → ``initialize`` answered;
- *cold open*: ``didOpen`` → ``publishDiagnostics`` of version 1 in a fresh server (parse, check, kinds, divergences
  and lowering every kind), counted from the process's start and from ``didOpen``;
- *keystrokes*: → ``publishDiagnostics`` of that version: typing in a comment, renaming a name throughout a layer
  (kinds unchanged), editing a number of a layer (it leaves its kind and returns: a divergence and a new kind to
  lower, then back); p50/p95/max latency and the server's CPU per keystroke;
- the server's resident memory at the end.

Usage: ``python benchmarks/bench_server.py [--keys 40] [--cold 5] [--write]`` (``--write`` replaces the
``## Language server`` section of docs/performance.md).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import statistics
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

from lsprotocol import types as lsp
from pygls.lsp.client import LanguageClient

from common import authored, load_average, load_line, machine, record

ROOT = Path(__file__).resolve().parents[1]
OPEN_DEPTHS = (8, 128, 512)
KEY_DEPTHS = (8, 32, 128, 512)
CONFIG = "gemma-3-27b"
TARGETS = {"cold": 1.0, "p95": 30.0, "cpu_ratio": 1.2}

BARE = '''
import sys
from lsprotocol import types
from pygls.lsp.server import LanguageServer

server = LanguageServer("bare", "1")


def publish(ls, doc):
    ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(doc.uri, [], version=doc.version))


@server.feature(types.TEXT_DOCUMENT_DID_OPEN)
def opened(ls, params):
    publish(ls, params.text_document)


@server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
def changed(ls, params):
    publish(ls, params.text_document)


server.start_io()
'''


class Session:
    """One server process and a client that records when each version's diagnostics arrive. ``env``: the
    environment every server starts in (``None``: this process's)."""

    env: dict | None = None

    def __init__(self):
        self.client = LanguageClient("bench", "1")
        self.arrived: dict[tuple[str, int], float] = {}
        self.events: dict[tuple[str, int], asyncio.Event] = {}
        self.diagnostics: dict[str, list] = {}

        @self.client.feature(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        def published(ls, params: lsp.PublishDiagnosticsParams):
            key = (params.uri, params.version)
            self.arrived[key] = time.perf_counter()
            self.diagnostics[params.uri] = params.diagnostics
            self.events.setdefault(key, asyncio.Event()).set()

        @self.client.feature("streamed/analysisDone")
        def done(ls, params):
            pass

        @self.client.feature(lsp.WINDOW_WORK_DONE_PROGRESS_CREATE)
        def create(ls, params):
            return None

    async def start(self, root: Path, *command: str) -> float:
        """Start the server and initialise it; the wall seconds from process start to ``initialize`` answered."""
        t = time.perf_counter()
        await self.client.start_io(*(command or (sys.executable, "-m", "streamed_lsp")),
                                   **({"env": self.env} if self.env else {}))
        await self.client.initialize_async(lsp.InitializeParams(
            capabilities=lsp.ClientCapabilities(), root_uri=root.as_uri(),
            workspace_folders=[lsp.WorkspaceFolder(root.as_uri(), "bench")],
            initialization_options={"streamed": {"debounceMs": 0}}))
        answered = time.perf_counter() - t
        self.client.initialized(lsp.InitializedParams())
        return answered

    @property
    def pid(self) -> int:
        return self.client._server.pid

    def open(self, uri: str, text: str) -> None:
        self.client.text_document_did_open(lsp.DidOpenTextDocumentParams(
            lsp.TextDocumentItem(uri=uri, language_id="streamed", version=1, text=text)))

    async def wait(self, uri: str, version: int, timeout: float = 120) -> float:
        ev = self.events.setdefault((uri, version), asyncio.Event())
        await asyncio.wait_for(ev.wait(), timeout)
        return self.arrived[(uri, version)]

    async def stop(self):
        await self.client.shutdown_async(None)
        self.client.exit(None)
        await self.client.stop()


def cpu_seconds(pid: int) -> float:
    """User + system CPU time the process has used."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def memory(pid: int) -> tuple[float, float]:
    status = Path(f"/proc/{pid}/status").read_text()
    get = lambda k: int(re.search(rf"{k}:\s+(\d+) kB", status).group(1)) / 1024  # noqa: E731
    return get("VmRSS"), get("VmHWM")


async def starts(root: Path, bare: Path, runs: int) -> dict:
    out: dict = {"streamed": [], "bare": []}
    for _ in range(runs):
        for name, command in (("streamed", ()), ("bare", (sys.executable, str(bare)))):
            s = Session()
            wall = await s.start(root, *command)
            out[name].append((wall, cpu_seconds(s.pid)))
            await s.stop()
    return out


async def cold_opens(texts: dict[int, str], root: Path, runs: int) -> dict:
    out: dict = {}
    for _ in range(runs):
        for n in OPEN_DEPTHS:
            s = Session()
            t0 = time.perf_counter()
            await s.start(root)
            uri = (root / f"cold{n}.lgm").as_uri()
            cpu0 = cpu_seconds(s.pid)
            t1 = time.perf_counter()
            s.open(uri, texts[n])
            arrived = await s.wait(uri, 1)
            cpu1 = cpu_seconds(s.pid)
            out.setdefault(n, []).append({"from_start": (arrived - t0, cpu1), "from_open": (arrived - t1, cpu1 - cpu0),
                                          "diagnostics": len(s.diagnostics[uri])})
            await s.stop()
    return out


def rounds(text: str, layers: int, keys: int) -> list[list[tuple[str, list]]]:
    """``keys`` rounds of 7 keystrokes, each round in one layer: 3 typing in a comment, 2 renaming a name throughout
    the layer (there and back), 2 editing a number — the last digit of its first epsilon (the layer leaves its kind
    and returns)."""
    lines = text.split("\n")
    out = []
    for i in range(keys):
        l = 5 + (i * 37) % (layers - 10) if layers > 12 else 1 + i % (layers - 2)
        while True:  # a layer with a norm's output to rename (a generated NAS layer may have neither block)
            head = next(n for n, ln in enumerate(lines) if ln.startswith(f"## Layer {l}:") or ln == f"## Layer {l}")
            end = next(n for n in range(head + 1, len(lines)) if lines[n].startswith("## ") or n == len(lines) - 1)
            body = "\n".join(lines[head:end])
            name = next((f"{stem}{l}" for stem in ("xn", "hn") if re.search(rf"\bLet {stem}{l}\b", body)), None)
            if name is not None and "epsilon " in body:
                break
            l += 1
        line = head + 1
        w = len(lines[line])
        r = [("comment", [((line, w), (line, w), " ")]), ("comment", [((line, w + 1), (line, w + 1), "--")]),
             ("comment", [((line, w), (line, w + 3), "")])]
        uses = [(n, m.start()) for n in range(head, end) for m in re.finditer(rf"\b{name}\b", lines[n])]
        for old_, new_ in ((name, f"z{name[1:]}"), (f"z{name[1:]}", name)):
            r.append(("rename", [((n, c), (n, c + len(old_)), new_) for n, c in reversed(uses)]))
        line = next(n for n in range(head, end) if "epsilon " in lines[n])
        col = re.search(r"epsilon [0-9.e-]*[0-9]", lines[line]).end() - 1  # the number's last digit
        digit = lines[line][col]
        other = "5" if digit != "5" else "6"
        r += [("number", [((line, col), (line, col + 1), other)]), ("number", [((line, col), (line, col + 1), digit)])]
        out.append(r)
    return out


async def keystrokes(docs: dict, root: Path, keys: int) -> dict:
    """``keys`` rounds of keystrokes into each document of ``docs`` (label → (text, layers, the server's command or
    ``()`` for streamed's)), each in a server of its own, all open at once, the rounds round-robin over them: each
    keystroke's latency to its diagnostics, the server's CPU per round, its memory at the end."""
    sessions: dict = {}
    state: dict = {}
    for label, (text, layers, command) in docs.items():
        s = Session()
        await s.start(root, *command)
        sessions[label] = s
        uri = (root / f"warm-{re.sub(r'[^A-Za-z0-9]+', '-', str(label))}.lgm").as_uri()
        s.open(uri, text)
        await s.wait(uri, 1)
        state[label] = {"uri": uri, "version": 1, "samples": {"comment": [], "rename": [], "number": []}, "cpu": 0.0,
                        "rounds": rounds(text, layers, keys)}
    for i in range(keys):
        for label, s in sessions.items():
            st = state[label]
            cpu0 = cpu_seconds(s.pid)
            for kind, changes in st["rounds"][i]:
                st["version"] += 1
                t = time.perf_counter()
                s.client.text_document_did_change(lsp.DidChangeTextDocumentParams(
                    lsp.VersionedTextDocumentIdentifier(version=st["version"], uri=st["uri"]),
                    [lsp.TextDocumentContentChangePartial(range=lsp.Range(lsp.Position(*a), lsp.Position(*b)), text=new)
                     for a, b, new in changes]))
                st["samples"][kind].append(await s.wait(st["uri"], st["version"]) - t)
            st["cpu"] += cpu_seconds(s.pid) - cpu0
    for label, s in sessions.items():
        state[label]["memory"] = memory(s.pid)
        state[label]["diagnostics"] = len(s.diagnostics[state[label]["uri"]])
        await s.stop()
    return state


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def report(m: dict) -> str:
    med = statistics.median
    ms = lambda s: f"{s * 1e3:.1f}"  # noqa: E731
    texts, kinds = m["texts"], m["kinds"]
    out = [
        "## Language server",
        "",
        f"`benchmarks/bench_server.py`, {date.today().isoformat()}, {machine()}; {load_line(*m['load'])} (the "
        "machine is shared: CPU time is the figure to read, wall time also counts waiting for a core). The real "
        "server over stdio, `debounceMs: 0` (every latency is beyond the debounce), decode deployment (each analysis "
        "includes every kind's lowering check). Documents: `streamed author` of gemma-3-27b.json at "
        + ", ".join(f"{n} layers ({len(texts[n]) // 1024} KiB)" for n in sorted(texts))
        + f"; kinds: {', '.join(f'{k} ×{c}' for k, c in kinds)} at 512 layers. The floor: a bare pygls server with the "
        "same `lsprotocol` import, publishing empty diagnostics.",
        "",
        f"**Start** (process start → `initialize` answered; medians of {len(m['starts']['streamed'])}):",
        "",
        "| server | wall | CPU |",
        "|---|---:|---:|",
    ]
    for name, label in (("bare", "floor: bare pygls server"), ("streamed", "streamed")):
        xs = m["starts"][name]
        out.append(f"| {label} | {med(w for w, _ in xs) * 1e3:.0f} ms | {med(c for _, c in xs) * 1e3:.0f} ms |")
    cold = m["cold"]
    out += [
        "",
        f"**Cold open** (→ diagnostics of version 1, every kind lowered; medians of {len(cold[OPEN_DEPTHS[0]])} fresh "
        "servers):",
        "",
        "| layers | from process start: wall / CPU | from `didOpen`: wall / CPU |",
        "|---:|---:|---:|",
    ]
    for n in OPEN_DEPTHS:
        xs = cold[n]
        out.append(f"| {n} | {med(x['from_start'][0] for x in xs):.2f} / {med(x['from_start'][1] for x in xs):.2f} s | "
                   f"{med(x['from_open'][0] for x in xs):.2f} / {med(x['from_open'][1] for x in xs):.2f} s |")
    keys = m["keys"]
    out += [
        "",
        f"**Keystrokes** (→ `publishDiagnostics` of that version; {len(keys[KEY_DEPTHS[0]]['rounds'])} rounds of 7 "
        "per server, round-robin over the servers):",
        "",
        "| layers | comment p50 / p95 | rename p50 / p95 | number p50 / p95 | all: p50 / p95 / max | CPU per keystroke | × at 32 | RSS / peak |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    base = None
    for n in (*KEY_DEPTHS, "floor"):
        st = keys[n]
        every = [x for xs in st["samples"].values() for x in xs]
        cpu = st["cpu"] / len(every)
        if n == 32:
            base = cpu
        cells = [f"{ms(med(xs))} / {ms(pct(xs, 0.95))}" for xs in st["samples"].values()]
        rss, peak = st["memory"]
        label = "floor (512-layer text)" if n == "floor" else str(n)
        out.append(f"| {label} | " + " | ".join(cells) + f" | {ms(med(every))} / {ms(pct(every, 0.95))} / "
                   f"{ms(max(every))} ms | {ms(cpu)} ms | {{ratio_{n}}} | {rss:.0f} / {peak:.0f} MiB |")
    text = "\n".join(out)
    for n in (*KEY_DEPTHS, "floor"):
        st = keys[n]
        cpu = st["cpu"] / sum(len(xs) for xs in st["samples"].values())
        text = text.replace(f"{{ratio_{n}}}", f"{cpu / base:.2f}×")
    top = KEY_DEPTHS[-1]
    every = [x for xs in keys[top]["samples"].values() for x in xs]
    cpu_top = keys[top]["cpu"] / len(every)
    cold_cpu = med(x["from_open"][1] for x in cold[OPEN_DEPTHS[-1]])
    p95 = pct(every, 0.95) * 1e3
    verdict = lambda ok, by: "met" if ok else f"**missed** by {by:.2f}×"  # noqa: E731
    text += "\n\n" + (
        f"**Targets at {top} layers:** cold open {cold_cpu:.2f} s of server CPU from `didOpen` (≤ {TARGETS['cold']} s: "
        f"{verdict(cold_cpu <= TARGETS['cold'], cold_cpu / TARGETS['cold'])}); keystroke p95 {p95:.1f} ms (≤ "
        f"{TARGETS['p95']:g} ms: {verdict(p95 <= TARGETS['p95'], p95 / TARGETS['p95'])}); CPU per keystroke "
        f"{cpu_top / base:.2f}× that at 32 layers (≤ {TARGETS['cpu_ratio']}×: "
        f"{verdict(cpu_top / base <= TARGETS['cpu_ratio'], cpu_top / base / TARGETS['cpu_ratio'])}).\n\n"
        "An edit re-cuts only the chunks it touches (the document is kept as its sections), and one that changes only "
        "layers' text updates the last analysis at those layers alone: the layer is lexed, then renamed from a layer "
        "of its shape (a rename: no parse, no check), renamed and renumbered from a layer of its frame and checked (a "
        "number: no parse), or parsed and checked (a comment); its links are "
        "rechecked with its neighbours, its digest looked up, and the kinds regrouped only when the digest changed. "
        "The residency check is remembered with the per-layer sizes it was given, so only a new sequence of sizes is "
        "planned. Typing in a comment or renaming lowers nothing; editing a number makes a new kind, lowered once "
        "(and reused when the layer returns).\n")
    return text


async def run(args) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        bare = root / "bare_server.py"
        bare.write_text(BARE)
        texts = {n: authored(CONFIG, n) for n in sorted({*OPEN_DEPTHS, *KEY_DEPTHS})}
        from streamed.analysis.whole import analyze

        for n, text in texts.items():
            a = analyze(text)
            assert len(a.programs.layers) == n and not a.errors, "the authored document should check cleanly"
        kinds = [(k.name, len(k.layers)) for k in analyze(texts[512]).kinds]
        load_start = load_average()
        m = {"texts": texts, "kinds": kinds}
        m["starts"] = await starts(root, bare, args.cold)
        m["cold"] = await cold_opens(texts, root, args.cold)
        docs = {n: (texts[n], n, ()) for n in KEY_DEPTHS}
        docs["floor"] = (texts[KEY_DEPTHS[-1]], KEY_DEPTHS[-1], (sys.executable, str(bare)))
        m["keys"] = await keystrokes(docs, root, args.keys)
        m["load"] = (load_start, load_average())
        return m


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--keys", type=int, default=40, help="keystroke rounds (each: 3 comment, 2 rename, 2 number keys)")
    ap.add_argument("--cold", type=int, default=5, help="fresh servers per depth for the start and the cold open")
    ap.add_argument("--write", action="store_true", help="record under ## Language server in docs/performance.md")
    args = ap.parse_args()
    section = report(asyncio.run(run(args)))
    print(section)
    if args.write:
        record(section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
