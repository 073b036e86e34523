"""Residency over a whole deployment, and the roofline estimate a user can act on.

Residency: SRAM is first reserved for the largest program's own working footprint (its activations, tables and
inputs — one tile's, for a tiled program, with its weights when they stay on chip across its tiles; only one
program runs at a time on a chip; certification refuses a program whose own footprint exceeds SRAM, never one for
its states). Tables read a row per position (rotations) live off chip, one copy a chip for every program that reads
them, in HBM (DDR past it) before any weight. Weights live in HBM, spilling to DDR layer by layer when the model is
larger. Each kind's carried state, one copy per layer of the kind, is then placed layer by layer in model order: in
SRAM while it fits, then HBM, then DDR. Everything is per chip (a tensor-parallel chip holds its own
slices). A kind program's state and weight tensors carry the slowest tier any of its layers uses — the tier the
program must be able to stream from. Cost: linear in the number of layers, arithmetic only.

Estimate: each program's FLOPs (on its fullest chip) and the bytes it moves per tier (``passes.cost.step_cost``, summed
over its tiles); its roofline time on the target is ``max(FLOPs / peak BF16, Σ_tier bytes / bandwidth)`` plus its
all-reduces over the chip link (a ring: ``2(tp−1)/tp`` of the reduced bytes). A step runs the embed, every layer (its
kind's program, with that layer's tiers), and the head; tokens per second is the tokens a step serves over the step's
time. Attention is costed at the positions it reads (every cached one, or a window's: a windowed cache is a ring of that
many); a lookup reads only its tokens' rows of the table, a rotation its positions' rows of its tables, from the tier
they live in, and a cache update writes only its new rows. A tiled program pays for its tiling: every row tile reads the
weights again (unless they stay on chip) and its attention the cache rows before it — ``weight_reads`` says how many
times a step reads each weight.
"""

from __future__ import annotations

from dataclasses import replace

from .ir import SpatialProgram
from .passes.cost import step_cost
from .passes.footprint import own_bytes, weight_bytes
from .target import SpatialTarget
from .units import beside, size

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


def _states_named(programs) -> str:
    """What the carried states of ``programs`` are, as a person names them: KV caches (written a row per position),
    recurrent states (replaced each step), or both."""
    kinds = set()
    for _, layers, p in programs:
        if layers is not None and p.carried:
            writes = {op.outputs[0]: op.kind for op in p.ops if op.outputs and op.outputs[0] in set(p.carried)}
            kinds.update("caches" if kind == "write_rows" else "recurrent" for kind in writes.values())
    return {frozenset({"caches"}): "the KV caches", frozenset({"recurrent"}): "the recurrent states"}.get(
        frozenset(kinds), "the KV caches and recurrent states")


def _tables(programs) -> dict[str, int]:
    """Every table held off chip (``footprint.on_chip``) by name, with its bytes per chip: one copy a chip, shared
    by every program that reads it."""
    out: dict[str, int] = {}
    for _, _, p in programs:
        for t in p.tensors:
            if t.role == "table" and t.tier != "sram":
                out[t.name] = max(out.get(t.name, 0), t.bytes)
    return out


