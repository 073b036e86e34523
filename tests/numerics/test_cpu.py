"""Which kernel path `--arithmetic llama.cpp` computes in: read from what a llama.cpp build reports of itself, or
from the CPU as a native build would compile for it, or named — and refused, in one line naming the build and the
paths there are, where no emulated path is the build's."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from repo import EXAMPLES
from streamed.numerics import cpu

TINY = str(EXAMPLES / "tiny-llama.lgm")
#: ``llama_print_system_info`` as llama.cpp prints it (``ggml-cpu.cpp``'s features: only those compiled in).
AVX512_BUILD = ("CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | BMI2 = 1 | AVX512 = 1 | "
                "AVX512_VBMI = 1 | AVX512_VNNI = 1 | AVX512_BF16 = 1 | AMX_INT8 = 1 | LLAMAFILE = 1 | OPENMP = 1 | "
                "REPACK = 1 | ")
AVX2_BUILD = "CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | BMI2 = 1 | LLAMAFILE = 1 | " \
             "OPENMP = 1 | REPACK = 1 | "
NEON_BUILD = "CPU : NEON = 1 | ARM_FMA = 1 | FP16_VA = 1 | DOTPROD = 1 | LLAMAFILE = 1 | OPENMP = 1 | REPACK = 1 | "
NO_FMA_BUILD = "CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | LLAMAFILE = 1 | OPENMP = 1 | "


def test_a_build_s_report_names_its_path():
    assert cpu.from_report(AVX512_BUILD) == cpu.AVX512 and cpu.AVX512.bf16
    without = cpu.from_report(AVX512_BUILD.replace("AVX512_BF16 = 1 | ", ""))  # an AVX-512 build before Zen 4's
    assert without.name == "avx512" and not without.bf16 and "no AVX512_BF16" in without.described
    assert cpu.from_report(AVX2_BUILD) == cpu.AVX2
    assert cpu.from_report(AVX2_BUILD.replace("LLAMAFILE = 1 | ", "")) == cpu.PATHS["avx2:nollamafile"]


@pytest.mark.parametrize("report, says", [(NEON_BUILD, "ARM's NEON"), (NO_FMA_BUILD, "without FMA and F16C")])
def test_a_build_no_path_emulates_is_refused_naming_the_build_and_the_paths_there_are(report, says):
    got = cpu.from_report(report, "the llama.cpp build on this machine")
    assert isinstance(got, cpu.Unemulated)
    text = str(got)
    assert says in text and "avx2 (x86-64 AVX2" in text and "avx512 (x86-64 AVX-512" in text, text
    assert "\n" not in text


def test_a_native_build_takes_the_widest_path_the_cpu_has():
    wide = {"avx2", "fma", "f16c", "avx512f", "avx512dq", "avx512bw"}
    assert cpu.from_cpu(wide | {"avx512_bf16"}, "x86_64") == cpu.AVX512
    assert cpu.from_cpu(wide, "x86_64") == replace(cpu.AVX512, bf16=False)  # Skylake-X: BF16 in 16-lane float code
    assert cpu.from_cpu({"avx2", "fma", "f16c", "avx512f"}, "x86_64") == cpu.AVX2  # no DQ: ggml's 16-lane soft_max off
    assert cpu.from_cpu({"avx2", "fma", "f16c"}, "x86_64") == cpu.AVX2
    assert isinstance(cpu.from_cpu({"avx"}, "x86_64"), cpu.Unemulated)
    assert isinstance(cpu.from_cpu({"asimd"}, "aarch64"), cpu.Unemulated)


def test_an_avx_512_cpu_runs_the_avx2_path_and_not_the_other_way():
    wide = {"avx2", "fma", "f16c", "avx512f", "avx512dq", "avx512_bf16"}
    assert cpu.runnable(cpu.AVX2, wide, "x86_64") is None and cpu.runnable(cpu.AVX512, wide, "x86_64") is None
    assert "avx512_bf16, avx512dq, avx512f" in cpu.runnable(cpu.AVX512, {"avx2", "fma", "f16c"}, "x86_64")
    assert "avx512_bf16" in cpu.runnable(cpu.AVX512, wide - {"avx512_bf16"}, "x86_64")
    assert cpu.runnable(replace(cpu.AVX512, bf16=False), wide - {"avx512_bf16"}, "x86_64") is None


def test_the_cpu_s_flags_are_read_from_proc_cpuinfo():
    info = "processor\t: 0\nmodel name\t: AMD EPYC\nflags\t\t: fpu sse avx avx2 fma f16c\n\nprocessor\t: 1\n"
    assert cpu.cpu_flags(info) == {"fpu", "sse", "avx", "avx2", "fma", "f16c"} and cpu.cpu_name(info) == "AMD EPYC"


def test_run_says_which_path_computed_and_a_named_path_computes_in_it(run):
    code, out, err = run("run", TINY, "--tokens", "5,17,3", "--arithmetic", "llama.cpp:avx512", "--json")
    assert code == 0, err
    wide = json.loads(out)
    assert wide["arithmetic"] == "llama.cpp:avx512" and wide["arithmetic_chosen_by"] == "named"
    code, out, err = run("run", TINY, "--tokens", "5,17,3", "--arithmetic", "llama.cpp:avx2", "--json")
    narrow = json.loads(out)
    assert narrow["arithmetic"] == "llama.cpp:avx2"
    code, out, err = run("run", TINY, "--tokens", "5,17,3")
    assert code == 0 and "arithmetic:" not in out  # exact says nothing more
    code, out, err = run("run", TINY, "--tokens", "5,17,3", "--arithmetic", "llama.cpp:avx2")
    assert out.rstrip().splitlines()[-1].startswith("arithmetic: llama.cpp:avx2 — x86-64 AVX2 + FMA + F16C"), out


def test_llama_cpp_s_arithmetic_is_this_machine_s_build_s_path_as_the_cpu_independently_says(run):
    """llama-cpp-python's llama.cpp is built native on this machine: its report and /proc/cpuinfo agree."""
    flags, name, machine = cpu.this_host()
    want = cpu.from_cpu(flags, machine)
    code, out, err = run("run", TINY, "--tokens", "5,17", "--arithmetic", "llama.cpp", "--json")
    if isinstance(want, cpu.Unemulated):  # not on this project's x86-64 machines; said, not computed otherwise
        assert code == 2 and "does not emulate" in err, err
        return
    assert code == 0, err
    got = json.loads(out)
    assert got["arithmetic"] == f"llama.cpp:{want.name}", (got["arithmetic"], name)
    assert got["arithmetic_chosen_by"] == "the llama.cpp build's report"


