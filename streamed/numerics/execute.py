"""The executor of bundles: runs what a bundle says, op by op, exactly as ``streamed/spatial/ir.py``'s docstring
defines each op — the embed program, then for each layer its kind's ``SpatialProgram`` with that layer's tensors
bound through the manifest, then the head. It walks the same IR the bundle serialises, never the source text, and
shares only the per-op arithmetic (``numerics``) with the reference interpreter — so where the two agree, the
lowering (what ops, over which tensors, bound to which layer's weights) is what has been checked.

Invariants:
- A weight is read as the program's tensor says: ``part`` ``planes``/``scales`` are the checkpoint's stored Q8_0
  blocks (``q8.Planes``, passed as a ``Part`` so a ``matmul_q8`` multiplies the blocks where they are), never
  re-quantised from floats; a ``slice`` cuts the declared weight (a view; a dense copy only of a chip's slice that
  cuts a Q8_0 block); ``of`` names the declared weight a chip-local tensor is part of.
- States live across steps in a ``Session`` under the names the LAYER gives them (``Kc7``, ``Kc7_s1``), so a state a
  kind program writes at layer 7 is layer 7's own; a state the program does not carry is zeroed at each step.
- Ops run by ``phase``, in list order within a phase (ir.py: phases run in order; the chips' ops of one phase run
  at once), over one environment of uniquely named tensors: a tensor-parallel program's chip-local tensors are
  distinct names. So an op scheduled in a phase before the one that writes its input reads nothing and is refused
  — the executor runs the schedule the program states, not the order its list happens to be in.
- A table is filled by its own ``fill`` rule, as the bundle states it (``kernels.fill_table``) — never taken from the
  host by name — so a rule the lowering wrote wrong is a table that differs from the document's.
- A tiled program runs its ops once per tile, in order, as ir.py's Tiles section says: each tile's row inputs and
  weights are what its ``reads`` say, its position the step's plus its first row, states whole and carried from
  tile to tile (a batched tile's sequence b is the program's sequence r0 + b); the per-row (and per-column) tensors
  of the tiles are assembled into the whole program's, so a tiled program's values compare with the reference's
  tensor by tensor.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Callable, Mapping

import numpy as np

from . import kernels as nx
from ..analysis.kinds import rebind
from .product import EXACT, Arithmetic
from .blocks import Blocks
from .q8 import BLOCK, Planes
from ..spatial.ir import (
    COLLECTIVES, Op, SpatialProgram, Tensor, batched, column_tensors, in_tile, row_tensors, runs_in, sequence_of,
)
from .weights import Weights


class ExecuteError(Exception):
    """A program the executor cannot run as the IR defines it: which program, which op (index and kind) and why."""

    def __init__(self, program: str, op: int | None, why: str, kind: str | None = None):
        where = program if op is None else f"{program}, op {op}" + (f" ({kind})" if kind else "")
        super().__init__(f"{where}: {why}")
        self.program, self.op, self.why = program, op, why


# ---- reading tensors -----------------------------------------------------------------------------------------------


def _cut(a, axis: int, start: int, stop: int):
    """``a`` cut along ``axis``: a numpy view, or a stored weight's (or plane's) own cut."""
    if isinstance(a, (Planes, Part, Blocks)):
        return a.cut(axis, start, stop)
    index = [slice(None)] * a.ndim
    index[axis] = slice(start, stop)
    return a[tuple(index)]


@dataclass(frozen=True)
class Part:
    """One of the two tensors a program reads a Q8_0 weight as (``part`` ``planes`` or ``scales``), over the stored
    weight already cut by the tensor's slice: a product reads the stored blocks themselves (``matmul_q8`` of the
    two parts of one weight), and the plane is made as an array only when something reads it as one."""

    planes: Planes
    part: str

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        a = self.planes.values if self.part == "planes" else self.planes.scales
        return a if dtype is None else a.astype(dtype)

    @property
    def shape(self) -> tuple[int, ...]:
        *lead, k, n = self.planes.shape
        return (*lead, k, n) if self.part == "planes" else (*lead, k // BLOCK, n)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def cut(self, axis: int, start: int, stop: int) -> "Part":
        """Cut along ``axis`` in this part's own units (a scales row is a block of 32 weight rows)."""
        axis = axis % self.ndim
        if self.part == "scales" and axis == self.ndim - 2:
            start, stop = start * BLOCK, stop * BLOCK
        elif self.part == "planes" and axis == self.ndim - 2 and (start % BLOCK or stop % BLOCK):
            raise ValueError(f"the cut {start}:{stop} of Q8_0 planes splits a block of {BLOCK}")
        return Part(self.planes.cut(axis, start, stop), self.part)


