"""Which states a program holds as rings, and how long each ring is (LANGUAGE §8, "A windowed cache").

A state declared ``ctx by …``, written only by ``Set row P of S to …`` and read only as the keys or values of
``attention … window W`` (or ``chunks of C``) is never read more than ``W`` positions back from the row that reads
it. So it holds only the positions a step reads: a **ring** of

    L = min(ctx, reach + rows − 1)

rows, position ``p`` at row ``p mod L`` — ``reach`` the widest window (or chunk) that reads it, ``rows`` the most
rows one step of the sequence writes (a prefill chunk; 1 for decode and for each sequence of a batch). A step of R
rows at positions ``P … P+R−1`` first writes its R rows and then each row ``P+r`` reads back as far as
``P+r−reach+1``: the oldest position read, ``P−reach+1``, and the newest written, ``P+R−1``, are ``reach + R − 1``
apart inclusive, so a ring of that many rows still holds every position read when the last row has been written
(tests/numerics/test_rings.py holds it against a plain cache of ctx rows). A chunked attention's row ``P+r`` reads
from ``⌊(P+r)/C⌋·C``, at most ``C − 1`` back: the same bound with ``reach = C``.

A state with any other reader or writer (``Set S to …``, a product, an unwindowed attention) keeps all ``ctx`` rows, and
so does the other of an attention's keys and values (one attention reads both alike); so does a ring that would be as
long (``L = ctx``: ``p mod ctx = p``). The rule reads the program alone, so every layer of a kind — one program up to
names — holds the same rings (kinds are unchanged by it).
"""

from __future__ import annotations

from ..lang.syntax import Binary, Call, Declaration, Let, Name, Number, Return, Set
from .program import Program


def ring_lengths(program: Program, constants: dict[str, float], ctx: int, rows: int) -> dict[str, int]:
    """The states of ``program`` held as rings shorter than ``ctx``, each with its rows ``L`` (module docstring);
    ``rows``: the most rows a step of the sequence writes."""
    candidates = {d.name for d in program.decls.values() if d.role == "state" and d.shape and d.shape[0] == "ctx"}
    reach: dict[str, int] = {}
    other: set[str] = set()
    pairs: list[tuple[str, ...]] = []  # the keys and values of each windowed attention: rings both, or neither

    def number(n) -> int:
        return int(n.value if isinstance(n, Number) else constants.get(n.text, 0))

    def walk(e, keys_of: int | None = None) -> None:
        if isinstance(e, Name):
            if e.text in candidates:
                if keys_of is None:
                    other.add(e.text)
                else:
                    reach[e.text] = max(reach.get(e.text, 0), keys_of)
        elif isinstance(e, Binary):
            walk(e.left)
            walk(e.right)
        elif isinstance(e, Call):
            window = _window(e, number) if e.op == "attention" else None
            for slot, arg in e.args:
                walk(arg, window if slot in ("K", "V") else None)
            if window is not None:
                pairs.append(tuple(a.text for a in (e.arg("K"), e.arg("V")) if isinstance(a, Name)))

    for st in program.statements:
        if isinstance(st, Set):
            if st.row is None:
                other.add(st.target.text)
            walk(st.value)
        elif isinstance(st, Let) and not isinstance(st.value, Declaration):
            walk(st.value)
        elif isinstance(st, Return):
            walk(st.name)
    for pair in pairs:
        if other & set(pair):
            other.update(pair)
    out = {}
    for name, w in reach.items():
        if name not in other and w > 0:
            length = min(ctx, w + max(rows, 1) - 1)
            if length < ctx:
                out[name] = length
    return out


def _window(call: Call, number) -> int | None:
    """How far back one row of an attention reads (its window, or its chunk: the nearer), or ``None`` when it reads
    every cached position."""
    reaches = [number(call.number(slot)) for option, slot in (("window", "W"), ("chunks of", "C"))
               if option in call.options and call.number(slot) is not None]
    return min(reaches) if reaches else None
