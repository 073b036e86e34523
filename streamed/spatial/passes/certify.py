"""``certify``: the proof a program is what the IR says it is, and fits the target — or a refusal with numbers.

In: a placed program, the target, and the names its document declares. Out: the program with its ``certificate``. Every
tensor bound exactly once, every value written in a phase before the one that reads it (the schedule is the phases),
shapes re-inferred op by op and equal to the declared ones, rings that hold what their step reads, tiles that cover
every row once and compute on their own rows, the program's own footprint (one tile's: its tables, inputs and
intermediates, per chip) within the target's SRAM, PMUs and PCUs, and its placement on each chip's units as long as
each op's PCUs and each buffer's PMUs, no unit given twice. Refused with numbers otherwise — for every limit exceeded,
each on the statement that takes most of it.
"""

from __future__ import annotations

from dataclasses import replace

from ..ir import COLLECTIVES, Access, Op, SpatialProgram, Tensor, batched, column_tensors, rows_per_run
from ..target import SpatialTarget
from .errors import LoweringError
from .footprint import (
    buffers, fullest_chip, held_by_ops, ops_per_chip, over_limits, own_bytes, pmus_needed, sram_footprint,
)
from .shapes import infer, keys_reached
from .tile import COLUMN_LOCAL, row_blocker


def _in_phase_order(program: SpatialProgram, tensors: dict[str, Tensor]) -> None:
    """★ THE SCHEDULE IS THE PHASES. An executor (and the chip) runs ops by phase (ir.py), so a value must be
    written in a phase before the one that reads it — or earlier in the same phase, except by a collective, which
    waits for every chip's earlier phases — and the ops that touch one state keep their list order. Refused naming
    the reader, the value and both phases: an all-reduce scheduled ahead of its partial sums would read nothing."""
    writer: dict[str, tuple[int, Op]] = {}
    touches: dict[str, list[tuple[int, Op]]] = {}
    for i, op in enumerate(program.ops):
        for n in op.outputs:
            if tensors.get(n) is not None and tensors[n].role == "state":
                continue
            writer.setdefault(n, (i, op))
        for n in {*op.inputs, *op.outputs}:
            if tensors.get(n) is not None and tensors[n].role == "state":
                touches.setdefault(n, []).append((i, op))
    for i, op in enumerate(program.ops):
        collective = op.kind in COLLECTIVES
        for n in op.inputs:
            if n not in writer:
                continue
            j, w = writer[n]
            if w.phase > op.phase or (w.phase == op.phase and (collective or j > i)):
                when = "the same phase" if w.phase == op.phase else f"the later phase {w.phase}"
                raise LoweringError(f"`{op.kind}` in phase {op.phase} reads `{n}`, which `{w.kind}` writes in {when}"
                                    + (": a collective reads what every chip wrote in earlier phases" if collective
                                       and w.phase == op.phase else ""), op.statement)
    for n, ops in touches.items():
        for (i, a), (j, b) in zip(ops, ops[1:]):
            if b.phase < a.phase:
                raise LoweringError(f"`{b.kind}` in phase {b.phase} touches the state `{n}` before `{a.kind}` in "
                                    f"phase {a.phase}, which comes first in the program", b.statement)


def _certify_tiles(program: SpatialProgram, tensors: dict[str, Tensor]) -> None:
    """The tiles cover every row (and column) exactly once, in order, none larger than the body; the body computes
    on a tile's rows alone when there are several row tiles, and on a tile's columns alone when column-tiled."""
    body_rows = rows_per_run(program)
    groups: list[tuple[tuple[int, int], list]] = []
    for t in program.tiles:
        if groups and groups[-1][0] == t.rows:
            groups[-1][1].append(t.cols)
        else:
            groups.append((t.rows, [t.cols]))
    at = 0
    for (r0, r1), cols in groups:
        if r0 != at or r1 <= r0:
            raise LoweringError(f"its tiles cover rows {r0} to {at - 1} twice" if r0 < at else
                                f"its tiles cover rows {at} to {r0 - 1} never" if r0 > at else
                                f"a tile covers the empty rows {r0} to {r1}")
        if r1 - r0 > body_rows or (r1 - r0 != body_rows and batched(program)):
            raise LoweringError(f"the tile of rows {r0} to {r1 - 1} is {'larger than' if r1 - r0 > body_rows else 'not'}"
                                f" its body's {body_rows} rows")
        at = r1
        if program.cols is not None:
            width = program.tile_cols
            c_at = 0
            for c in cols:
                if c is None or c[0] != c_at or c[1] <= c[0] or c[1] - c[0] > width:
                    raise LoweringError(f"the column tiles of rows {r0} to {r1 - 1} do not cover columns 0 to "
                                        f"{program.cols - 1} once each, in order, {width} at most each")
                c_at = c[1]
            if c_at != program.cols:
                raise LoweringError(f"the column tiles of rows {r0} to {r1 - 1} stop at column {c_at} of "
                                    f"{program.cols}")
        elif cols != [None]:
            raise LoweringError(f"its tiles cover rows {r0} to {r1 - 1} twice" if set(cols) == {None}
                                else "a tile has columns but the program is not column-tiled")
    if at != program.rows:
        raise LoweringError(f"its tiles cover rows 0 to {at - 1} of {program.rows}")
    if len(groups) > 1:
        blocker = row_blocker(program)
        if blocker is not None:
            raise LoweringError(f"its rows are tiled but {blocker[1]}", blocker[0].statement)
    columns = column_tensors(program)
    for op in program.ops:
        if any(n in columns for n in op.inputs):
            product = op.kind in ("matmul", "matmul_q8") and op.inputs[0] not in columns
            if not (product or op.kind == "running_argmax" or op.kind in COLUMN_LOCAL
                    and all(n in columns for n in op.inputs)):
                raise LoweringError(f"`{op.kind}` reads the column tile `{op.inputs[0]}` but needs every column",
                                    op.statement)
    out = program.output
    for t in program.tiles:
        if out is not None and Access(out, 0, *t.rows) not in t.writes:
            raise LoweringError(f"the tile of rows {t.rows[0]} to {t.rows[1] - 1} does not write its rows of `{out}`")