def _q8_weight(planes, scales) -> Planes:
    """The Q8_0 weight a ``matmul_q8`` reads from its two tensors: the stored weight itself when both are its parts
    (the executor's case), else made from the two arrays (a test's)."""
    if isinstance(planes, Part) and isinstance(scales, Part) and planes.planes.shape == scales.planes.shape \
            and np.may_share_memory(planes.planes.raw, scales.planes.raw):
        return planes.planes
    return Planes.of_planes(np.asarray(planes), np.asarray(scales))


def weight_value(t: Tensor, name: str, weights: Weights):
    """The value of weight tensor ``t``, whose declared weight this layer calls ``name``: the weight as stored (an
    array, or ``q8.Planes``), or the Q8_0 planes or scales as stored (``Part``), cut by ``t.slice``."""
    if name not in weights:
        raise KeyError(f"no weight `{name}`")
    a = weights[name]
    if t.part is None:
        if t.slice is not None:
            axis, start, stop = t.slice
            a = _cut(a, axis, start, stop)
        return a
    if not isinstance(a, Planes):
        raise KeyError(f"`{name}` is read as Q8_0 {t.part} but the checkpoint does not store it Q8_0 "
                       f"({weights.source or 'these weights'})")
    if t.slice is not None:
        axis, start, stop = t.slice
        a = a.cut(axis, start, stop)
        if not isinstance(a, Planes):
            raise ValueError(f"the slice {start}:{stop} of `{name}` cuts a Q8_0 block")
    return Part(a, t.part)


# ---- one program ---------------------------------------------------------------------------------------------------


def _optional_inputs(op: Op) -> dict[str, str]:
    """An ``experts`` op's optional tensors by what they are: after the five fixed inputs, in the order attr
    ``optional`` names them (or, in the older spelling, each attr's value the input's position)."""
    names = op.attr("optional")
    if names is not None:
        return dict(zip(names, op.inputs[5:]))
    out = {}
    for key in ("selection_bias", "router_bias", "bias_gate", "bias_up", "bias_down", "shared_gate_proj", "shared_up",
                "shared_down", "shared_gate"):
        at = op.attr(key)
        if isinstance(at, int) and not isinstance(at, bool):
            out[key] = op.inputs[at]
    return out


def _elementwise(op: Op, v: list, f: Callable) -> np.ndarray:
    if len(v) == 2:
        return f(nx.f32(v[0]), nx.f32(v[1])).astype(np.float32)
    s = np.float32(op.attr("scalar"))
    if op.kind == "sub" and op.attr("side", "right") == "left":
        return (s - nx.f32(v[0])).astype(np.float32)
    return f(nx.f32(v[0]), s).astype(np.float32)


def _stored_q8(op: Op, v: list) -> list:
    """``v`` as the table of ops lists an op's inputs: each weight attr ``q8`` names read as its stored Q8_0 blocks
    (ir.py: "Weights read as stored Q8_0"; ``_q8_weight`` of its planes and scales) — a product reads them where
    they are, an expert bank one expert's matrix at a time (``Planes[e]``), never densified."""
    slots = op.attr("q8")
    out = list(v[:len(v) - len(slots)])
    for i, scales in zip(slots, v[len(v) - len(slots):]):
        out[i] = _q8_weight(out[i], scales)
    return out


