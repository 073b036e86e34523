"""What every benchmark shares: the machine it ran on, and recording its section of docs/performance.md.

Each benchmark owns one ``## Heading`` of docs/performance.md; ``record`` replaces that section (or appends it) and
leaves every other section as it is, so benchmarks can be re-run in any order.
"""

from __future__ import annotations

import os
import platform
import statistics
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PERFORMANCE = ROOT / "docs" / "performance.md"


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def load_average() -> str:
    try:
        return f"{os.getloadavg()[0]:.2f}"
    except OSError:
        return "?"


def machine() -> str:
    """``2 cores (AMD EPYC …), Python 3.11.7`` — what a figure was measured on."""
    return f"{os.cpu_count()} cores ({cpu_model()}), Python {platform.python_version()}"


def record(section: str, path: Path = PERFORMANCE) -> Path:
    """Replace the section whose first line is ``section``'s ``## Heading`` (or append it), leaving the rest."""
    heading = section.lstrip().splitlines()[0].strip()
    text = path.read_text("utf-8") if path.exists() else "# Performance\n\n"
    lines = text.splitlines(keepends=True)
    start = next((i for i, l in enumerate(lines) if l.strip() == heading), None)
    section = section.strip("\n") + "\n"
    if start is None:
        path.write_text(text.rstrip("\n") + "\n\n" + section, "utf-8")
        return path
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    tail = "".join(lines[end:])
    path.write_text("".join(lines[:start]) + section + ("\n" + tail if tail else ""), "utf-8")
    return path


def publish(section: str, write: bool) -> None:
    """Print a benchmark's section and, with ``--write``, record it in docs/performance.md."""
    print(section)
    if write:
        print(f"recorded in {record(section)}")


def median_time(runs: int, fn, clock=time.perf_counter) -> float:
    """The median of ``runs`` timings of ``fn()`` by ``clock`` (wall time unless told: ``time.process_time`` for
    this process's CPU)."""
    samples = []
    for _ in range(runs):
        t = clock()
        fn()
        samples.append(clock() - t)
    return statistics.median(samples)


# ---- what the speed benchmarks share: documents at any depth, whole processes, the floor ---------------------------

#: The floor every speed table stands on: the seed's token rule as one ``re.findall`` over the whole text.
FLOOR = r"[A-Za-z0-9_]+|\S"


def authored(config: str, layers: int) -> str:
    """``streamed author``'s document for ``examples/configs/CONFIG.json`` grown (or cut) to ``layers`` layers — a
    real model's program at any depth, its layer pattern kept (``layer_types`` extended by the config's period)."""
    import json

    from streamed.model.author import author
    from streamed.model.hf import spec_from_config

    data = json.loads((ROOT / "examples" / "configs" / f"{config}.json").read_text())
    text = data.get("text_config", data)
    text["num_hidden_layers"] = layers
    if "layer_types" in text:
        if "full_attention_interval" in text:
            every = text["full_attention_interval"]
            text["layer_types"] = ["full_attention" if (i + 1) % every == 0 else "linear_attention" for i in range(layers)]
        else:
            pattern = text["layer_types"]
            text["layer_types"] = [pattern[i % len(pattern)] for i in range(layers)]
    return author(spec_from_config(data))


def every_layer_its_own(text: str) -> str:
    """``text`` with every layer its own kind and nothing else changed: layer l's first epsilon written as
    ``{l + 1}e-7`` — the heterogeneous document of issue #23, a model whose layers differ only in their epsilon."""
    import re

    def own(m: re.Match) -> str:
        layer = int(m.group(1))
        return re.sub(r"epsilon [0-9.e-]*[0-9]", f"epsilon {layer + 1}e-7", m.group(0), count=1)

    return re.sub(r"(?ms)^## Layer (\d+)\b.*?(?=^## |\Z)", own, text)


def run_process(cmd: list[str], cwd: Path = ROOT) -> tuple[float, float, int]:
    """Run ``cmd`` to its end: (CPU seconds it used — user and system, its own and its children's —, wall seconds,
    exit status). CPU time is what the machine's other load does not change."""
    import subprocess
    import time

    t = time.perf_counter()
    p = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    return usage.ru_utime + usage.ru_stime, time.perf_counter() - t, p.returncode


def floor_command(path: Path) -> list[str]:
    """A whole process that reads ``path`` and tokenizes it with ``FLOOR``: the interpreter's start and the reading,
    the least any command can cost."""
    import sys

    return [sys.executable, "-c", f"import re, sys; re.findall({FLOOR!r}, open(sys.argv[1], encoding='utf-8').read())",
            str(path)]


def median(xs) -> float:
    return statistics.median(xs)


def load_line(start: str, end: str) -> str:
    return f"load average {start} at the start, {end} at the end"
