"""Which of llama.cpp's CPU kernel paths ``--arithmetic llama.cpp`` computes in: what a build of llama.cpp on this
machine compiled, read from what that build says of itself.

Why a path. ggml's CPU kernels are written once per instruction set, and the float32 sums they compute are grouped by
the width of the vector register: ``ggml_vec_dot_f32`` keeps four accumulators of 16 lanes under AVX-512 and of 8
under AVX2, llamafile's tinyBLAS one accumulator of that width, ``ggml_v_expf`` is a different sequence of roundings
on each, and soft_max sums one register at a time. So the same model on the same tokens gives other last bits on an
AVX2 build than on an AVX-512 one — and a Q8_0 model quantises those bits to a step of 1/127 of a block's largest
value, so the difference reaches 1e-2 in the logits. To be llama.cpp's arithmetic bit for bit is to be the arithmetic
of one path; which one is a fact of the build (``llama_print_system_info``), not of the document.

The paths emulated (``PATHS``):

- ``avx2`` — x86-64 with AVX2, FMA and F16C (``GGML_AVX2``): 8 float32 lanes;
- ``avx512`` — x86-64 with AVX-512 F and DQ (``GGML_AVX512``; VNNI or not, which changes only integer sums that are
  exact either way): 16 lanes. With AVX512_BF16 or without (``KernelPath.bf16``): ggml's BF16 products take
  ``_mm512_dpbf16_ps`` in a build with it, 16-lane float code in one without — not part of the name. A build's own
  report says which (``AVX512_BF16 = 1``); a native build has it where the CPU has (``avx512_bf16``: AMD's Zen 4 on,
  Intel's Cooper Lake and Sapphire Rapids on), and ``--arithmetic llama.cpp:avx512`` names it with AVX512_BF16 unless
  this CPU lacks it (``this_machine``).

Each with llamafile's tinyBLAS (``LLAMAFILE = 1``, llama.cpp's default) taking float products of two or more rows, or
without it (``:nollamafile``). Every other build — ARM's NEON or SVE, an x86 build without FMA, POWER, RISC-V — is
refused, naming the build and the paths there are: a silent approximation of another build's arithmetic would
claim "bit for bit" and not be it.

I/O: ``this_machine`` alone reads (``llama_cpp``'s report when llama-cpp-python is installed, else
``/proc/cpuinfo``) and keeps the report it read in the user's cache folder (``llama_cpp_report``); the rest is pure.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import platform
import re
from dataclasses import dataclass, replace
from pathlib import Path


@dataclass(frozen=True)
class KernelPath:
    """One build's float arithmetic: ``lanes`` float32 values a vector register holds (8: AVX2, 16: AVX-512), and
    whether llamafile's tinyBLAS computes float products of several rows (``tinyblas``)."""

    isa: str
    lanes: int
    tinyblas: bool = True
    #: The float32 lanes GCC's auto-vectoriser gave ggml's plain C loops (``ggml.ssm_conv``'s sum) in the build: 0 for
    #: the path's own; 8 for a native AVX-512 build on an Intel CPU, whose GCC tunings (skylake-avx512, icelake,
    #: sapphirerapids…) prefer 256-bit registers where AMD's take 512 (``this_machine``). Not part of the name: the
    #: same kernels, one loop compiled otherwise.
    compiled_lanes: int = 0
    #: AVX512_BF16 compiled in (``avx512`` alone): ggml's BF16 products then take ``_mm512_dpbf16_ps``
    #: (``ggml_quants``). Not part of the name, as ``compiled_lanes``.
    bf16: bool = False

    @property
    def loop_lanes(self) -> int:
        """The lanes a plain C loop of ggml's was vectorised with in this build (``compiled_lanes``)."""
        return self.compiled_lanes or self.lanes

    @property
    def name(self) -> str:
        """What ``--arithmetic llama.cpp:NAME`` takes and ``run --json``/``verify`` print: ``avx2``,
        ``avx512:nollamafile``…"""
        return self.isa if self.tinyblas else f"{self.isa}:nollamafile"

    @property
    def described(self) -> str:
        no_bf16 = ", no AVX512_BF16" if self.isa == "avx512" and not self.bf16 else ""
        return f"{_ISA[self.isa]}{no_bf16}{'' if self.tinyblas else ', llamafile off'}"


