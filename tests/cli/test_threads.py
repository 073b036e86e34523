"""How a run's threads wait between parallel kernels (``jit._threads``): where the machine has a core free for each of
the run's threads they spin as libgomp's own do (milliseconds: a sleeping thread, and a virtual machine's idle CPU,
is slow to wake for the next kernel); where it is busy, briefly, then sleep (libgomp's spin, under load, took the
core the other thread's work waited for — a 1B-shaped decode 2–4× slower); either way unless the user's environment
says how OpenMP threads wait; and the setting does not leak into the processes a run starts. libgomp itself is asked
(``omp_display_env``), in the process that ran the command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from repo import EXAMPLES, ROOT
from streamed.numerics.jit import SPIN_BUSY, SPIN_IDLE, runnable_others, spin_count

PROBE = """
import ctypes, json, os, sys
before = dict(os.environ)
from streamed.cli import main
assert main(json.loads(sys.argv[1])) == 0
from streamed.numerics import jit
print("layer:", jit.threading_layer())
print("openmp settings left:", {k: v for k, v in os.environ.items() if k.startswith(("OMP_", "GOMP_"))
                                if before.get(k) != v})
print("chosen:", jit.SPIN_CHOSEN, flush=True)
ctypes.CDLL("libgomp.so.1").omp_display_env(1)  # libgomp's settings, on stderr
"""


def waits(**env: str) -> tuple[str, str, str]:
    """libgomp's wait policy and spin count in a run's process, and the count the run chose (``None`` when the
    environment decided)."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OMP_", "GOMP_"))}
    argv = ["run", str(EXAMPLES / "tiny-llama.lgm"), "--tokens", "1,2,3", "--json"]
    p = subprocess.run([sys.executable, "-c", PROBE, json.dumps(argv)], cwd=ROOT, env={**clean, **env},
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    said = p.stdout.splitlines()[-3:]
    assert said[:2] == ["layer: omp", "openmp settings left: {}"], said
    [policy] = [line.split("=", 1)[1].strip().strip("'") for line in p.stderr.splitlines()
                if line.strip().startswith("OMP_WAIT_POLICY")]
    [spins] = [line.split("=", 1)[1].strip().strip("'") for line in p.stderr.splitlines()
               if line.strip().startswith("GOMP_SPINCOUNT")]
    return policy, spins, said[2].split(": ", 1)[1]


@pytest.fixture
def busy():
    """One process spinning on every core, running (state R) before the test goes on; stopped after."""
    cores = len(os.sched_getaffinity(0))
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(cores)]
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            states = []
            for p in spinners:
                with open(f"/proc/{p.pid}/stat") as f:
                    states.append(f.read().rsplit(")", 1)[1].split()[0])
            if all(s == "R" for s in states):
                break
            time.sleep(0.05)
        yield cores
    finally:
        for p in spinners:
            p.kill()
            p.wait()


def test_threads_spin_long_only_where_the_run_s_threads_fit_beside_what_else_is_runnable():
    assert (SPIN_IDLE, SPIN_BUSY) == ("300000", "3000")  # libgomp's own, and about a hundredth of it
    assert spin_count(0, 2, 2) == SPIN_IDLE
    assert spin_count(1, 4, 2) == SPIN_IDLE
    assert spin_count(1, 2, 2) == SPIN_BUSY
    assert spin_count(0, 1, 2) == SPIN_BUSY  # more threads than cores: they cannot all spin
    assert spin_count(6, 2, 1) == SPIN_BUSY


def test_what_else_is_runnable_counts_every_busy_process(busy):
    assert runnable_others() >= busy


def test_a_run_s_threads_spin_as_it_chose_and_libgomp_reads_it():
    policy, spins, chosen = waits()
    assert chosen in (SPIN_IDLE, SPIN_BUSY)
    assert (policy, spins) == ("PASSIVE", chosen)  # libgomp's reading of a spin count alone


def test_on_a_busy_machine_a_run_s_threads_spin_briefly(busy):
    assert waits()[1:] == (SPIN_BUSY, SPIN_BUSY)


def test_the_user_s_environment_decides_how_the_threads_wait():
    assert waits(OMP_WAIT_POLICY="ACTIVE")[::2] == ("ACTIVE", "None")
    assert waits(GOMP_SPINCOUNT="300000") == ("PASSIVE", "300000", "None")
    assert waits(GOMP_SPINCOUNT="20") == ("PASSIVE", "20", "None")
