"""Run every benchmark and record each one's section of docs/performance.md (``make bench``).

Each benchmark is its own process, one after another, so no two compete for the machine's two cores.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
BENCHMARKS = [
    ("bench_kinds.py", ["--append"]),
    ("bench_author.py", ["--append"]),
    ("bench_lowering.py", ["--write"]),
    ("bench_manifest.py", ["--write"]),
    ("bench_verify.py", ["--write"]),
    ("bench_server.py", ["--write"]),
    ("bench_heterogeneous.py", ["--write"]),
    ("bench_bundle.py", ["--write"]),
    ("bench_pictures.py", ["--write"]),
    ("bench_gguf_header.py", ["--write"]),
    # Real size beside llama.cpp: writes 4.4, 1.4 and 8.5 GB checkpoints into a temporary folder under build/ (removed
    # after) and needs about 16 GB of memory free for the 8B-shaped one, which it leaves out, saying so, otherwise.
    ("bench_realsize.py", ["--write"]),
    ("bench_real_models.py", ["--write"]),
]


def main() -> int:
    failed = []
    for script, args in BENCHMARKS:
        print(f"== {script} {' '.join(args)}", flush=True)
        if subprocess.run([sys.executable, str(HERE / script), *args], cwd=HERE.parent).returncode != 0:
            failed.append(script)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
