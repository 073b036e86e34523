"""What a step of a program costs: the bytes each op moves per tier (``traffic``: what it reads of each input, what it
writes of each output) and, summed over its tiles on its fullest chip, its FLOPs and bytes by what they are
(``step_cost``: weights, carried states, on chip, over the link) — what ``place`` records per op, what ``tile``
compares tilings by, and what the residency's roofline estimate is made of.

A step is charged what it reads, not what it holds: an expert bank the experts its rows choose, an embedding table
its tokens' rows, a windowed cache its window; a tiled program pays for its tiling.
"""

from __future__ import annotations

from ..ir import Op, SpatialProgram, Tensor, Tile, column_tensors, q8_scales, row_tensors, rows_per_run, runs_in
from .shapes import flops_of, keys_reached


def read_fraction(op: Op, name: str, tensors: dict[str, Tensor]) -> float:
    """The part of input ``name`` an op reads per step: all of it, except
    - an expert's weights, of which a step reads the experts its rows choose (at most ``rows · top`` of E);
    - an embedding table, of which a lookup reads the rows of its tokens (``rows`` of ``vocab``);
    - the state a ``write_rows`` updates in place: it reads none of it (the new rows are its write);
    - the keys and values of a windowed (or chunked) attention: the last ``W + rows − 1`` positions;
    - a rotation's tables: the rows of its positions (``rows`` of ``ctx``).
    An estimate that charged the whole table or cache would bound decode below what the weights allow."""
    if op.kind == "rope" and name in op.inputs[2:4]:
        return min(1.0, tensors[op.inputs[0]].shape[0] / max(tensors[name].shape[0], 1))
    if op.kind == "lookup" and name in op.inputs[1:]:
        return min(1.0, tensors[op.outputs[0]].shape[0] / max(tensors[op.inputs[1]].shape[0], 1))
    if op.kind == "write_rows" and name == op.inputs[0]:
        return 0.0
    if op.kind == "attention" and name in op.inputs[1:3]:
        # A window (or chunk) of W keys: the rows' queries reach the last W + rows − 1 positions of the cache.
        keys, rows = tensors[name].shape[0], tensors[op.inputs[0]].shape[0]
        return min(1.0, (keys_reached(op) + rows - 1) / max(keys, 1))
    if op.kind != "experts" or name not in _expert_banks(op) and name not in _expert_biases(op):
        return 1.0
    experts = tensors[op.inputs[2]].shape[0]
    rows = tensors[op.inputs[0]].shape[0]
    return min(1.0, rows * op.attr("top", 1) / experts)


def written_bytes(op: Op, name: str, tensors: dict[str, Tensor]) -> int:
    """Bytes an op writes to output ``name`` per step: all of it, except a ``write_rows``, which writes only its new
    rows into the state it updates in place."""
    t = tensors[name]
    if op.kind == "write_rows":
        return t.bytes * tensors[op.inputs[2]].shape[0] // max(t.shape[0], 1)
    return t.bytes


def _expert_banks(op: Op) -> tuple[str, ...]:
    """An ``experts`` op's banks G, U and D as it reads them: dense, or the planes and scales of each."""
    scales = q8_scales(op)
    return tuple(n for i in (2, 3, 4) for n in (op.inputs[i], scales.get(i)) if n is not None)


def _expert_biases(op: Op) -> tuple[str, ...]:
    optional = op.attr("optional", ())
    return tuple(n for n, a in zip(op.inputs[5:], optional) if a in ("bias_gate", "bias_up", "bias_down"))


def traffic(op: Op, tensors: dict[str, Tensor]) -> dict[str, int]:
    """Bytes an op moves per tier: what ``read_fraction`` says it reads of each input and what ``written_bytes``
    says it writes (attention reads its cache at full context)."""
    moved: dict[str, int] = {}
    for n in op.inputs:
        t = tensors[n]
        moved[t.tier] = moved.get(t.tier, 0) + int(t.bytes * read_fraction(op, n, tensors))
    for n in op.outputs:
        t = tensors[n]
        moved[t.tier] = moved.get(t.tier, 0) + written_bytes(op, n, tensors)
    return moved


def step_cost(p: SpatialProgram) -> dict:
    """One step of a program on its fullest chip: FLOPs, and bytes moved by what they are — ``weights``, carried
    ``states``, rows of ``tables`` held off chip, the rest on chip (``sram``) and all-reduced over the link
    (``link``) — summed over its tiles.

    Each tile does its rows' (and columns') share of the work; it reads the weights it uses (a column tile its
    columns; nothing after the first tile when they stay on chip); its attention reads the cache rows it needs,
    through its last row at full context (``W + rows − 1`` of them with a window); a recurrence reads and writes its
    whole state. So a tiled program's cost shows the price of its tiling."""
    chips = range(p.tp) if p.tp > 1 else (None,)
    tensors = {t.name: t for t in p.tensors}
    shape = lambda n: tensors[n].shape
    carried = set(p.carried)
    tiles = p.tiles or (Tile((0, p.rows)),)
    body_rows, width = rows_per_run(p), p.tile_cols
    per_row, per_col = row_tensors(p), column_tensors(p)
    best = None
    for c in chips:
        mine = [op for op in p.ops if c is None or op.chip in (None, c)]
        cost = {"flops": 0, "weights": 0, "states": 0, "tables": 0, "sram": 0, "link": 0}
        for i, t in enumerate(tiles):
            n = t.rows[1] - t.rows[0]
            share = n / body_rows
            col_share = (t.cols[1] - t.cols[0]) / width if t.cols is not None else 1.0

            def part(name: str) -> float:
                """The share of the body's ``name`` this tile holds."""
                return (share if name in per_row else 1.0) * (col_share if name in per_col else 1.0)

            running = {id(op) for op in runs_in(p, t, per_col)}  # by identity: comparing ops field by field is O(n²)
            for op in mine:
                if id(op) not in running:
                    continue
                reads_cols = any(x in per_col for x in op.inputs)
                cost["flops"] += flops_of(op, shape) * share * (col_share if reads_cols else 1.0)
                if op.kind == "allreduce":
                    cost["link"] += tensors[op.outputs[0]].bytes * share * 2 * (p.tp - 1) // p.tp
                for name in op.inputs:
                    tensor = tensors[name]
                    moved = tensor.bytes * read_fraction(op, name, tensors) * part(name)
                    if tensor.role == "weight":
                        cost["weights"] += 0 if p.weights_on_chip and i else moved
                    elif op.kind in ("attention", "latent_attention") and name in op.inputs[1:3] and p.tiles:
                        keys = tensor.shape[0]
                        reach = min(keys_reached(op) + n - 1, t.rows[1] + keys - p.rows) if op.kind == "attention" \
                            else t.rows[1] + keys - p.rows
                        cost["states" if name in carried else "sram"] += tensor.bytes * min(1.0, reach / keys)
                    elif tensor.role == "table":
                        cost["sram" if tensor.tier == "sram" else "tables"] += moved * share
                    else:
                        cost["states" if name in carried else "sram"] += moved
                for name in op.outputs:
                    written = written_bytes(op, name, tensors) * (share if op.kind == "write_rows" else part(name))
                    cost["states" if name in carried else "sram"] += written
        cost = {k: (v if k == "flops" else int(v)) for k, v in cost.items()}
        cost["flops"] = int(cost["flops"])
        if best is None or cost["flops"] > best["flops"]:
            best = cost
    return best
