"""``split_tp``: the program over ``tp`` chips, every chip its own heads and FFN columns (Megatron).

In: the lifted tensors and ops, the states carried, ``tp``, the declared weights the checkpoint stores Q8_0. Out:
the tensors and ops over the chips (each op with its chip and phase, every chip's slice of an op in one phase), the
carried states per chip, and the declared weights stored Q8_0 whose slices the chips read dense, with why.

A product from a replicated activation into an activation that nothing needs whole is split by columns; a product
from a split activation is split by rows and its partial sums all-reduced at once — two all-reduces for an
attention + feed-forward layer. Divisibility (heads, KV heads, widths) is checked here and refused as ``TPError``. A
Q8_0 weight whose row slice cuts its blocks is read dense by the chips (the seed's Storage rule), recorded with why
in the certificate's ``read_dense``. ``tp_slices`` reads a lowered program back for the manifest: which part of which
declared weight (or carried state) each chip holds.

★ A CHIP HOLDS THE KEY/VALUE HEADS ITS QUERY HEADS READ. When the chips outnumber an attention's key/value heads and
those divide the chips, each KV head is replicated on the ``tp / G`` chips whose query heads read it (vLLM's and
Megatron's tensor parallelism): everything the KV heads are computed from along their heads — the caches, the rope
and norms per head, the projections' columns and biases — is held in ``G`` *shares*, chip c holding share
``c // (tp / G)`` (one share: each chip its copy of the whole). Gated delta's key heads likewise: a value head
reads key head ``h // (H / G)``, or with ``in turn`` key head ``h mod G``, which makes chip c's share ``c mod S``.
Only a split no sharing makes is refused: query (or value) heads that do not divide over the chips, KV heads that
neither split over the chips nor divide them.

Two jobs, two classes: ``_Slices`` keeps the books of what is split where (slices, gathers, all-reduces,
phases); ``_Splitter`` holds the per-op rules that decide it.
"""

from __future__ import annotations

from dataclasses import replace

from ..ir import Q8_BLOCK, Op, SpatialProgram, Tensor, nbytes
from .errors import LoweringError, TPError
from .shapes import ELEMENTWISE


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
        elif k in ("rmsnorm", "l2norm", "layernorm"):
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


