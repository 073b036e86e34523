"""``lift``: each statement of an authored program to spatial ops, in statement order.

In: a checked ``Program``, the model's constants, the ``Cut``. Out: the program's tensors (by name, declared first),
its ops in statement order, and the states it carries from step to step.

Sub-expressions get derived names ``{binder}__{k}`` (a ``Set`` statement's ``{state}__w{statement}__{k}``), so every
derived name starts with the authored name it comes from, followed by ``_`` — which is what lets a kind program's
names be rebound to any layer of the kind (``streamed.analysis.kinds.rebind_via``). A batched cut runs the ops that
read a position or a state once per sequence (``take_rows`` → the op on ``pos_s{b}``, ``Kc3_s{b}`` →
``stack_rows``). Every statement that cannot be lifted is refused (``LoweringError.every``: its index, its binder
and why); a statement that reads what a refused one binds is not refused again.

Two jobs, two classes: ``_Emitter`` grows the tensors and ops as the cut shapes them; ``_Lifter`` reads the
syntax and says what to emit.
"""

from __future__ import annotations

from dataclasses import replace

from ...lang.limits import show as show_value
from ...lang.syntax import Binary, Call, Declaration, Let, Name, Number, Return, Set
from ...model.caches import ring_lengths
from ...model.program import Program
from ..deployment import Cut
from ..ir import Op, Tensor, nbytes
from .errors import LoweringError
from .shapes import infer


SEQUENCE_OPS = {"rope", "attention", "latent_attention", "gated_delta", "short_convolution", "write_rows"}
_CALL_KIND = {"latent attention": "latent_attention", "gated delta": "gated_delta",
              "short convolution": "short_convolution", "row": "lookup", "rows": "lookup"}
_BINARY_KIND = {"plus": "add", "minus": "sub", "multiplied": "mul"}
#: The experts op's optional slots, in the order they follow X, R, G, U, D.
EXPERT_OPTIONAL = (("B", "selection bias", "selection_bias"), ("RB", "router bias", "router_bias"),
                   ("BG", "expert biases", "bias_gate"), ("BU", "expert biases", "bias_up"),
                   ("BD", "expert biases", "bias_down"), ("G2", "shared", "shared_gate_proj"),
                   ("U2", "shared", "shared_up"), ("D2", "shared", "shared_down"), ("S", "shared gate", "shared_gate"))


def _resolve(shape, cut: Cut) -> tuple[int, ...]:
    return tuple(cut.rows if d == "rows" else cut.ctx if d == "ctx" else int(d) for d in shape)


def _dtype_bytes(shape, dtype):
    return nbytes(shape, dtype)


class _Poisoned(Exception):
    """A statement reads what an earlier refused statement binds: refusing it too would say that refusal again."""


class _Emitter:
    """The lifted program as it grows, for one cut: its tensors (each declaration as the cut shapes it — per sequence
    in a batched cut) and its ops, each one's output shapes inferred as it is appended, and a batched cut's ops that
    read a position or a state once per sequence. It knows the cut and nothing of the syntax; ``statement`` and
    ``binder`` say where a failure is reported."""

    def __init__(self, program: Program, cut: Cut):
        self.p = program
        self.cut = cut
        self.tensors: dict[str, Tensor] = {}
        self.ops: list[Op] = []
        self.statement: int | None = None
        self.binder: str | None = None
        self.counter = 0
        self.stem = ""
        self.carried: list[str] = []
        #: The states held as rings (``model.caches``), each with its rows.
        self.rings: dict[str, int] = {}
        #: The weights stored other than bf16 and read dense, with the dtype they are held in (``lift``).
        self.dtypes: dict[str, str] = {}

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
            self.add(d.name, _resolve(d.shape, c), self.dtypes.get(d.name, "bf16"), "weight", "hbm")
        elif d.role == "input":
            self.add(d.name, _resolve(d.shape, c), "bf16", "input")
        elif d.role == "state":
            names = [f"{d.name}_s{b}" for b in range(c.batch)] if c.batched else [d.name]
            shape = _resolve(d.shape, c)
            if d.name in self.rings:
                shape = (self.rings[d.name],) + shape[1:]
            for n in names:
                self.add(n, shape, "bf16", "state")
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


