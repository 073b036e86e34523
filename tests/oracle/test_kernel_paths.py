"""Every kernel path this host's CPU can run is held to a real llama.cpp build of that path, bit for bit.

The rest of the oracle holds the path of llama-cpp-python's native build (``llamacpp.BUILT``: the widest this CPU
has). Here each other emulated path (``streamed.numerics.cpu.PATHS``, the AVX-512 one with AVX512_BF16 and without:
their BF16 products are other code, ``llama_builds.BUILDS``) is either:
- run: when the CPU can run it, the kernel tests (``test_ggml_kernels.py``), the real-width Q8_0 slice, the
  oracle's Q8_0 cases in llama.cpp's arithmetic and its BF16 products (``BF16``) run again in a process of their own
  whose ``llama_cpp`` loads a build made for that path (``llama_builds``: ``make test`` builds it once, into
  ``~/.cache/streamed-llama/``), and must pass; or
- not collected, when the CPU cannot run it (an AVX2 host runs no AVX-512 code): nothing of that build can run in this
  process's machine, so there is nothing to hold. Such a path is named with the reason in pytest's header
  (``conftest.pytest_report_header``), and ``llama_builds`` neither builds it nor asks for it — which the last test
  holds, on every host.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import llama_builds
import llamacpp
from streamed.numerics import cpu

ROOT = Path(__file__).resolve().parents[2]
#: BF16's products, which each path computes its own way (AVX2's fma, AVX512_BF16's ``dpbf16``, AVX-512F's 16-lane
#: fma): the one-row dot against the build's own, a file's products (tinyBLAS's where its loads cover the width) and
#: logits, and an expert's over a bank.
BF16 = [f"tests/oracle/test_quants.py::{t}" for t in (
    "test_in_llama_cpp_s_arithmetic_a_bf16_dot_is_the_build_s_own_to_its_subnormals_and_its_order_of_addition",
    "test_in_llama_cpp_s_arithmetic_a_quantised_product_is_llama_cpp_s_bit_for_bit[BF16]",
    "test_in_llama_cpp_s_arithmetic_a_bf16_product_of_several_rows_over_a_width_tinyblas_does_not_load_is_the_dot_s",
    "test_in_llama_cpp_s_arithmetic_a_quantised_file_s_logits_are_llama_cpp_s_bit_for_bit_where_exact_ones_are_not"
    "[BF16]",
    "test_in_llama_cpp_s_arithmetic_an_expert_s_product_over_a_bank_kept_in_blocks_is_llama_cpp_s_bit_for_bit[BF16]")]
OTHERS = [p for p, _ in llama_builds.BUILDS.values() if llama_builds.tag(p) != llama_builds.tag(llamacpp.BUILT)]
FLAGS, NAME, MACHINE = cpu.this_host()
#: The other paths this CPU runs: each one's test is collected. The rest are ``llama_builds.not_runnable``'s.
RUNS = [p for p in OTHERS if cpu.runnable(p, FLAGS, MACHINE) is None]

#: The ``/proc/cpuinfo`` flags without which each instruction set's build cannot run (an independent statement of
#: ``cpu.runnable``'s rule, from llama.cpp's CMake options: ``GGML_AVX2`` with FMA and F16C, ``GGML_AVX512`` F+DQ).
BUILDS_NEED = {"avx2": {"avx2", "fma", "f16c"}, "avx512": {"avx512f", "avx512dq", "avx512_bf16"}}


def test_the_paths_this_cpu_cannot_run_are_neither_built_nor_held_and_each_is_said_why():
    cannot = llama_builds.not_runnable()
    assert {llama_builds.tag(p) for p in RUNS} | set(cannot) | {llama_builds.tag(llamacpp.BUILT)} \
        >= set(llama_builds.BUILDS), "every path is either the native build's, held here, or said to be not runnable"
    assert not {llama_builds.tag(p) for p in llama_builds.wanted()} & set(cannot)
    for tag, why in cannot.items():
        needs = BUILDS_NEED[tag.split("-")[0]]
        assert why.startswith("this CPU has no ") and any(flag in why for flag in needs - FLAGS), (tag, why)


@pytest.mark.parametrize("path", RUNS, ids=[llama_builds.tag(p) for p in RUNS])
def test_each_path_this_cpu_runs_is_llama_cpp_s_arithmetic_bit_for_bit_in_a_build_of_that_path(path):
    where = llama_builds.built(path)
    assert where is not None, (f"no llama.cpp build for {llama_builds.tag(path)} at {llama_builds.folder(path)}: "
                               f"`make test` makes it (python tests/support/llama_builds.py)")
    env = {**os.environ, "LLAMA_CPP_LIB_PATH": str(where), "STREAMED_ORACLE_BUILD": llama_builds.tag(path)}
    tests = ["tests/oracle/test_ggml_kernels.py", "tests/oracle/test_real_width.py::"
             "test_two_real_width_q8_0_layers_are_llama_cpp_s_logits_bit_for_bit_in_its_arithmetic",
             "tests/oracle/test_llamacpp.py", *BF16, "-k",
             "not test_kernel_paths and (ggml or real_width or arithmetic)"]
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=3000)
    tail = "\n".join(done.stdout.splitlines()[-25:])
    assert done.returncode == 0, f"the {llama_builds.tag(path)} build's oracle:\n{tail}\n{done.stderr[-2000:]}"
    assert " passed" in tail and " skipped" not in tail, tail


if not RUNS:  # no other path runs here (an AVX2 host): pytest would report an empty parameter set as a skip
    del test_each_path_this_cpu_runs_is_llama_cpp_s_arithmetic_bit_for_bit_in_a_build_of_that_path