def _certify_rings(program: SpatialProgram, tensors: dict[str, Tensor]) -> None:
    """★ A RING HOLDS WHAT ITS STEP READS (LANGUAGE §8). A state written as a ring is read only as a ring, by an
    attention over the same context; each such attention's keys and values hold at least the ``reach + rows − 1``
    positions one run of its rows reads (``reach`` its window or chunk), or the whole context."""
    written = {op.outputs[0]: op.attr("ring") for op in program.ops if op.kind == "write_rows" and op.attr("ring")}
    for op in program.ops:
        for i, n in enumerate(op.inputs):
            if n not in written or op.kind == "write_rows" and i == 0:
                continue
            if op.kind != "attention" or i not in (1, 2) or op.attr("ring") != written[n]:
                raise LoweringError(f"`{op.kind}` reads the ring `{n}` as a cache of every position", op.statement)
        if op.kind == "attention" and op.attr("ring"):
            reach, rows = keys_reached(op), tensors[op.inputs[0]].shape[0]  # one run's queries: a tile's, a sequence's
            reads = "its row reads" if rows == 1 else f"its {rows} rows read"
            for n in op.inputs[1:3]:
                need = min(op.attr("ring"), reach + rows - 1)
                if n not in written or tensors[n].shape[0] < need:
                    raise LoweringError(f"attention reads `{n}` as a ring of {tensors[n].shape[0]} rows, which does "
                                        f"not hold the {need} positions {reads}", op.statement)


def _certify_placement(program: SpatialProgram, target: SpatialTarget) -> None:
    """Where ``place`` put the program is where it fits (ir.py, Placement): on each chip every op that runs there has
    one range of PCUs as long as its ``pcus``, the buffers are exactly ``footprint.buffers``'s, each with its PMUs,
    and no two ranges share a unit or pass the target's."""
    if program.placement is None:
        raise LoweringError("it is not placed: no op has its PCUs, no buffer its PMUs")
    for c in (range(program.tp) if program.tp > 1 else (None,)):
        ops, bufs = program.placement.on(c)
        where = f" on chip {c}" if c is not None else ""
        runs = [i for i, op in program.schedule() if c is None or op.chip in (None, c)]
        if sorted(i for i, _, _ in ops) != sorted(runs):
            raise LoweringError(f"its placement{where} does not give each of its {len(runs)} ops one range of PCUs")
        for i, a, b in ops:
            if b - a != program.ops[i].pcus:
                raise LoweringError(f"its placement gives `{program.ops[i].kind}` {b - a} PCUs{where}, not the "
                                    f"{program.ops[i].pcus} it was assigned", program.ops[i].statement)
        if [(n, b - a) for n, a, b in bufs] != buffers(program, target, c):
            raise LoweringError(f"its placement{where} does not give each on-chip buffer the PMUs its bytes fill")
        for unit, ranges, have in (("PCU", [(a, b) for _, a, b in ops], target.pcus),
                                   ("PMU", [(a, b) for _, a, b in bufs], target.pmus)):
            ranges.sort()
            if any(b0 > a1 for (_, b0), (a1, _) in zip(ranges, ranges[1:])):
                raise LoweringError(f"its placement{where} gives one {unit} to two of its ops or buffers")
            if ranges and ranges[-1][1] > have:
                raise LoweringError(f"its ops and buffers take {ranges[-1][1]:,} {unit}s{where}; the "
                                    f"{target.name.upper()} has {have:,}")