class _Slices:
    """The split program as it is made: which tensors are split over the chips and along which axis, each chip's
    slice of a weight (as loaded) or of an activation (cut on the chip by ``take_cols``), a split value gathered
    whole once, partial products summed by one all-reduce, and the phase every op runs in. It knows nothing of what
    an op needs; ``_Splitter`` decides that, op by op."""

    def __init__(self, tensors: dict[str, Tensor], tp: int, q8: frozenset[str], label: str):
        self.src = tensors
        self.q8 = q8
        #: Declared weights the checkpoint stores Q8_0 that the chips read dense, and why (the seed's Storage rule).
        self.dense: dict[str, str] = {}
        self.tensors: dict[str, Tensor] = {}
        self.ops: list[Op] = []
        self.tp = tp
        self.label = label
        self.axis: dict[str, int] = {}  # split tensors: the axis split over chips
        #: Tensors held in fewer shares than chips (replicated KV heads): the number of shares and whether chip c
        #: holds share ``c mod n`` (``cyclic``) or ``c // (tp / n)``. Every other split tensor has ``tp`` shares.
        self.shares: dict[str, tuple[int, bool]] = {}
        self.phase = 0
        self.weight_axis: dict[str, int] = {}
        self.statement = None
        self.current: Op | None = None

    def refuse(self, why: str):
        raise TPError(f"{self.label}: {why}", self.statement, self.binder)

    def part(self, n: int, what: str, shares: int | None = None) -> int:
        shares = shares or self.tp
        if n % shares:
            self.refuse(f"{what} ({n}) do not split over {self.tp} chips" if shares == self.tp else
                        f"{what} ({n}) do not split into {shares} shares")
        return n // shares

    def count(self, name: str) -> int:
        """How many shares ``name`` is split into: ``tp``, or fewer for a replicated KV head's tensors."""
        return self.shares.get(name, (self.tp, False))[0]

    def share(self, name: str, c: int) -> int:
        """Which share of ``name`` chip ``c`` holds."""
        n, cyclic = self.shares.get(name, (self.tp, False))
        return c % n if cyclic else c // (self.tp // n)

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
        n = self.count(name)
        if n == 1 and t.role != "weight":  # one share of a value every chip computes whole: nothing to cut
            return self.keep(name)
        axis = len(t.shape) - 1 if axis is None else axis
        width = self.part(t.shape[axis], what or f"the {t.shape[axis]} columns of `{name}`", n)
        start = self.share(name, c) * width
        shape = list(t.shape)
        shape[axis] = width
        if t.role == "weight":
            self.weight_axis.setdefault(name, axis)
            if name in self.q8 and len(t.shape) >= 2 and axis == len(t.shape) - 2 and width % Q8_BLOCK:
                # The seed's Storage rule: a slice that cuts Q8_0 blocks cannot be read as stored, so the chips
                # read it dense (its values are the blocks' dequantisation, the reference's numbers).
                self.dense.setdefault(name, f"its {t.shape[axis]} input features split over {self.tp} chips as rows "
                                            f"of {width}, which cut its Q8_0 blocks of {Q8_BLOCK}")
            return self.new(f"{name}_c{c}", t, shape, c, of=name, slice=(axis, start, start + width))
        if axis != len(t.shape) - 1:
            self.refuse(f"`{name}` would be cut along axis {axis} on the chip")
        out = f"{name}__cols_c{c}"
        if out not in self.tensors:
            self.keep(name)
            self.new(out, t, shape, c, role="intermediate")
            self.ops.append(Op("take_cols", (name,), (out,), (("start", start), ("stop", start + width)),
                               phase=self.phase, chip=c, statement=self.statement))
        return out

    def whole(self, name: str) -> str:
        """``name`` replicated: a split tensor is gathered from the chips once."""
        if name not in self.axis:
            return self.keep(name)
        if self.count(name) != self.tp:
            self.refuse(f"`{name}` holds key/value heads replicated over the chips and would be gathered whole")
        out = f"{name}__all"
        if out not in self.tensors:
            t = self.src[name]
            self.tensors[out] = replace(t, name=out, chip=None, role="intermediate" if t.role != "output" else "output")
            self.phase += 1
            self.ops.append(Op("allgather", tuple(f"{name}_c{c}" for c in range(self.tp)), (out,),
                               (("axis", self.axis[name]),), phase=self.phase, statement=self.statement))
        return out

    def split_out(self, name: str, c: int, axis: int | None = None) -> str:
        """Chip ``c``'s share of the value ``name`` an op computes on the chip: ``of`` the whole, its ``slice``."""
        t = self.src[name]
        axis = len(t.shape) - 1 if axis is None else axis
        self.axis[name] = axis
        shape = list(t.shape)
        width = shape[axis] = self.part(t.shape[axis], f"the {t.shape[axis]} columns of `{name}`", self.count(name))
        start = self.share(name, c) * width
        role = "state" if t.role == "state" else "intermediate"
        return self.new(f"{name}_c{c}", t, shape, c, role=role, of=name, slice=(axis, start, start + width))

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

    @property
    def binder(self) -> str | None:
        """The authored name the current op's output comes from (``h0`` for ``h0__1``)."""
        op = self.current
        return op.outputs[0].split("__")[0] if op is not None and op.outputs else None