def test_a_machine_whose_llama_cpp_no_path_emulates_is_refused_before_anything_runs(run, monkeypatch):
    monkeypatch.setattr(cpu, "llama_cpp_report", lambda: NEON_BUILD)
    code, out, err = run("run", TINY, "--tokens", "5,17", "--arithmetic", "llama.cpp")
    assert code == 2 and not out
    assert err.count("\n") == 1 and "NEON" in err and "llama.cpp:avx2" in err, err
    code, out, err = run("verify", TINY, "--arithmetic", "llama.cpp", "--mode", "decode", "--ctx", "8")
    assert code == 2 and "NEON" in err


@pytest.mark.parametrize("text", ["llama.cpp:avx3", "llamacpp", "llama.cpp:"])
def test_an_arithmetic_that_is_not_one_is_one_line_naming_it(run, text):
    code, out, err = run("run", TINY, "--tokens", "5", "--arithmetic", text)
    assert code == 2 and f"--arithmetic {text}: not an arithmetic" in err and "avx512" in err, err


def test_a_native_avx_512_build_on_an_intel_cpu_sums_ggml_s_plain_loops_in_8_lanes(monkeypatch):
    """GCC's tunings for Intel's AVX-512 cores prefer 256-bit registers for the loops it vectorises itself (ggml's
    ``ssm_conv`` is one): there the build's plain loops sum as an AVX2 build's do; an AMD AVX-512 build's in 16 lanes.
    (This AMD host's build is held to llama.cpp bit for bit; an Intel build is not here to run.)"""
    import numpy as np

    from streamed.numerics import ggml

    monkeypatch.setattr(cpu, "llama_cpp_report", lambda: AVX512_BUILD)
    for vendor, lanes in (("GenuineIntel", 8), ("AuthenticAMD", 16)):
        monkeypatch.setattr(cpu, "_read_cpuinfo", lambda v=vendor: f"vendor_id\t: {v}\nflags\t\t: avx2 fma f16c\n")
        chosen = cpu.this_machine()
        assert chosen.path.name == "avx512" and chosen.path.lanes == 16 and chosen.path.loop_lanes == lanes, vendor
        assert cpu.this_machine("avx512").path.loop_lanes == lanes
        assert not cpu.this_machine("avx512").path.bf16  # a native build on a CPU without avx512_bf16 has none
    monkeypatch.setattr(cpu, "_read_cpuinfo", lambda: "vendor_id\t: AuthenticAMD\nflags\t\t: avx512f avx512_bf16\n")
    assert cpu.this_machine("avx512").path == cpu.AVX512
    assert cpu.native_tuning(cpu.AVX2, "GenuineIntel") == cpu.AVX2
    rng = np.random.default_rng(5)
    z, w = rng.standard_normal((12, 256)).astype(np.float32), rng.standard_normal((4, 256)).astype(np.float32)
    intel = ggml.ssm_conv(z, w, path=cpu.native_tuning(cpu.AVX512, "GenuineIntel"))
    assert np.array_equal(intel, ggml.ssm_conv(z, w, path=cpu.AVX2))
    assert not np.array_equal(intel, ggml.ssm_conv(z, w, path=cpu.AVX512))  # four fmas against four products