def certify(program: SpatialProgram, target: SpatialTarget, declared: set[str] | None = None) -> SpatialProgram:
    """Every tensor bound exactly once, shapes that agree op by op, tiles that cover the program once, and a fit
    on the target — or a refusal. A program over several of the target's limits is refused for each."""
    tensors: dict[str, Tensor] = {}
    for t in program.tensors:
        if t.name in tensors:
            raise LoweringError(f"`{t.name}` is declared twice")
        tensors[t.name] = t
    _in_phase_order(program, tensors)
    available = {n for n, t in tensors.items() if t.role in ("input", "weight", "state", "table")}
    written: set[str] = set()
    for _, op in program.schedule():
        for n in op.inputs:
            if n not in tensors:
                raise LoweringError(f"`{op.kind}` reads `{n}`, which the program does not hold", op.statement)
            if n not in available:
                raise LoweringError(f"`{op.kind}` reads `{n}` before anything writes it", op.statement)
        shapes = infer(op, lambda n: tensors[n].shape)
        for n, s in zip(op.outputs, shapes):
            t = tensors.get(n)
            if t is None:
                raise LoweringError(f"`{op.kind}` writes `{n}`, which the program does not hold", op.statement)
            if t.role in ("input", "weight", "table"):
                raise LoweringError(f"`{op.kind}` writes the {t.role} `{n}`", op.statement)
            if t.role != "state":
                if n in written:
                    raise LoweringError(f"`{n}` is written twice", op.statement)
                written.add(n)
            if tuple(s) != t.shape:
                raise LoweringError(f"`{n}` is {t.shape} but `{op.kind}` makes {tuple(s)}", op.statement)
            available.add(n)
    unwritten = [n for n, t in tensors.items() if t.role in ("intermediate", "output") and n not in written]
    if unwritten:
        raise LoweringError(f"`{unwritten[0]}` is never written")
    if declared is not None:
        held = set(tensors) | {t.of for t in tensors.values() if t.of}
        held |= {n.rsplit("_s", 1)[0] for n in tensors if "_s" in n}
        held |= {n.rsplit("_c", 1)[0] for n in held if "_c" in n}
        missing = sorted(n for n in declared if n not in held)
        if missing:
            raise LoweringError(f"the declared `{missing[0]}` is not bound in the lowered program")
    _certify_rings(program, tensors)
    if program.tiles:
        _certify_tiles(program, tensors)
    # ★ A PROGRAM'S OWN FOOTPRINT IS WHAT MUST BE ON CHIP: its activations, tables and inputs (one tile's, when
    # tiled), and what each op holds while it runs (an expert's gate and up activations, an attention's score tile:
    # `held_bytes`, op by op in `held_by_ops`) — a certificate that left them out certified programs that do not fit. Its carried states (KV caches, recurrent state) are placed by residency over the whole deployment —
    # SRAM while they fit, then HBM, then DDR, streamed from there — so a cache larger than SRAM is a residency
    # question, not a refusal here.
    chips = range(program.tp) if program.tp > 1 else (None,)
    per_chip_ops = ops_per_chip(program)
    use = sram_footprint(program)
    need = own_bytes(program)
    pmus = pmus_needed(program, target)
    refused = over_limits(program, target, "in tiles" if program.tiles else "")
    if refused:
        raise LoweringError.of(refused)
    _certify_placement(program, target)
    certificate = {
        "tensors": len(tensors), "ops": len(program.ops), "bound_once": True, "shapes_agree": True,
        "pcus": max(sum(op.pcus for op in program.ops if c is None or op.chip in (None, c)) for c in chips),
        "pcus_available": target.pcus, "ops_per_chip": per_chip_ops, "pmus": pmus, "pmus_available": target.pmus,
        "sram_bytes": need, "sram_available": target.sram_bytes, "state_bytes": use["states"], "target": target.name,
        "held_bytes": use["held"],
        "held_by_ops": [{"op": i, "kind": program.ops[i].kind, "bytes": n}
                        for i, n in held_by_ops(program, fullest_chip(program))],
    }
    if program.tiles:
        certificate.update({"tiles": len(program.tiles), "tile_rows": program.tile_rows, "tile_cols": program.tile_cols,
                            "weights_on_chip": program.weights_on_chip, "tiles_cover_once": True})
    # What the lowering said of the weights it reads dense though stored Q8_0 (split_tp, fold_q8) is its own, not
    # certify's to prove: kept as said (a bundle's reader holds it to the layers' storage).
    if (program.certificate or {}).get("read_dense"):
        certificate["read_dense"] = program.certificate["read_dense"]
    return replace(program, certificate=certificate)
