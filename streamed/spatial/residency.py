"""Residency over a whole deployment, and the roofline estimate a user can act on.

Residency: SRAM is first reserved for the largest program's own working footprint (its activations, tables and
inputs — one tile's, for a tiled program, with its weights when they stay on chip across its tiles; only one
program runs at a time on a chip; certification refuses a program whose own footprint exceeds SRAM, never one for
its states). Each kind's carried state, one copy per layer of the kind, is
then placed layer by layer in model order: in SRAM while it fits, then HBM, then DDR. Weights live in HBM, spilling
to DDR layer by layer when the model is larger. Everything is per chip (a tensor-parallel chip holds its own
slices). A kind program's state and weight tensors carry the slowest tier any of its layers uses — the tier the
program must be able to stream from. Cost: linear in the number of layers, arithmetic only.

Estimate: each program's FLOPs (on its fullest chip) and the bytes it moves per tier (``passes.cost.step_cost``, summed
over its tiles); its roofline time on the target is ``max(FLOPs / peak BF16, Σ_tier bytes / bandwidth)`` plus its
all-reduces over the chip link (a ring: ``2(tp−1)/tp`` of the reduced bytes). A step runs the embed, every layer
(its kind's program, with that layer's tiers), and the head; tokens per second is the tokens a step serves over the
step's time. Attention is costed at full context (every cached position read); a lookup reads only its tokens' rows
of the table, and a cache update writes only its new rows. A tiled program pays for its tiling: every row tile
reads the weights again (unless they stay on chip) and its attention the cache rows before it — ``weight_reads``
says how many times a step reads each weight.
"""

from __future__ import annotations

from dataclasses import replace

from .ir import SpatialProgram
from .passes.cost import step_cost
from .passes.footprint import own_bytes, weight_bytes
from .target import SpatialTarget
from .units import size

TIER_ORDER = ("sram", "hbm", "ddr")


class ResidencyError(ValueError):
    """A deployment whose weights or states fit no tier; ``layer`` and ``program`` (its index in ``plan``'s
    programs) say whose did not, when a layer's."""

    def __init__(self, why: str, layer: int | None = None, program: int | None = None):
        super().__init__(why)
        self.layer = layer
        self.program = program


def _per_chip(program: SpatialProgram, select) -> int:
    chips = range(program.tp) if program.tp > 1 else (None,)
    return max(sum(t.bytes for t in program.tensors if select(t) and (c is None or t.chip in (None, c))) for c in chips)


def weight_reads(program: SpatialProgram) -> int:
    """How many times a step reads each of the program's weights: once, or once per row tile of a tiled program
    whose weights do not stay on chip (its column tiles read each column once)."""
    if not program.tiles or program.weights_on_chip:
        return 1
    return len({t.rows for t in program.tiles})


def state_bytes(program: SpatialProgram) -> int:
    carried = set(program.carried)
    return _per_chip(program, lambda t: t.name in carried)


def _runs(layers: list[int]) -> list[list[int]]:
    out: list[list[int]] = []
    for l in layers:
        if out and out[-1][1] == l - 1:
            out[-1][1] = l
        else:
            out.append([l, l])
    return out