def run_op(op: Op, v: list, arithmetic: Arithmetic = EXACT) -> tuple:
    """The values ``op`` writes (one per output), from its input values ``v`` — each op as ir.py defines it, in
    ``arithmetic``."""
    a = op.attr
    k = op.kind
    if a("q8"):  # weights read as stored Q8_0: each its planes and scales, the scales after the op's other inputs
        v = _stored_q8(op, v)
    if k == "matmul":
        return (nx.matmul(v[0], v[1], arithmetic),)
    if k == "matmul_q8":
        return (nx.matmul(v[0], _q8_weight(v[1], v[2]), arithmetic),)
    if k == "add":
        return (_elementwise(op, v, np.add),)
    if k == "sub":
        return (_elementwise(op, v, np.subtract),)
    if k == "mul":
        return (_elementwise(op, v, np.multiply),)
    if k == "scale":
        return ((nx.f32(v[0]) * np.float32(a("factor"))).astype(np.float32),)
    if k == "rmsnorm":
        return (nx.rmsnorm(v[0], v[1], a("epsilon", 1e-6), a("offset", 0.0), a("heads", 1), arithmetic),)
    if k == "l2norm":
        return (nx.l2norm(v[0], a("epsilon", 1e-6), a("heads", 1), arithmetic),)
    if k == "gelu":
        return (nx.gelu(v[0], arithmetic),)
    if k == "layernorm":
        return (nx.layernorm(v[0], v[1], v[2] if len(v) > 2 else None, a("epsilon", 1e-5), arithmetic),)
    if k == "softcap":
        return (nx.soft_cap(v[0], a("cap"), arithmetic),)
    if k in ("silu", "sigmoid", "softplus", "exp"):
        return (getattr(nx, k)(v[0], arithmetic),)
    if k == "softmax":
        return (nx.softmax(v[0], arithmetic=arithmetic),)
    if k == "argmax":
        return (nx.argmax(v[0]),)
    if k == "running_argmax":  # one column tile's own: ``run_tiles`` folds it into the row tile's
        x = nx.f32(v[0])
        return (nx.argmax(x), np.max(x, axis=-1))
    if k == "lookup":
        return (nx.lookup(v[0], v[1]),)
    if k == "rope":
        return (nx.rope(v[0], int(v[1]), v[2], v[3], a("heads"), a("rotating"), a("after", 0), a("interleaved", False),
                        arithmetic),)
    if k == "attention":
        keys, values = v[1], v[2]
        if a("ring"):  # keys and values held as rings: read in the positions' frame (ir.py)
            rows, reach = np.shape(v[0])[0], min(a("window") or math.inf, a("chunk") or math.inf)
            keys, values = (nx.ring_read(x, int(v[3]), rows, a("ring"), reach) for x in (keys, values))
        return (nx.attention(v[0], keys, values, int(v[3]), a("heads"), a("groups"), a("window"), a("chunk"),
                             a("scale"), v[4] if len(v) > 4 else None, a("softcap"), arithmetic),)
    if k == "latent_attention":
        return (nx.latent_attention(v[0], v[1], v[2], int(v[3]), v[4], v[5], a("heads"), a("nope"), a("rope"),
                                    a("scale"), arithmetic),)
    if k == "gated_delta":
        return nx.gated_delta(v[0], v[1], v[2], v[3], v[4], v[5], a("heads"), a("groups"), a("in_turn", False),
                              a("scale"), arithmetic)
    if k == "short_convolution":
        return nx.short_convolution(v[0], v[1], v[2], arithmetic)
    if k == "experts":
        opt = _optional_inputs(op)
        by = dict(zip(op.inputs, v))
        get = lambda key: by[opt[key]] if key in opt else None  # noqa: E731
        biases = (get("bias_gate"), get("bias_up"), get("bias_down")) if "bias_gate" in opt else None
        shared = (get("shared_gate_proj"), get("shared_up"), get("shared_down")) if "shared_gate_proj" in opt else None
        groups = a("groups")
        return (nx.experts(v[0], v[1], a("top"), v[2], v[3], v[4], scored_by=a("scored", "softmax"),
                           normalized=bool(a("normalized", False)), routed_scale=a("routed_scale"),
                           selection_bias=get("selection_bias"),
                           groups=(groups, a("keep")) if groups else None, router_bias=get("router_bias"),
                           expert_biases=biases, clamp=a("clamp"), weighting_inputs=bool(a("weighting_inputs", False)),
                           shared=shared, shared_gate=get("shared_gate"),
                           quotient_gate=bool(a("quotient_gate", False)), arithmetic=arithmetic),)
    if k == "write_rows":
        if a("ring"):  # a ring of the state's rows over the context's positions (ir.py)
            return (nx.ring_write(v[0], int(v[1]), v[2], a("ring")),)
        s, p, x = nx.f32(v[0]).copy(), int(v[1]), nx.f32(v[2])
        if p < 0 or p + x.shape[0] > s.shape[0]:
            raise ValueError(f"rows {p}…{p + x.shape[0] - 1} are past the state's {s.shape[0]} rows")
        s[p:p + x.shape[0]] = x
        return (s,)
    if k == "assign":
        return (nx.f32(v[0]).copy(),)
    if k == "copy":
        return (np.array(v[0], copy=True),)
    if k == "take_rows":
        start = a("start")
        return (np.array(v[0][start:start + a("count")]),)
    if k == "stack_rows":
        return (np.concatenate([np.atleast_1d(x) for x in v], axis=0),)
    if k == "take_cols":
        return (nx.columns(v[0], a("start"), a("stop"), a("every")),)
    if k == "allreduce":
        total = nx.f32(v[0]).copy()
        for x in v[1:]:
            total = total + nx.f32(x)
        return (total.astype(np.float32),)
    if k == "allgather":
        return (np.concatenate(v, axis=a("axis", -1)),)
    raise ValueError(f"no definition of op kind `{k}` in the IR")


