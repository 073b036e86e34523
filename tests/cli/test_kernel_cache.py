"""The compiled kernels are kept where the user can write (issue 33): a `streamed run` from an install nobody may
write to compiles its kernels once, into the user's cache folder, and the next run loads them instead of compiling
again — numba's own account of its cache (``NUMBA_DEBUG_CACHE``) says which it did."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from privileges import unprivileged
from repo import EXAMPLES, ROOT, lesser_target
from repo import own_environment as environment


def read_only_install(folder: Path) -> Path:
    """A copy of the package no one may write to (``chmod -R a-w``), as a system or read-only install is."""
    site = folder / "site"
    shutil.copytree(ROOT / "streamed", site / "streamed", ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run(["chmod", "-R", "a-w", str(site)], check=True)
    return site


def tiny_run(site: Path, env: dict[str, str]) -> str:
    p = subprocess.run([*unprivileged(), sys.executable, "-m", "streamed", "run", str(EXAMPLES / "tiny-llama.lgm"),
                        "--tokens", "1,2,3"], cwd=site, env={**env, "NUMBA_DEBUG_CACHE": "1"},
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    return p.stdout


def test_a_read_only_install_compiles_its_kernels_once_into_the_user_cache_folder(tmp_path):
    """The first run compiles and keeps its kernels (and their images) in the user's cache folder; the next compiles
    nothing — from the images without numba, and through numba's cache where images are off."""
    site = read_only_install(tmp_path)
    env = environment(tmp_path / "home", XDG_CACHE_HOME=str(tmp_path / "cache"))
    try:
        first = tiny_run(site, env)
        assert "data saved to" in first, first
        cache = tmp_path / "cache" / "streamed" / "numba"
        kept = sorted(p.name for p in cache.rglob("*.nbc"))
        assert kept, f"nothing compiled was kept in {cache}"
        assert any((cache / "images").glob("*.img")), f"no kernel image was kept in {cache}"
        second = tiny_run(site, env)
        assert "data saved to" not in second and "data loaded from" not in second, second  # numba not even asked
        through_numba = tiny_run(site, {**env, "STREAMED_KERNEL_IMAGES": "0"})
        assert "data loaded from" in through_numba and "data saved to" not in through_numba, through_numba
        assert sorted(p.name for p in cache.rglob("*.nbc")) == kept
        assert not list(site.rglob("__pycache__")), "something was written beside the package"
    finally:
        subprocess.run(["chmod", "-R", "u+w", str(site)], check=True)


def test_the_cache_folder_is_the_user_s_own_setting_then_xdg_then_home(tmp_path):
    def folder(**env: str) -> str:
        return subprocess.run([sys.executable, "-c", "import os, streamed; print(os.environ['NUMBA_CACHE_DIR'])"],
                              cwd=ROOT, env=environment(tmp_path / "home", **env), capture_output=True, text=True,
                              check=True).stdout.strip()

    assert folder(NUMBA_CACHE_DIR=str(tmp_path / "mine")) == str(tmp_path / "mine")
    assert folder(XDG_CACHE_HOME=str(tmp_path / "xdg")) == str(tmp_path / "xdg" / "streamed" / "numba")
    assert folder() == str(tmp_path / "home" / ".cache" / "streamed" / "numba")


#: A ``streamed`` command in a process that says, after it, whether numba's compiler registries were loaded (its
#: linear algebra is one of them); with ``refresh``, loaded before the command, as numba's own cache loading does.
PROBE = """
import json, sys
refresh, argv = json.loads(sys.argv[1])
if refresh:
    from numba.core.registry import cpu_target
    cpu_target.target_context.refresh()
from streamed.cli import main
assert main(argv) == 0
print("registries loaded:", "numba.np.linalg" in sys.modules)
"""


def test_a_warm_run_loads_its_kernels_without_numba_s_compiler_and_computes_the_same_logits(tmp_path):
    """The kernels' machine code read from numba's cache needs numba's runtime, not its compiler's registries
    (``jit``): a warm run through numba (images off) loads none of them — a tenth of a second and more of every run's
    start — and its logits are, bit for bit, a run's that loaded them all first."""
    import json

    import numpy as np

    def probe(refresh: bool, arithmetic: str, saved: Path) -> str:
        argv = ["run", str(EXAMPLES / "tiny-llama.lgm"), "--tokens", "5,17,3,9", "--prefill", "2",
                "--arithmetic", arithmetic, "--save", str(saved)]
        p = subprocess.run([sys.executable, "-c", PROBE, json.dumps([refresh, argv])], cwd=ROOT, capture_output=True,
                           text=True, timeout=600, env={**os.environ, "STREAMED_KERNEL_IMAGES": "0"})
        assert p.returncode == 0, p.stderr
        return p.stdout.rstrip().splitlines()[-1]

    for arithmetic in ("exact", "llama.cpp:avx2"):
        probe(False, arithmetic, tmp_path / "warm-up.npz")  # compiles what the cache does not hold yet
        assert probe(False, arithmetic, tmp_path / "lean.npz") == "registries loaded: False"
        assert probe(True, arithmetic, tmp_path / "full.npz") == "registries loaded: True"
        with np.load(tmp_path / "lean.npz") as lean, np.load(tmp_path / "full.npz") as full:
            assert np.array_equal(lean["logits"], full["logits"]), arithmetic


