"""Float32 arithmetic as llama.cpp's C code does it, for the few settings it computes from a file's metadata in
float32 before any tensor is touched (YaRN's attention factor and DeepSeek-V2's attention scale, ``llama_context``,
``deepseek2.cpp`` and ggml's ``rope_yarn``): a document that states such a setting states the float32 llama.cpp
multiplies by, so its value read back is that float32 bit for bit.

Each operation rounds to float32 as C's ``float`` does; ``logf`` is the C library's own (llama.cpp calls libm's, and
a correctly rounded logarithm differs from it in a last bit now and then); ``fmaf`` is a product and a sum rounded
once, which GCC makes of ``a*b + c`` in ggml's CPU code (built for the host's FMA unit; llama.cpp's own library is
not, and rounds twice).

Pure: numbers in, numbers out.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from fractions import Fraction

import numpy as np

_LIBM = ctypes.CDLL(ctypes.util.find_library("m"))
_LIBM.logf.restype = ctypes.c_float
_LIBM.logf.argtypes = [ctypes.c_float]


def f32(x: float) -> float:
    """``x`` rounded to float32 (C's ``(float)x``), as a Python float: past float32's range, an infinity — a value the
    caller judges (a number too large for the language is refused with its place), never a numpy warning on the
    user's terminal."""
    with np.errstate(over="ignore"):
        return float(np.float32(x))


def logf(x: float) -> float:
    """The C library's ``logf`` of ``x`` (a float32)."""
    return float(_LIBM.logf(f32(x)))


def fmaf(a: float, b: float, c: float) -> float:
    """``a·b + c`` of three float32 values, rounded once to float32: the exact value's nearest float32, ties to the
    even one."""
    exact = Fraction(a) * Fraction(b) + Fraction(c)
    near = np.float32(float(exact))
    candidates = (np.nextafter(near, np.float32(-np.inf)), near, np.nextafter(near, np.float32(np.inf)))
    return float(min(candidates, key=lambda v: (abs(Fraction(float(v)) - exact), int(v.view(np.uint32)) & 1)))