def _misplaced(op: Op, chips: Mapping[str, int | None]) -> str | None:
    """Why ``op`` could not run where ir.py says it runs, or ``None``: an op on chip c reads and writes only chip c's
    tensors and replicated ones; an op on every chip only replicated ones; an all-reduce or all-gather reads one
    tensor of each chip, in chip order, and writes a replicated one. A single-process executor would compute the
    right numbers from a tensor another chip holds — the chips could not."""
    if op.kind in COLLECTIVES:
        held = [chips.get(n) for n in op.inputs]
        if any(c is not None for c in held) and held != list(range(len(held))):
            return f"gathers {', '.join(op.inputs)} from chips {held}, not one per chip in order"
        return None
    for n in (*op.inputs, *op.outputs):
        c = chips.get(n)
        if c is not None and c != op.chip:
            return f"runs on {'every chip' if op.chip is None else f'chip {op.chip}'} but `{n}` lives on chip {c}"
    return None


def run_program(program: SpatialProgram, given: Mapping[str, np.ndarray],
                arithmetic: Arithmetic = EXACT) -> dict[str, np.ndarray]:
    """Execute ``program`` over ``given`` — a value for every input, weight, table and state tensor, by the program's
    own tensor names — and return every tensor's value after the last op (states updated). A tiled program runs
    tile by tile (``run_tiles``)."""
    env: dict[str, np.ndarray] = {}
    for t in program.tensors:
        if t.role in ("input", "weight", "table", "state"):
            if t.name not in given:
                raise ExecuteError(program.name, None, f"no value for its {t.role} `{t.name}`")
            env[t.name] = given[t.name]
    if arithmetic.ggml:  # ggml picks a float product's kernel by the rows of the step, not of a tile or a sequence's
        arithmetic = replace(arithmetic, rows=1 if batched(program) else program.rows)
    if program.tiles:
        return run_tiles(program, env, arithmetic)
    return _run_ops(program, program.ops, env, arithmetic=arithmetic)


def _run_ops(program: SpatialProgram, ops, env: dict[str, np.ndarray], where: str = "",
             fold: Callable[[Op, tuple], tuple] | None = None,
             arithmetic: Arithmetic = EXACT) -> dict[str, np.ndarray]:
    """Run ``ops`` (of ``program``, in the order its schedule gives them) over ``env``; ``fold`` adjusts what an
    op computed (a tile's running arg-max) before it is written."""
    chips = {t.name: t.chip for t in program.tensors}
    index = {id(op): i for i, op in enumerate(program.ops)}
    name = program.name + where
    for op in sorted(ops, key=lambda op: op.phase):  # the schedule: by phase, list order within one
        i = index[id(op)]
        misplaced = _misplaced(op, chips)
        if misplaced:
            raise ExecuteError(name, i, misplaced, op.kind)
        try:
            args = [env[n] for n in op.inputs]
        except KeyError as e:
            raise ExecuteError(name, i, f"reads `{e.args[0]}` before any op writes it", op.kind) from None
        try:
            out = run_op(op, args, arithmetic)
            if fold is not None:
                out = fold(op, out)
        except (ValueError, IndexError, TypeError, KeyError) as e:
            raise ExecuteError(name, i, str(e), op.kind) from e
        if len(out) != len(op.outputs):
            raise ExecuteError(name, i, f"writes {len(op.outputs)} tensors but computes {len(out)}", op.kind)
        for out_name, value in zip(op.outputs, out):
            env[out_name] = value
    return env