#: A ``streamed`` command in a process that says, after it, whether it compiled numba's runtime (``jit._runtime``):
#: numba makes the runtime's module in ``nrtdynmod.create_nrt_module`` whenever it compiles it, its own way or ours.
RUNTIME_PROBE = """
import json, sys
from numba.core.runtime import nrtdynmod
made = []
create = nrtdynmod.create_nrt_module
def counted(context):
    made.append(context)
    return create(context)
nrtdynmod.create_nrt_module = counted
from streamed.cli import main
assert main(json.loads(sys.argv[1])) == 0
print("runtime compiled:", bool(made))
"""


def test_a_warm_run_reads_numba_s_runtime_from_the_kernel_cache_and_computes_the_same_logits(tmp_path):
    """Numba compiles its runtime's module in every process (20–30 ms, and 20 MB of LLVM paged in); its machine code
    is kept in the kernel cache beside the kernels (``jit._runtime``). The first run compiles and keeps it, the next
    reads it; a kept copy that is damaged is compiled again and replaced; a kernel compiled in a process whose
    runtime was read links against it — and every run's logits are, bit for bit, the first's. (Through numba:
    images off.)"""
    import json

    import numpy as np

    cache = tmp_path / "cache"
    env = {**environment(tmp_path / "home"), "NUMBA_CACHE_DIR": str(cache), "STREAMED_KERNEL_IMAGES": "0"}

    def run(saved: Path) -> str:
        argv = ["run", str(EXAMPLES / "tiny-llama.lgm"), "--tokens", "5,17,3,9", "--prefill", "2", "--save",
                str(saved)]
        p = subprocess.run([sys.executable, "-c", RUNTIME_PROBE, json.dumps(argv)], cwd=ROOT, env=env,
                           capture_output=True, text=True, timeout=600)
        assert p.returncode == 0, p.stderr
        return p.stdout.rstrip().splitlines()[-1]

    def same(a: Path, b: Path) -> bool:
        with np.load(a) as x, np.load(b) as y:
            return np.array_equal(x["logits"], y["logits"])

    assert run(tmp_path / "first.npz") == "runtime compiled: True"
    [kept] = (cache / "runtime").iterdir()
    assert run(tmp_path / "warm.npz") == "runtime compiled: False"
    assert same(tmp_path / "first.npz", tmp_path / "warm.npz")

    kept.write_bytes(b"not numba's runtime")
    assert run(tmp_path / "damaged.npz") == "runtime compiled: True"
    assert same(tmp_path / "first.npz", tmp_path / "damaged.npz")
    assert run(tmp_path / "mended.npz") == "runtime compiled: False"

    for compiled in cache.rglob("product.*.nb*"):  # the products compiled again, against the runtime read
        compiled.unlink()
    assert run(tmp_path / "recompiled.npz") == "runtime compiled: False"
    assert any(cache.rglob("product.*.nbc"))
    assert same(tmp_path / "first.npz", tmp_path / "recompiled.npz")


