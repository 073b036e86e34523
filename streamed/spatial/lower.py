"""Lowering one authored program to a certified ``SpatialProgram``: a pipeline of named passes.

    lift  →  split_tp (tensor parallel only)  →  fold_q8  →  tile  →  place  →  certify

One pass runs over the whole deployment before any program is lowered: the dense tables
(``streamed.spatial.streamed_model.shared_tables``) — the host tables and hidden-state boundaries the programs share, declared
alike everywhere, whose set is part of every program's cache key.

- ``lift``: each statement to spatial ops in statement order. Sub-expressions get derived names
  ``{binder}__{k}`` (a ``Set`` statement's ``{state}__w{statement}_{k}``), so every derived name starts with the
  authored name it comes from, followed by ``_`` — which is what lets a kind program's names be rebound to any layer
  of the kind (``streamed.analysis.kinds.rebind_via``). A batched cut runs the ops that read a position or a state once per
  sequence (``take_rows`` → the op on ``pos_s{b}``, ``Kc3_s{b}`` → ``stack_rows``). Every statement that cannot be
  lifted is refused (``LoweringError.every``: its index, its binder and why); a statement that reads what a refused
  one binds is not refused again.
- ``split_tp``: every chip its own heads and FFN columns (Megatron): a product from a replicated activation into an
  activation that nothing needs whole is split by columns; a product from a split activation is split by rows and
  its partial sums all-reduced at once — two all-reduces for an attention + feed-forward layer. Divisibility (heads,
  KV heads, widths) is checked here and refused as ``TPError``. A Q8_0 weight whose row slice cuts its blocks is
  read dense by the chips (the seed's Storage rule), recorded with why in the certificate's ``read_dense``.
- ``fold_q8``: a product over a weight the checkpoint stores Q8_0 reads its int8 planes and block scales
  (``matmul_q8``); every other weight is read dense.
- ``tile``: a program whose footprint exceeds the target's SRAM, PMUs or PCUs runs as tiles that each fit
  (ir.py, Tiles): of its rows, of a batch's sequences, and of the head's vocabulary columns with a running
  arg-max; the weights are streamed to every tile or kept on chip across them, whichever moves less. Refused, with
  the numbers of its smallest tile, only when even that does not fit.
- ``place``: PCUs for each op in proportion to its FLOPs (at least one each), PMUs for each on-chip buffer, bytes
  moved per tier.
- ``certify``: every tensor bound exactly once, every value written in a phase before the one that reads it (the
  schedule is the phases), shapes re-inferred op by op and equal to the declared ones, tiles that cover every row
  once and compute on their own rows, the program's own footprint (one tile's: its tables, inputs and
  intermediates, per chip) within the target's SRAM, PMUs and PCUs. Refused with numbers otherwise — for every
  limit exceeded, each on the statement that takes most of it.

Every pass is a pure function of its inputs; cost is linear in the program, never in the model's depth (the tile
pass lowers the program again at a logarithmic number of tile sizes).
"""

from __future__ import annotations

import math
import re
from dataclasses import replace
from typing import Callable

from ..lang.syntax import Binary, Call, Declaration, Let, Name, Number, Return, Set
from ..model.program import Program
from .deployment import Cut
from .ir import (
    COLLECTIVES, Q8_BLOCK, Access, Op, SpatialProgram, Tensor, Tile, column_tensors, in_tile, nbytes, row_tensors,
    runs_in, sequence_of,
)
from .target import SpatialTarget
from .units import beside, size


class LoweringError(Exception):
    """A program that does not lower: why, and the statement (index and binder) that caused it, when one did.

    ``more``: the program's other rejects, each on its own statement — a lowering reports every statement it cannot
    lift and every limit of the target the program exceeds, not only the first (``every`` lists them all)."""

    def __init__(self, why: str, statement: int | None = None, binder: str | None = None, more=()):
        super().__init__(why)
        self.why = why
        self.statement = statement
        self.binder = binder
        self.more = tuple(more)

    @property
    def every(self) -> tuple["LoweringError", ...]:
        return (self, *self.more)

    @staticmethod
    def of(errors: list["LoweringError"]) -> "LoweringError":
        """One error standing for ``errors`` (at least one), in order: the first, with the rest as its ``more``."""
        first, rest = errors[0], [m for e in errors for m in e.every][1:]
        return type(first)(first.why, first.statement, first.binder, rest)


class TPError(LoweringError):
    """A tensor-parallel width the model does not admit: the bundle cannot exist."""


ELEMENTWISE = {"silu", "gelu", "sigmoid", "softplus", "exp", "scale", "add", "sub", "mul", "copy"}
SEQUENCE_OPS = {"rope", "attention", "latent_attention", "gated_delta", "short_convolution", "write_rows"}
_CALL_KIND = {"latent attention": "latent_attention", "gated delta": "gated_delta",
              "short convolution": "short_convolution", "row": "lookup", "rows": "lookup"}
_BINARY_KIND = {"plus": "add", "minus": "sub", "multiplied": "mul"}
#: The experts op's optional slots, in the order they follow X, R, G, U, D.
EXPERT_OPTIONAL = (("B", "selection bias", "selection_bias"), ("RB", "router bias", "router_bias"),
                   ("BG", "expert biases", "bias_gate"), ("BU", "expert biases", "bias_up"),
                   ("BD", "expert biases", "bias_down"), ("G2", "shared", "shared_gate_proj"),
                   ("U2", "shared", "shared_up"), ("D2", "shared", "shared_down"), ("S", "shared gate", "shared_gate"))


# ---- shapes and costs ------------------------------------------------------------------------------------------