def plan(programs: list[tuple[str, list[int] | None, SpatialProgram]], layer_kinds: list[int | None],
         target: SpatialTarget):
    """``programs``: (name, layers or None for embed/head, program) in model order of first use; ``layer_kinds[l]``:
    the index in ``programs`` of layer l's kind. Returns (residency dict, programs with tiers set, per-layer tiers).

    A deployment that cannot fit is refused naming the binding limit in units: all its weights (with the tables
    held off chip) against HBM and DDR, or all its states against what SRAM, HBM and DDR hold beside them — then
    the first layer that does not fit (a layer's states are not split over tiers, so they can also fail to fit
    when the total does: that is said as such)."""
    reserved = max((own_bytes(p) for _, _, p in programs), default=0)
    free = {"sram": target.sram_bytes - reserved, "hbm": target.hbm_bytes, "ddr": target.ddr_bytes}
    weights = {"hbm": 0, "ddr": 0}
    tables = {"hbm": 0, "ddr": 0}
    states = {"sram": 0, "hbm": 0, "ddr": 0}
    chip = target.name.upper()

    def take(n: int, tiers: tuple[str, ...], placed: dict) -> str | None:
        """The first of ``tiers`` with room for ``n`` bytes, which it then holds."""
        for tier in tiers:
            if n <= free[tier]:
                free[tier] -= n
                placed[tier] += n
                return tier
        return None

    wbytes = [weight_bytes(p) for _, _, p in programs]
    sbytes = [state_bytes(p) for _, _, p in programs]
    table_bytes = _tables(programs)
    all_weights = sum(wbytes[i] for i, (_, layers, _) in enumerate(programs) if layers is None) + \
        sum(wbytes[k] for k in layer_kinds) + sum(table_bytes.values())

    def weight_tier(n: int, what: str, layer: int | None = None, program: int | None = None,
                    placed: dict = weights) -> str:
        tier = take(n, ("hbm", "ddr"), placed)
        if tier is None:
            need, have = beside(all_weights, target.hbm_bytes + target.ddr_bytes)
            raise ResidencyError(f"the weights need {need} per chip; the {chip}'s HBM and DDR hold {have} "
                                 f"({size(target.hbm_bytes)} + {size(target.ddr_bytes)}): those of {what} do not "
                                 f"fit", layer, program)
        return tier

    # Tables first (a step reads a row of each), then the embed's and the head's weights, then each layer's: every
    # token reads every weight each step, so they take HBM before any state.
    table_tiers = {name: weight_tier(n, f"the table `{name}`", placed=tables) for name, n in table_bytes.items()}
    fixed_tiers = {i: weight_tier(wbytes[i], f"the {name} program")
                   for i, (name, layers, _) in enumerate(programs) if layers is None}
    weight_tiers = [weight_tier(wbytes[k], f"layer {l}", l, k) for l, k in enumerate(layer_kinds)]
    # Then states, layer by layer in model order: SRAM, then HBM, then DDR (a state's reads grow with its context).
    room = dict(free)
    all_states = sum(sbytes[k] for k in layer_kinds)
    layer_tiers: list[tuple[str, str]] = []
    for l, k in enumerate(layer_kinds):
        st = take(sbytes[k], TIER_ORDER, states)
        if st is None:
            carried = f"{f'layers 0-{l} carry' if l else 'layer 0 carries'} {size(sum(states.values()) + sbytes[k])}"
            if all_states > sum(room.values()):
                need, have = beside(all_states, sum(room.values()))
                beside_ = f"{size(sum(weights.values()))} of weights" + (
                    f" and {size(sum(tables.values()))} of tables" if sum(tables.values()) else "")
                why = (f"{_states_named(programs)} need {need} per chip; beside {beside_} the {chip} holds {have} "
                       f"(SRAM {size(room['sram'])}, HBM {size(room['hbm'])}, DDR {size(room['ddr'])}): the states "
                       f"of layer {l} do not fit ({carried})")
            else:
                why = (f"the states of layer {l} do not fit: {carried} of state per chip, and no one tier holds "
                       f"layer {l}'s {size(sbytes[k])} in what is left beside {size(sum(weights.values()))} of "
                       f"weights and {size(reserved)} reserved (SRAM {size(free['sram'])}, HBM "
                       f"{size(free['hbm'])}, DDR {size(free['ddr'])})")
            raise ResidencyError(why, l, k)
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
            replace(t, tier=wt) if t.role == "weight" else replace(t, tier=st) if t.name in carried else
            replace(t, tier=table_tiers[t.name]) if t.role == "table" and t.tier != "sram" else t for t in p.tensors)
        placed.append(replace(p, tensors=tensors))
    residency = {
        "per_chip": True,
        "reserved_sram_bytes": reserved,
        "capacity": {"sram": target.sram_bytes, "hbm": target.hbm_bytes, "ddr": target.ddr_bytes},
        "states": states,
        "weights": weights,
        "tables": tables,
        "layers": groups,
    }
    return residency, placed, layer_tiers


def seconds(cost: dict, weights_tier: str, states_tier: str, target: SpatialTarget,
            tables_tier: str = "hbm") -> tuple[float, dict]:
    moved = {"sram": cost["sram"], "hbm": 0, "ddr": 0}
    moved[weights_tier] = moved.get(weights_tier, 0) + cost["weights"]
    moved[states_tier] = moved.get(states_tier, 0) + cost["states"]
    moved[tables_tier] = moved.get(tables_tier, 0) + cost.get("tables", 0)
    memory = sum(b / target.bandwidth(t) for t, b in moved.items())
    compute = cost["flops"] / target.peak_bf16
    return max(memory, compute) + cost["link"] / target.link_bandwidth, moved


def estimate(programs: list[tuple[str, list[int] | None, SpatialProgram]], layer_kinds: list[int],
             layer_tiers: list[tuple[str, str]], tokens_per_step: int, target: SpatialTarget) -> dict:
    costs = [step_cost(p) for _, _, p in programs]
    per_program = {}
    step = {"flops": 0, "bytes": {"sram": 0, "hbm": 0, "ddr": 0}, "seconds": 0.0, "link_bytes": 0}

    # The tier each program's off-chip tables stream from (residency places them once for every program).
    tables_tier = [next((t.tier for t in p.tensors if t.role == "table" and t.tier != "sram"), "hbm")
                   for _, _, p in programs]

    def add(i: int, wt: str, st: str, count: int = 1):
        t, moved = seconds(costs[i], wt, st, target, tables_tier[i])
        step["flops"] += costs[i]["flops"] * count
        step["link_bytes"] += costs[i]["link"] * count
        for k, v in moved.items():
            step["bytes"][k] += v * count
        step["seconds"] += t * count
        return t, moved

    for i, (name, layers, p) in enumerate(programs):
        wt = next((t.tier for t in p.tensors if t.role == "weight"), "hbm")
        t, moved = seconds(costs[i], wt, next((t.tier for t in p.tensors if t.name in set(p.carried)), "sram"), target,
                           tables_tier[i])
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
