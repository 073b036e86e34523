"""JSON as every reader of ``streamed`` takes it (a ``config.json``, a bundle's manifest and programs): strict JSON in
UTF-8 (a byte-order mark allowed), nested at most ``MAX_JSON_DEPTH`` deep, numbers that are finite.

Why not plain ``json.loads``: it recurses once per level of nesting (a file nested 100,000 deep is a
``RecursionError``), raises a bare ``ValueError`` for an integer of more than 4,300 digits, and accepts ``NaN``,
``Infinity`` and ``1e400`` (infinity) — none of which a strict parser (jq, ``JSON.parse``, serde) calls JSON. Here
each is one ``JsonError`` whose message says what is wrong and where; the caller puts its path before it.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from .limits import MAX_JSON_DEPTH


class JsonError(ValueError):
    """Text that is not JSON this tool reads: the message says why, and where (line and column) when it can."""


#: A JSON string (as the scanner reads it) or a bracket: what the depth scan steps through.
_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.S)


def _depth_past_limit(text: str) -> int | None:
    """The offset where nesting first goes past ``MAX_JSON_DEPTH``, found without recursion, or ``None``.

    Strings are stepped over as JSON's scanner reads them, so a bracket inside one does not count; where the text is
    not JSON at all the count may be off, but ``json.loads`` then fails before it gets as deep."""
    if text.count("[") + text.count("{") <= MAX_JSON_DEPTH:
        return None
    depth = 0
    for m in _TOKENS.finditer(text):
        c = m.group()
        if c in "[{":
            depth += 1
            if depth > MAX_JSON_DEPTH:
                return m.start()
        elif c in "]}":
            depth -= 1
    return None


def _where(text: str, offset: int) -> str:
    line = text.count("\n", 0, offset) + 1
    return f"line {line}, column {offset - (text.rfind(chr(10), 0, offset) + 1) + 1}"


def _finite(s: str) -> float:
    v = float(s)
    if not math.isfinite(v):
        raise JsonError(f"the number {s[:40]} is too large for a 64-bit float")
    return v


def _not_json(name: str):
    raise JsonError(f"{name} is not JSON (a strict reader refuses it); write a number")


def loads(data: str | bytes) -> Any:
    """The value of a JSON text, or ``JsonError`` saying why it is not one."""
    if isinstance(data, (bytes, bytearray)):
        try:
            text = bytes(data).decode("utf-8-sig")  # a byte-order mark, as Windows editors write, is not JSON
        except UnicodeDecodeError as e:
            raise JsonError(f"not UTF-8 text (byte {e.start} is 0x{data[e.start]:02x})") from None
    else:
        text = data.removeprefix("\ufeff")
    deep = _depth_past_limit(text)
    if deep is not None:
        raise JsonError(f"nested more than {MAX_JSON_DEPTH} deep at {_where(text, deep)}; streamed reads JSON nested "
                        f"at most {MAX_JSON_DEPTH} levels")
    try:
        return json.loads(text, parse_float=_finite, parse_constant=_not_json)
    except JsonError:
        raise
    except json.JSONDecodeError as e:
        raise JsonError(f"not JSON: {e.msg} at line {e.lineno}, column {e.colno}") from None
    except RecursionError:  # the scan above makes this unreachable for JSON; kept so that no input escapes
        raise JsonError(f"nested too deep; streamed reads JSON nested at most {MAX_JSON_DEPTH} levels") from None
    except ValueError as e:  # an integer of more digits than Python converts (4,300)
        raise JsonError(f"not JSON this tool reads: {str(e).split(';')[0]}") from None


def dumps(value: Any, **options) -> str:
    """``value`` as strict JSON: ``ValueError`` rather than a bare ``NaN`` or ``Infinity`` no strict parser reads."""
    return json.dumps(value, allow_nan=False, **options)