def _read(value: np.ndarray, access) -> np.ndarray:
    """The part of ``value`` an ``Access`` without ``from_position`` names: all of it, or a slice along an axis."""
    if access.axis is None:
        return value
    return _cut(value, access.axis, access.start or 0, access.stop)


def run_tiles(program: SpatialProgram, given: dict[str, np.ndarray],
              arithmetic: Arithmetic = EXACT) -> dict[str, np.ndarray]:
    """A tiled program (ir.py, Tiles) over ``given`` (the whole program's values): each tile's ops over its reads,
    its position the step's plus its first row, states carried from tile to tile; returns the whole program's
    values — the tiles' per-row and per-column tensors assembled, states as the last tile left them."""
    per_row, per_col = row_tensors(program), column_tensors(program)
    shapes = {t.name: t.shape for t in program.tensors}
    states = {t.name: given[t.name] for t in program.tensors if t.role == "state"}
    named = {n for op in program.ops for n in (*op.inputs, *op.outputs)}  # the names the tiles' ops read and write
    whole: dict[str, np.ndarray] = {}
    env: dict[str, np.ndarray] = {}
    for number, tile in enumerate(program.tiles):
        (r0, r1), cols = tile.rows, tile.cols
        if cols is None or cols[0] == 0:  # a new row tile: nothing of the last one is read again
            env = {}
        for t in program.tensors:
            if t.name not in named:
                continue
            if t.role == "input" and t.shape == ():  # a sequence's own position, or the step's moved to the tile
                env[t.name] = (given[in_tile(program, tile, t.name)] if sequence_of(t.name) is not None
                               else np.int32(int(given[t.name]) + r0))
            elif t.role == "table":
                env[t.name] = given[t.name]
            elif t.role == "state":
                env[t.name] = states[in_tile(program, tile, t.name)]
        for access in tile.reads:
            t = program.tensor(access.tensor)
            if t.role in ("input", "weight") and not access.from_position and t.shape != ():
                env[access.tensor] = _read(given[access.tensor], access)

        def fold(op: Op, out: tuple) -> tuple:
            """A column tile's arg-max joins its row tile's: indices from column 0, a tie to the lowest index."""
            if op.kind != "running_argmax" or cols is None:
                return out
            index, best = np.asarray(out[0]) + cols[0], np.asarray(out[1], dtype=np.float32)
            if cols[0] > 0:
                before, seen = env[op.outputs[0]], env[op.outputs[1]]
                better = best > seen
                index, best = np.where(better, index, before), np.where(better, best, seen)
            return (index, best)

        ops = runs_in(program, tile, per_col)
        _run_ops(program, ops, env, f", tile {number} (rows {r0}-{r1 - 1})", fold, arithmetic)
        for t in program.tensors:
            if t.role == "state" and t.name in named:
                states[in_tile(program, tile, t.name)] = env[t.name]
        for op in ops:
            for name in op.outputs:
                if name in states:
                    continue
                value = np.asarray(env[name])
                if name not in per_row and name not in per_col:
                    whole[name] = value
                    continue
                if name not in whole:
                    shape = list(shapes[name])
                    if name in per_row:
                        shape[0] = program.rows
                    if name in per_col:
                        shape[-1] = program.cols
                    whole[name] = np.zeros(shape, dtype=value.dtype)
                index = [slice(None)] * value.ndim
                if name in per_row:
                    index[0] = slice(r0, r1)
                if name in per_col and cols is not None:
                    index[-1] = slice(cols[0], cols[1])
                whole[name][tuple(index)] = value
    return {**given, **whole, **states}