_ISA = {"avx2": "x86-64 AVX2 + FMA + F16C, 8 float32 lanes", "avx512": "x86-64 AVX-512, 16 float32 lanes"}
AVX2 = KernelPath("avx2", 8)
AVX512 = KernelPath("avx512", 16, bf16=True)
PATHS = {p.name: p for base in (AVX2, AVX512) for p in (base, replace(base, tinyblas=False))}


@dataclass(frozen=True)
class Unemulated:
    """A build whose arithmetic no emulated path is: ``build`` says what it is, ``reason`` why none fits."""

    build: str
    reason: str

    def __str__(self) -> str:
        return (f"--arithmetic llama.cpp: {self.build} computes in {self.reason}, which streamed does not emulate — "
                f"the paths it emulates are {', '.join(f'{n} ({p.described})' for n, p in PATHS.items() if p.tinyblas)}"
                f"; name one (--arithmetic llama.cpp:avx2) to compute as that build would")


@dataclass(frozen=True)
class Chosen:
    """The path a run computes in, and how it was chosen (``source``: the build's report, the CPU, or the user)."""

    path: KernelPath
    source: str


#: The weight types a llama.cpp build on each path moves, by default, into another layout to multiply in kernels of
#: their own (ggml's "extra buffer types", ``use_extra_bufts``; ``ggml-cpu/repack.cpp``'s
#: ``ggml_repack_get_optimal_repack_type`` for x86: AVX2 and up, and AVX-512 for Q2_K), summing in another order than
#: the type's ``vec_dot`` that ``--arithmetic llama.cpp`` computes; ``llama-cli --no-repack`` turns them off.
REPACKED = {"avx2": ("IQ4_NL", "MXFP4", "Q4_0", "Q4_K"), "avx512": ("IQ4_NL", "MXFP4", "Q2_K", "Q4_0", "Q4_K")}
#: The weight types a build with AMX_INT8 moves into AMX tiles by default (``ggml-cpu/amx/common.h``,
#: ``qtype_has_amx_kernels``), before the repacking above.
AMX_TYPES = ("IQ4_XS", "Q4_0", "Q4_1", "Q4_K", "Q5_K", "Q6_K", "Q8_0")


def repacked(types, path: KernelPath, amx: bool) -> list[str]:
    """The types among ``types`` (``Q4_K``…) whose products llama.cpp, with its defaults, computes in repacked
    layouts on ``path`` (``amx``: a build with AMX_INT8) — which ``--arithmetic llama.cpp`` does not: it is llama.cpp's
    arithmetic with repacking off. Sorted. (Where a weight's shape does not fit the layout llama.cpp leaves it as
    stored: Q4_0 with output rows a multiple of 8, say; every model's projections fit.)"""
    moved = set(REPACKED[path.isa]) | (set(AMX_TYPES) if amx and path.isa == "avx512" else set())
    return sorted(set(types) & moved)


def has_amx() -> bool:
    """Whether the llama.cpp on this machine has AMX_INT8 compiled in: its report says (``llama_cpp_report``); without
    one, a native build has it where the CPU has AMX-INT8 and AVX-512 VNNI (GCC's ``-march=native``)."""
    report = llama_cpp_report()
    if report is not None:
        return features(report).get("AMX_INT8", False)
    return {"amx_int8", "avx512_vnni"} <= cpu_flags(_read_cpuinfo())


def named(text: str) -> KernelPath | None:
    """The path ``--arithmetic llama.cpp:TEXT`` names (``avx2``, ``avx512``, ``avx2:nollamafile``…), or None."""
    return PATHS.get(text.strip().lower())


def features(report: str) -> dict[str, bool]:
    """``llama_print_system_info``'s ``NAME = 0|1`` pairs (``CPU : SSE3 = 1 | AVX = 1 | AVX2 = 1 | …``)."""
    return {k.upper(): v == "1" for k, v in re.findall(r"([A-Za-z0-9_]+)\s*=\s*([01])", report)}


