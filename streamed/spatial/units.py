"""Sizes as people read them: ``2.06 TB``, ``432 MB``, ``207 KB`` — decimal units, as vendors quote them (and as
``target.py`` reads a target's figures), three significant digits.

A refusal compares what a program needs with what the target has, and the two must never read alike when they
differ: ``beside(need, have)`` writes them with as many digits as it takes to tell them apart (``1.2 MB`` against
``1 MB``; ``1.0004 MB`` against ``1 MB``).
"""

from __future__ import annotations

_UNITS = (("TB", 10**12), ("GB", 10**9), ("MB", 10**6), ("KB", 10**3))


def _unit(n: float) -> tuple[str, int]:
    return next(((u, s) for u, s in _UNITS if abs(n) >= s), ("B", 1))


def _digits(x: float, significant: int) -> str:
    text = f"{x:.{significant}g}"
    if "e" in text:  # 1e+03 of a unit is written out: 1000 MB, never 1e+03 MB
        text = f"{x:.0f}"
    return text


def size(n: float, significant: int = 3) -> str:
    """``n`` bytes in the largest decimal unit it reaches: ``size(2.06e12) == "2.06 TB"``."""
    unit, scale = _unit(n)
    if unit == "B":
        return f"{int(n)} B"
    return f"{_digits(n / scale, significant)} {unit}"


def beside(need: float, have: float) -> tuple[str, str]:
    """``need`` and ``have`` as ``size`` writes them — unless two different numbers would then read alike, when both
    are written in the unit of the larger with the fewest digits that tell them apart."""
    a, b = size(need), size(have)
    if a != b or need == have:
        return a, b
    unit, scale = _unit(max(need, have))
    for significant in range(4, 16):
        a, b = (_digits(v / scale, significant) for v in (need, have))
        if a != b:
            break
    return (f"{a} {unit}", f"{b} {unit}")
