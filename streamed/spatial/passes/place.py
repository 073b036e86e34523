"""``place``: PCUs for each op in proportion to its FLOPs (at least one each), PMUs for each on-chip buffer, bytes
moved per tier.

In: a program (tiled or whole) and the target. Out: the same program, each op carrying its ``pcus``, ``pmus``,
``flops`` and ``bytes_moved`` (of one run: one tile of a tiled program). Placing refuses nothing: too many ops for
the PCUs is ``certify``'s refusal.
"""

from __future__ import annotations

import math
from dataclasses import replace

from ..ir import SpatialProgram
from ..target import SpatialTarget
from .cost import traffic
from .shapes import flops_of


def place(program: SpatialProgram, target: SpatialTarget) -> SpatialProgram:
    """PCUs per op in proportion to its FLOPs (each at least one), PMUs per op for the on-chip buffers it writes,
    and each op's FLOPs and bytes per tier (of one run: one tile of a tiled program). Too many ops for the PCUs is
    ``certify``'s refusal."""
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
    ops = []
    for i, op in enumerate(program.ops):
        pmus = sum(math.ceil(tensors[o].bytes / target.pmu_bytes) for o in op.outputs if tensors[o].tier == "sram")
        ops.append(replace(op, pcus=pcus[i], pmus=max(pmus, 1), flops=flops[i], bytes_moved=traffic(op, tensors)))
    return replace(program, ops=tuple(ops))