def from_report(report: str, build: str = "the llama.cpp build on this machine") -> KernelPath | Unemulated:
    """The path a llama.cpp build computes in, from what it reports of itself (``llama_print_system_info``):
    AVX-512 wherever it was compiled in (ggml's kernels take the widest registers), else AVX2 with FMA and F16C;
    LLAMAFILE says whether tinyBLAS takes float products of several rows, AVX512_BF16 whether ``dpbf16`` takes
    BF16's."""
    f = features(report)
    tiny = f.get("LLAMAFILE", False)
    if f.get("AVX512"):
        return KernelPath("avx512", 16, tiny, bf16=f.get("AVX512_BF16", False))
    if f.get("AVX2") and f.get("FMA") and f.get("F16C"):
        return KernelPath("avx2", 8, tiny)
    on = [k for k, v in f.items() if v and k not in ("LLAMAFILE", "OPENMP", "REPACK", "KLEIDIAI")]
    if any(k.startswith(("NEON", "SVE", "ARM", "DOTPROD", "MATMUL_INT8")) for k in on):
        why = "ARM's NEON kernels"
    elif f.get("AVX2") or f.get("AVX"):
        why = f"x86-64 kernels without {' and '.join(k for k in ('FMA', 'F16C') if not f.get(k))}"
    else:
        why = f"kernels for {', '.join(on) or 'no vector instruction set it names'}"
    return Unemulated(f"{build} ({' '.join(on) or 'no SIMD'})", why)


def from_cpu(flags: set[str], machine: str) -> KernelPath | Unemulated:
    """The path a native build of llama.cpp (``GGML_NATIVE``, its default: ``-march=native``) compiles for a CPU with
    these ``/proc/cpuinfo`` flags, with llamafile on (its default) and AVX512_BF16 where the CPU has it."""
    if machine not in ("x86_64", "AMD64", "amd64"):
        return Unemulated(f"a native llama.cpp build on this {machine} CPU", "that architecture's kernels")
    if {"avx512f", "avx512dq"} <= flags:
        return AVX512 if "avx512_bf16" in flags else replace(AVX512, bf16=False)
    if {"avx2", "fma", "f16c"} <= flags:
        return AVX2
    missing = sorted({"avx2", "fma", "f16c"} - flags)
    return Unemulated("a native llama.cpp build on this x86-64 CPU", f"x86-64 kernels without {', '.join(missing)}")


def cpu_flags(cpuinfo: str) -> set[str]:
    """The first ``flags`` line of ``/proc/cpuinfo``."""
    m = re.search(r"^flags\s*:\s*(.*)$", cpuinfo, re.M)
    return set(m.group(1).split()) if m else set()


def cpu_vendor(cpuinfo: str) -> str:
    """``/proc/cpuinfo``'s first ``vendor_id`` (``GenuineIntel``, ``AuthenticAMD``), or empty."""
    m = re.search(r"^vendor_id\s*:\s*(\S+)", cpuinfo, re.M)
    return m.group(1) if m else ""


def native_tuning(path: KernelPath, vendor: str) -> KernelPath:
    """``path`` as a native build (``-march=native``) on a CPU of ``vendor`` compiles it: GCC's tunings for Intel's
    AVX-512 cores prefer 256-bit registers for the loops it vectorises itself, so there a plain C loop of ggml's sums
    in 8 lanes (``KernelPath.compiled_lanes``); everywhere else in the path's own."""
    if path.isa == "avx512" and vendor == "GenuineIntel":
        return replace(path, compiled_lanes=8)
    return path


def cpu_name(cpuinfo: str) -> str:
    m = re.search(r"^model name\s*:\s*(.*)$", cpuinfo, re.M)
    return m.group(1).strip() if m else platform.processor() or platform.machine()


def _read_cpuinfo() -> str:
    try:
        return Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return ""


def cores() -> int:
    """The cores this process may run on: its affinity where the system has one (a container's or ``taskset``'s
    share), else the machine's count; at least 1."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0)) or 1
    return os.cpu_count() or 1


def this_host() -> tuple[set[str], str, str]:
    """This CPU's flags, its name and its architecture (reads ``/proc/cpuinfo``)."""
    info = _read_cpuinfo()
    return cpu_flags(info), cpu_name(info), platform.machine()


