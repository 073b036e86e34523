"""A large broken document beside the same document without errors (issue 30): 50,000 lines, the tiny Llama's layer
written out again for every layer until the document is that long — once as written, once with every `Let` line broken
(`bee` for `be`: an error on each of them). Measured whole-process, medians:

- ``streamed check`` (process start → exit), wall and CPU (``resource``'s children's user + system time);
- the language server over stdio (``python -m streamed_lsp``, ``debounceMs`` 0): ``didOpen`` → the first
  ``publishDiagnostics``, then a hover on the last layer, then an edit of one line → its ``publishDiagnostics``
  (wall, as the client sees it — its own reading of the notification included — and the server process's CPU, from
  ``/proc``: what the load does not inflate).

Usage: ``python benchmarks/bench_broken.py [--runs 3] [--write]`` (``--write`` replaces the ``## A large broken
document`` section of docs/performance.md).
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import time
from datetime import date
from pathlib import Path

from common import load_average, load_line, machine, publish

ROOT = Path(__file__).resolve().parents[1]
LINES = 50_000
sys.path.insert(0, str(ROOT / "tests" / "server"))

from rawclient import RawClient  # noqa: E402 — the tests' client of the real server process


def document(broken: bool) -> str:
    """The tiny Llama's layers repeated to ``LINES`` lines (each layer's names its own), every `Let` broken if asked."""
    text = (ROOT / "examples" / "tiny-llama.lgm").read_text()
    head, rest = text.split("## Layer 0", 1)
    first = "## Layer 0" + rest.split("## Layer 1")[0]
    out, lines, layer = [head], head.count("\n"), 0
    while lines < LINES:
        t = re.sub(r"\b([A-Za-z]+)0\b", lambda m: f"{m.group(1)}L{layer}", first).replace("## Layer 0", f"## Layer {layer}")
        if layer:
            t = t.replace("Let x be an input", f"Let xoL{layer - 1} be an input")
            t = re.sub(r"\bx\b(?= with| plus)", f"xoL{layer - 1}", t)
        if broken:
            t = "\n".join(l.replace(" be ", " bee ", 1) if l.startswith("Let") else l for l in t.splitlines()) + "\n"
        out.append(t)
        lines += t.count("\n")
        layer += 1
    out.append(("## Head" + text.split("## Head")[1]).replace("xo3", f"xoL{layer - 1}"))
    return "".join(out)


def check(path: Path) -> tuple[float, float, int]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "streamed", "check", str(path)], capture_output=True)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, p.stdout.decode().count("\n")


def cpu(pid: int) -> float:
    """A process's CPU seconds so far (user + system, all its threads), from ``/proc``."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def served(folder: Path, name: str, text: str) -> tuple[float, float, float, int, float, float]:
    """didOpen → diagnostics, a hover, an edit → its diagnostics (seconds), how many diagnostics were published, and
    the server's CPU seconds from didOpen to its diagnostics and from the edit to its diagnostics."""
    client = RawClient(folder)
    pid = client.process.pid
    try:
        got = client.request("initialize", {"processId": None, "rootUri": folder.as_uri(), "capabilities": {},
                                            "initializationOptions": {"streamed": {"debounceMs": 0}}}, timeout=300)
        assert "result" in got, got
        client.notify("initialized", {})
        c, t = cpu(pid), time.perf_counter()
        uri = client.open(name, text)
        first = client.published(uri, timeout=600)
        opened, open_cpu = time.perf_counter() - t, cpu(pid) - c
        last = text.count("\n") - 3
        t = time.perf_counter()
        client.request("textDocument/hover", {"textDocument": {"uri": uri}, "position": {"line": last, "character": 5}},
                       timeout=600)
        hovered = time.perf_counter() - t
        client.received.clear()
        c, t = cpu(pid), time.perf_counter()
        client.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": 2}, "contentChanges": [
            {"range": {"start": {"line": 40, "character": 0}, "end": {"line": 40, "character": 0}},
             "text": "-- an edit\n"}]})
        while True:
            got = client.published(uri, timeout=600)
            if got.get("version") == 2:
                break
            client.received.clear()
        edited, edit_cpu = time.perf_counter() - t, cpu(pid) - c
        return opened, hovered, edited, len(first["diagnostics"]), open_cpu, edit_cpu
    finally:
        client.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args()
    folder = Path(os.environ.get("TMPDIR", "/tmp")) / f"bench-broken-{os.getpid()}"
    folder.mkdir(parents=True, exist_ok=True)
    rows = []
    load_before = load_average()
    for label, broken in (("without errors", False), ("an error on every `Let` line", True)):
        text = document(broken)
        path = folder / f"{'broken' if broken else 'clean'}.lgm"
        path.write_text(text)
        checks = [check(path) for _ in range(args.runs)]
        serves = [served(folder, path.name, text) for _ in range(args.runs)]
        med = lambda xs: statistics.median(xs)  # noqa: E731
        rows.append((label, text.count("\n"), checks[0][2], med([c[0] for c in checks]), med([c[1] for c in checks]),
                     med([s[0] for s in serves]), med([s[1] for s in serves]), med([s[2] for s in serves]),
                     serves[0][3], med([s[4] for s in serves]), med([s[5] for s in serves])))
    table = ["| document | lines | `check` lines out | `check` wall | `check` CPU | server: open → diagnostics | "
             "hover | edit → diagnostics | server CPU: open, edit | diagnostics |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        table.append(f"| {r[0]} | {r[1]:,} | {r[2]:,} | {r[3]:.2f} s | {r[4]:.2f} s | {r[5]:.2f} s | {r[6]:.2f} s | "
                     f"{r[7]:.2f} s | {r[9]:.2f} s, {r[10]:.2f} s | {r[8]:,} |")
    section = f"""## A large broken document

`benchmarks/bench_broken.py` (issue 30): {LINES:,} lines of the tiny Llama's layer written out again, as written and
with an error on every `Let` line; whole processes, medians of {args.runs}. {machine()}; {date.today()};
{load_line(load_before, load_average())} (the machine is shared by the team: wall times are inflated by the load,
CPU is the process's own).

{chr(10).join(table)}
"""
    publish(section, args.write)


if __name__ == "__main__":
    main()