def infer(op: Op, shape) -> tuple[tuple[int, ...], ...]:
    """The shapes of ``op``'s outputs from its inputs' (``shape(name)``). Raises ``LoweringError`` on a mismatch."""
    k, ins = op.kind, [shape(n) for n in op.inputs]

    def bad(why):
        raise LoweringError(f"`{op.kind}` of {', '.join(op.inputs)}: {why}", op.statement)

    if k in ("matmul", "matmul_q8"):
        x, w = ins[0], ins[1]
        if len(x) != 2 or len(w) != 2 or x[1] != w[0]:
            bad(f"{x} times {w}")
        if k == "matmul_q8" and ins[2] != (w[0] // Q8_BLOCK, w[1]):
            bad(f"scales {ins[2]} for planes {w}")
        return ((x[0], w[1]),)
    if k in ("add", "sub", "mul"):
        if len(ins) == 1:
            return (ins[0],)
        a, b = ins
        if a == b or b == () or (len(b) == 1 and a and a[-1] == b[0]):
            return (a,)
        if a == () or (len(a) == 1 and b and b[-1] == a[0]):
            return (b,)
        bad(f"{a} and {b} do not broadcast")
    if k in ELEMENTWISE or k in ("softmax", "rmsnorm", "l2norm", "rope"):
        return (ins[0],)
    if k == "lookup":
        return ((ins[0][0], ins[1][1]),)
    if k == "attention":
        q, kk, v = ins[0], ins[1], ins[2]
        h, g = op.attr("heads"), op.attr("groups")
        if q[1] % h or kk[1] % g or v[1] % g or q[1] // h != kk[1] // g or kk[0] != v[0]:
            bad(f"queries {q}, keys {kk}, values {v} for {h} heads sharing {g}")
        return ((q[0], h * (v[1] // g)),)
    if k == "latent_attention":
        return ((ins[0][0], op.attr("heads") * ins[5][2]),)
    if k == "gated_delta":
        return ((ins[0][0], op.attr("heads") * ins[3][2]), ins[3])
    if k == "short_convolution":
        return (ins[0], ins[1])
    if k == "experts":
        return (ins[0],)
    if k == "argmax":
        return ((ins[0][0],),)
    if k == "running_argmax":
        return ((ins[0][0],), (ins[0][0],))
    if k == "write_rows":
        s, v = ins[0], ins[2]
        if len(v) != 2 or len(s) != 2 or v[1] != s[1] or v[0] > s[0]:
            bad(f"rows {v} do not fit state {s}")
        return (s,)
    if k == "assign":
        return (ins[0],)
    if k == "take_rows":
        return ((op.attr("count"),) + ins[0][1:],)
    if k == "stack_rows":
        return ((sum(s[0] for s in ins),) + ins[0][1:],)
    if k == "take_cols":
        return (ins[0][:-1] + (op.attr("stop") - op.attr("start"),),)
    if k == "allreduce":
        return (ins[0],)
    if k == "allgather":
        axis = op.attr("axis", -1) % len(ins[0])
        s = list(ins[0])
        s[axis] = sum(x[axis] for x in ins)
        return (tuple(s),)
    bad("unknown op")


def _size(s) -> int:
    return math.prod(s) if s else 1


def _reach(op: Op) -> int | float:
    """How many keys one query of an attention op scores at most: a sliding window's ``W``, a chunk's ``C``, else
    every cached position (``inf``: the cache's length decides)."""
    return min(op.attr("window", math.inf) or math.inf, op.attr("chunk", math.inf) or math.inf)


def flops_of(op: Op, shape) -> int:
    """Floating-point operations of one op (multiply-adds count two)."""
    k, ins = op.kind, [shape(n) for n in op.inputs]
    out = shape(op.outputs[0]) if op.outputs else ()
    if k in ("matmul", "matmul_q8"):
        return 2 * ins[0][0] * ins[0][1] * ins[1][1]
    if k == "attention":
        q, kk = ins[0], ins[1]
        return 4 * q[0] * q[1] * min(kk[0], _reach(op))
    if k == "latent_attention":
        q, c, r, a, b = ins[0], ins[1], ins[2], ins[4], ins[5]
        h, n = a[0], a[1]
        return 2 * q[0] * h * (n * c[1] + c[0] * (2 * c[1] + r[1]) + c[1] * b[2])
    if k == "gated_delta":
        s = ins[3]
        return 6 * ins[0][0] * _size(s)
    if k == "short_convolution":
        return 2 * _size(ins[0]) * ins[2][0]
    if k == "experts":
        x, r, g = ins[0], ins[1], ins[2]
        top = op.attr("top", 1)
        f = 6 * x[0] * x[1] * g[2] * top + 2 * x[0] * x[1] * r[1]
        if "shared_gate_proj" in op.attr("optional", ()):
            f += 6 * x[0] * x[1] * shape(op.inputs[5 + op.attr("optional").index("shared_gate_proj")])[1]
        return f
    if k in ("rmsnorm", "l2norm"):
        return 4 * _size(out)
    if k == "rope":
        return 6 * _size(out)
    if k in ("softmax", "gelu", "silu", "sigmoid", "softplus", "exp"):
        return 4 * _size(out)
    if k in ("add", "sub", "mul", "scale", "argmax", "running_argmax"):
        return _size(ins[0])
    if k == "allreduce":
        return _size(out) * (len(ins) - 1)
    return 0


# ---- lift ------------------------------------------------------------------------------------------------------


def _resolve(shape, cut: Cut) -> tuple[int, ...]:
    return tuple(cut.rows if d == "rows" else cut.ctx if d == "ctx" else int(d) for d in shape)


def _dtype_bytes(shape, dtype):
    return nbytes(shape, dtype)


class _Poisoned(Exception):
    """A statement reads what an earlier refused statement binds: refusing it too would say that refusal again."""


class _Lifter:
    def __init__(self, program: Program, constants: dict[str, float], cut: Cut):
        self.p = program
        self.constants = constants
        self.cut = cut
        self.tensors: dict[str, Tensor] = {}
        self.ops: list[Op] = []
        self.statement: int | None = None
        self.binder: str | None = None
        self.counter = 0
        self.stem = ""
        self.subst: dict[str, str] = {}
        self.carried: list[str] = []
        self.poisoned: set[str] = set()

    # -- tensors --
    def shape(self, name: str) -> tuple[int, ...]:
        return self.tensors[name].shape

    def add(self, name: str, shape, dtype: str, role: str, tier: str = "sram", **kw) -> str:
        self.tensors[name] = Tensor(name, tuple(shape), dtype, role, tier, _dtype_bytes(shape, dtype), **kw)
        return name

    def fail(self, why: str):
        raise LoweringError(why, self.statement, self.binder)

    def fresh(self) -> str:
        self.counter += 1
        return f"{self.stem}__{self.counter}"

    def decl(self, d) -> None:
        c = self.cut
        if d.role == "token":
            self.add(d.name, (c.rows,), "int32", "input")
        elif d.role == "position":
            if c.batched:
                for b in range(c.batch):
                    self.add(f"{d.name}_s{b}", (), "int32", "input")
            else:
                self.add(d.name, (), "int32", "input")
        elif d.role == "weight":
            self.add(d.name, _resolve(d.shape, c), "bf16", "weight", "hbm")
        elif d.role == "input":
            self.add(d.name, _resolve(d.shape, c), "bf16", "input")
        elif d.role == "state":
            names = [f"{d.name}_s{b}" for b in range(c.batch)] if c.batched else [d.name]
            for n in names:
                self.add(n, _resolve(d.shape, c), "bf16", "state")
                if not c.forward:
                    self.carried.append(n)
        elif d.role == "table":
            self.add(d.name, _resolve(d.shape, c), "bf16", "table", fill=tuple(d.fill) if d.fill else None)

    # -- ops --
    def emit(self, kind: str, inputs, attrs=(), dest: str | None = None, outputs=None) -> str:
        """Append one op (per sequence when it reads a position or a state in a batched cut); returns its output."""
        dest = dest or self.fresh()
        if self.cut.batched and kind in SEQUENCE_OPS:
            return self.emit_per_sequence(kind, inputs, attrs, dest)
        op = Op(kind, tuple(inputs), tuple(outputs or (dest,)), tuple(attrs), statement=self.statement)
        try:
            shapes = infer(op, self.shape)
        except LoweringError as e:
            self.fail(e.why)
        for name, s in zip(op.outputs, shapes):
            if name not in self.tensors:
                dtype = "int32" if kind == "argmax" else "bf16"
                self.add(name, s, dtype, "intermediate")
        self.ops.append(op)
        return dest

    def role(self, name: str) -> str | None:
        d = self.p.decls.get(name)
        return d.role if d else None

    def emit_per_sequence(self, kind: str, inputs, attrs, dest: str) -> str:
        c = self.cut
        parts = []
        state_out = None
        for b in range(c.batch):
            ins = []
            for n in inputs:
                role = self.role(n)
                if role in ("position", "state"):
                    ins.append(f"{n}_s{b}")
                elif role in ("weight", "table"):
                    ins.append(n)
                else:
                    if self.shape(n)[:1] != (c.rows,):
                        self.fail(f"`{kind}` reads `{n}` ({self.shape(n)}), which is not one row per sequence")
                    part = f"{n}__s{b}"
                    if part not in self.tensors:
                        op = Op("take_rows", (n,), (part,), (("start", b), ("count", 1)), statement=self.statement)
                        self.add(part, infer(op, self.shape)[0], self.tensors[n].dtype, "intermediate")
                        self.ops.append(op)
                    ins.append(part)
            if kind == "write_rows":
                out = (ins[0],)
            elif kind in ("gated_delta", "short_convolution"):
                state = ins[3] if kind == "gated_delta" else ins[1]
                out = (f"{dest}__s{b}", state)
            else:
                out = (f"{dest}__s{b}",)
            op = Op(kind, tuple(ins), out, tuple(attrs), statement=self.statement)
            try:
                shapes = infer(op, self.shape)
            except LoweringError as e:
                self.fail(e.why)
            for name, s in zip(out, shapes):
                if name not in self.tensors:
                    self.add(name, s, "bf16", "intermediate")
            self.ops.append(op)
            parts.append(out[0])
            state_out = out[0]
        if kind == "write_rows":
            return state_out
        op = Op("stack_rows", tuple(parts), (dest,), statement=self.statement)
        self.add(dest, infer(op, self.shape)[0], "bf16", "intermediate")
        self.ops.append(op)
        return dest

    def number(self, n) -> float:
        if n is None:
            return None
        if isinstance(n, Number):
            return n.value
        return self.constants[n.text]

    def operand(self, e) -> str | float:
        """A tensor name, or a scalar for a number or a constant."""
        if isinstance(e, Number):
            return e.value
        if isinstance(e, Name):
            if e.text in self.poisoned:
                raise _Poisoned()
            if e.text in self.p.shapes or e.text in self.p.decls:
                name = self.subst.get(e.text, e.text)
                if name not in self.tensors and self.role(name) not in ("position", "state"):
                    self.fail(f"`{e.text}` is read before anything binds it")
                return name
            if e.text in self.constants:
                return self.constants[e.text]
            self.fail(f"`{e.text}` is never bound")
        return self.expr(e, None)

    def tensor_operand(self, e, what: str) -> str:
        v = self.operand(e)
        if not isinstance(v, str):
            self.fail(f"{what} must be a tensor, not the number {v:g}")
        return v

    def expr(self, e, dest: str | None) -> str:
        if isinstance(e, (Name, Number)):
            v = self.operand(e)
            if isinstance(v, str):
                return self.emit("copy", (v,), dest=dest)
            self.fail(f"`{self.binder}` is bound to the number {v:g}; a constant belongs in `## Model`")
        if isinstance(e, Binary):
            return self.binary(e, dest)
        return self.call(e, dest)

    def binary(self, e: Binary, dest):
        if e.op == "scaled":
            x = self.tensor_operand(e.left, "what is scaled")
            f = self.operand(e.right)
            if isinstance(f, str):
                self.fail("`scaled by` takes a number or a constant, not a tensor")
            return self.emit("scale", (x,), (("factor", f),), dest)
        if e.op == "times":
            x = self.tensor_operand(e.left, "the left of `times`")
            w = self.tensor_operand(e.right, "the right of `times`")
            return self.emit("matmul", (x, w), (), dest)
        kind = _BINARY_KIND[e.op]
        a, b = self.operand(e.left), self.operand(e.right)
        if isinstance(a, str) and isinstance(b, str):
            return self.emit(kind, (a, b), (), dest)
        if isinstance(a, str):
            return self.emit(kind, (a,), (("scalar", b), ("side", "right")), dest)
        if isinstance(b, str):
            return self.emit(kind, (b,), (("scalar", a), ("side", "left")), dest)
        self.fail(f"`{e.op}` of two numbers; compute it in `## Model`")

    def call(self, c: Call, dest):
        op = c.op
        kind = _CALL_KIND.get(op, op)
        t = lambda slot: self.tensor_operand(c.arg(slot), f"`{slot}` of `{op}`")
        n = lambda slot: self.number(c.number(slot))
        if op in ("silu", "gelu", "sigmoid", "softplus", "exp", "softmax", "argmax"):
            return self.emit(kind, (t("X"),), (), dest)
        if op in ("rmsnorm", "l2norm"):
            attrs = [("epsilon", n("E") if "epsilon" in c.options else 1e-6)]
            if op == "rmsnorm":
                attrs.append(("offset", n("O") if "offset" in c.options else 0.0))
            if "heads" in c.options:
                attrs.append(("heads", int(n("H"))))
            ins = (t("X"), t("G")) if op == "rmsnorm" else (t("X"),)
            return self.emit(kind, ins, attrs, dest)
        if op in ("row", "rows"):
            return self.emit("lookup", (t("T"), t("E")), (), dest)
        if op == "rope":
            x = t("X")
            heads = int(n("H"))
            after = int(n("N")) if "after" in c.options else 0
            rot = int(n("R")) if "rotating" in c.options else self.shape(x)[1] // heads - after
            attrs = (("heads", heads), ("rotating", rot)) + ((("after", after),) if after else ()) \
                + ((("interleaved", True),) if "interleaved" in c.options else ())
            return self.emit("rope", (x, self.position(c), t("C"), t("S")), attrs, dest)
        if op == "attention":
            q, k, v = t("Q"), t("K"), t("V")
            self.cache(k, "keys")
            self.cache(v, "values")
            attrs = [("heads", int(n("H"))), ("groups", int(n("G")))]
            if "window" in c.options:
                attrs.append(("window", int(n("W"))))
            if "chunks of" in c.options:
                attrs.append(("chunk", int(n("C"))))
            if "scale" in c.options:
                attrs.append(("scale", n("F")))
            ins = [q, k, v, self.position(c)]
            if "sinks" in c.options:
                ins.append(t("S"))
            return self.emit("attention", ins, attrs, dest)
        if op == "latent attention":
            cache, rk = t("C"), t("R")
            self.cache(cache, "latents")
            self.cache(rk, "rope keys")
            attrs = [("heads", int(n("H"))), ("nope", int(n("N"))), ("rope", int(n("M")))]
            if "scale" in c.options:
                attrs.append(("scale", n("F")))
            return self.emit(kind, (t("Q"), cache, rk, self.position(c), t("A"), t("B")), attrs, dest)
        if op == "gated delta":
            s = t("S")
            heads = int(n("H"))
            attrs = [("heads", heads), ("groups", int(n("G")) if c.number("G") is not None else heads)]
            if "in turn" in c.options:
                attrs.append(("in_turn", True))
            dest = dest or self.fresh()
            return self.emit(kind, (t("Q"), t("K"), t("V"), s, t("A"), t("B")), attrs, dest, outputs=(dest, s))
        if op == "short convolution":
            s = t("S")
            dest = dest or self.fresh()
            return self.emit(kind, (t("X"), s, t("W")), (), dest, outputs=(dest, s))
        if op == "experts":
            ins = [t("X"), t("R"), t("G"), t("U"), t("D")]
            optional = []
            for slot, _, attr in EXPERT_OPTIONAL:
                if c.arg(slot) is not None:
                    ins.append(t(slot))
                    optional.append(attr)
            attrs = [("top", int(n("K"))), ("scored", "sigmoid" if "scored by sigmoid" in c.options else "softmax"),
                     ("normalized", "normalized" in c.options), ("weighting_inputs", "weighting inputs" in c.options),
                     ("optional", tuple(optional))]
            if "routed scale" in c.options:
                attrs.append(("routed_scale", n("F")))
            if "groups" in c.options:
                attrs += [("groups", int(n("N"))), ("keep", int(n("M")))]
            if "clamped swiglu at" in c.options:
                attrs.append(("clamp", n("L")))
            return self.emit("experts", ins, attrs, dest)
        self.fail(f"`{op}` has no spatial lowering")

    def position(self, c: Call) -> str:
        p = c.arg("P")
        if not isinstance(p, Name) or self.role(p.text) != "position":
            self.fail(f"`{c.op}` reads its position from a declared position, not `{getattr(p, 'text', p)}`")
        return p.text

    def cache(self, name: str, what: str) -> None:
        """Outside a forward step, attention reads a cache: a state that holds every position up to ``ctx``."""
        if self.cut.forward:
            return
        if self.role(name) != "state":
            self.fail(f"attention reads its {what} from `{name}`, which is not a state: a "
                      f"{'batched' if self.cut.batched else 'decode'} step would attend over its own rows only "
                      f"(declare `{name}` a state of ctx rows and `Set row` it)")

    def statement_(self, st) -> None:
        self.statement = st.index
        self.counter = 0
        if isinstance(st, Let):
            self.binder = st.name.text
            self.stem = st.name.text
            if isinstance(st.value, Declaration):
                return
            self.expr(st.value, st.name.text)
        elif isinstance(st, Set):
            target = st.target.text
            self.binder = target
            self.stem = f"{target}__w{st.index}"
            if self.role(target) != "state":
                self.fail(f"`Set` changes a declared state; `{target}` is not one")
            value = self.tensor_operand(st.value, "the value a state is set to") if not isinstance(st.value, (Name, Number)) else self.operand(st.value)
            if not isinstance(value, str):
                self.fail("a state is set to a tensor, not a number")
            if st.row is None:
                if self.cut.batched:
                    self.fail(f"`Set {target} to …` replaces a whole state; a batched step holds one `{target}` per "
                              f"sequence and cannot say whose (write it by rows: `Set row P of {target} to …`)")
                self.emit("assign", (value,), (), target, outputs=(target,))
            else:
                if not isinstance(st.row, Name) or self.role(st.row.text) != "position":
                    self.fail("`Set row P of …` writes from a declared position")
                self.emit("write_rows", (target, st.row.text, value), (), target, outputs=(target,))
        elif isinstance(st, Return):
            self.binder = st.name.text
            if st.name.text in self.poisoned:
                raise _Poisoned()
            name = self.subst.get(st.name.text, st.name.text)
            t = self.tensors.get(name)
            if t is None:
                self.fail(f"`{st.name.text}` is returned but never bound")
            if t.role in ("input", "weight", "state", "table"):
                out = f"{name}__out"
                self.emit("copy", (name,), (), out)
                name = out
            self.tensors[name] = replace(self.tensors[name], role="output")


def lift(program: Program, constants: dict[str, float], cut: Cut):
    """The program's tensors (by name, declared first) and ops in statement order, and the states it carries."""
    lf = _Lifter(program, constants, cut)
    for d in sorted(program.decls.values(), key=lambda d: d.statement):
        lf.decl(d)
    if cut.last_row and program.input is not None:
        lf.statement, lf.binder, lf.stem, lf.counter = None, program.input, program.input, 0
        rows = lf.shape(program.input)[0]
        last = f"{program.input}__last"
        op = Op("take_rows", (program.input,), (last,), (("start", rows - 1), ("count", 1)))
        lf.add(last, infer(op, lf.shape)[0], "bf16", "intermediate")
        lf.ops.append(op)
        lf.subst[program.input] = last
    # Every statement is lifted, so that a program reports each statement it cannot lift; a statement that reads
    # what a refused one binds is skipped silently (one mistake, one reject).
    errors: list[LoweringError] = []
    for st in program.statements:
        try:
            lf.statement_(st)
        except (LoweringError, _Poisoned) as e:
            if isinstance(e, LoweringError):
                errors.append(e)
            bound = getattr(st, "name", None) or getattr(st, "target", None)
            if bound is not None:
                lf.poisoned.add(bound.text)
    if errors:
        raise LoweringError.of(errors)
    if not any(t.role == "output" for t in lf.tensors.values()):
        raise LoweringError(f"{program.label} returns nothing")
    return lf.tensors, lf.ops, tuple(lf.carried)


# ---- tensor parallel ---------------------------------------------------------------------------------------------


def _needs_whole(tensors: dict[str, Tensor], ops: list[Op]) -> set[str]:
    """The tensors some reader needs whole on every chip (a norm over whole rows, a softmax, the experts' input, the
    program's output…), propagated back through the elementwise ops and state writes that produce them."""
    need = {n for n, t in tensors.items() if t.role == "output"}
    for op in reversed(ops):
        k, ins, outs = op.kind, op.inputs, op.outputs
        out_needed = any(o in need for o in outs)
        if k in ELEMENTWISE or k in ("take_rows", "stack_rows", "rope", "assign"):
            if out_needed:
                need.update(ins)
        elif k == "write_rows":
            if out_needed:
                need.add(ins[2])
        elif k in ("rmsnorm", "l2norm"):
            if op.attr("heads") is None or out_needed:
                need.add(ins[0])
        elif k in ("softmax", "argmax", "lookup", "experts"):
            need.add(ins[0])
        elif k == "latent_attention":
            need.update(ins[1:3])
            if out_needed:
                need.add(ins[0])
        elif k in ("attention", "gated_delta", "short_convolution"):
            if out_needed:
                need.update(ins)
        elif k == "matmul":
            if tensors[ins[1]].role != "weight":
                need.update(ins)
    return need


class _Splitter:
    def __init__(self, tensors: dict[str, Tensor], ops: list[Op], tp: int, q8: frozenset[str], label: str):
        self.src = tensors
        self.tensors: dict[str, Tensor] = {}
        self.ops: list[Op] = []
        self.tp = tp
        self.q8 = q8
        self.label = label
        self.axis: dict[str, int] = {}  # split tensors: the axis split over chips
        self.phase = 0
        self.need = _needs_whole(tensors, ops)
        self.weight_axis: dict[str, int] = {}
        self.statement = None
        self.current: Op | None = None
        #: Declared weights the checkpoint stores Q8_0 that the chips read dense, and why (the seed's Storage rule).
        self.dense: dict[str, str] = {}

    def refuse(self, why: str):
        raise TPError(f"{self.label}: {why}", self.statement, self.binder)

    def part(self, n: int, what: str) -> int:
        if n % self.tp:
            self.refuse(f"{what} ({n}) do not split over {self.tp} chips")
        return n // self.tp

    def keep(self, name: str) -> str:
        if name not in self.tensors:
            self.tensors[name] = self.src[name]
        return name

    def new(self, name: str, like: Tensor, shape, chip, role=None, **kw) -> str:
        if name not in self.tensors:
            role = role or ("intermediate" if like.role in ("input", "output") else like.role)
            self.tensors[name] = replace(like, name=name, shape=tuple(shape), chip=chip, role=role,
                                         bytes=nbytes(shape, like.dtype), **kw)
        return name

    def local(self, name: str, c: int, axis: int | None = None, what: str | None = None) -> str:
        """Chip ``c``'s part of ``name`` split along ``axis`` (default: the last). A weight is sliced as loaded; a
        replicated activation or state is cut on the chip by ``take_cols``; a split one is already local."""
        t = self.src.get(name) or self.tensors[name]
        if name in self.axis:
            return f"{name}_c{c}"
        axis = len(t.shape) - 1 if axis is None else axis
        width = self.part(t.shape[axis], what or f"the {t.shape[axis]} columns of `{name}`")
        shape = list(t.shape)
        shape[axis] = width
        if t.role == "weight":
            self.weight_axis.setdefault(name, axis)
            return self.new(f"{name}_c{c}", t, shape, c, of=name, slice=(axis, c * width, (c + 1) * width))
        if axis != len(t.shape) - 1:
            self.refuse(f"`{name}` would be cut along axis {axis} on the chip")
        out = f"{name}__cols_c{c}"
        if out not in self.tensors:
            self.keep(name)
            self.new(out, t, shape, c, role="intermediate")
            self.ops.append(Op("take_cols", (name,), (out,), (("start", c * width), ("stop", (c + 1) * width)),
                               phase=self.phase, chip=c, statement=self.statement))
        return out

    def whole(self, name: str) -> str:
        """``name`` replicated: a split tensor is gathered from the chips once."""
        if name not in self.axis:
            return self.keep(name)
        out = f"{name}__all"
        if out not in self.tensors:
            t = self.src[name]
            self.tensors[out] = replace(t, name=out, chip=None, role="intermediate" if t.role != "output" else "output")
            self.phase += 1
            self.ops.append(Op("allgather", tuple(f"{name}_c{c}" for c in range(self.tp)), (out,),
                               (("axis", self.axis[name]),), phase=self.phase, statement=self.statement))
        return out

    def split_out(self, name: str, c: int, axis: int | None = None) -> str:
        t = self.src[name]
        axis = len(t.shape) - 1 if axis is None else axis
        self.axis[name] = axis
        shape = list(t.shape)
        shape[axis] = self.part(t.shape[axis], f"the {t.shape[axis]} columns of `{name}`")
        role = "state" if t.role == "state" else "intermediate"
        return self.new(f"{name}_c{c}", t, shape, c, role=role)

    def per_chip(self, op: Op, ins_of, outs_of, attrs_of=None):
        for c in range(self.tp):
            attrs = attrs_of(c) if attrs_of else op.attrs
            self.ops.append(replace(op, inputs=tuple(ins_of(c)), outputs=tuple(outs_of(c)), attrs=tuple(attrs),
                                    chip=c, phase=self.phase))

    def replicated(self, op: Op):
        ins = tuple(self.whole(n) for n in op.inputs)
        for o in op.outputs:
            self.keep(o)
        self.ops.append(replace(op, inputs=ins, phase=self.phase, chip=None))

    def allreduce(self, name: str, op: Op, ins_of, attrs_of=None):
        """Each chip's partial product of ``op`` into ``name``, summed by one all-reduce."""
        t = self.src[name]
        parts = [self.new(f"{name}__part_c{c}", t, t.shape, c, role="intermediate") for c in range(self.tp)]
        self.per_chip(op, ins_of, lambda c: (parts[c],), attrs_of)
        self.phase += 1
        self.keep(name)
        self.ops.append(Op("allreduce", tuple(parts), (name,), phase=self.phase, statement=op.statement))

    def scaled_attrs(self, op: Op, keys):
        def attrs(c):
            return tuple((k, v // self.tp if k in keys else v) for k, v in op.attrs)
        return attrs

    def admits(self, ops: list[Op]) -> None:
        """Heads and expert widths first: they say why a width is refused better than a column count does. Every
        op that does not split is refused, each on its statement."""
        errors: list[LoweringError] = []
        for op in ops:
            self.statement = op.statement
            self.current = op
            try:
                if op.kind == "attention":
                    self.part(op.attr("heads"), "the query heads of attention")
                    self.part(op.attr("groups"), "the key/value heads of attention")
                elif op.kind == "gated_delta":
                    self.part(op.attr("heads"), "the value heads of gated delta")
                    self.part(op.attr("groups"), "the key heads of gated delta")
                elif op.kind == "latent_attention":
                    self.part(op.attr("heads"), "the heads of latent attention")
                elif op.kind == "experts":
                    self.part(self.src[op.inputs[2]].shape[2], "the FFN columns of each expert")
            except TPError as e:
                if not any(e.statement == seen.statement for seen in errors):
                    errors.append(e)
        if errors:
            raise TPError.of(errors)

    @property
    def binder(self) -> str | None:
        """The authored name the current op's output comes from (``h0`` for ``h0__1``)."""
        op = self.current
        return op.outputs[0].split("__")[0] if op is not None and op.outputs else None

    def run(self, ops: list[Op]) -> None:
        self.admits(ops)
        for op in ops:
            self.phase += 1
            self.current = op
            self.statement = op.statement
            self.one(op)

    def one(self, op: Op) -> None:
        k, ins, outs = op.kind, op.inputs, op.outputs
        split = lambda n: n in self.axis
        if k == "matmul" and self.src[ins[1]].role == "weight":
            x, w = ins
            if split(x):
                if w in self.q8:
                    rows = self.part(self.src[w].shape[0], f"the input features of `{w}`")
                    if rows % Q8_BLOCK:
                        # The seed's Storage rule: a slice that cuts Q8_0 blocks cannot be read as stored, so the
                        # chips read it dense (its values are the blocks' dequantisation, the reference's numbers).
                        self.dense[w] = (f"its {self.src[w].shape[0]} input features split over {self.tp} chips as "
                                         f"rows of {rows}, which cut its Q8_0 blocks of {Q8_BLOCK}")
                self.allreduce(outs[0], op, lambda c: (self.local(x, c), self.local(w, c, 0, f"the input features of `{w}`")))
            elif outs[0] not in self.need:
                self.per_chip(op, lambda c: (self.keep(x), self.local(w, c, 1, f"the output features of `{w}`")),
                              lambda c: (self.split_out(outs[0], c),))
            else:
                self.replicated(op)
            return
        if k in ELEMENTWISE or k in ("take_rows", "stack_rows"):
            if any(split(n) for n in ins) and outs[0] not in self.need:
                self.per_chip(op, lambda c: [self.local(n, c) if len(self.src[n].shape) else self.keep(n) for n in ins],
                              lambda c: (self.split_out(outs[0], c),))
            else:
                self.replicated(op)
            return
        if k in ("rmsnorm", "l2norm") and op.attr("heads") and split(ins[0]) and outs[0] not in self.need:
            heads = op.attr("heads")
            self.part(heads, f"the {heads} heads normalised by `{k}`")
            self.per_chip(op, lambda c: (self.local(ins[0], c),) + tuple(self.keep(n) for n in ins[1:]),
                          lambda c: (self.split_out(outs[0], c),), self.scaled_attrs(op, ("heads",)))
            return
        if k == "rope" and split(ins[0]) and outs[0] not in self.need:
            self.part(op.attr("heads"), f"the {op.attr('heads')} heads of `rope`")
            self.per_chip(op, lambda c: (self.local(ins[0], c),) + tuple(self.keep(n) for n in ins[1:]),
                          lambda c: (self.split_out(outs[0], c),), self.scaled_attrs(op, ("heads",)))
            return
        if k in ("write_rows", "assign"):
            v = ins[2] if k == "write_rows" else ins[0]
            if split(v) and outs[0] not in self.need:
                s = outs[0]
                if k == "write_rows":
                    self.per_chip(op, lambda c: (self.split_out(s, c), self.keep(ins[1]), self.local(v, c)),
                                  lambda c: (f"{s}_c{c}",))
                else:
                    self.per_chip(op, lambda c: (self.local(v, c),), lambda c: (self.split_out(s, c),))
            else:
                self.replicated(op)
            return
        if k == "attention" and split(ins[0]) and outs[0] not in self.need:
            h, g = op.attr("heads"), op.attr("groups")
            self.part(h, f"the {h} query heads of attention")
            self.part(g, f"the {g} key/value heads of attention")
            self.per_chip(op, lambda c: [self.local(ins[0], c), self.local(ins[1], c), self.local(ins[2], c),
                                         self.keep(ins[3])] + ([self.local(ins[4], c, 0)] if len(ins) > 4 else []),
                          lambda c: (self.split_out(outs[0], c),), self.scaled_attrs(op, ("heads", "groups")))
            return
        if k == "latent_attention" and split(ins[0]) and outs[0] not in self.need:
            h = op.attr("heads")
            self.part(h, f"the {h} heads of latent attention")
            self.per_chip(op, lambda c: (self.local(ins[0], c), self.whole(ins[1]), self.whole(ins[2]), self.keep(ins[3]),
                                         self.local(ins[4], c, 0), self.local(ins[5], c, 0)),
                          lambda c: (self.split_out(outs[0], c),), self.scaled_attrs(op, ("heads",)))
            return
        if k == "gated_delta" and split(ins[2]) and outs[0] not in self.need:
            h, g = op.attr("heads"), op.attr("groups")
            if op.attr("in_turn") and g != h:
                self.refuse(f"value heads that take the {g} key heads in turn do not split in blocks over chips")
            self.part(h, f"the {h} value heads of gated delta")
            self.part(g, f"the {g} key heads of gated delta")
            s = ins[3]
            self.per_chip(op, lambda c: (self.local(ins[0], c), self.local(ins[1], c), self.local(ins[2], c),
                                         self.split_out(s, c, 0), self.local(ins[4], c), self.local(ins[5], c)),
                          lambda c: (self.split_out(outs[0], c), f"{s}_c{c}"), self.scaled_attrs(op, ("heads", "groups")))
            return
        if k == "short_convolution" and split(ins[0]) and outs[0] not in self.need:
            s = ins[1]
            self.per_chip(op, lambda c: (self.local(ins[0], c), self.split_out(s, c), self.local(ins[2], c, 1)),
                          lambda c: (self.split_out(outs[0], c), f"{s}_c{c}"))
            return
        if k == "experts":
            self.experts(op)
            return
        self.replicated(op)

    def experts(self, op: Op) -> None:
        """Every chip its columns of each expert's FFN (and of the shared expert's): partials, one all-reduce. The
        router runs replicated; an expert down-projection bias is added by chip 0 only."""
        ins = op.inputs
        optional = op.attr("optional", ())
        f = self.src[ins[2]].shape[2]
        self.part(f, f"the {f} FFN columns of each expert")
        split_axis = {"bias_gate": 1, "bias_up": 1, "shared_gate_proj": 1, "shared_up": 1, "shared_down": 0}

        def ins_of(c):
            out = [self.whole(ins[0]), self.keep(ins[1]), self.local(ins[2], c, 2), self.local(ins[3], c, 2),
                   self.local(ins[4], c, 1)]
            for name, attr in zip(ins[5:], optional):
                if attr == "bias_down" and c != 0:
                    continue
                out.append(self.local(name, c, split_axis[attr]) if attr in split_axis else self.keep(name))
            return out

        def attrs_of(c):
            kept = tuple(a for a in optional if not (a == "bias_down" and c != 0))
            return tuple((k, kept if k == "optional" else v) for k, v in op.attrs)

        self.allreduce(op.outputs[0], op, ins_of, attrs_of)


def split_tp(tensors: dict[str, Tensor], ops: list[Op], carried: tuple[str, ...], tp: int, q8: frozenset[str],
             label: str):
    """The program over ``tp`` chips (see the module docstring); returns tensors, ops, carried, and the declared
    weights stored Q8_0 whose slices the chips read dense, with why."""
    s = _Splitter(tensors, ops, tp, q8, label)
    s.run(ops)
    for name, t in tensors.items():  # declared tensors no op reads still belong to the program
        if t.role in ("input", "table") and name not in s.tensors:
            s.keep(name)
    new_carried = []
    for n in carried:
        if n in s.axis:
            new_carried += [f"{n}_c{c}" for c in range(tp)]
        else:
            new_carried.append(n)
            s.keep(n)
    return s.tensors, s.ops, tuple(new_carried), s.dense


def tp_slices(program: SpatialProgram) -> list[dict]:
    """Which part of which declared weight each chip loads: the tensor-parallel manifest of one program."""
    return [
        {"tensor": t.name, "of": t.of, "chip": t.chip, "axis": t.slice[0], "start": t.slice[1], "stop": t.slice[2],
         "encoding": t.part or "dense"}
        for t in program.tensors if t.slice is not None
    ]


def read_dense(program: SpatialProgram) -> list[dict]:
    """The weights the checkpoint stores Q8_0 that a tensor-parallel program's chips read dense, which chips, and
    why (``certificate["read_dense"]``, written by the lowering): where a host must dequantise before loading."""
    found = (program.certificate or {}).get("read_dense", {})
    chips: dict[str, list[int]] = {}
    for t in program.tensors:
        if t.of in found and t.part is None and t.chip is not None:
            chips.setdefault(t.of, []).append(t.chip)
    return [{"of": w, "chips": sorted(set(chips.get(w, []))), "why": why} for w, why in found.items()]


# ---- fold Q8 -------------------------------------------------------------------------------------------------


def fold_q8(tensors: dict[str, Tensor], ops: list[Op], q8: frozenset[str]):
    """A product over a weight the checkpoint stores Q8_0 reads its int8 planes and fp16 block scales; every other
    weight is read dense. A dense weight no op reads any more leaves the program. Every product whose weight's input
    features are not whole blocks is refused, each on its statement."""
    out_ops = []
    errors: list[LoweringError] = []
    for op in ops:
        if op.kind == "matmul":
            w = tensors[op.inputs[1]]
            declared = w.of or w.name
            if w.role == "weight" and declared in q8 and w.part is None:
                k, n = w.shape
                if k % Q8_BLOCK:
                    errors.append(LoweringError(f"`{declared}` is stored Q8_0 but its {k} input features are not "
                                                f"whole blocks of {Q8_BLOCK}", op.statement, declared))
                    out_ops.append(op)
                    continue
                planes, scales = f"{w.name}__q8", f"{w.name}__scales"
                if planes not in tensors:
                    tensors[planes] = replace(w, name=planes, dtype="int8", part="planes", of=declared,
                                              bytes=nbytes(w.shape, "int8"))
                    tensors[scales] = replace(w, name=scales, shape=(k // Q8_BLOCK, n), dtype="f16", part="scales",
                                              of=declared, bytes=nbytes((k // Q8_BLOCK, n), "f16"))
                op = replace(op, kind="matmul_q8", inputs=(op.inputs[0], planes, scales))
        out_ops.append(op)
    if errors:
        raise LoweringError.of(errors)
    read = {n for op in out_ops for n in op.inputs} | {n for op in out_ops for n in op.outputs}
    kept = {n: t for n, t in tensors.items() if not (t.role == "weight" and t.part is None and n not in read)}
    return kept, out_ops


# ---- place and certify ----------------------------------------------------------------------------------------


def sram_footprint(program: SpatialProgram) -> dict[str, int]:
    """A program's own on-chip bytes per kind of tensor, on its fullest chip: its states, tables, inputs and
    intermediates (weights stream from HBM or DDR)."""
    chips = range(program.tp) if program.tp > 1 else (None,)
    best = None
    for c in chips:
        use = {"states": 0, "tables": 0, "activations": 0}
        for t in program.tensors:
            if t.role == "weight" or t.tier != "sram" or (c is not None and t.chip not in (None, c)):
                continue
            key = "states" if t.role == "state" else "tables" if t.role == "table" else "activations"
            use[key] += t.bytes
        if best is None or sum(use.values()) > sum(best.values()):
            best = use
    return best


def authored(name: str) -> str:
    """The authored name a lowered tensor comes from: ``Kc3_s1`` (sequence 1's cache), ``Wq3_c0`` (chip 0's
    slice), ``xn3__1`` (a part of ``xn3``'s expression) all come from what precedes the lowering's suffix."""
    return re.sub(r"(_[sc]\d+)+$", "", name.split("__", 1)[0])


def _largest_on_chip(program: SpatialProgram, group: str) -> tuple[str, int, int | None]:
    """The authored name, bytes and statement of the largest on-chip tensor of ``group`` (``states``, ``tables``,
    ``activations``): what a user shrinks when a program does not fit. Its statement is the first op's that touches
    it (``lower_program`` moves a declared name to its declaration)."""
    role = {"states": ("state",), "tables": ("table",)}.get(group)
    by_name: dict[str, list[Tensor]] = {}
    for t in program.tensors:  # a batched step's 64 caches ``Kc3_s0`` … are one authored ``Kc3``
        if t.role != "weight" and t.tier == "sram" and (t.role in role if role else t.role not in ("state", "table")):
            by_name.setdefault(authored(t.name), []).append(t)
    name, parts = max(by_name.items(), key=lambda kv: sum(t.bytes for t in kv[1]))
    names = {t.name for t in parts}
    statement = next((op.statement for op in program.ops if names & {*op.outputs, *op.inputs}), None)
    return name, sum(t.bytes for t in parts), statement


def read_fraction(op: Op, name: str, tensors: dict[str, Tensor]) -> float:
    """The part of input ``name`` an op reads per step: all of it, except
    - an expert's weights, of which a step reads the experts its rows choose (at most ``rows · top`` of E);
    - an embedding table, of which a lookup reads the rows of its tokens (``rows`` of ``vocab``);
    - the state a ``write_rows`` updates in place: it reads none of it (the new rows are its write);
    - the keys and values of a windowed (or chunked) attention: the last ``W + rows − 1`` positions.
    An estimate that charged the whole table or cache would bound decode below what the weights allow."""
    if op.kind == "lookup" and name in op.inputs[1:]:
        return min(1.0, tensors[op.outputs[0]].shape[0] / max(tensors[op.inputs[1]].shape[0], 1))
    if op.kind == "write_rows" and name == op.inputs[0]:
        return 0.0
    if op.kind == "attention" and name in op.inputs[1:3]:
        # A window (or chunk) of W keys: the rows' queries reach the last W + rows − 1 positions of the cache.
        keys, rows = tensors[name].shape[0], tensors[op.inputs[0]].shape[0]
        return min(1.0, (_reach(op) + rows - 1) / max(keys, 1))
    if op.kind != "experts" or name not in op.inputs[2:5] and name not in _expert_biases(op):
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
    tables and inputs, and its weights when they stay on chip across its tiles — never its states, which residency
    places over the whole deployment."""
    use = sram_footprint(program)
    return use["activations"] + use["tables"] + (weight_bytes(program) if program.weights_on_chip else 0)


def pmus_needed(program: SpatialProgram, target: SpatialTarget) -> int:
    """PMUs for a program's on-chip buffers (chip 0's): each takes the PMUs its bytes fill; a state its ops read at
    least one, the buffer it streams through from wherever residency puts it (a tile streams its own sequences');
    weights kept on chip across tiles their own."""
    used = {n for op in program.ops for n in (*op.inputs, *op.outputs)}
    n = sum(1 if t.role == "state" else math.ceil(t.bytes / target.pmu_bytes) for t in program.tensors
            if t.tier == "sram" and t.role != "weight" and t.chip in (None, 0) and (t.role != "state" or t.name in used))
    if program.weights_on_chip:
        n += sum(math.ceil(t.bytes / target.pmu_bytes) for t in program.tensors if t.role == "weight")
    return n


# ---- tile ------------------------------------------------------------------------------------------------------

#: Ops that compute each column of their output from the same column of their inputs: a column tile runs them over
#: its own columns alone (with two inputs, both of the tile).
COLUMN_LOCAL = frozenset({"silu", "gelu", "sigmoid", "softplus", "exp", "scale", "copy", "add", "sub", "mul"})


def ops_per_chip(program: SpatialProgram) -> int:
    """The ops of a program's fullest chip: one PCU each at least."""
    chips = range(program.tp) if program.tp > 1 else (None,)
    return max(sum(1 for op in program.ops if c is None or op.chip in (None, c)) for c in chips)


def _fits(p: SpatialProgram, target: SpatialTarget) -> bool:
    return (own_bytes(p) <= target.sram_bytes and pmus_needed(p, target) <= target.pmus
            and ops_per_chip(p) <= target.pcus)


def batched(p: SpatialProgram) -> bool:
    """Whether ``p`` runs per sequence: it holds per-sequence positions or states (``pos_s0``, ``Kc3_s0``)."""
    return any((t.role == "state" or t.role == "input" and t.shape == ()) and sequence_of(t.name) is not None
               for t in p.tensors)


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
    step = _body_rows(body)
    width = None if cols is None else next(body.tensor(n).shape[-1] for n in columns
                                           if body.tensor(n).role == "weight")
    tiles = []
    for r0 in range(0, rows, step):
        r = (r0, min(rows, r0 + step))
        for c in ([None] if cols is None else [(c0, min(cols, c0 + width)) for c0 in range(0, cols, width)]):
            tiles.append(accesses(body, Tile(r, c), columns))
    return replace(body, rows=rows, tiles=tuple(tiles), cols=cols)


def _body_rows(p: SpatialProgram) -> int:
    """The rows one run of ``p``'s ops covers: its row inputs' (the program's rows when it has none)."""
    return next((t.shape[0] for t in p.tensors if t.role == "input" and t.shape != ()), p.rows)


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
    if _fits(whole, target):
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
            n = _largest(lambda n: _fits(body(n, None, on_chip), target), rows)
            if n is not None:
                plans.append(_tiled(body(even(rows, n), None, on_chip), rows, None, frozenset(), whole))
    if product is not None:
        width = whole.tensor(whole.ops[product[0]].outputs[0]).shape[-1]
        narrow = min(width, Q8_BLOCK)
        n = _largest(lambda n: _fits(body(rows_of(n), narrow), target), most_rows)
        if n is not None:
            n = even(rows, rows_of(n))
            blocks = _largest(lambda b: _fits(body(n, min(width, b * Q8_BLOCK)), target), -(-width // Q8_BLOCK))
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
        over = _over_limits(whole, target)
        raise LoweringError.of([LoweringError(f"{e.why}, and its rows cannot be tiled: {why}", e.statement, e.binder)
                                for e in over])
    smallest = body(rows_of(1), min(whole.tensor(whole.ops[product[0]].outputs[0]).shape[-1], Q8_BLOCK)
                    if product is not None else None)
    how = "" if rows == 1 and product is None else "even in tiles of one row" if blocker is None else \
        "even in tiles of its columns"
    raise LoweringError.of(_over_limits(smallest, target, how))


def _seconds(p: SpatialProgram, target: SpatialTarget) -> tuple[float, float]:
    """A step's roofline time, then its memory time, for comparing tilings of one program: its weights and carried
    states read from HBM (where residency usually puts them), the rest from SRAM. A compute-bound step's tilings
    tie on time; the one that moves less then wins."""
    cost = step_cost(p)
    memory = (cost["weights"] + cost["states"]) / target.hbm_bandwidth + cost["sram"] / target.sram_bandwidth
    return max(memory, cost["flops"] / target.peak_bf16), memory


def _over_limits(p: SpatialProgram, target: SpatialTarget, how: str = "") -> list[LoweringError]:
    """The target's on-chip limits ``p`` (a program, or one tile of it) exceeds: PCUs, SRAM and PMUs, each a refusal
    on the statement that makes most of what does not fit."""
    out = []
    ops = ops_per_chip(p)
    if ops > target.pcus:
        statement, binder = _heaviest_statement(p, lambda op: 1)
        out.append(LoweringError(f"needs {ops:,} PCUs, one for each of its ops; the {target.name.upper()} has "
                                 f"{target.pcus:,}", statement, binder))
    if own_bytes(p) > target.sram_bytes:
        out.append(_sram_refusal(p, target, how))
    pmus = pmus_needed(p, target)
    if pmus > target.pmus:
        tensors = {t.name: t for t in p.tensors}
        statement, binder = _heaviest_statement(p, lambda op: sum(
            math.ceil(tensors[o].bytes / target.pmu_bytes) for o in op.outputs
            if tensors[o].tier == "sram" and tensors[o].role not in ("state", "weight")))
        where = f" {how}" if how else ""
        out.append(LoweringError(
            f"needs {pmus:,} PMUs for its on-chip buffers{where} (each PMU holds {size(target.pmu_bytes)}); the "
            f"{target.name.upper()} has {target.pmus:,}", statement, binder))
    return out


def _sram_refusal(p: SpatialProgram, target: SpatialTarget, how: str = "") -> LoweringError:
    """``p`` (a program, or its smallest tile) does not fit: its footprint and its largest buffer, on the statement
    that makes that buffer."""
    use = sram_footprint(p)
    own = {k: v for k, v in use.items() if k != "states"}
    biggest = max(own, key=own.get)
    what = {"tables": "its tables", "activations": "its activations"}[biggest]
    name, size_, statement = _largest_on_chip(p, biggest)
    need, have = beside(own_bytes(p), target.sram_bytes)
    cols = f", {p.tile_cols} columns wide" if p.tile_cols else ""
    tiled = f" {how}{cols}" if how else ""
    on_chip = f", {size(weight_bytes(p))} for its weights kept on chip" if p.weights_on_chip else ""
    return LoweringError(f"needs {need} of SRAM{tiled} ({size(use[biggest])} for {what}, the largest `{name}` of "
                         f"{size(size_)}{on_chip}); the {target.name.upper()} has {have}", statement, name)


# ---- place and certify ----------------------------------------------------------------------------------------


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


def _certify_tiles(program: SpatialProgram, tensors: dict[str, Tensor]) -> None:
    """The tiles cover every row (and column) exactly once, in order, none larger than the body; the body computes
    on a tile's rows alone when there are several row tiles, and on a tile's columns alone when column-tiled."""
    body_rows = _body_rows(program)
    groups: list[tuple[tuple[int, int], list]] = []
    for t in program.tiles:
        if groups and groups[-1][0] == t.rows:
            groups[-1][1].append(t.cols)
        else:
            groups.append((t.rows, [t.cols]))
    at = 0
    for (r0, r1), cols in groups:
        if r0 != at or r1 <= r0:
            raise LoweringError(f"its tiles cover rows {at} to {r0 - 1} {'twice' if r0 < at else 'never'}"
                                if r0 != at else f"a tile covers the empty rows {r0} to {r1}")
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
    if program.tiles:
        _certify_tiles(program, tensors)
    # ★ A PROGRAM'S OWN FOOTPRINT IS WHAT MUST BE ON CHIP: its activations, tables and inputs (one tile's, when
    # tiled). Its carried states (KV caches, recurrent state) are placed by residency over the whole deployment —
    # SRAM while they fit, then HBM, then DDR, streamed from there — so a cache larger than SRAM is a residency
    # question, not a refusal here.
    chips = range(program.tp) if program.tp > 1 else (None,)
    per_chip_ops = ops_per_chip(program)
    use = sram_footprint(program)
    need = own_bytes(program)
    pmus = pmus_needed(program, target)
    refused = _over_limits(program, target, "in tiles" if program.tiles else "")
    if refused:
        raise LoweringError.of(refused)
    certificate = {
        "tensors": len(tensors), "ops": len(program.ops), "bound_once": True, "shapes_agree": True,
        "pcus": max(sum(op.pcus for op in program.ops if c is None or op.chip in (None, c)) for c in chips),
        "pcus_available": target.pcus, "ops_per_chip": per_chip_ops, "pmus": pmus, "pmus_available": target.pmus,
        "sram_bytes": need, "sram_available": target.sram_bytes, "state_bytes": use["states"], "target": target.name,
    }
    if program.tiles:
        certificate.update({"tiles": len(program.tiles), "tile_rows": program.tile_rows, "tile_cols": program.tile_cols,
                            "weights_on_chip": program.weights_on_chip, "tiles_cover_once": True})
    return replace(program, certificate=certificate)


# ---- what a step costs -----------------------------------------------------------------------------------------


def step_cost(p: SpatialProgram) -> dict:
    """One step of a program on its fullest chip: FLOPs, and bytes moved by what they are — ``weights``, carried
    ``states``, the rest on chip (``sram``) and all-reduced over the link (``link``) — summed over its tiles.

    Each tile does its rows' (and columns') share of the work; it reads the weights it uses (a column tile its
    columns; nothing after the first tile when they stay on chip); its attention reads the cache rows it needs,
    through its last row at full context (``W + rows − 1`` of them with a window); a recurrence reads and writes its
    whole state. So a tiled program's cost shows the price of its tiling."""
    chips = range(p.tp) if p.tp > 1 else (None,)
    tensors = {t.name: t for t in p.tensors}
    shape = lambda n: tensors[n].shape
    carried = set(p.carried)
    tiles = p.tiles or (Tile((0, p.rows)),)
    body_rows, width = _body_rows(p), p.tile_cols
    per_row, per_col = row_tensors(p), column_tensors(p)
    best = None
    for c in chips:
        mine = [op for op in p.ops if c is None or op.chip in (None, c)]
        cost = {"flops": 0, "weights": 0, "states": 0, "sram": 0, "link": 0}
        for i, t in enumerate(tiles):
            n = t.rows[1] - t.rows[0]
            share = n / body_rows
            col_share = (t.cols[1] - t.cols[0]) / width if t.cols is not None else 1.0

            def part(name: str) -> float:
                """The share of the body's ``name`` this tile holds."""
                return (share if name in per_row else 1.0) * (col_share if name in per_col else 1.0)

            running = runs_in(p, t, per_col)
            for op in mine:
                if op not in running:
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
                        reach = min(_reach(op) + n - 1, t.rows[1] + keys - p.rows) if op.kind == "attention" \
                            else t.rows[1] + keys - p.rows
                        cost["states" if name in carried else "sram"] += tensor.bytes * min(1.0, reach / keys)
                    elif tensor.role == "table":
                        cost["sram"] += moved * share
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


# ---- the pipeline --------------------------------------------------------------------------------------------


PASSES = ("lift", "split_tp", "fold_q8", "tile", "place", "certify")


def _unplaced(program: Program, constants: dict[str, float], cut: Cut, name: str, q8: frozenset[str]):
    """``lift → split_tp → fold_q8``: the program's tensors and ops for ``cut``, not yet tiled, placed or certified;
    and the declared weights stored Q8_0 that its chips read dense, with why."""
    tensors, ops, carried = lift(program, constants, cut)
    dense: dict[str, str] = {}
    if cut.tp > 1:
        tensors, ops, carried, dense = split_tp(tensors, ops, carried, cut.tp, q8, name)
    else:
        ops = [replace(op, phase=i) for i, op in enumerate(ops)]
    tensors, ops = fold_q8(tensors, ops, q8 - frozenset(dense))
    sp = SpatialProgram(name=name, rows=cut.rows, ctx=cut.ctx, tensors=tuple(tensors.values()), ops=tuple(ops),
                        carried=carried, tp=cut.tp)
    return sp, dense


def lower_program(program: Program, constants: dict[str, float], cut: Cut, target: SpatialTarget, name: str,
                  q8: frozenset[str] = frozenset()) -> SpatialProgram:
    """One authored program, lowered and certified for ``cut`` on ``target``; raises ``LoweringError`` (with every
    reject of the program in its ``every``)."""
    sp, dense = _unplaced(program, constants, cut, name, q8)
    try:
        # A batched cut's rows are its sequences: a tile of n rows is a batch of n.
        at = lambda rows: replace(cut, rows=rows, batch=rows if cut.batched else cut.batch)  # noqa: E731
        sp = tile(sp, lambda rows: _unplaced(program, constants, at(rows), name, q8)[0], target)
        sp = certify(place(sp, target), target, {d.name for d in program.decls.values()
                                                 if d.role not in ("position", "state")})
    except LoweringError as e:
        # A refusal that names a declared tensor (a table too large for SRAM) belongs on its declaration: the
        # statement whose size the user changes.
        raise LoweringError.of([_on_declaration(program, one) for one in e.every]) from None
    if dense:
        sp = replace(sp, certificate={**sp.certificate, "read_dense": dense})
    return sp


def _on_declaration(program: Program, e: LoweringError) -> LoweringError:
    decl = program.decls.get(e.binder) if e.binder else None
    if decl is None or e.statement == decl.statement or decl.role not in ("table", "input"):
        return e
    return type(e)(e.why, decl.statement, e.binder)