class _Lifter(_Emitter):
    """The authored syntax read as ops: each statement, expression and call says what to emit. Names are read
    through ``subst`` (a last-row program's input is its last row), numbers through the model's constants; the names
    a refused statement binds are ``poisoned``, so what reads them is not refused again."""

    def __init__(self, program: Program, constants: dict[str, float], cut: Cut):
        super().__init__(program, cut)
        self.constants = constants
        self.subst: dict[str, str] = {}
        self.poisoned: set[str] = set()

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
            self.fail(f"{what} must be a tensor, not the number {show_value(v)}")
        return v

    def expr(self, e, dest: str | None) -> str:
        if isinstance(e, (Name, Number)):
            v = self.operand(e)
            if isinstance(v, str):
                return self.emit("copy", (v,), dest=dest)
            self.fail(f"`{self.binder}` is bound to the number {show_value(v)}; a constant belongs in `## Model`")
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
        if op == "layernorm":
            ins = (t("X"), t("G")) + ((t("B"),) if "bias" in c.options else ())
            return self.emit("layernorm", ins, (("epsilon", n("E") if "epsilon" in c.options else 1e-5),), dest)
        if op == "soft cap":
            return self.emit("softcap", (t("X"),), (("cap", n("C")),), dest)
        if op == "columns":
            attrs = (("start", int(n("A"))), ("stop", int(n("B"))))
            if "of every" in c.options:
                attrs += (("every", int(n("N"))),)
            return self.emit("take_cols", (t("X"),), attrs, dest)
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
            attrs = [("heads", int(n("H"))), ("groups", int(n("G")))] + self.ring(c.arg("K"), c.arg("V"))
            if "window" in c.options:
                attrs.append(("window", int(n("W"))))
            if "chunks of" in c.options:
                attrs.append(("chunk", int(n("C"))))
            if "scale" in c.options:
                attrs.append(("scale", n("F")))
            if "soft cap" in c.options:
                attrs.append(("softcap", n("L")))
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
            if "scale" in c.options:
                attrs.append(("scale", n("F")))
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
            if "quotient gate" in c.options:
                attrs.append(("quotient_gate", True))
            return self.emit("experts", ins, attrs, dest)
        self.fail(f"`{op}` has no spatial lowering")

    def ring(self, *names) -> list[tuple[str, int]]:
        """``[("ring", ctx)]`` when the states named are rings (ir.py: ``write_rows``, ``attention``), else ``[]``."""
        held = [isinstance(n, Name) and n.text in self.rings for n in names]
        return [("ring", self.cut.ctx)] if any(held) else []

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
                self.emit("write_rows", (target, st.row.text, value), self.ring(st.target), target, outputs=(target,))
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


def lift(program: Program, constants: dict[str, float], cut: Cut, dtypes: tuple[tuple[str, str], ...] = ()):
    """The program's tensors (by name, declared first) and ops in statement order, and the states it carries.
    ``dtypes``: the weights held in memory other than bf16 — as stored, when the storage says (a router F32, an
    expert bank MXFP4) — so that their bytes are what is stored."""
    lf = _Lifter(program, constants, cut)
    lf.dtypes = dict(dtypes)
    lf.rings = ring_lengths(program, constants, cut.ctx, cut.written)
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
    return _tables_by_position(lf.tensors, lf.ops), lf.ops, tuple(lf.carried)


def _tables_by_position(tensors: dict[str, Tensor], ops: list[Op]) -> dict[str, Tensor]:
    """★ NO TABLE AS LONG AS THE CONTEXT IS HELD ON CHIP. A table that only rotations read is read a row per
    position: it lives off chip (HBM, where residency places it, beside the weights; DDR past HBM) and a run stages
    the rows of its positions (``footprint.on_chip``; ``cost`` charges their bytes). A table any other op reads
    stays in SRAM, whole."""
    whole = {n for op in ops for i, n in enumerate(op.inputs)
             if tensors[n].role == "table" and not (op.kind == "rope" and i in (2, 3))}
    return {n: replace(t, tier="hbm") if t.role == "table" and n not in whole else t for n, t in tensors.items()}
