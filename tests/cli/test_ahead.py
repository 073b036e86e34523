"""Compiling ahead (issue 33: a first run that does not compile for half a minute): ``streamed warm`` compiles what
every run on the machine needs, so that a run of any file type people download compiles nothing after it; the first
command on a machine starts the same in the background, once, when it has ended; a run that finds the kernels not
compiled compiles its own as it goes, alone, and the warm-up starts after it.

Each test gives its commands a kernel cache of its own (``NUMBA_CACHE_DIR``) and turns compiling ahead on for them
(the suite turns it off: ``tests/conftest.py``); a background warm-up a test starts is stopped before it ends."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import ggufs
import oracle
import quants
from repo import EXAMPLES, NUMBA_EXTENSIONS, ROOT
from streamed.numerics import ahead

#: ``streamed ARGS`` with numba's compile events counted: the kernels the process compiled (not loaded from the
#: cache), said on stderr after the command's own output.
COUNTED = """
import sys
from numba.core import event

compiled = set()


class Seen(event.Listener):
    def on_start(self, ev):
        compiled.add(ev.data["dispatcher"].py_func.__qualname__)

    def on_end(self, ev):
        pass


event.register("numba:compile", Seen())
from streamed.cli import main

status = main(sys.argv[1:])
print("compiled:", ", ".join(sorted(compiled)) or "nothing", file=sys.stderr)
sys.exit(status)
"""

CFG = {"model_type": "llama", "hidden_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4,
       "num_key_value_heads": 2, "head_dim": 64, "intermediate_size": 512, "vocab_size": 256,
       "rope_theta": 500000.0, "rms_norm_eps": 1e-5, "tie_word_embeddings": False}
#: What a user runs: a prefill of 6 tokens, then two decode steps.
TOKENS, PREFILL = "5,17,200,3,99,41,7,250", "6"


def environment(cache: Path, on: bool = True) -> dict[str, str]:
    return {**os.environ, "NUMBA_CACHE_DIR": str(cache), ahead.ENV: "1" if on else "0"}


def streamed(*args, env: dict[str, str], counted: bool = False, timeout: int = 900) -> subprocess.CompletedProcess:
    head = [sys.executable, "-c", COUNTED] if counted else [sys.executable, "-m", "streamed"]
    return subprocess.run([*head, *map(str, args)], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout)


def compiled(p: subprocess.CompletedProcess) -> str:
    return next(l for l in p.stderr.splitlines() if l.startswith("compiled:")).removeprefix("compiled:").strip()


def stop_background(env: dict[str, str]) -> None:
    """End the background warm-up of ``env``'s cache, if one runs (its whole process group: its jobs too)."""
    pid = _running(env)
    if pid is not None:
        try:
            os.killpg(pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        for _ in range(200):
            if _running(env) is None:
                return
            time.sleep(0.05)


def _running(env: dict[str, str]) -> int | None:
    p = subprocess.run([sys.executable, "-c", "from streamed.numerics import ahead; print(ahead.running())"],
                       cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    return None if p.stdout.strip() == "None" else int(p.stdout)


# ---- streamed warm, then the files people download --------------------------------------------------------------


@pytest.fixture(scope="module")
def warmed(tmp_path_factory):
    """A kernel cache ``streamed warm`` filled, and what it printed."""
    cache = tmp_path_factory.mktemp("kernels")
    env = environment(cache)
    p = streamed("warm", env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    return env, p.stdout


@pytest.fixture(scope="module")
def downloaded(tmp_path_factory):
    """Checkpoints as people download them, of a model none of the warm-up's runs is: Q4_K_M, Q2_K, Q4_0 and BF16
    made by llama.cpp's own quantizer, Q8_0 and F16 as the converter writes them — each with its document."""
    folder = tmp_path_factory.mktemp("downloaded")
    f32 = oracle.write(folder / "f32.gguf", CFG).path
    files = {ftype: quants.quantize(f32, folder / f"{ftype}.gguf", ftype) for ftype in ("Q4_K_M", "Q2_K", "Q4_0",
                                                                                           "BF16")}
    files["Q8_0"] = oracle.write(folder / "q8.gguf", CFG, q8=True).path
    files["F16"] = oracle.write(folder / "f16.gguf", CFG, f16=True).path
    docs = {}
    for ftype, path in files.items():
        doc = folder / f"{ftype}.lgm"
        p = streamed("author", path, "-o", doc, env=environment(folder / "unused", on=False))
        assert p.returncode == 0, p.stderr
        docs[ftype] = (doc, path)
    return docs


def test_streamed_warm_says_each_small_run_it_made_and_stamps_the_machine(warmed):
    env, out = warmed
    lines = [l for l in out.splitlines() if l.startswith("  ")]
    assert len(lines) == len(ahead.every_job()), out
    assert all(" compiled in " in l or " refused in " in l for l in lines), out
    assert sum(" compiled in " in l for l in lines) >= len(ahead.GROUPS), out  # the exact arithmetic runs anywhere
    assert f"{len(lines)} of {len(lines)} done" in out
    stamps = list(Path(env["NUMBA_CACHE_DIR"], "ahead").glob("*/*"))
    assert len(stamps) == len(ahead.every_job()), stamps


@pytest.mark.parametrize("arithmetic", ["exact", "llama.cpp"])
@pytest.mark.parametrize("ftype", ["Q4_K_M", "Q2_K", "Q4_0", "BF16", "Q8_0", "F16"])
def test_after_streamed_warm_a_run_of_a_downloaded_file_compiles_no_kernel(warmed, downloaded, ftype, arithmetic):
    env, _ = warmed
    doc, path = downloaded[ftype]
    p = streamed("run", doc, "--checkpoint", path, "--tokens", TOKENS, "--prefill", PREFILL, "--arithmetic",
                 arithmetic, env=env, counted=True)
    assert p.returncode == 0, p.stderr
    assert "position 7" in p.stdout
    assert compiled(p) == "nothing", f"{ftype} in {arithmetic}: {p.stderr}"
    assert "compiling the kernels" not in p.stderr


#: ``streamed ARGS``, then the numba modules the process imported, on stderr.
IMPORTED = """
import sys
from streamed.cli import main

status = main(sys.argv[1:])
print("numba:", ", ".join(sorted(m for m in sys.modules if m == "numba" or m.startswith("numba."))), file=sys.stderr)
sys.exit(status)
"""


@pytest.mark.parametrize("arithmetic", ["exact", "llama.cpp"])
@pytest.mark.parametrize("ftype", ["Q4_K_M", "Q2_K", "Q4_0", "BF16", "Q8_0", "F16"])
def test_after_streamed_warm_a_run_of_a_downloaded_file_imports_no_numba(warmed, downloaded, ftype, arithmetic):
    """Every kernel such a run calls has its image after ``streamed warm`` (``numerics/images.py``): the run loads
    numba's extension modules from their files, and none of numba's Python."""
    env, _ = warmed
    doc, path = downloaded[ftype]
    p = subprocess.run([sys.executable, "-c", IMPORTED, "run", str(doc), "--checkpoint", str(path), "--tokens", TOKENS,
                        "--prefill", PREFILL, "--arithmetic", arithmetic], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=900)
    assert p.returncode == 0, p.stderr
    imported = set(next(l for l in p.stderr.splitlines() if l.startswith("numba:"))[6:].strip().split(", ")) - {""}
    assert imported <= NUMBA_EXTENSIONS, f"{ftype} in {arithmetic} imported {sorted(imported - NUMBA_EXTENSIONS)}"


def test_a_first_run_of_a_q4_k_m_file_compiles_the_kernels_of_its_own_types_alone_and_the_next_run_none(downloaded,
                                                                                                          tmp_path):
    """The quantised types' kernels are one a type (``blocks._rows_of``, ``ggml_quants._kernel_of``): a machine's
    first run of a file compiles its own types' and no other's, and finds them in the cache in the next process (a
    kernel a factory makes is keyed alike in every process: ``jit._cell``)."""
    from gguf import GGUFReader

    from streamed.numerics.blocks import TYPES

    doc, path = downloaded["Q4_K_M"]
    stored = {t.tensor_type.name for t in GGUFReader(path).tensors}
    env = environment(tmp_path / "kernels", on=False)
    runs = [streamed("run", doc, "--checkpoint", path, "--tokens", TOKENS, "--prefill", PREFILL, "--arithmetic",
                     "llama.cpp", env=env, counted=True) for _ in range(2)]
    assert all(p.returncode == 0 for p in runs), runs[-1].stderr
    names = compiled(runs[0]).split(", ")
    typed = {n.split("_", 2)[2] for n in names if n.startswith(("_rows_", "_kernel_"))} & TYPES.keys()
    assert any(n.startswith("_kernel_") for n in names) and typed, names  # a K-quant product and its dequantiser
    assert typed <= stored, f"kernels of {sorted(typed - stored)} compiled for a file of {sorted(stored)}"
    assert compiled(runs[1]) == "nothing", runs[1].stderr


# ---- the first command on a machine -------------------------------------------------------------------------------


def test_the_first_commands_on_a_machine_start_one_warm_up_in_the_background(tmp_path):
    env = environment(tmp_path / "kernels")
    log = tmp_path / "kernels" / "ahead" / "warm-up.log"
    try:
        for _ in range(2):
            p = streamed("kinds", EXAMPLES / "tiny-llama.lgm", env=env)
            assert p.returncode == 0, p.stderr
        for _ in range(600):  # the warm-up's first line, once its lock is taken
            if log.exists() and "compiling ahead" in log.read_text():
                break
            time.sleep(0.1)
        assert _running(env) is not None, log.read_text() if log.exists() else "no log"
        time.sleep(1.0)  # the second command's warm-up has found the lock taken and ended by now
        assert log.read_text().count("compiling ahead") == 1, log.read_text()
    finally:
        stop_background(env)
    assert _running(env) is None
    stamps = list((tmp_path / "kernels" / "ahead").glob("*/*"))
    assert len(stamps) < len(ahead.every_job()), "a warm-up stopped in its first seconds stamped every job"


def test_with_compiling_ahead_off_a_command_compiles_nothing_ahead(tmp_path):
    env = environment(tmp_path / "kernels", on=False)
    p = streamed("kinds", EXAMPLES / "tiny-llama.lgm", env=env)
    assert p.returncode == 0, p.stderr
    assert not (tmp_path / "kernels" / "ahead").exists()


def test_a_cold_run_compiles_its_own_kernels_alone_and_starts_the_warm_up_when_it_ends(tmp_path):
    gguf = ggufs.llama_like(tmp_path / "model.gguf", layers=2, d=64, heads=4, kv_heads=2, ffn=128, vocab=256)
    doc = tmp_path / "model.lgm"
    assert streamed("author", gguf, "-o", doc, env=environment(tmp_path / "unused", on=False)).returncode == 0
    env = environment(tmp_path / "kernels")
    log = tmp_path / "kernels" / "ahead" / "warm-up.log"
    try:
        p = streamed("run", doc, "--checkpoint", gguf, "--tokens", TOKENS, "--prefill", PREFILL, "--arithmetic",
                     "llama.cpp", "--save", tmp_path / "logits.npz", env=env, counted=True)
        assert p.returncode == 0, p.stderr
        assert "_attend" in compiled(p), p.stderr  # its own kernels, as it went
        ended = (tmp_path / "logits.npz").stat().st_mtime
        for _ in range(600):
            if log.exists() and "compiling ahead" in log.read_text():
                break
            time.sleep(0.1)
        assert _running(env) is not None, "no warm-up after the run"
        began = time.mktime(time.strptime(log.read_text().split(" compiling ahead")[0], "%Y-%m-%d %H:%M:%S"))
        assert began >= int(ended), "the warm-up began before the run had written its logits"
    finally:
        stop_background(env)


# ---- the parts ----------------------------------------------------------------------------------------------------


def test_the_stamp_is_another_when_the_cpu_or_numba_is(monkeypatch):
    from streamed.numerics import cpu

    ahead.key.cache_clear()
    first = ahead.key()
    flags, name, machine = cpu.this_host()
    monkeypatch.setattr(cpu, "this_host", lambda: (flags - {"avx512f"} | {"not-this-cpu"}, name, machine))
    ahead.key.cache_clear()
    other_cpu = ahead.key()
    monkeypatch.undo()
    monkeypatch.setattr(ahead, "_version_file", lambda package: b"__version__ = '0.0.1'\n")
    ahead.key.cache_clear()
    other_numba = ahead.key()
    monkeypatch.undo()
    ahead.key.cache_clear()
    assert len({first, other_cpu, other_numba}) == 3
    assert ahead.key() == first


def test_a_failed_job_is_reported_and_left_to_streamed_warm_and_a_refused_arithmetic_is_no_failure(monkeypatch,
                                                                                                   tmp_path):
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    ends = {"exact": 3, "llama.cpp": 2}
    monkeypatch.setattr(ahead, "_argv", lambda job, folder: [
        sys.executable, "-c", f"import sys; print('first', file=sys.stderr); print('why: {job.arithmetic}', "
                              f"file=sys.stderr); sys.exit({ends[job.arithmetic]})"])
    said = []
    done = ahead.compile_ahead([ahead.Job("exact", "q8_0"), ahead.Job("llama.cpp", "q8_0")], 2, said=said.append)
    assert {(d.job.arithmetic, d.status, d.said) for d in done} == {("exact", "failed", "why: exact"),
                                                                   ("llama.cpp", "refused", "why: llama.cpp")}
    assert said == done
    exact, llama = ahead.Job("exact", "q8_0"), ahead.Job("llama.cpp", "q8_0")
    assert not ahead.stamped(exact), "a failed job was stamped as run"
    assert ahead.failed(exact).read_text() == "why: exact\n", "a failed job would be tried by every command again"
    assert ahead.stamped(llama) and not ahead.failed(llama).exists(), "a refused arithmetic is not a failure"
    ends["exact"] = 0  # ``streamed warm`` tries it again: run, it is stamped and no longer failed
    ahead.compile_ahead([exact], 1)
    assert ahead.stamped(exact) and not ahead.failed(exact).exists()


def test_warm_refuses_fewer_than_one_job_at_a_time_and_a_count_that_is_no_number(run):
    code, out, err = run("warm", "--jobs", "0")
    assert code == 2
    assert "--jobs 0: give at least 1" in err
    code, out, err = run("warm", "--jobs", "two")
    assert code == 2
    assert err.strip() == "streamed: --jobs two: not a whole number; give it in the digits 0-9 (as 4096)"
