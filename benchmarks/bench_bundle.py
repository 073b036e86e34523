"""What a bundle on disk costs to write safely and to read as untrusted input: ``write_bundle`` (the folder's lock,
the check that nothing foreign is in the way, strict JSON, the renames) and ``read_bundle`` (the manifest and every
program validated against the shipped schemas, the manifest checked against itself and held to its programs), at 8,
128 and 512 layers —
beside the floor: the same files parsed with ``json.loads`` and nothing checked. Medians of ``--runs`` runs in one
process, the depths interleaved.

    .venv/bin/python benchmarks/bench_bundle.py [--runs N] [--write]

``--write`` records the table in docs/performance.md under ``## Bundles`` (only that section).
"""

from __future__ import annotations

import argparse
import datetime
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from common import load_average, machine, record  # noqa: E402

from streamed.analysis.whole import analyze  # noqa: E402
import streamed.spatial.bundle as bundle_module  # noqa: E402
from streamed.spatial.bundle import read_bundle, write_bundle  # noqa: E402
from streamed.spatial.deployment import Deployment  # noqa: E402
from streamed.spatial.streamed_model import lower_streamed  # noqa: E402
from streamed.spatial.synth import two_kind_document  # noqa: E402

HEADING = "## Bundles"
DEPTHS = (8, 128, 512)


def _unheld(*_) -> None:
    """``read_bundle`` without its manifest held to its programs (``bundle._agrees_with_its_programs``)."""


def plain_read(folder: Path) -> None:
    """The floor: every file of the bundle parsed, nothing checked."""
    json.loads((folder / "manifest.json").read_bytes())
    for p in (folder / "programs").iterdir():
        json.loads(p.read_bytes())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--write", action="store_true", help="record the table in docs/performance.md")
    args = ap.parse_args()
    load_before = load_average()
    models = {n: lower_streamed(analyze(two_kind_document(n)), Deployment("decode", ctx=4096)) for n in DEPTHS}
    samples: dict[tuple[int, str], list[float]] = {(n, k): [] for n in DEPTHS
                                                   for k in ("write", "read", "unheld", "plain")}
    sizes = {}
    with tempfile.TemporaryDirectory() as d:
        for _ in range(args.runs):
            for n in DEPTHS:  # interleaved: a change of the machine's load falls on every depth alike
                out = Path(d) / f"b{n}"
                t = time.perf_counter()
                write_bundle(models[n], out)
                samples[(n, "write")].append(time.perf_counter() - t)
                t = time.perf_counter()
                read_bundle(out)
                samples[(n, "read")].append(time.perf_counter() - t)
                held, bundle_module._agrees_with_its_programs = bundle_module._agrees_with_its_programs, _unheld
                try:  # the same read without holding the manifest to its programs: what that guarantee costs
                    t = time.perf_counter()
                    read_bundle(out)
                    samples[(n, "unheld")].append(time.perf_counter() - t)
                finally:
                    bundle_module._agrees_with_its_programs = held
                t = time.perf_counter()
                plain_read(out)
                samples[(n, "plain")].append(time.perf_counter() - t)
                sizes[n] = sum(p.stat().st_size for p in out.rglob("*.json"))
        shutil.rmtree(d, ignore_errors=True)
    ms = {key: statistics.median(v) * 1000 for key, v in samples.items()}
    rows = "\n".join(f"| {n} | {sizes[n] / 1024:.0f} KiB | {ms[(n, 'write')]:.1f} | {ms[(n, 'read')]:.1f} | "
                     f"{ms[(n, 'read')] - ms[(n, 'unheld')]:.1f} ({ms[(n, 'read')] / ms[(n, 'unheld')]:.2f}×) | "
                     f"{ms[(n, 'plain')]:.1f} | {ms[(n, 'read')] / ms[(n, 'plain')]:.1f}× |" for n in DEPTHS)
    section = f"""{HEADING}

`benchmarks/bench_bundle.py --runs {args.runs}`, {datetime.date.today().isoformat()}, {machine()}; load average
{load_before} at the start, {load_average()} at the end (the machine is shared: these are upper bounds). Medians of
{args.runs} runs in one process, the depths interleaved. Model: the generated two-kind document
(`streamed.spatial.synth.two_kind_document`), decode at ctx 4096. *write* is `write_bundle` into a folder holding the
previous run's bundle (lock, the check that it holds nothing its manifest does not prove, strict JSON, the renames);
*read* is `read_bundle` (the manifest and every program validated against the shipped schemas, the manifest checked
against itself and against its programs: each placed and certified again, the residency plan, the estimate and the
manifest derived again and compared — *of which held*: what that last check costs, the read timed again without
it); *plain* is the floor, the same files parsed with `json.loads` and nothing checked.

| layers | files | write (ms) | read (ms) | of which held (ms) | plain (ms) | read / plain |
|---:|---:|---:|---:|---:|---:|---:|
{rows}
"""
    print(section)
    if args.write:
        record(section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
