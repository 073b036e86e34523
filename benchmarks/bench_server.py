"""The language server under an editor's load, measured over stdio against the real server process.

The document: Gemma 3 27B's config (examples/configs/gemma-3-27b.json) with 128 layers, written by ``streamed author``
— two kinds (sliding window 1024 and global), real widths. The server runs with ``debounceMs: 0``, so every figure is
latency *beyond* the debounce, and with the default deployment (decode), so each analysis includes each kind's
lowering reject check (lowered kinds cached by digest).

Figures:
- cold open: ``didOpen`` → ``publishDiagnostics`` of version 1 in a freshly started server (parse, check, kinds,
  divergences and lowering every kind), median over ``--cold`` fresh servers;
- keystroke → ``publishDiagnostics`` of that version: p50 and p95 over ``--keys`` keystrokes each of: typing in a
  comment, renaming a name inside a layer (kinds unchanged), editing a number of a layer (the layer leaves its kind and
  returns: a divergence and a new kind to lower, then back);
- the server's resident memory (VmRSS and peak VmHWM) at the end.

Usage: ``python benchmarks/bench_server.py [--keys 60] [--cold 3] [--write]`` (``--write`` replaces the
``## Language server`` section of docs/performance.md).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

from lsprotocol import types as lsp
from pygls.lsp.client import LanguageClient

from common import machine, record

ROOT = Path(__file__).resolve().parents[1]
LAYERS = 128


def author_document(workdir: Path) -> str:
    config = json.loads((ROOT / "examples" / "configs" / "gemma-3-27b.json").read_text())
    config["text_config"]["num_hidden_layers"] = LAYERS
    src = workdir / "config.json"
    src.write_text(json.dumps(config))
    out = workdir / "deep.lgm"
    subprocess.run([sys.executable, "-m", "streamed", "author", str(src), "-o", str(out), "--name", f"Gemma 3, {LAYERS} layers"],
                   check=True, cwd=ROOT)
    return out.read_text()


class Session:
    """One server process and a client that records when each version's diagnostics arrive."""

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

    async def start(self, root: Path):
        await self.client.start_io(sys.executable, "-m", "streamed_lsp")
        await self.client.initialize_async(lsp.InitializeParams(
            capabilities=lsp.ClientCapabilities(), root_uri=root.as_uri(),
            workspace_folders=[lsp.WorkspaceFolder(root.as_uri(), "bench")],
            initialization_options={"streamed": {"debounceMs": 0}}))
        self.client.initialized(lsp.InitializedParams())

    @property
    def pid(self) -> int:
        return self.client._server.pid

    async def wait(self, uri: str, version: int, timeout: float = 60) -> float:
        ev = self.events.setdefault((uri, version), asyncio.Event())
        await asyncio.wait_for(ev.wait(), timeout)
        return self.arrived[(uri, version)]

    async def stop(self):
        await self.client.shutdown_async(None)
        self.client.exit(None)
        await self.client.stop()


