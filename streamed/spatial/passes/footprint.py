"""What a program holds on chip, and whether the target holds it: its own SRAM bytes (``sram_footprint``,
``own_bytes``), its weights' bytes as stored (``weight_bytes``), the PMUs its buffers fill and the PCUs its ops take,
on its fullest chip.

``over_limits`` is every limit of the target a program (or one tile of it) exceeds — PCUs, SRAM and PMUs — each a
refusal with its numbers on the statement that makes most of what does not fit: what ``tile`` says of a smallest
tile and ``certify`` of a program. A program's carried states are never its footprint: residency places them over
the whole deployment.
"""

from __future__ import annotations

import math
from typing import Callable

from ..ir import Op, SpatialProgram, Tensor, authored, column_tensors, rows_per_run
from ..target import SpatialTarget
from ..units import beside, size
from .errors import LimitError, LoweringError
from .shapes import held_bytes, held_parts


def on_chip(program: SpatialProgram, t: Tensor) -> int:
    """The SRAM bytes tensor ``t`` takes while ``program`` runs (weights aside: they stream, or ``weights_on_chip``
    says they stay): all of it when it lives in SRAM; of a table held off chip, the rows one run reads — a rotation
    reads the rows of its positions, never the whole context's (ir.py, ``table``); nothing of an off-chip state."""
    if t.role == "weight":
        return 0
    if t.tier == "sram":
        return t.bytes
    if t.role == "table":
        return min(t.shape[0], rows_per_run(program)) * t.bytes // max(t.shape[0], 1)
    return 0


def held_by_ops(program: SpatialProgram, chip: int | None = None) -> list[tuple[int, int]]:
    """Each op of ``chip`` (``None``: a program of one chip) that holds something while it runs beyond its inputs
    and outputs — an expert's gate and up activations, an attention's score tile… (``shapes.held_parts``) — as
    ``(op index, bytes)``, in program order. The ops of a program run at once, as a pipeline, so all of it is held
    together."""
    tensors = program._index()
    shape = lambda n: tensors[n].shape  # noqa: E731
    return [(i, n) for i, op in enumerate(program.ops) if chip is None or op.chip in (None, chip)
            for n in [held_bytes(op, shape)] if n]


def sram_footprint(program: SpatialProgram) -> dict[str, int]:
    """A program's own on-chip bytes per kind, on its fullest chip: its states, tables (the rows a run reads of one
    held off chip), inputs and intermediates (``activations``: weights stream from HBM or DDR), and what its ops hold
    while they run beyond their inputs and outputs (``held``: ``held_by_ops``)."""
    chips = range(program.tp) if program.tp > 1 else (None,)
    best = None
    for c in chips:
        use = {"states": 0, "tables": 0, "activations": 0, "held": sum(n for _, n in held_by_ops(program, c))}
        for t in program.tensors:
            held = on_chip(program, t)
            if not held or (c is not None and t.chip not in (None, c)):
                continue
            key = "states" if t.role == "state" else "tables" if t.role == "table" else "activations"
            use[key] += held
        if best is None or sum(use.values()) > sum(best.values()):
            best = use
    return best


def _largest_on_chip(program: SpatialProgram, group: str) -> tuple[str, int, int | None]:
    """The authored name, bytes and statement of the largest on-chip tensor of ``group`` (``states``, ``tables``,
    ``activations``): what a user shrinks when a program does not fit. Its statement is the first op's that touches
    it (``lower_program`` moves a declared name to its declaration)."""
    role = {"states": ("state",), "tables": ("table",)}.get(group)
    by_name: dict[str, list[Tensor]] = {}
    for t in program.tensors:  # a batched step's 64 caches ``Kc3_s0`` … are one authored ``Kc3``
        if on_chip(program, t) and (t.role in role if role else t.role not in ("state", "table")):
            by_name.setdefault(authored(t.name), []).append(t)
    held = lambda parts: sum(on_chip(program, t) for t in parts)  # noqa: E731
    name, parts = max(by_name.items(), key=lambda kv: held(kv[1]))
    names = {t.name for t in parts}
    statement = next((op.statement for op in program.ops if names & {*op.outputs, *op.inputs}), None)
    return name, held(parts), statement