# ---- a bound program -----------------------------------------------------------------------------------------------


@dataclass
class Bound:
    """One program bound to one layer (or the embed, or the head): ``names`` maps the program's tensor names to the
    names this layer gives them (the manifest's binding); a name it does not map is its own."""

    program: SpatialProgram
    names: Mapping[str, str]
    label: str
    layer: int | None = None
    representative: int | None = None

    def bound(self, name: str) -> str:
        """The layer's name for the program's ``name``: the binding's, else ``kinds.rebind`` from the kind's
        representative (intermediates are computed, not bound, so a manifest need not list them)."""
        if name in self.names:
            return self.names[name]
        if self.representative is None or self.layer is None or self.representative == self.layer:
            return name
        return rebind(name, self.representative, self.layer)


class Session:
    """The carried state of one deployment across steps, keyed by the layer's own names."""

    def __init__(self) -> None:
        self.states: dict[str, np.ndarray] = {}

    def state(self, t: Tensor, name: str) -> np.ndarray:
        if name not in self.states:
            self.states[name] = np.zeros(t.shape, dtype=np.float32)
        return self.states[name]


def run_bound(b: Bound, weights: Weights, inputs: Mapping[str, np.ndarray], session: Session,
              arithmetic: Arithmetic = EXACT) -> dict[str, np.ndarray]:
    """Execute ``b.program`` with every weight and state read under the layer's names and every table filled by its
    rule; ``inputs`` by the program's own input names. Returns the environment keyed by the program's names; carried states go back to
    ``session``, the others are zeroed for the next step (ir.py: a state not carried is zero at each step)."""
    p = b.program
    given: dict[str, np.ndarray] = {}
    for t in p.tensors:
        try:
            if t.role == "input":
                given[t.name] = inputs[t.name]
            elif t.role == "weight":
                given[t.name] = weight_value(t, b.bound(t.of or t.name), weights)
            elif t.role == "table":
                given[t.name] = _table(t, arithmetic)
            elif t.role == "state":
                name = b.bound(t.name)
                if t.name not in p.carried:
                    session.states.pop(name, None)
                given[t.name] = session.state(t, name)
        except (KeyError, ValueError) as e:
            raise ExecuteError(b.label, None, f"its {t.role} `{t.name}` (bound to `{b.bound(t.of or t.name)}`): "
                                              f"{e.args[0] if e.args else e}") from None
    env = run_program(p, given, arithmetic)
    for t in p.tensors:
        if t.role == "state":
            name = b.bound(t.name)
            if t.name in p.carried:
                session.states[name] = env[t.name]
            else:
                session.states.pop(name, None)
    return env


def _table(t: Tensor, arithmetic: Arithmetic = EXACT) -> np.ndarray:
    if t.fill is None:
        raise KeyError(f"the bundle gives table `{t.name}` no fill rule")
    if len(t.shape) != 2:
        raise ValueError(f"table `{t.name}` is {t.shape}, not rows by width")
    return nx.fill_table(t.fill, t.shape[0], t.shape[1], arithmetic)


# ---- a bundle, step by step ----------------------------------------------------------------------------------------


@dataclass
class Plan:
    """What a bundle runs each step, in order: the embed program (``None`` in a forward bundle, whose first hidden
    state is an input), one bound program per layer, the head."""

    embed: Bound | None
    layers: list[Bound]
    head: Bound


@dataclass
class Executed:
    """One executed step: ``values[label]`` every tensor each program held after its last op, keyed by the name the
    LAYER gives it (its binding, or ``kinds.rebind`` for intermediates); ``hidden`` each layer's output; ``logits``
    what the head's argmax read; ``next`` the head's output."""

    values: dict[str, dict[str, np.ndarray]]
    x: np.ndarray
    hidden: list[np.ndarray]
    logits: np.ndarray | None
    next: np.ndarray


