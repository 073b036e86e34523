"""llama.cpp built for one kernel path, so the oracle can hold every path this CPU runs to a real build of it.

llama-cpp-python's own build is native (``GGML_NATIVE``): it takes the widest path the CPU has, and the rest of the
suite holds that path. A CPU runs narrower paths too — an AVX-512 host runs AVX2 code — and their arithmetic is
another (``streamed.numerics.cpu``), so each is built here from the same sources: llama-cpp-python's sdist of the
installed version (pip's cache has it from the install; the index otherwise), its vendored llama.cpp configured with
``GGML_NATIVE=OFF`` and the path's instruction sets, shared libraries only (``libllama`` and ``ggml``'s), into
``CACHE/<version>-<path>/`` — built once, then reused. ``llama_cpp`` loads it when ``LLAMA_CPP_LIB_PATH`` names that
folder, so the oracle runs in a process of its own per build (``tests/oracle/test_kernel_paths.py``).

``python tests/support/llama_builds.py`` (``make test`` runs it) builds every path this CPU can run that the native
build is not — none on an AVX2 host; on an AVX-512 host the AVX2 one and the AVX-512 one with or without AVX512_BF16
that the native build is not (BF16's products are other code in each: ``cpu.KernelPath.bf16``) — about 9 minutes a
build on 2 cores, once.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from streamed.numerics import cpu  # noqa: E402

CACHE = Path(os.environ.get("STREAMED_LLAMA_BUILDS", Path.home() / ".cache" / "streamed-llama"))
_X86 = ["-DGGML_AVX=ON", "-DGGML_AVX2=ON", "-DGGML_FMA=ON", "-DGGML_F16C=ON", "-DGGML_BMI2=ON"]
_AVX512 = [*_X86, "-DGGML_AVX512=ON", "-DGGML_AVX512_VNNI=ON"]
#: The builds, by the name of their folder (``tag``): each one's path and its instruction sets, as llama.cpp's CMake
#: options name them (``ggml/CMakeLists.txt``).
BUILDS = {"avx2": (cpu.AVX2, [*_X86, "-DGGML_AVX512=OFF"]),
          "avx512": (cpu.AVX512, [*_AVX512, "-DGGML_AVX512_BF16=ON"]),
          "avx512-nobf16": (replace(cpu.AVX512, bf16=False), [*_AVX512, "-DGGML_AVX512_BF16=OFF"])}


def tag(path: cpu.KernelPath) -> str:
    """The name of ``path``'s build (``BUILDS``): its instruction set, and ``-nobf16`` for AVX-512 without
    AVX512_BF16."""
    return f"{path.isa}-nobf16" if path.isa == "avx512" and not path.bf16 else path.isa


def version() -> str:
    from importlib.metadata import version as installed

    return installed("llama-cpp-python")


def folder(path: cpu.KernelPath) -> Path:
    """Where ``path``'s build lives (its ``lib*.so``), whether or not it is built yet."""
    return CACHE / f"{version()}-{tag(path)}"


def built(path: cpu.KernelPath) -> Path | None:
    """``path``'s build, when it has been made."""
    where = folder(path)
    return where if (where / "libllama.so").is_file() and (where / "BUILT").is_file() else None


def native() -> cpu.KernelPath | None:
    """The path llama-cpp-python's own build computes in (its report)."""
    import llama_cpp

    got = cpu.from_report(llama_cpp.llama_print_system_info().decode("utf-8", "replace"))
    return got if isinstance(got, cpu.KernelPath) else None


def wanted() -> list[cpu.KernelPath]:
    """The paths this CPU runs that the native build is not: the ones to build."""
    flags, _, machine = cpu.this_host()
    mine = native()
    return [p for p, _ in BUILDS.values() if p != mine and cpu.runnable(p, flags, machine) is None]


def not_runnable() -> dict[str, str]:
    """The builds this CPU cannot run, by name (``tag``), each with why (``cpu.runnable``): never built, and their
    paths not held here — said in pytest's header and by ``main``."""
    flags, _, machine = cpu.this_host()
    return {tag(p): why for p, _ in BUILDS.values() if (why := cpu.runnable(p, flags, machine)) is not None}


def build(path: cpu.KernelPath, log=print) -> Path:
    """Build llama.cpp for ``path`` into ``folder(path)`` (atomically: a half-made build is never found)."""
    where = folder(path)
    with tempfile.TemporaryDirectory(prefix="llama-build-") as tmp:
        tmp = Path(tmp)
        log(f"llama.cpp {version()} for {tag(path)}: fetching llama-cpp-python's sources")
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:",
                        f"llama-cpp-python=={version()}", "-d", str(tmp)], check=True)
        sdist = next(tmp.glob("llama_cpp_python-*.tar.gz"))
        with tarfile.open(sdist) as t:
            t.extractall(tmp, filter="data")
        src = next(tmp.glob("llama_cpp_python-*/vendor/llama.cpp"))
        out = tmp / "build"
        log(f"llama.cpp {version()} for {tag(path)}: configuring and building (several minutes)")
        subprocess.run(["cmake", "-S", str(src), "-B", str(out), "-DCMAKE_BUILD_TYPE=Release", "-DGGML_NATIVE=OFF",
                        *BUILDS[tag(path)][1], "-DGGML_LLAMAFILE=ON", "-DBUILD_SHARED_LIBS=ON", "-DLLAMA_CURL=OFF",
                        "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_BUILD_TOOLS=OFF",
                        "-DLLAMA_BUILD_SERVER=OFF", "-DLLAMA_BUILD_COMMON=OFF", "-DGGML_OPENMP=ON",
                        "-DCMAKE_BUILD_RPATH=$ORIGIN"],  # each library finds the others beside it
                       check=True, stdout=subprocess.DEVNULL)
        subprocess.run(["cmake", "--build", str(out), "--target", "llama", "-j", str(os.cpu_count() or 2)],
                       check=True, stdout=subprocess.DEVNULL)
        CACHE.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{where.name}-", dir=CACHE))
        for lib in out.rglob("lib*.so*"):
            shutil.copy2(lib, staging / lib.name, follow_symlinks=False)  # its version links as links
        (staging / "BUILT").write_text(f"llama-cpp-python {version()}, {path.described}\n")
        if where.exists():
            shutil.rmtree(where)
        staging.rename(where)
    return where


def main() -> int:
    CACHE.mkdir(parents=True, exist_ok=True)
    todo = [p for p in wanted() if built(p) is None]
    for p in todo:
        build(p)
    have = [tag(p) for p in wanted()]
    cannot = "".join(f"; not testable on this CPU: {t} ({why})" for t, why in not_runnable().items())
    print(f"llama.cpp kernel paths: native {tag(native()) if native() else 'none emulated'}"
          + (f", built {', '.join(have)} ({CACHE})" if have else ", no other path this CPU runs") + cannot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