def _fake_build(folder, report: str):
    """A folder LLAMA_CPP_LIB_PATH can name, holding a "library"; and a stand-in ``llama_cpp`` module that reports
    ``report`` and counts how often it was asked."""
    import types

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "libllama.so").write_bytes(b"not really a library")
    asked = []
    module = types.SimpleNamespace(llama_print_system_info=lambda: asked.append(1) or report.encode())
    return module, asked


def test_a_build_s_report_is_asked_once_and_asked_again_when_the_build_changes(tmp_path, monkeypatch):
    import os
    import sys

    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "cache" / "numba"))
    monkeypatch.setenv("LLAMA_CPP_LIB_PATH", str(tmp_path / "build"))
    module, asked = _fake_build(tmp_path / "build", AVX2_BUILD)
    monkeypatch.setitem(sys.modules, "llama_cpp", module)
    assert cpu.llama_cpp_report() == AVX2_BUILD and len(asked) == 1
    assert cpu.llama_cpp_report() == AVX2_BUILD and len(asked) == 1  # kept: llama_cpp not asked (nor imported) again
    rebuilt = tmp_path / "build" / "libllama.so"
    rebuilt.write_bytes(b"another build, another size")
    os.utime(rebuilt, ns=(1, 1))
    module.llama_print_system_info = lambda: asked.append(1) or AVX512_BUILD.encode()
    assert cpu.llama_cpp_report() == AVX512_BUILD and len(asked) == 2
    monkeypatch.setenv("LLAMA_CPP_LIB_PATH", str(tmp_path / "empty"))  # a folder with no library: no build
    (tmp_path / "empty").mkdir()
    assert cpu.llama_cpp_report() is None


def test_a_report_that_cannot_be_kept_is_still_read(tmp_path, monkeypatch):
    import sys

    blocked = tmp_path / "file"
    blocked.write_text("a file where the cache folder would be")
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(blocked / "numba"))
    monkeypatch.setenv("LLAMA_CPP_LIB_PATH", str(tmp_path / "build"))
    module, asked = _fake_build(tmp_path / "build", AVX2_BUILD)
    monkeypatch.setitem(sys.modules, "llama_cpp", module)
    assert cpu.llama_cpp_report() == AVX2_BUILD and cpu.llama_cpp_report() == AVX2_BUILD and len(asked) == 2