def runnable(path: KernelPath, flags: set[str], machine: str) -> str | None:
    """None when a CPU with these flags can run a build of ``path``; else why not, in a phrase."""
    if machine not in ("x86_64", "AMD64", "amd64"):
        return f"this {machine} CPU runs no x86-64 build"
    need = {"avx2": {"avx2", "fma", "f16c"}, "avx512": {"avx512f", "avx512dq"}}[path.isa] | (
        {"avx512_bf16"} if path.bf16 else set())
    missing = sorted(need - flags)
    return f"this CPU has no {', '.join(missing)}" if missing else None


def _library_stamp() -> str | None:
    """What names the llama.cpp build llama-cpp-python would load, found without importing it (its import is a
    tenth of a second, a whole run's start-up at small sizes): the folder it loads from (``LLAMA_CPP_LIB_PATH``, else
    the package's ``lib``, as ``llama_cpp.llama_cpp`` looks) and each shared library's name, size and time there, as
    a digest; None when llama-cpp-python is not installed or the folder holds no library."""
    folder = os.environ.get("LLAMA_CPP_LIB_PATH")
    if not folder:
        try:
            spec = importlib.util.find_spec("llama_cpp")
        except (ImportError, ValueError):
            return None
        if spec is None or not spec.origin:
            return None
        folder = str(Path(spec.origin).parent / "lib")
    try:
        files = sorted((e.name, e.stat().st_size, e.stat().st_mtime_ns) for e in os.scandir(folder)
                       if e.is_file() and re.search(r"\.(so|dylib|dll)(\.|$)", e.name))
    except OSError:
        return None
    if not files:
        return None
    return hashlib.sha256(repr((os.path.abspath(folder), files)).encode()).hexdigest()[:32]


def llama_cpp_report() -> str | None:
    """``llama_print_system_info`` of the llama.cpp that llama-cpp-python loads (it honours ``LLAMA_CPP_LIB_PATH``),
    or None when llama-cpp-python is not installed or its library does not load. Kept in the kernel cache folder
    under the build's stamp (``_library_stamp``): a build rebuilt or replaced has another stamp and is asked again; a
    cache that cannot be written is only not kept."""
    stamp = _library_stamp()
    if stamp is None:
        return None
    # Beside the compiled kernels: ``streamed/__init__`` sets the folder before any module of the package runs.
    kept = Path(os.environ.get("NUMBA_CACHE_DIR") or Path.home() / ".cache") / "llama-cpp-report" / f"{stamp}.txt"
    try:
        return kept.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        pass
    try:
        import llama_cpp
    except Exception:  # not installed, or its shared library failed to load: then the CPU decides
        return None
    try:
        report = llama_cpp.llama_print_system_info().decode("utf-8", "replace")
    except Exception:
        return None
    from .images import keep

    keep(kept, report.encode("utf-8"))
    return report


def this_machine(name: str | None = None) -> Chosen | Unemulated:
    """The path ``--arithmetic llama.cpp[:NAME]`` computes in: the one named; else the one the llama.cpp build on this
    machine reports (llama-cpp-python's); else the one a native build would compile for this CPU — each as a native
    build on this CPU compiles it (``native_tuning``; a named ``avx512`` without AVX512_BF16 where the CPU says it has
    none)."""
    info = _read_cpuinfo()
    vendor = cpu_vendor(info)
    if name:
        path = named(name)
        if path is None:  # the command line checks names first (``named``): this is a caller's mistake
            raise ValueError(f"no kernel path named {name!r}: {', '.join(PATHS)}")
        flags = cpu_flags(info)
        if path.bf16 and flags and "avx512_bf16" not in flags:
            path = replace(path, bf16=False)
        return Chosen(native_tuning(path, vendor), "named")
    report = llama_cpp_report()
    if report is not None:
        got = from_report(report)
        return Chosen(native_tuning(got, vendor), "the llama.cpp build's report") if isinstance(got, KernelPath) \
            else got
    got = from_cpu(cpu_flags(info), platform.machine())
    return Chosen(native_tuning(got, vendor), f"this CPU ({cpu_name(info)})") if isinstance(got, KernelPath) else got