def test_kernels_compiled_for_a_cpu_without_avx512_compute_this_host_s_logits(tmp_path):
    """A kernel may use an instruction this host has and a user's has not (the Q8_0 product's ``vpdpbusd``): then it
    must not be emitted at all where the target lacks it — LLVM cannot compile it and the process aborts. Compiled
    for an AVX2 CPU (numba's own ``NUMBA_CPU_NAME``/``NUMBA_CPU_FEATURES``, into a cache of its own; off x86-64,
    numba's generic CPU: ``repo.lesser_target``), every kernel
    of a Q8_0 run in llama.cpp's arithmetic, on both paths, computes this host's logits bit for bit."""
    import numpy as np

    targets = (("host", {}), ("lesser", lesser_target()))
    for arithmetic in ("llama.cpp:avx2", "llama.cpp:avx512"):
        saved = {}
        for target, extra in targets:
            env = {**environment(tmp_path / "home"), "NUMBA_CACHE_DIR": str(tmp_path / f"cache-{target}"), **extra}
            saved[target] = tmp_path / f"{target}-{arithmetic}.npz"
            p = subprocess.run([sys.executable, "-m", "streamed", "run", str(EXAMPLES / "tiny-llama.lgm"), "--tokens",
                                "5,17,3,9,200,41", "--prefill", "5", "--arithmetic", arithmetic, "--save",
                                str(saved[target])], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
            assert p.returncode == 0, p.stderr[-2000:]
        with np.load(saved["host"]) as host, np.load(saved["lesser"]) as lesser:
            assert np.array_equal(host["logits"], lesser["logits"]), arithmetic


GENERATOR = """
from numba import types
from numba.extending import intrinsic
from llvmlite import ir


@intrinsic
def constant(typingctx):
    def codegen(context, builder, signature, args):
        return ir.Constant(ir.IntType(64), {value})

    return types.int64(), codegen
"""

KERNEL = """
from streamed.numerics.jit import kernel
from generator import constant


@kernel
def computed():
    return constant()
"""


def test_a_kernel_is_compiled_again_when_a_code_generator_beside_it_changes(tmp_path):
    """numba keys a cached kernel by its own module's source; the code generators it calls live in the modules beside
    it (the dots intrinsics, ``product.prefetch``). A change there must reach the kernel, not leave the machine code
    compiled before it in the cache."""
    package = tmp_path / "package"
    package.mkdir()
    (package / "kernels.py").write_text(KERNEL)
    env = environment(tmp_path / "home", NUMBA_CACHE_DIR=str(tmp_path / "cache"),
                      PYTHONPATH=os.pathsep.join([str(package), str(ROOT)]))

    def computed(value: int) -> int:
        (package / "generator.py").write_text(GENERATOR.format(value=value))
        p = subprocess.run([sys.executable, "-c", "import streamed, kernels; print(kernels.computed())"], cwd=package,
                           env=env, capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stderr
        return int(p.stdout)

    assert computed(7) == 7
    assert list((tmp_path / "cache").rglob("*.nbc")), "the kernel was not kept in the cache"
    assert computed(7) == 7
    assert computed(11) == 11, "the kernel kept from before its code generator changed was loaded"


#: One process saving ``sys.argv[2]``'s entry in a kernel's index in ``sys.argv[1]``, as a compile does: it reads the
#: index, then waits (2 s at most) until the process saving ``sys.argv[3]``'s has read it too, then writes.
SAVING = """
import sys, time
from pathlib import Path
from streamed.numerics.jit import _cache_classes
_Indexed = _cache_classes()[1]
folder, me, other = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
index = _Indexed(cache_path=str(folder), filename_base="kernel", source_stamp="sources")
read = index._load_index
def read_then_wait():
    found = read()
    (folder / f"{me}.read").touch()
    for _ in range(40):
        if (folder / f"{other}.read").exists():
            break
        time.sleep(0.05)
    return found
index._load_index = read_then_wait
index.save(("signature", me), "machine code of " + me)
"""


def test_processes_saving_two_signatures_of_one_kernel_at_once_keep_both_each_naming_its_own_code(tmp_path):
    from streamed.numerics.jit import _cache_classes

    _Indexed = _cache_classes()[1]
    saving = [subprocess.Popen([sys.executable, "-c", SAVING, str(tmp_path), me, other], cwd=ROOT)
              for me, other in (("a", "b"), ("b", "a"))]
    assert [p.wait(timeout=60) for p in saving] == [0, 0]
    index = _Indexed(cache_path=str(tmp_path), filename_base="kernel", source_stamp="sources")
    assert [index.load(("signature", s)) for s in "ab"] == ["machine code of a", "machine code of b"]


def test_a_kernel_whose_closure_holds_an_llvm_type_keeps_its_cache_key_once_code_is_made_with_the_type():
    """A kernel is found in the kernel cache by its closure's cells (``jit._cell``). llvmlite keeps an LLVM type's text
    on the type once code is made with it, so a type keyed by its pickle changed key in the process that compiled the
    kernel — saved under one key, looked for under another, compiled again by every process. By its text it keeps
    one key, and two types keep two."""
    from llvmlite import ir

    from streamed.numerics.jit import _cell

    sixteen = ir.VectorType(ir.IntType(32), 16)
    before = _cell(sixteen)
    str(ir.Constant(sixteen, [0] * 16))  # as code generation uses it
    assert _cell(sixteen) == before
    assert _cell(ir.VectorType(ir.IntType(32), 8)) != before
