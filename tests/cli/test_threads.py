"""A run's threads spin briefly between parallel kernels, then sleep (``jit._threads``: libgomp's own spin of
milliseconds, under load, took the core the other thread's work waited for — a 1B-shaped decode 2–4× slower),
unless the user's environment says how OpenMP threads wait; and the setting does not leak into the processes a run
starts. libgomp itself is asked (``omp_display_env``), in the process that ran the command."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from repo import EXAMPLES, ROOT

PROBE = """
import ctypes, json, os, sys
before = dict(os.environ)
from streamed.cli import main
assert main(json.loads(sys.argv[1])) == 0
import numba
print("layer:", numba.threading_layer())
print("openmp settings left:", {k: v for k, v in os.environ.items() if k.startswith(("OMP_", "GOMP_"))
                                if before.get(k) != v}, flush=True)
ctypes.CDLL("libgomp.so.1").omp_display_env(1)  # libgomp's settings, on stderr
"""


def waits(**env: str) -> tuple[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OMP_", "GOMP_"))}
    argv = ["run", str(EXAMPLES / "tiny-llama.lgm"), "--tokens", "1,2,3", "--json"]
    p = subprocess.run([sys.executable, "-c", PROBE, json.dumps(argv)], cwd=ROOT, env={**clean, **env},
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    said = p.stdout.splitlines()[-2:]
    assert said == ["layer: omp", "openmp settings left: {}"], said
    [policy] = [line.split("=", 1)[1].strip().strip("'") for line in p.stderr.splitlines()
                if line.strip().startswith("OMP_WAIT_POLICY")]
    [spins] = [line.split("=", 1)[1].strip().strip("'") for line in p.stderr.splitlines()
               if line.strip().startswith("GOMP_SPINCOUNT")]
    return policy, spins


def test_a_run_s_threads_spin_briefly_between_kernels_unless_the_user_says_how_they_wait():
    from streamed.numerics.jit import SPIN_COUNT

    assert SPIN_COUNT != "300000"  # not libgomp's own
    assert waits()[1] == SPIN_COUNT
    assert waits(OMP_WAIT_POLICY="ACTIVE")[0] == "ACTIVE"
    assert waits(GOMP_SPINCOUNT="300000") == ("PASSIVE", "300000")  # libgomp's own reading of a spin count alone