def plan(programs: list[tuple[str, list[int] | None, SpatialProgram]], layer_kinds: list[int | None],
         target: SpatialTarget):
    """``programs``: (name, layers or None for embed/head, program) in model order of first use; ``layer_kinds[l]``:
    the index in ``programs`` of layer l's kind. Returns (residency dict, programs with tiers set, per-layer tiers)."""
    reserved = max((own_bytes(p) for _, _, p in programs), default=0)
    free = {"sram": target.sram_bytes - reserved, "hbm": target.hbm_bytes, "ddr": target.ddr_bytes}
    weights = {"hbm": 0, "ddr": 0}
    states = {"sram": 0, "hbm": 0, "ddr": 0}

    def take(n: int, tiers: tuple[str, ...], placed: dict) -> str | None:
        """The first of ``tiers`` with room for ``n`` bytes, which it then holds."""
        for tier in tiers:
            if n <= free[tier]:
                free[tier] -= n
                placed[tier] += n
                return tier
        return None

    def weight_tier(n: int, what: str, layer: int | None = None, program: int | None = None) -> str:
        tier = take(n, ("hbm", "ddr"), weights)
        if tier is None:
            raise ResidencyError(f"the weights of {what} do not fit: {size(sum(weights.values()) + n)} per chip; "
                                 f"the {target.name.upper()} has {size(target.hbm_bytes)} of HBM and "
                                 f"{size(target.ddr_bytes)} of DDR", layer, program)
        return tier

    wbytes = [weight_bytes(p) for _, _, p in programs]
    sbytes = [state_bytes(p) for _, _, p in programs]
    fixed_tiers = {i: weight_tier(wbytes[i], f"the {name} program")
                   for i, (name, layers, _) in enumerate(programs) if layers is None}
    # One pass over the layers, plain arithmetic: weights first (every token reads every weight each step), then
    # states (a state's reads grow with its context) — SRAM, then HBM, then DDR.
    weight_tiers = [weight_tier(wbytes[k], f"layer {l}", l, k) for l, k in enumerate(layer_kinds)]
    layer_tiers: list[tuple[str, str]] = []
    for l, k in enumerate(layer_kinds):
        st = take(sbytes[k], TIER_ORDER, states)
        if st is None:
            raise ResidencyError(
                f"the states of layer {l} do not fit: {f'layers 0-{l} carry' if l else 'layer 0 carries'} "
                f"{size(sum(states.values()) + sbytes[k])} of state per chip, and beside {size(sum(weights.values()))} "
                f"of weights and {size(reserved)} reserved the {target.name.upper()} has {size(target.sram_bytes)} of "
                f"SRAM, {size(target.hbm_bytes)} of HBM and {size(target.ddr_bytes)} of DDR", l, k)
        layer_tiers.append((weight_tiers[l], st))

    slowest = lambda tiers: max(tiers, key=TIER_ORDER.index) if tiers else "sram"
    placed = []
    groups = []
    for i, (name, layers, p) in enumerate(programs):
        if layers is None:
            wt, st = fixed_tiers[i], "sram"
        else:
            wt = slowest([layer_tiers[l][0] for l in layers])
            st = slowest([layer_tiers[l][1] for l in layers])
            by: dict[tuple[str, str], list[int]] = {}
            for l in layers:
                by.setdefault(layer_tiers[l], []).append(l)
            for (w, s), ls in by.items():
                groups.append({"kind": name, "layers": ls, "weights": w, "states": s,
                               "state_bytes_per_layer": sbytes[i], "weight_bytes_per_layer": wbytes[i]})
        carried = set(p.carried)
        tensors = tuple(
            replace(t, tier=wt) if t.role == "weight" else replace(t, tier=st) if t.name in carried else t
            for t in p.tensors)
        placed.append(replace(p, tensors=tensors))
    residency = {
        "per_chip": True,
        "reserved_sram_bytes": reserved,
        "capacity": {"sram": target.sram_bytes, "hbm": target.hbm_bytes, "ddr": target.ddr_bytes},
        "states": states,
        "weights": weights,
        "layers": groups,
    }
    return residency, placed, layer_tiers


def seconds(cost: dict, weights_tier: str, states_tier: str, target: SpatialTarget) -> tuple[float, dict]:
    moved = {"sram": cost["sram"], "hbm": 0, "ddr": 0}
    moved[weights_tier] = moved.get(weights_tier, 0) + cost["weights"]
    moved[states_tier] = moved.get(states_tier, 0) + cost["states"]
    memory = sum(b / target.bandwidth(t) for t, b in moved.items())
    compute = cost["flops"] / target.peak_bf16
    return max(memory, compute) + cost["link"] / target.link_bandwidth, moved


def estimate(programs: list[tuple[str, list[int] | None, SpatialProgram]], layer_kinds: list[int],
             layer_tiers: list[tuple[str, str]], tokens_per_step: int, target: SpatialTarget) -> dict:
    costs = [step_cost(p) for _, _, p in programs]
    per_program = {}
    step = {"flops": 0, "bytes": {"sram": 0, "hbm": 0, "ddr": 0}, "seconds": 0.0, "link_bytes": 0}

    def add(i: int, wt: str, st: str, count: int = 1):
        t, moved = seconds(costs[i], wt, st, target)
        step["flops"] += costs[i]["flops"] * count
        step["link_bytes"] += costs[i]["link"] * count
        for k, v in moved.items():
            step["bytes"][k] += v * count
        step["seconds"] += t * count
        return t, moved

    for i, (name, layers, p) in enumerate(programs):
        wt = next((t.tier for t in p.tensors if t.role == "weight"), "hbm")
        t, moved = seconds(costs[i], wt, next((t.tier for t in p.tensors if t.name in set(p.carried)), "sram"), target)
        per_program[name] = {"flops": costs[i]["flops"], "bytes": moved, "link_bytes": costs[i]["link"],
                             "seconds": t, "instances": len(layers) if layers is not None else 1,
                             "tiles": len(p.tiles) or 1, "weight_reads": weight_reads(p),
                             "weight_bytes": costs[i]["weights"]}
        if layers is None:
            add(i, wt, "sram")
    counts: dict[tuple[int, str, str], int] = {}
    for l, k in enumerate(layer_kinds):
        key = (k, *layer_tiers[l])
        counts[key] = counts.get(key, 0) + 1
    for (k, wt, st), n in counts.items():
        add(k, wt, st, n)
    compute = step["flops"] / target.peak_bf16
    return {
        "target": target.name,
        "programs": per_program,
        "step": step,
        "tokens_per_step": tokens_per_step,
        "tokens_per_second": tokens_per_step / step["seconds"] if step["seconds"] else None,
        "bound": "compute" if compute >= step["seconds"] * 0.5 else "memory",
    }
