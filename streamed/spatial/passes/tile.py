"""``tile``: a program whose footprint exceeds the target's SRAM, PMUs or PCUs runs as tiles that each fit (ir.py,
Tiles): of its rows, of a batch's sequences, and of the head's vocabulary columns with a running arg-max.

In: the program as lowered (whole), a way to lower it again at fewer rows, the target. Out: the program unchanged
when it fits; otherwise its body at one tile's rows (and columns) and its tiles, each with what it reads and
writes. The weights are streamed to every tile or kept on chip across them, whichever moves less. Invariant: tiles
compute exactly what the whole does — rows are tiled only when the program is row-local (``row_blocker``), columns
only through column-local ops to an arg-max (``vocabulary_product``). Refused, with the numbers of its smallest tile,
only when even that does not fit.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable

from ..ir import (
    Q8_BLOCK, Access, Op, SpatialProgram, Tensor, Tile, authored, batched, column_tensors, in_tile, nbytes, row_tensors,
    rows_per_run, runs_in, sequence_of,
)
from ..target import SpatialTarget
from .cost import step_cost
from .errors import LoweringError
from .footprint import fits, over_limits
from .shapes import infer


#: Ops that compute each column of their output from the same column of their inputs: a column tile runs them over
#: its own columns alone (with two inputs, both of the tile).
COLUMN_LOCAL = frozenset({"silu", "gelu", "sigmoid", "softplus", "exp", "softcap", "scale", "copy", "add", "sub",
                          "mul"})


def row_blocker(p: SpatialProgram) -> tuple[Op, str] | None:
    """The first op a tile of rows could not compute on its own rows, and why; ``None`` when the program is
    row-local (ir.py, Tiles), so that tiles of its rows compute exactly what the whole does."""
    rows = row_tensors(p)
    per_sequence = batched(p)
    for op in p.ops:
        if not any(n in rows for n in op.inputs):
            continue
        k = op.kind
        if per_sequence and (k == "stack_rows" or k == "take_rows" and op.attr("count") == 1):
            continue  # a batched program picks and stacks its sequences: row b of a tile is one of them
        if k in ("attention", "latent_attention"):
            own = [n for n in op.inputs[1:3] if n in rows]
            if own:
                name = authored(own[0])
                return op, (f"its attention reads `{name}`, computed from the step's own rows, not a cache: a tile of "
                            f"rows would attend over its own rows only (declare `{name}` a state of ctx rows and "
                            f"`Set row` it)")
        elif k in ("matmul", "matmul_q8") and any(n in rows for n in op.inputs[1:]):
            return op, f"it multiplies by `{authored(op.inputs[1])}`, computed from the step's rows"
        elif k == "assign":
            return op, f"it replaces the whole state `{authored(op.outputs[0])}` with a value of the step's rows"
        elif k in ("take_rows", "stack_rows") or k == "allgather" and op.attr("axis", -1) % len(
                p.tensor(op.inputs[0]).shape) == 0:
            return op, f"`{k}` reads rows of the whole step"
    return None


def vocabulary_product(p: SpatialProgram) -> tuple[int, frozenset[str]] | None:
    """The product column tiles can split — a product over weights whose result reaches nothing but an ``argmax``,
    through column-local ops: the head's ``logits`` — as its op index and the tensors computed from it; the widest
    when there are several, ``None`` when there is none."""
    best = None
    for i, op in enumerate(p.ops):
        if op.kind not in ("matmul", "matmul_q8") or any(p.tensor(n).role != "weight" for n in op.inputs[1:]):
            continue
        closure = {op.outputs[0]}
        ends = 0
        for later in p.ops[i + 1:]:
            if not any(n in closure for n in later.inputs):
                continue
            if later.kind == "argmax":
                ends += 1
            elif later.kind in COLUMN_LOCAL and all(n in closure for n in later.inputs):
                closure.update(later.outputs)
            else:
                ends = 0
                break
        if ends and p.output not in closure:
            width = p.tensor(op.outputs[0]).shape[-1]
            if best is None or width > best[0]:
                best = (width, i, frozenset(closure))
    return None if best is None else (best[1], best[2])


def _column_body(p: SpatialProgram, index: int, closure: frozenset[str], width: int) -> SpatialProgram:
    """The body of one column tile: the product's weights (planes and scales) ``width`` columns wide, every tensor
    computed from them re-shaped, and the ``argmax`` a ``running_argmax`` folding the column tiles."""
    tensors = {t.name: t for t in p.tensors}
    for n in p.ops[index].inputs[1:]:
        t = tensors[n]
        shape = t.shape[:-1] + (width,)
        tensors[n] = replace(t, shape=shape, bytes=nbytes(shape, t.dtype))
    ops = list(p.ops[:index])
    for op in p.ops[index:]:
        if op.kind == "argmax" and op.inputs[0] in closure:
            best = f"{op.outputs[0]}__max"
            shape = tensors[op.outputs[0]].shape
            tensors[best] = Tensor(best, shape, "f32", "intermediate", "sram", nbytes(shape, "f32"))
            op = replace(op, kind="running_argmax", outputs=(op.outputs[0], best))
        for n, s in zip(op.outputs, infer(op, lambda n: tensors[n].shape)):
            if tensors[n].shape != s:
                tensors[n] = replace(tensors[n], shape=s, bytes=nbytes(s, tensors[n].dtype))
        ops.append(op)
    return replace(p, tensors=tuple(tensors.values()), ops=tuple(ops))


def accesses(p: SpatialProgram, tile: Tile, columns: frozenset[str]) -> Tile:
    """``tile`` with what it reads and writes of the program's tensors (ir.py, Tiles) through the ops it runs: its
    rows of the row inputs and of the output; whole weights, or its columns of ``columns``; the rows of a rotation
    table at its positions; a cache's rows through its last position (from its window's first); a recurrence's whole
    state."""
    (r0, r1), cols = tile.rows, tile.cols
    ops = runs_in(p, tile, columns)
    used = {n for op in ops for n in op.inputs}
    reads: dict[str, Access] = {}
    writes: dict[str, Access] = {}
    # A batched tile's rows are whole sequences, each at its own position: it reads and writes their rows from 0.
    r0_at, r1_at = (0, r1 - r0) if batched(p) else (r0, r1)
    name = lambda n: in_tile(p, tile, n)  # noqa: E731 — the program's tensor an op of this tile names
    for t in p.tensors:
        if t.name not in used:
            continue
        if t.role == "input":
            reads[t.name] = Access(name(t.name)) if t.shape == () else Access(t.name, 0, r0, r1)
        elif t.role == "weight":
            reads[t.name] = Access(t.name, 1, *cols) if cols is not None and t.name in columns else Access(t.name)
    for op in ops:
        k = op.kind
        if k == "rope":
            for table in op.inputs[2:4]:
                reads.setdefault(table, Access(table, 0, r0_at, r1_at, True))
        elif k in ("attention", "latent_attention"):
            window = op.attr("window") if k == "attention" else None
            for cache in op.inputs[1:3]:
                rows_read = 1 if batched(p) else r1_at
                first = (rows_read - window if batched(p) else r0_at - window + 1) if window else None
                reads.setdefault(cache, Access(name(cache), 0, first, rows_read, True))
        elif k in ("gated_delta", "short_convolution"):
            state = op.inputs[3] if k == "gated_delta" else op.inputs[1]
            reads.setdefault(state, Access(name(state)))
            writes[state] = Access(name(state))
        elif k == "write_rows":
            v = p.tensor(op.inputs[2]).shape[0]
            writes[op.outputs[0]] = Access(name(op.outputs[0]), 0, 0 if batched(p) else r0, v if batched(p) else r1,
                                           True)
        elif k == "assign":
            writes[op.outputs[0]] = Access(name(op.outputs[0]))
    for t in p.tensors:
        if t.name in used and t.role in ("table", "state") and t.name not in reads:
            reads[t.name] = Access(name(t.name))
    out = p.output
    if out is not None and any(out in op.outputs for op in ops):
        writes[out] = Access(out, 0, r0, r1)
    return replace(tile, reads=tuple(reads.values()), writes=tuple(writes.values()))


def _tiled(body: SpatialProgram, rows: int, cols: int | None, columns: frozenset[str],
           whole: SpatialProgram) -> SpatialProgram:
    """``body`` (lowered at one tile's rows and columns) with its tiles over ``rows`` rows and ``cols`` columns:
    row tiles in order, each row tile's column tiles in order; ``columns`` its per-column tensors. A batched body
    also holds the states and positions of the sequences past its own (from ``whole``), which its tiles read."""
    held = {t.name for t in body.tensors}
    beyond = tuple(t for t in whole.tensors if t.name not in held and sequence_of(t.name) is not None
                   and t.role in ("state", "input"))
    body = replace(body, tensors=body.tensors + beyond, carried=whole.carried)
    step = rows_per_run(body)
    width = None if cols is None else next(body.tensor(n).shape[-1] for n in columns
                                           if body.tensor(n).role == "weight")
    tiles = []
    for r0 in range(0, rows, step):
        r = (r0, min(rows, r0 + step))
        for c in ([None] if cols is None else [(c0, min(cols, c0 + width)) for c0 in range(0, cols, width)]):
            tiles.append(accesses(body, Tile(r, c), columns))
    return replace(body, rows=rows, tiles=tuple(tiles), cols=cols)


def _even(total: int, most: int) -> int:
    """The size of ``ceil(total / most)`` tiles as even as they can be: none larger than ``most``."""
    return -(-total // -(-total // most))


def _divisor(total: int, most: int) -> int:
    """The largest tile of ``total`` rows, at most ``most``, that divides it: a batched program's tiles are all its
    body's size, because its ops pick sequence b of a tile."""
    return max(d for d in range(1, most + 1) if total % d == 0)


def _largest(ok: Callable[[int], bool], hi: int) -> int | None:
    """The largest n in [1, hi] with ``ok(n)``, for ``ok`` true up to some n and false after; ``None`` if not 1."""
    if hi < 1 or not ok(1):
        return None
    lo = 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if ok(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def tile(whole: SpatialProgram, body_at: Callable[[int], SpatialProgram], target: SpatialTarget) -> SpatialProgram:
    """The tile pass (ir.py, Tiles): ``whole`` as it is when it fits the target; otherwise tiled. ``body_at(n)`` is
    the program lowered at ``n`` rows (its ctx unchanged).

    Candidates: tiles of rows with the weights streamed to every tile, or kept on chip across them; tiles of rows
    and of the vocabulary product's columns (then each row tile reads the weights once, column by column, so the
    fewest row tiles are sought first, then the widest columns that keep them). Each is the largest that fits SRAM
    and PMUs; the one that moves the fewest bytes a step (weights and caches re-read per tile) wins, the fewest
    tiles on a tie. A program whose smallest tile does not fit is refused with the numbers of that tile."""
    if fits(whole, target):
        return whole
    rows = whole.rows
    blocker = row_blocker(whole)
    product = vocabulary_product(whole)
    most_rows = rows if blocker is None else 1  # without row locality, one row tile: the whole rows
    even = _divisor if batched(whole) else _even

    def body(n: int, width: int | None = None, on_chip: bool = False) -> SpatialProgram:
        p = whole if n == rows else body_at(n)
        if width is not None:
            p = _column_body(p, *vocabulary_product(p), width)
        return replace(p, weights_on_chip=on_chip)

    def rows_of(n: int) -> int:  # ``n`` counted from the whole when rows cannot be tiled
        return n if blocker is None else rows

    plans: list[SpatialProgram] = []
    if blocker is None and rows > 1:
        for on_chip in (False, True):
            n = _largest(lambda n: fits(body(n, None, on_chip), target), rows)
            if n is not None:
                plans.append(_tiled(body(even(rows, n), None, on_chip), rows, None, frozenset(), whole))
    if product is not None:
        width = whole.tensor(whole.ops[product[0]].outputs[0]).shape[-1]
        narrow = min(width, Q8_BLOCK)
        n = _largest(lambda n: fits(body(rows_of(n), narrow), target), most_rows)
        if n is not None:
            n = even(rows, rows_of(n))
            blocks = _largest(lambda b: fits(body(n, min(width, b * Q8_BLOCK)), target), -(-width // Q8_BLOCK))
            cols = _even(width, min(width, blocks * Q8_BLOCK))
            if cols < width:
                p = body(n, cols)
                columns = column_tensors(p, frozenset(p.ops[product[0]].inputs[1:]))
                plans.append(_tiled(p, rows, width, columns, whole))
    if plans:
        return min(plans, key=lambda p: (*_seconds(p, target), len(p.tiles)))
    # Refused: the smallest tile, measured.
    if blocker is not None and product is None:
        op, why = blocker
        over = over_limits(whole, target)
        raise LoweringError.of([type(e)(f"{e.why}, and its rows cannot be tiled: {why}", e.statement, e.binder)
                                for e in over])
    smallest = body(rows_of(1), min(whole.tensor(whole.ops[product[0]].outputs[0]).shape[-1], Q8_BLOCK)
                    if product is not None else None)
    how = "" if rows == 1 and product is None else "even in tiles of one row" if blocker is None else \
        "even in tiles of its columns"
    raise LoweringError.of(over_limits(smallest, target, how))


def _seconds(p: SpatialProgram, target: SpatialTarget) -> tuple[float, float]:
    """A step's roofline time, then its memory time, for comparing tilings of one program: its weights, carried states and
    off-chip tables' rows read from HBM (where residency usually puts them), the rest from SRAM. A compute-bound step's
    tilings tie on time; the one that moves less then wins."""
    cost = step_cost(p)
    memory = (cost["weights"] + cost["states"] + cost["tables"]) / target.hbm_bandwidth \
        + cost["sram"] / target.sram_bandwidth
    return max(memory, cost["flops"] / target.peak_bf16), memory
