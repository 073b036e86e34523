"""Where the repository's files are, and the documents several suites share: the shipped examples, their configs,
and tiny-llama grown to any depth. Imported by name (the root ``conftest`` puts this folder on ``sys.path``)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
CONFIGS = EXAMPLES / "configs"
TINY = (EXAMPLES / "tiny-llama.lgm").read_text()
#: An AVX2 machine without AVX-512 (Haswell), as numba's code generator is told to compile for one: a kernel that takes
#: a wider form where the host has AVX-512 is compiled in its other form under these, on this host too.
HASWELL = {"NUMBA_CPU_NAME": "haswell",
           "NUMBA_CPU_FEATURES": "+64bit,+avx,+avx2,+bmi,+bmi2,+cmov,+cx16,+f16c,+fma,+lzcnt,+movbe,+popcnt,+sse,+sse2,"
                                 "+sse3,+sse4.1,+sse4.2,+ssse3"}
def own_environment(home: Path, **more: str) -> dict[str, str]:
    """This process's environment for a command of the user ``home``: no numba setting nor XDG folder of ours, no
    bytecode written beside the sources, ``more`` added."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NUMBA_", "XDG_"))}
    return {**env, "HOME": str(home), "PYTHONDONTWRITEBYTECODE": "1", **more}


#: numba's extension modules a kernel image needs (its C runtime, the Python wrapper's helpers, a threading layer),
#: which a warm run loads from their files without numba's Python (``streamed/numerics/images.py``).
NUMBA_EXTENSIONS = {"numba._helperlib", "numba._dynfunc", "numba.core.runtime._nrt_python", "numba.np.ufunc.omppool",
                    "numba.np.ufunc.workqueue", "numba.np.ufunc.tbbpool"}


def lesser_target() -> dict:
    """numba's settings to compile this host's kernels for a lesser CPU of its own architecture, whose code this host
    runs: on x86-64 a Haswell (``HASWELL``: AVX2, no AVX-512 — the forms a user's AVX2 machine runs); elsewhere
    numba's generic CPU of the architecture (``NUMBA_CPU_NAME=generic``: no optional feature at all). Never a skip:
    every host can run the code of a lesser CPU of its kind. (Not generic on x86-64: without F16C, LLVM converts fp16
    by calls into compiler-rt, ``__extendhfsf2``, which a Python process does not have — the kernels of an x86-64
    older than F16C cannot be linked, a known limit; an AArch64 CPU converts fp16 itself.)"""
    import platform

    return HASWELL if platform.machine().lower() in ("x86_64", "amd64") else {"NUMBA_CPU_NAME": "generic"}


#: A target with 10 KB of SRAM, on which the small documents' forward, prefill and batched programs need tiles.
TINY_CHIP = Path(__file__).resolve().parent / "tiny-chip.toml"


def config(name: str) -> dict:
    """The shipped ``examples/configs/NAME.json``, parsed."""
    return json.loads((CONFIGS / f"{name}.json").read_text())


def example(name: str) -> str:
    """The text of the shipped ``examples/NAME.lgm``."""
    return (EXAMPLES / f"{name}.lgm").read_text("utf-8")


def deep(src: str, n: int) -> str:
    """``src`` (tiny-llama) with its layer 0 written out ``n`` times, each renamed into its own layer's names."""
    head, rest = src.split("## Layer 0", 1)
    body0 = rest.split("## Layer 1")[0].replace("q0", "qr0")
    tail = "## Head" + src.split("## Head")[1]
    out = []
    for l in range(n):
        t = re.sub(r"\b([A-Za-z]+?)0\b", lambda m: m.group(1) + str(l), body0)
        if l > 0:
            t = re.sub(r"\bx\b", f"xo{l - 1}", t)
        out.append(f"## Layer {l}" + t)
    return head + "".join(out) + tail.replace("xo3", f"xo{n - 1}")


SIX = deep(TINY, 6)
#: Six layers; layer 4 writes its first norm's epsilon differently, so it is not one program with layers 0–3 and 5.
DIVERGENT = SIX.replace("Let xn4 be rmsnorm of xo3 with g4, epsilon 0.00001.", "Let xn4 be rmsnorm of xo3 with g4, epsilon 0.001.")
assert DIVERGENT != SIX


#: Published test configs (tests/model/configs/) with a field `streamed author` refuses — the refusal is held by
#: tests/model/test_real_configs.py — and the value it refuses: every other test reads the rest of the config.
REFUSED_FIELDS = {"deepseek-v3": ("quantization_config", "fp8"), "internlm2-chat-7b": ("rope_scaling", "dynamic")}


def without_refused(name: str, cfg: dict) -> dict:
    """``cfg`` (the published config ``name``) without the field ``streamed`` refuses in it, if any."""
    field = REFUSED_FIELDS.get(name, (None,))[0]
    return {k: v for k, v in cfg.items() if k != field}