def _inputs(p: SpatialProgram, tokens: np.ndarray, positions: list[int], hidden: np.ndarray | None,
            bound: Callable[[str], str]) -> dict[str, np.ndarray]:
    """A program's host inputs by what they are: int32 ``(rows,)`` the token ids; an int32 scalar a position (in a
    batched program ``…_s{b}``, sequence b's); anything else the hidden state."""
    out: dict[str, np.ndarray] = {}
    for t in p.inputs:
        if t.dtype == "int32" and t.shape == ():
            name = bound(t.name)
            b = int(name.rsplit("_s", 1)[1]) if "_s" in name and name.rsplit("_s", 1)[1].isdigit() else 0
            out[t.name] = np.int32(positions[b])
        elif t.dtype == "int32":
            out[t.name] = np.asarray(tokens, dtype=np.int32)
        else:
            if hidden is None:
                raise ExecuteError(p.name, None, f"its input `{t.name}` needs a hidden state and none was given")
            out[t.name] = hidden
    return out


def _argmax_input(p: SpatialProgram) -> str | None:
    return next((op.inputs[0] for op in p.ops if op.kind == "argmax"), None)


class Executor:
    """A deployment's bundle run step by step over one ``Session`` of carried state. ``step`` takes this step's token
    ids (one per row), the position of each sequence (one for an unbatched step) and, for a forward bundle, the first
    hidden state."""

    def __init__(self, weights: Weights, session: Session | None = None,
                 rename: Callable[[Bound, str], str] | None = None, arithmetic: Arithmetic = EXACT):
        self.weights = weights
        self.arithmetic = arithmetic
        self.session = session or Session()
        self.rename = rename or (lambda b, n: b.bound(n))  # how a program's names read at its layer

    def run(self, b: Bound, tokens, positions, hidden) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        p = b.program
        env = run_bound(b, self.weights, _inputs(p, tokens, positions, hidden, b.bound), self.session, self.arithmetic)
        return env, {self.rename(b, n): v for n, v in env.items()}

    def step(self, plan: Plan, tokens, positions: list[int], x: np.ndarray | None = None, *,
             keep: bool = True) -> Executed:
        """One step of ``plan`` (``_step``), float32 overflow a value and never a numpy warning, as the reference's.
        Without ``keep``, each program's values are let go when it ends (``Executed.values`` is empty), as
        ``Reference.step``'s."""
        with np.errstate(all="ignore"):
            return self._step(plan, tokens, positions, x, keep)

    def _step(self, plan: Plan, tokens, positions: list[int], x: np.ndarray | None = None,
              keep: bool = True) -> Executed:
        tokens = np.atleast_1d(np.asarray(tokens, dtype=np.int32))
        values: dict[str, dict[str, np.ndarray]] = {}
        if plan.embed is not None:
            env, named = self.run(plan.embed, tokens, positions, None)
            if keep:
                values["embed"] = named
            x = env[plan.embed.program.output]
        if x is None:
            raise ExecuteError("embed", None, "the bundle has no embed program and no first hidden state was given")
        h = x
        hidden = []
        for b in plan.layers:
            env, named = self.run(b, tokens, positions, h)
            if keep:
                values[b.label] = named
            h = env[b.program.output]
            hidden.append(h)
        env, named = self.run(plan.head, tokens, positions, h)
        if keep:
            values["head"] = named
        a = _argmax_input(plan.head.program)
        return Executed(values, np.asarray(x), hidden, env.get(a) if a else None, env[plan.head.program.output])


def plan_of(model, via_json: bool = True) -> Plan:
    """The plan a ``streamed.spatial.streamed_model.StreamedModel`` says: its embed, each layer's kind program bound through the
    layer's binding (the manifest's ``tensors``), its head. With ``via_json`` every program is first written to and
    read back from the JSON a bundle holds, so what runs is what the bundle serialises."""

    def ir(p: SpatialProgram) -> SpatialProgram:
        return SpatialProgram.from_json(p.to_json()) if via_json else p

    kinds = {k.name: (ir(k.program), k.representative) for k in model.kinds}
    layers = []
    for b in sorted(model.layers, key=lambda b: b.layer):
        program, rep = kinds[b.kind]
        layers.append(Bound(program, dict(b.tensors), f"layer {b.layer}", b.layer, rep))
    embed = Bound(ir(model.embed), {}, "embed") if model.embed is not None else None
    return Plan(embed, layers, Bound(ir(model.head), {}, "head"))