def weight_bytes(program: SpatialProgram) -> int:
    """The bytes of a program's weights as stored, on its fullest chip (a column-tiled weight whole, not one tile's
    columns)."""
    chips = range(program.tp) if program.tp > 1 else (None,)
    columns = column_tensors(program)
    whole = lambda t: t.bytes * program.cols // program.tile_cols if t.name in columns else t.bytes  # noqa: E731
    return max(sum(whole(t) for t in program.tensors if t.role == "weight" and (c is None or t.chip in (None, c)))
               for c in chips)


def own_bytes(program: SpatialProgram) -> int:
    """What a program (one tile of a tiled one) holds in SRAM while it runs, on its fullest chip: its activations,
    tables and inputs, what its ops hold while they run (``held_by_ops``), and its weights when they stay on chip across its tiles — never its states, which residency
    places over the whole deployment."""
    use = sram_footprint(program)
    return use["activations"] + use["tables"] + use["held"] + (weight_bytes(program) if program.weights_on_chip else 0)


def buffers(program: SpatialProgram, target: SpatialTarget, chip: int | None = 0) -> list[tuple[str, int]]:
    """A chip's on-chip buffers and the PMUs each fills, in the order the chip's ops first use them: a tensor its ops
    touch takes the PMUs its bytes on chip fill (``on_chip``: a table held off chip, the rows a run stages); a state
    its ops read, one — the buffer it streams through from wherever residency puts it (a tile streams its own
    sequences'), so the buffers are the same before and after residency; weights kept on chip across tiles their
    own. A tensor no op touches — a batched tile's other sequences' positions and states — takes none. What an op holds
    while it runs (``held_by_ops``) is in the buffer of its first output: that op's PMUs. ``chip`` 0 (or ``None``)
    holds the replicated tensors too."""
    inside = {program.ops[i].outputs[0]: n for i, n in held_by_ops(program, chip)}
    held = [t for t in program.tensors if t.chip in (None, chip)]
    used = [n for _, op in program.schedule() if op.chip in (None, chip) for n in (*op.inputs, *op.outputs)]
    first = {n: k for k, n in reversed(list(enumerate(used)))}
    touched = {n for op in program.ops for n in (*op.inputs, *op.outputs)}
    out = []
    for t in sorted(held, key=lambda t: first.get(t.name, len(used))):
        if t.role == "weight":
            if program.weights_on_chip:
                out.append((t.name, math.ceil(t.bytes / target.pmu_bytes)))
        elif t.name in touched and (t.role == "state" or on_chip(program, t)):
            own = 1 if t.role == "state" else math.ceil(on_chip(program, t) / target.pmu_bytes)
            out.append((t.name, own + math.ceil(inside.get(t.name, 0) / target.pmu_bytes)))
    return out


def pmus_needed(program: SpatialProgram, target: SpatialTarget) -> int:
    """PMUs for a program's on-chip buffers (chip 0's, ``buffers``)."""
    return sum(n for _, n in buffers(program, target, 0 if program.tp > 1 else None))


def ops_per_chip(program: SpatialProgram) -> int:
    """The ops of a program's fullest chip: one PCU each at least."""
    chips = range(program.tp) if program.tp > 1 else (None,)
    return max(sum(1 for op in program.ops if c is None or op.chip in (None, c)) for c in chips)


def fits(p: SpatialProgram, target: SpatialTarget) -> bool:
    return (own_bytes(p) <= target.sram_bytes and pmus_needed(p, target) <= target.pmus
            and ops_per_chip(p) <= target.pcus)


