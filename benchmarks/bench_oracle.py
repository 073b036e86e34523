"""What the llama.cpp oracle costs and what it measures.

- ``## The llama.cpp oracle`` in docs/performance.md: the oracle suite as ``make test`` runs it (``python -m pytest
  tests/oracle``, a new process), and, with ``--install``, what the ``llama-cpp-python`` test extra adds to ``make
  test`` on a fresh machine: ``pip install`` of it into a fresh venv with pip's cache off (cold: llama.cpp is built
  from source with the machine's gcc and cmake) and with the wheel cache that build left (warm).
- docs/oracle.md: every case of ``tests/oracle`` with the largest difference between llama.cpp's logits and the
  reference's and the bundle's, relative to llama.cpp's largest logit at that position — the figures the suite's
  tolerances are set from. Only the table of the host's kernel path (its ``<!-- path NAME -->`` … ``<!-- /path -->``
  section) is rewritten; every other line of the file, prose written by hand, is kept as it is.

Run: ``python benchmarks/bench_oracle.py [--install]``.
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

from common import ROOT, load_average, machine, record

ORACLE_DOC = ROOT / "docs" / "oracle.md"


def timed(argv: list[str], cwd: Path = ROOT) -> float:
    start = time.perf_counter()
    subprocess.run(argv, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def install_costs() -> tuple[float, float, str]:
    """Seconds to ``pip install llama-cpp-python`` (the installed version) into a fresh venv: cache off, then warm."""
    from importlib.metadata import version

    spec = f"llama-cpp-python=={version('llama-cpp-python')}"
    with tempfile.TemporaryDirectory() as tmp:
        cold_env, warm_env = Path(tmp, "cold"), Path(tmp, "warm")
        for env in (cold_env, warm_env):
            subprocess.run([sys.executable, "-m", "venv", str(env)], check=True)
        cold = timed([str(cold_env / "bin" / "pip"), "install", "-q", "--no-cache-dir", spec])
        # Warm: pip's own wheel cache, which holds this build since this checkout's first `make test`.
        warm = timed([str(warm_env / "bin" / "pip"), "install", "-q", spec])
    return cold, warm, spec


def agreement() -> list[tuple]:
    """(case, weights, reference vs llama.cpp, bundle vs llama.cpp, the reference in llama.cpp's arithmetic vs
    llama.cpp, the bundles in it vs llama.cpp — Q8_0 only, as the suite holds them) for every oracle case: F32, Q8_0
    and F16 projections."""
    sys.path[:0] = [str(ROOT / "tests" / "support"), str(ROOT / "tests" / "oracle")]
    import numpy as np

    import llamacpp
    import oracle
    import test_llamacpp as t

    def worst(got, want) -> float:
        return float(oracle.relative(got, want).max())

    def bundled(ours, want) -> float:
        pos = sorted(ours.bundle)
        return worst(np.stack([ours.bundle[p] for p in pos]), want[pos])

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in sorted(t.CASES):
            for q8 in (False, True):
                c = t.CASES[name]()
                w = oracle.write(Path(tmp) / "m.gguf", c, q8=q8, **t.WRITTEN.get(name, {}))
                tokens = t.tokens_for(c)
                want = llamacpp.logits(w.path, tokens, t.PREFILL)
                ours = oracle.ours(w.path, tokens, t.PREFILL)
                emulated = oracle.ours(w.path, tokens, t.PREFILL, bundle=q8, arithmetic="llama.cpp")
                rows.append((name, "Q8_0" if q8 else "F32", worst(ours.reference, want), bundled(ours, want),
                             worst(emulated.reference, want), bundled(emulated, want) if q8 else None))
            c = t.CASES[name]()
            w = oracle.write(Path(tmp) / "m.gguf", c, f16=True, **t.WRITTEN.get(name, {}))
            tokens = t.tokens_for(c)
            want = llamacpp.logits(w.path, tokens, t.PREFILL)
            ours = oracle.ours(w.path, tokens, t.PREFILL, bundle=False)
            emulated = oracle.ours(w.path, tokens, t.PREFILL, bundle=False, arithmetic="llama.cpp").reference
            rows.append((name, "F16", worst(ours.reference, want), None, worst(emulated, want), None))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--install", action="store_true", help="also time the extra's install, cold and warm (slow)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--agreement-only", action="store_true",
                    help="only docs/oracle.md's table (leave the suite's time in docs/performance.md as it is)")
    args = ap.parse_args()
    when, where, load = date.today().isoformat(), machine(), load_average()
    if args.agreement_only:
        write_agreement(when, where, load)
        return
    suite = [timed([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/oracle"])
             for _ in range(args.runs)]
    lines = [
        "## The llama.cpp oracle",
        "",
        f"`benchmarks/bench_oracle.py`, {when}, {where}, load average {load} at the start; the machine is shared with "
        "other work while this runs.",
        "",
        f"**The oracle suite (`python -m pytest tests/oracle`, a new process): {statistics.median(suite):.0f} s** "
        f"(median of {args.runs}), of `make test`'s Python run.",
    ]
    if args.install:
        cold, warm, spec = install_costs()
        lines += [
            "",
            f"What the test extra `{spec}` adds to `make test`'s install on a fresh machine: **{cold / 60:.1f} min** "
            f"with pip's cache empty (llama.cpp built from source, CPU only, with gcc and cmake), **{warm:.0f} s** "
            f"once pip's wheel cache holds that build (load average {load_average()} at the end). CI runs "
            "`make test` on the session's machine, whose pip wheel cache holds the build after its first install, "
            "so CI pays the warm figure; a fresh machine pays the cold one once.",
        ]
    record("\n".join(lines) + "\n")
    print("\n".join(lines + [""]))
    write_agreement(when, where, load)


SECTION = re.compile(r"<!-- path (\S+) -->.*?<!-- /path -->", re.S)


def with_path_section(text: str, isa: str, section: str) -> str:
    """docs/oracle.md's ``text`` with path ``isa``'s section (from ``<!-- path isa -->`` to ``<!-- /path -->``) now
    ``section``: in its place, or, for a path not measured before, among the others in the order of their names.
    Every other character of the file is kept as it is — the prose around the tables is written by hand."""
    found = list(SECTION.finditer(text))
    if not found:
        raise SystemExit(f"{ORACLE_DOC}: no `<!-- path NAME -->` … `<!-- /path -->` section to put the {isa} table "
                         f"beside")
    mine = next((m for m in found if m.group(1) == isa), None)
    if mine is not None:
        return text[:mine.start()] + section + text[mine.end():]
    after = next((m for m in found if m.group(1) > isa), None)
    if after is not None:
        return text[:after.start()] + section + "\n\n" + text[after.start():]
    last = found[-1]
    return text[:last.end()] + "\n\n" + section + text[last.end():]


def write_agreement(when: str, where: str, load: str) -> None:
    """docs/oracle.md with this host's path's table measured now; every other line of the file as it was."""
    sys.path[:0] = [str(ROOT / "tests" / "support")]
    import llamacpp

    path = llamacpp.built_path()
    rows = agreement()

    def cell(x: float | None) -> str:
        return "" if x is None else "0" if x == 0 else f"{x:.2g}"

    table = ["| case | weights | reference | bundle | reference, `--arithmetic llama.cpp` | bundles, `--arithmetic "
             "llama.cpp` |", "|---|---|---|---|---|---|"]
    table += [f"| {n} | {w} | {cell(r)} | {cell(b)} | {cell(e)} | {cell(eb)} |" for n, w, r, b, e, eb in rows]
    exact = {w: sum(1 for n, ww, r, b, e, eb in rows if ww == w and e == 0 and not eb) for w in ("Q8_0", "F16", "F32")}
    cases = sum(1 for row in rows if row[1] == "F32")
    mine = (f"<!-- path {path.isa} -->\n### {path.isa}: {path.described}\n\nMeasured {when} by "
            f"`benchmarks/bench_oracle.py` on {where} (load average {load}), llama.cpp's "
            f"{path.isa} build. In llama.cpp's arithmetic {exact['Q8_0']} of the {cases} Q8_0 cases are llama.cpp's "
            f"logits bit for bit through the reference and the bundles, {exact['F16']} of the {cases} F16 cases "
            f"through the reference, {exact['F32']} F32 cases.\n\n" + "\n".join(table) + "\n<!-- /path -->")
    ORACLE_DOC.write_text(with_path_section(ORACLE_DOC.read_text("utf-8"), path.isa, mine), "utf-8")
    print("\n".join(table))


if __name__ == "__main__":
    main()
