"""Float arithmetic written out exactly: a value rounded to float32 (or float64) from an exact rational, so a test can
state an order of float operations — each rounding where a kernel rounds — with no float arithmetic of its own."""

from fractions import Fraction


def _round(q: Fraction, digits: int, lowest: int) -> Fraction:
    """``q`` rounded to the nearest binary float of ``digits`` significant bits whose exponent is at least ``lowest``
    (subnormals below it), ties to even."""
    if q == 0:
        return Fraction(0)
    sign = -1 if q < 0 else 1
    a = abs(q)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    while Fraction(2) ** e > a:
        e -= 1
    while Fraction(2) ** (e + 1) <= a:
        e += 1
    ulp = Fraction(2) ** (max(e, lowest) - (digits - 1))
    n, rest = divmod(a, ulp)
    if rest > ulp / 2 or (rest == ulp / 2 and n % 2 == 1):
        n += 1
    return sign * n * ulp


def round_f32(q: Fraction) -> Fraction:
    """``q`` rounded to the nearest float32, ties to even — exactly, with no float arithmetic in between."""
    return _round(q, 24, -126)


def round_f64(q: Fraction) -> Fraction:
    """``q`` rounded to the nearest float64, ties to even."""
    return _round(q, 53, -1022)