def cpu_seconds(pid: int) -> float:
    """User + system CPU time the process has used (independent of how busy the rest of the machine is)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def memory(pid: int) -> tuple[float, float]:
    status = Path(f"/proc/{pid}/status").read_text()
    get = lambda k: int(re.search(rf"{k}:\s+(\d+) kB", status).group(1)) / 1024
    return get("VmRSS"), get("VmHWM")


async def cold_open(text: str, root: Path) -> tuple[float, int, int]:
    s = Session()
    await s.start(root)
    uri = (root / "cold.lgm").as_uri()
    t = time.perf_counter()
    s.client.text_document_did_open(lsp.DidOpenTextDocumentParams(lsp.TextDocumentItem(uri=uri, language_id="streamed", version=1, text=text)))
    arrived = await s.wait(uri, 1)
    n = len(s.diagnostics[uri])
    pid = s.pid
    await s.stop()
    return arrived - t, n, pid


async def keystrokes(text: str, root: Path, keys: int) -> dict:
    s = Session()
    await s.start(root)
    uri = (root / "warm.lgm").as_uri()
    s.client.text_document_did_open(lsp.DidOpenTextDocumentParams(lsp.TextDocumentItem(uri=uri, language_id="streamed", version=1, text=text)))
    await s.wait(uri, 1)
    version = 1
    out: dict[str, list[float]] = {"comment": [], "rename": [], "number": []}

    async def key(*changes) -> float:
        """One version: the content changes in order (an editor's keystroke, or a rename's edits, last first)."""
        nonlocal version
        version += 1
        t = time.perf_counter()
        s.client.text_document_did_change(lsp.DidChangeTextDocumentParams(
            lsp.VersionedTextDocumentIdentifier(version=version, uri=uri),
            [lsp.TextDocumentContentChangePartial(range=lsp.Range(lsp.Position(*a), lsp.Position(*b)), text=new)
             for a, b, new in changes]))
        return await s.wait(uri, version) - t

    lines = text.split("\n")
    cpu0 = cpu_seconds(s.pid)
    layers = [5 + (i * 37) % (LAYERS - 10) for i in range(keys)]
    for i, l in enumerate(layers):
        head = next(n for n, ln in enumerate(lines) if ln.startswith(f"## Layer {l}:") or ln == f"## Layer {l}")
        end = next(n for n in range(head + 1, len(lines)) if lines[n].startswith("## ") or n == len(lines) - 1)
        # Typing in a comment at the end of a layer's first line: the layer's text changes, its tokens do not.
        line = head + 1
        w = len(lines[line])
        out["comment"].append(await key(((line, w), (line, w), " ")))
        out["comment"].append(await key(((line, w + 1), (line, w + 1), "--")))
        out["comment"].append(await key(((line, w), (line, w + 3), "")))
        # Renaming a name inside a layer (every use, one edit as a rename applies it): the kind is unchanged.
        name = f"xn{l}"
        uses = [(n, m.start()) for n in range(head, end) for m in re.finditer(rf"\b{name}\b", lines[n])]
        for old_, new_ in ((name, f"zn{l}"), (f"zn{l}", name)):
            out["rename"].append(await key(*[((n, c), (n, c + len(old_)), new_) for n, c in reversed(uses)]))
        # Editing a number: the layer leaves its kind (a divergence, a new kind to lower), then returns.
        line = next(n for n in range(head, end) if "epsilon 1e-6" in lines[n])
        col = lines[line].index("epsilon 1e-6") + len("epsilon 1e-")
        out["number"].append(await key(((line, col), (line, col + 1), "5")))
        out["number"].append(await key(((line, col), (line, col + 1), "6")))
    cpu = cpu_seconds(s.pid) - cpu0
    rss, peak = memory(s.pid)
    await s.stop()
    return {"samples": out, "rss": rss, "peak": peak, "cpu": cpu}


def p(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--keys", type=int, default=40, help="keystroke rounds (each: 3 comment, 2 rename, 2 number keys)")
    ap.add_argument("--cold", type=int, default=3, help="fresh servers for the cold open")
    ap.add_argument("--write", action="store_true", help="record under ## Language server in docs/performance.md")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        text = author_document(root)
        from streamed.analysis.whole import analyze

        a = analyze(text)
        assert len(a.programs.layers) == LAYERS and not a.errors, "the authored document should check cleanly"
        kinds = [(k.name, len(k.layers)) for k in a.kinds]
        colds = [asyncio.run(cold_open(text, root)) for _ in range(args.cold)]
        warm = asyncio.run(keystrokes(text, root, args.keys))

    cold = statistics.median(c[0] for c in colds)
    rows = []
    all_keys = [x for xs in warm["samples"].values() for x in xs]
    for name, xs in [*warm["samples"].items(), ("all keystrokes", all_keys)]:
        rows.append((name, len(xs), statistics.median(xs) * 1000, p(xs, 0.95) * 1000, max(xs) * 1000))
    load = os.getloadavg()[0]
    report = [
        "## Language server",
        "",
        f"`benchmarks/bench_server.py`, {date.today().isoformat()}, {machine()}; load average {load:.1f} while it ran (the machine is shared: other engineers' "
        f"test suites run concurrently, so these are upper bounds). The real server over stdio; document: "
        f"`streamed author` of gemma-3-27b.json with {LAYERS} layers ({len(text.splitlines())} lines, "
        f"{len(text.encode()) // 1024} KiB; kinds: {', '.join(f'{n} ×{c}' for n, c in kinds)}); `debounceMs: 0`, so every "
        f"latency is beyond the debounce; decode deployment, so each analysis includes every kind's lowering check.",
        "",
        "| measure | target | result |",
        "|---|---|---|",
        f"| cold open → diagnostics, incl. lowering every kind (median of {len(colds)} fresh servers) | ≤ 1.5 s | "
        f"{cold:.2f} s |",
    ]
    for name, n, med, p95, mx in rows:
        target = "p95 ≤ 50 ms" if name == "all keystrokes" else ""
        report.append(f"| keystroke → publishDiagnostics, {name} (n = {n}): median / p95 / max | {target} | "
                      f"{med:.1f} / {p95:.1f} / {mx:.1f} ms |")
    report.append(f"| server CPU time per keystroke (mean; what the machine's load does not change) | | "
                  f"{warm['cpu'] / len(all_keys) * 1000:.1f} ms |")
    report.append(f"| server memory after {len(all_keys)} keystrokes: VmRSS / peak VmHWM | ≤ 300 MB | "
                  f"{warm['rss']:.0f} / {warm['peak']:.0f} MiB |")
    report.append("")
    report.append("An edit re-lexes and re-parses only the chunk (section) it touches; every other section, its checked "
                  "program and its digest come from caches keyed by the section's text; kinds are lowered once per "
                  "digest. Typing in a comment or renaming inside a layer lowers nothing; editing a number makes a new "
                  "kind whose program is lowered once (and reused when the layer returns).")
    text_out = "\n".join(report) + "\n"
    print(text_out)
    if args.write:
        record(text_out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