class _Splitter(_Slices):
    """The per-op rules of the split (Megatron): which ops run per chip on their slices, which run replicated, and
    where partial sums are all-reduced; the widths an op does not admit are refused, each on its statement."""

    def __init__(self, tensors: dict[str, Tensor], ops: list[Op], tp: int, q8: frozenset[str], label: str):
        super().__init__(tensors, tp, q8, label)
        self.need = _needs_whole(tensors, ops)

    def scaled_attrs(self, op: Op, keys, by: dict[str, int] | None = None):
        """``op``'s attrs on one chip: each of ``keys`` divided by the chips, or by ``by``'s count for it."""
        by = by or {}

        def attrs(c):
            return tuple((k, v // by.get(k, self.tp) if k in keys else v) for k, v in op.attrs)
        return attrs

    def kv_shares(self, op: Op) -> tuple[int, bool] | None:
        """How ``op``'s key/value (gated delta: key) heads are held over the chips when each chip cannot hold its
        own ``G / tp`` of them: the number of shares and whether chip c holds share ``c mod n``; ``None`` when they
        split over the chips as the query heads do. Refuses a split no sharing makes."""
        h, g = op.attr("heads"), op.attr("groups")
        what = "key/value heads of attention" if op.kind == "attention" else "key heads of gated delta"
        self.part(h, "the query heads of attention" if op.kind == "attention" else "the value heads of gated delta")
        local = h // self.tp  # the query (value) heads of one chip
        if op.attr("in_turn") and g != h:  # value head j reads key head j mod G
            if g % local == 0:
                return (g // local, True) if g // local < self.tp else None
            if local % g == 0:
                return 1, True
            self.refuse(f"the {local} value heads of a chip read {g} key heads in turn, which no chip holds whole")
        if g % self.tp == 0:
            return None
        if self.tp % g == 0:
            return g, False
        self.refuse(f"the {what} ({g}) neither split over {self.tp} chips nor divide them")

    def admits(self, ops: list[Op]) -> None:
        """Heads and expert widths first: they say why a width is refused better than a column count does. Every
        op that does not split is refused, each on its statement. Key/value heads fewer than the chips are held in
        shares (``kv_shares``), spread to everything they are computed from (``spread``)."""
        errors: list[LoweringError] = []
        for op in ops:
            self.statement = op.statement
            self.current = op
            try:
                if op.kind in ("attention", "gated_delta"):
                    kv = self.kv_shares(op)
                    if kv is not None:
                        for n in (op.inputs[1:3] if op.kind == "attention" else op.inputs[0:2]):
                            self.shares.setdefault(n, kv)
                elif op.kind == "latent_attention":
                    self.part(op.attr("heads"), "the heads of latent attention")
                elif op.kind == "experts":
                    self.part(self.src[op.inputs[2]].shape[2], "the FFN columns of each expert")
            except TPError as e:
                if not any(e.statement == seen.statement for seen in errors):
                    errors.append(e)
        if errors:
            raise TPError.of(errors)
        self.spread(ops)

    def spread(self, ops: list[Op]) -> None:
        """The shares of the key/value heads reach everything they are computed from along their heads: the state
        a row is written from, the ops per head (rope, norms over heads), elementwise ops and their per-column
        operands (a bias), a short convolution's state and kernel, a product's weight columns. One share is a copy
        of the whole on each chip, computed and held per chip like any share (so the manifest says who holds it)."""
        for op in reversed(ops):
            held = [o for o in op.outputs if o in self.shares]
            if not held:
                continue
            kv, k, ins = self.shares[held[0]], op.kind, op.inputs
            width = self.src[held[0]].shape[-1]
            if k == "write_rows":
                reach = [ins[2]]
            elif k in ("assign", "rope", "rmsnorm", "l2norm"):
                reach = [ins[0]]
            elif k == "short_convolution":
                reach = list(ins)
            elif k == "matmul":
                reach = [ins[1]] if self.src[ins[1]].role == "weight" else []
            elif k in ELEMENTWISE or k in ("take_rows", "stack_rows"):
                reach = [n for n in ins if self.src[n].shape and self.src[n].shape[-1] == width]
            else:
                reach = []
            for n in reach:
                self.shares.setdefault(n, kv)
        for op in ops:  # and what a batched step stacks of them (or picks a sequence's rows of) is held alike
            held = [n for n in op.inputs if n in self.shares]
            if op.kind in ("take_rows", "stack_rows") and held:
                self.shares.setdefault(op.outputs[0], self.shares[held[0]])

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
            heads, n = op.attr("heads"), self.count(outs[0])
            self.part(heads, f"the {heads} heads normalised by `{k}`", n)
            self.per_chip(op, lambda c: (self.local(ins[0], c),) + tuple(self.keep(n) for n in ins[1:]),
                          lambda c: (self.split_out(outs[0], c),), self.scaled_attrs(op, ("heads",), {"heads": n}))
            return
        if k == "rope" and split(ins[0]) and outs[0] not in self.need:
            n = self.count(outs[0])
            self.part(op.attr("heads"), f"the {op.attr('heads')} heads of `rope`", n)
            self.per_chip(op, lambda c: (self.local(ins[0], c),) + tuple(self.keep(n) for n in ins[1:]),
                          lambda c: (self.split_out(outs[0], c),), self.scaled_attrs(op, ("heads",), {"heads": n}))
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
            h, g, kv = op.attr("heads"), op.attr("groups"), self.count(ins[1])
            self.part(h, f"the {h} query heads of attention")
            self.part(g, f"the {g} key/value heads of attention", kv)
            self.per_chip(op, lambda c: [self.local(ins[0], c), self.local(ins[1], c), self.local(ins[2], c),
                                         self.keep(ins[3])] + ([self.local(ins[4], c, 0)] if len(ins) > 4 else []),
                          lambda c: (self.split_out(outs[0], c),),
                          self.scaled_attrs(op, ("heads", "groups"), {"groups": kv}))
            return
        if k == "latent_attention" and split(ins[0]) and outs[0] not in self.need:
            h = op.attr("heads")
            self.part(h, f"the {h} heads of latent attention")
            self.per_chip(op, lambda c: (self.local(ins[0], c), self.whole(ins[1]), self.whole(ins[2]), self.keep(ins[3]),
                                         self.local(ins[4], c, 0), self.local(ins[5], c, 0)),
                          lambda c: (self.split_out(outs[0], c),), self.scaled_attrs(op, ("heads",)))
            return
        if k == "gated_delta" and split(ins[2]) and outs[0] not in self.need:
            h, g, kv = op.attr("heads"), op.attr("groups"), self.count(ins[1])
            self.part(h, f"the {h} value heads of gated delta")
            self.part(g, f"the {g} key heads of gated delta", kv)
            s = ins[3]
            self.per_chip(op, lambda c: (self.local(ins[0], c), self.local(ins[1], c), self.local(ins[2], c),
                                         self.split_out(s, c, 0), self.local(ins[4], c), self.local(ins[5], c)),
                          lambda c: (self.split_out(outs[0], c), f"{s}_c{c}"),
                          self.scaled_attrs(op, ("heads", "groups"), {"groups": kv}))
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
    """Which part of which declared weight each chip loads: the tensor-parallel manifest of one program. Two chips
    that load the same part of a weight each hold a copy (a replicated key/value head's projection)."""
    return [
        {"tensor": t.name, "of": t.of, "chip": t.chip, "axis": t.slice[0], "start": t.slice[1], "stop": t.slice[2],
         "encoding": t.part or "dense"}
        for t in program.tensors if t.slice is not None and t.role == "weight"
    ]


def replicas(program: SpatialProgram) -> list[dict]:
    """The declared tensors (weights and carried states) some chips hold copies of: for each, its axis and each
    share along it with the chips that hold it — a replicated key/value head's cache and projections."""
    carried = set(program.carried)
    by: dict[str, dict[tuple, list[int]]] = {}
    for t in program.tensors:
        if t.slice is not None and t.chip is not None and t.part in (None, "planes") and \
                (t.role == "weight" or t.name in carried):
            by.setdefault(t.of, {}).setdefault(t.slice, []).append(t.chip)
    out = []
    for name, held in by.items():
        if any(len(chips) > 1 for chips in held.values()):
            out.append({"of": name, "axis": next(iter(held))[0],
                        "shares": [{"start": a[1], "stop": a[2], "chips": sorted(chips)}
                                   for a, chips in sorted(held.items(), key=lambda kv: kv[0][1])]})
    return out