def over_limits(p: SpatialProgram, target: SpatialTarget, how: str = "") -> list[LoweringError]:
    """The target's on-chip limits ``p`` (a program, or one tile of it) exceeds: PCUs, SRAM and PMUs, each a refusal
    on the statement that makes most of what does not fit."""
    out = []
    ops = ops_per_chip(p)
    if ops > target.pcus:
        statement, binder = _heaviest_statement(p, lambda op: 1)
        out.append(LimitError(f"needs {ops:,} PCUs, one for each of its ops; the {target.name.upper()} has "
                                 f"{target.pcus:,}", statement, binder))
    if own_bytes(p) > target.sram_bytes:
        out.append(_sram_refusal(p, target, how))
    pmus = pmus_needed(p, target)
    if pmus > target.pmus:
        tensors = {t.name: t for t in p.tensors}
        statement, binder = _heaviest_statement(p, lambda op: sum(
            math.ceil(on_chip(p, tensors[o]) / target.pmu_bytes) for o in op.outputs
            if tensors[o].role not in ("state", "weight")))
        where = f" {how}" if how else ""
        out.append(LimitError(
            f"needs {pmus:,} PMUs for its on-chip buffers{where} (each PMU holds {size(target.pmu_bytes)}); the "
            f"{target.name.upper()} has {target.pmus:,}", statement, binder))
    return out


def _sram_refusal(p: SpatialProgram, target: SpatialTarget, how: str = "") -> LoweringError:
    """``p`` (a program, or its smallest tile) does not fit: its footprint and its largest buffer — a tensor, or
    what one op holds while it runs, by its parts — on the statement that makes it."""
    use = sram_footprint(p)
    own = {k: v for k, v in use.items() if k != "states"}
    biggest = max(own, key=own.get)
    need, have = beside(own_bytes(p), target.sram_bytes)
    cols = f", {p.tile_cols} columns wide" if p.tile_cols else ""
    tiled = f" {how}{cols}" if how else ""
    on_chip = f", {size(weight_bytes(p))} for its weights kept on chip" if p.weights_on_chip else ""
    held = ""
    ops = held_by_ops(p, fullest_chip(p))
    if ops:
        i, n = max(ops, key=lambda io: io[1])
        op = p.ops[i]
        tensors = p._index()
        what, most = max(held_parts(op, lambda m: tensors[m].shape), key=lambda wn: wn[1])
        held = (f", {size(use['held'])} held by its ops while they run, the most by `{op.kind}` of "
                f"`{authored(op.outputs[0])}`: {size(n)}, of which {what} {size(most)}")
    if biggest == "held":
        return LimitError(f"needs {need} of SRAM{tiled} ({size(use['activations'])} for its activations{held}"
                             f"{on_chip}); the {target.name.upper()} has {have}", op.statement,
                             authored(op.outputs[0]))
    what = {"tables": "its tables", "activations": "its activations"}[biggest]
    name, size_, statement = _largest_on_chip(p, biggest)
    return LimitError(f"needs {need} of SRAM{tiled} ({size(use[biggest])} for {what}, the largest `{name}` of "
                         f"{size(size_)}{held}{on_chip}); the {target.name.upper()} has {have}", statement, name)


def fullest_chip(p: SpatialProgram) -> int | None:
    """The chip whose own bytes are the most (``None`` for a program of one chip): the one ``sram_footprint`` reports."""
    if p.tp <= 1:
        return None
    return max(range(p.tp), key=lambda c: sum(n for _, n in held_by_ops(p, c)) + sum(
        on_chip(p, t) for t in p.tensors if t.role != "state" and t.chip in (None, c)))


def _heaviest_statement(program: SpatialProgram, weigh: Callable[[Op], int]) -> tuple[int | None, str | None]:
    """The authored statement whose ops weigh most (``weigh``): where a program over a target's units is made
    smaller — and the binder it writes."""
    totals: dict[int, int] = {}
    for op in program.ops:
        if op.statement is not None:
            totals[op.statement] = totals.get(op.statement, 0) + weigh(op)
    if not totals:
        return None, None
    statement = max(totals, key=totals.get)
    op = next(o for o in program.ops if o.statement == statement)
    return statement, authored(op.outputs[0]) if op.outputs else None
