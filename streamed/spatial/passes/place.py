"""``place``: PCUs for each op in proportion to its FLOPs (at least one each), PMUs for each on-chip buffer, bytes
moved per tier, and where each op and buffer sits on each chip.

In: a program (tiled or whole) and the target. Out: the same program, each op carrying its ``pcus``, ``pmus``,
``flops`` and ``bytes_moved`` (of one run: one tile of a tiled program), and the program its ``placement`` — each
chip's ops end to end on its PCUs in schedule order, its buffers end to end on its PMUs in order of first use
(``footprint.buffers``, the rule ``pmus_needed`` counts by). Placing refuses nothing: too many ops for the PCUs, or
units past the target's, is ``certify``'s refusal.
"""

from __future__ import annotations

from dataclasses import replace

from ..ir import Placement, SpatialProgram
from ..target import SpatialTarget
from .cost import traffic
from .footprint import buffers
from .shapes import flops_of


def place(program: SpatialProgram, target: SpatialTarget) -> SpatialProgram:
    """PCUs per op in proportion to its FLOPs (each at least one), PMUs per op for the on-chip buffers it writes
    (``buffers``: a state's is the one it streams through), each op's FLOPs and bytes per tier (of one run: one tile
    of a tiled program), and where each op and buffer sits on each chip (``placement``). Too many ops for the PCUs
    is ``certify``'s refusal."""
    tensors = {t.name: t for t in program.tensors}
    shape = lambda n: tensors[n].shape
    chips = range(program.tp) if program.tp > 1 else (None,)
    flops = [flops_of(op, shape) for op in program.ops]
    pcus = [1] * len(program.ops)
    for c in chips:
        mine = [i for i, op in enumerate(program.ops) if c is None or op.chip in (None, c)]
        spare = max(target.pcus - len(mine), 0)
        total = sum(flops[i] for i in mine) or 1
        for i in mine:
            pcus[i] = max(pcus[i], 1 + int(spare * flops[i] / total))
    # Each chip's ops laid end to end on its PCUs in the order they run, its buffers on its PMUs in the order they are
    # first used: the ranges a picture of the chip draws (ir.py, Placement).
    on_pcus, on_pmus, fills = [], [], {}
    for c in chips:
        at = 0
        for i, op in program.schedule():
            if c is None or op.chip in (None, c):
                on_pcus.append((c, i, at, at + pcus[i]))
                at += pcus[i]
        at = 0
        for name, count in buffers(program, target, c):
            on_pmus.append((c, name, at, at + count))
            fills.setdefault(name, count)
            at += count
    ops = []
    for i, op in enumerate(program.ops):
        pmus = sum(fills.get(o, 0) for o in op.outputs)
        ops.append(replace(op, pcus=pcus[i], pmus=max(pmus, 1), flops=flops[i], bytes_moved=traffic(op, tensors)))
    return replace(program, ops=tuple(ops), placement=Placement(tuple(on_pcus), tuple(on_pmus)))
