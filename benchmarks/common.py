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
