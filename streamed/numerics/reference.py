"""The reference interpreter: a checked document executed directly, statement by statement, with the meaning
docs/language.md gives each statement and operation (``numerics``). It is the ground truth a bundle is certified
against, so it reads the authored programs — never the lowering's output.

Step semantics (one definition for every deployment):
- A step of one sequence consumes ``rows`` tokens at positions ``pos … pos+rows−1``: decode is ``rows = 1``, a
  prefill chunk is ``rows = chunk``, the forward is the whole sequence at ``pos = 0``. Every program of the step sees
  the same ``token`` (``rows`` ids) and ``position`` (``pos``, the first row's).
- ``Set row P of S to E`` writes rows ``P … P+rows(E)−1`` of state ``S``; ``Set S to E`` replaces it; ``gated
  delta`` and ``short convolution`` replace their state ``S``. A later statement reading ``S`` reads the new value,
  and the state at the end of the step is what the next step starts from. Every state starts at zero.
- The head's output is the next token of every row (a prefill's next token is its last row's).
- A batch of sequences is the document run once per sequence, each with its own states and position
  (``Batch``): that is the meaning a batched bundle must reproduce.

``Reference.step`` returns every bound name of every program (``Step.values``), so a comparison can name the first
tensor that differs, not only the first layer.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import kernels as nx
from .product import EXACT, Arithmetic
from ..lang import ops as ops_table
from ..lang.syntax import Binary, Call, Declaration, Let, Name, Number, Return, Set
from ..model.caches import ring_lengths
from ..model.program import Program, Programs
from .weights import Weights, concrete, tables as host_tables


class ReferenceError(Exception):
    """A program the interpreter cannot run as written: the program's label, the statement and why."""

    def __init__(self, program: str, statement: int | None, why: str):
        where = f"{program}" + ("" if statement is None else f", statement {statement + 1}")
        super().__init__(f"{where}: {why}")
        self.program, self.statement, self.why = program, statement, why


def operands(call: Call) -> tuple[dict[str, object], dict[str, object]]:
    """A call's operands keyed ``SLOT`` for the operation's own pattern and ``option:SLOT`` for an option's (two
    options may reuse a slot letter). The parser appends operands in the order the pattern and then the written
    options give them; an option key two options share (``heads #H sharing #G`` and ``heads #H``) is the one whose
    slots the operands that follow fill — the longest, as the parser reads the longest."""
    op = ops_table.op_named(call.op)
    args, numbers = list(call.args), list(call.numbers)
    a_out: dict[str, object] = {}
    n_out: dict[str, object] = {}
    at = [0, 0]  # the next operand and the next number

    def fits(pattern) -> int:
        a, n = at
        for item in pattern:
            if item[0] == "$":
                if a >= len(args) or args[a][0] != item[1:]:
                    return -1
                a += 1
            elif item[0] == "#":
                if n >= len(numbers) or numbers[n][0] != item[1:]:
                    return -1
                n += 1
        return len(pattern)

    def take(prefix: str, pattern) -> None:
        for item in pattern:
            if item[0] == "$":
                a_out[prefix + item[1:]] = args[at[0]][1]
                at[0] += 1
            elif item[0] == "#":
                n_out[prefix + item[1:]] = numbers[at[1]][1]
                at[1] += 1

    take("", op.pattern)
    for key in call.options:
        take(key + ":", max((o.pattern for o in op.options if o.key == key), key=fits))
    return a_out, n_out


@dataclass
class Step:
    """One step's results: ``values[label][name]`` every name each program bound (its declared inputs, every
    ``Let``, each state as the step left it), in the order they were last written — so the first that differs
    from another run is the first computed differently; ``hidden`` each layer's output in order, ``logits`` the
    head's values before the argmax (``None`` when the head has no argmax), ``next`` the head's output, ``x`` the
    first hidden state."""

    values: dict[str, dict[str, np.ndarray]]
    x: np.ndarray
    hidden: list[np.ndarray]
    logits: np.ndarray | None
    next: np.ndarray


class Reference:
    """One sequence of one document: its weights, host tables for ``ctx`` positions, its carried states — a windowed
    cache as the ring LANGUAGE §8 says it is (``model.caches``), sized for steps of at most ``rows`` rows (a prefill's
    chunk; 1 for decode) — and the arithmetic its operations compute in (``product.Arithmetic``: exact float32 unless
    told). ``context``: the context the model runs at, which decides what depends on it (LongRoPE's factors:
    ``model.context.longrope_factors``); ``ctx`` unless told — a run of a few tokens "at" a longer context holds caches of
    its tokens alone."""

    def __init__(self, programs: Programs, weights: Weights, ctx: int, arithmetic: Arithmetic = EXACT, *,
                 rows: int = 1, context: int | None = None):
        self.programs = programs
        self.weights = weights
        self.ctx = ctx
        self.arithmetic = arithmetic
        self.tables = host_tables(programs, ctx, arithmetic, context)
        self.states: dict[str, np.ndarray] = {}
        self.rings: dict[str, int] = {}
        self._operands: dict[int, tuple] = {}  # id(call) → (call, its operands): the call held, so no id is reused
        for p in programs.all():
            rings = ring_lengths(p, programs.constants, ctx, rows)
            self.rings.update(rings)
            for d in p.decls.values():
                if d.role == "state" and d.name not in self.states:
                    shape = concrete(d.shape, ctx=ctx)
                    self.states[d.name] = np.zeros((rings[d.name], *shape[1:]) if d.name in rings else shape,
                                                   dtype=np.float32)

    # ---- one program ----
    def run(self, program: Program, tokens: np.ndarray, pos: int, x: np.ndarray | None, *,
            owned: bool = False) -> dict[str, np.ndarray]:
        """Execute ``program``'s statements in order; returns every bound name and ``__output__``.

        A ``Set`` gives its state a new value and leaves every value bound before it as it was — so it writes a copy
        of the state, unless ``owned`` (the caller keeps none of this step's values, nor the states': ``step`` without
        ``keep``) and no value bound in this program shares the state's memory: then it writes the state where it is.
        A decode step's ``Set`` of a cache writes one row; copying the whole cache for it was, at 300 cells of a
        1B-shaped model, 10 MB a step — a step's cost growing with the context for nothing."""
        env: dict[str, object] = {}
        label = program.label
        for st in program.statements:
            try:
                if isinstance(st, Let):
                    if isinstance(st.value, Declaration):
                        env[st.name.text] = self._declared(program, st.name.text, st.value.role, tokens, pos, x)
                    else:
                        env[st.name.text] = self.eval(st.value, env)
                elif isinstance(st, Set):
                    value = nx.f32(self.eval(st.value, env))
                    name = st.target.text
                    old = self.states[name]
                    new = old if owned and not _held(old, env, name) else old.copy()
                    if st.row is None:
                        new[...] = value
                    elif name in self.rings:
                        new = nx.ring_write(new, int(self.eval(st.row, env)), value, self.ctx)
                    else:
                        p = int(self.eval(st.row, env))
                        if p < 0 or p + value.shape[0] > new.shape[0]:
                            raise ReferenceError(label, st.index, f"rows {p}…{p + value.shape[0] - 1} of `{name}` are past its {new.shape[0]} rows (ctx)")
                        new[p:p + value.shape[0]] = value
                    self.states[name] = new
                    env.pop(name, None)  # a state is listed where it was last written (see ``Step``)
                    env[name] = new
                elif isinstance(st, Return):
                    env["__output__"] = env[st.name.text]
            except (ValueError, IndexError, KeyError) as e:
                raise ReferenceError(label, st.index, str(e)) from e
        return env  # type: ignore[return-value]

    def _declared(self, program: Program, name: str, role: str, tokens, pos, x):
        if role == "token":
            return np.asarray(tokens, dtype=np.int64)
        if role == "position":
            return int(pos)
        if role == "input":
            if x is None:
                raise ReferenceError(program.label, None, f"its input `{name}` was not given")
            return nx.f32(x)
        if role == "weight":
            return self.weights[name]
        if role == "state":
            return self.states[name]
        if role == "table":
            return self.tables[name]
        raise ReferenceError(program.label, None, f"`{name}` has an unknown role `{role}`")

    # ---- expressions ----
    def number(self, n) -> float:
        if isinstance(n, Number):
            return n.value
        return self.programs.constants[n.text]

    def eval(self, e, env: dict):
        if isinstance(e, Number):
            return np.float32(e.value)
        if isinstance(e, Name):
            if e.text in env:
                return env[e.text]
            return np.float32(self.programs.constants[e.text])
        if isinstance(e, Binary):
            a = self.eval(e.left, env)
            if e.op == "scaled":
                return (nx.f32(a) * np.float32(self.number(e.right))).astype(np.float32)
            b = self.eval(e.right, env)
            if e.op == "times":
                return nx.matmul(a, b, self.arithmetic)
            if e.op == "plus":
                return (nx.f32(a) + nx.f32(b)).astype(np.float32)
            if e.op == "minus":
                return (nx.f32(a) - nx.f32(b)).astype(np.float32)
            if e.op == "multiplied":
                return (nx.f32(a) * nx.f32(b)).astype(np.float32)
            raise ValueError(f"unknown operator `{e.op}`")
        return self.call(e, env)

    def call(self, c: Call, env: dict):
        known = self._operands.get(id(c))  # parsed once a call (a decode step evaluates each of them again)
        if known is None or known[0] is not c:
            known = self._operands[id(c)] = (c, *operands(c))
        _, args, nums = known
        v = {k: self.eval(a, env) for k, a in args.items()}
        n = {k: self.number(x) for k, x in nums.items()}

        def i(key, default=None):
            return int(n[key]) if key in n else default

        op = c.op
        if op in ("silu", "gelu", "sigmoid", "softplus", "exp"):
            return getattr(nx, op)(v["X"], self.arithmetic)
        if op == "softmax":
            return nx.softmax(v["X"], arithmetic=self.arithmetic)
        if op == "argmax":
            return nx.argmax(v["X"])
        if op == "rmsnorm":
            return nx.rmsnorm(v["X"], v["G"], n.get("epsilon:E", 1e-6), n.get("offset:O", 0.0), i("heads:H", 1),
                              self.arithmetic)
        if op == "l2norm":
            return nx.l2norm(v["X"], n.get("epsilon:E", 1e-6), i("heads:H", 1), self.arithmetic)
        if op == "layernorm":
            return nx.layernorm(v["X"], v["G"], v.get("bias:B"), n.get("epsilon:E", 1e-5), self.arithmetic)
        if op == "soft cap":
            return nx.soft_cap(v["X"], n["C"], self.arithmetic)
        if op == "columns":
            return nx.columns(v["X"], i("A"), i("B"), i("of every:N"))
        if op in ("row", "rows"):
            return nx.lookup(v["T"], v["E"])
        if op == "rope":
            return nx.rope(v["X"], int(v["P"]), v["C"], v["S"], i("heads:H"), i("rotating:R"), i("after:N", 0),
                           "interleaved" in c.options, self.arithmetic)
        if op == "attention":
            keys, values = v["K"], v["V"]
            if getattr(args["K"], "text", None) in self.rings:  # a windowed cache: read from its ring (§8)
                reach = min(i("window:W") or np.inf, i("chunks of:C") or np.inf)
                rows = np.shape(v["Q"])[0]
                keys, values = (nx.ring_read(x, int(v["P"]), rows, self.ctx, reach) for x in (keys, values))
            return nx.attention(v["Q"], keys, values, int(v["P"]), i("heads:H"), i("heads:G"),
                                i("window:W"), i("chunks of:C"), n.get("scale:F"), v.get("sinks:S"),
                                n.get("soft cap:L"), self.arithmetic)
        if op == "latent attention":
            return nx.latent_attention(v["Q"], v["C"], v["R"], int(v["P"]), v["A"], v["B"], i("heads:H"),
                                       i("nope:N"), i("rope:M"), n.get("scale:F"), self.arithmetic)
        if op == "gated delta":
            out, s = nx.gated_delta(v["Q"], v["K"], v["V"], v["S"], v["A"], v["B"], i("heads:H"), i("heads:G"),
                                    "in turn" in c.options, n.get("scale:F"), self.arithmetic)
            self._update(c.arg("S"), s, env)
            return out
        if op == "short convolution":
            out, s = nx.short_convolution(v["X"], v["S"], v["W"], self.arithmetic)
            self._update(c.arg("S"), s, env)
            return out
        if op == "experts":
            o = set(c.options)
            return nx.experts(
                v["X"], v["R"], i("K"), v["G"], v["U"], v["D"],
                scored_by="sigmoid" if "scored by sigmoid" in o else "softmax",
                normalized="normalized" in o,
                routed_scale=n.get("routed scale:F"),
                selection_bias=v.get("selection bias:B"),
                groups=(i("groups:N"), i("groups:M")) if "groups" in o else None,
                router_bias=v.get("router bias:RB"),
                expert_biases=(v["expert biases:BG"], v["expert biases:BU"], v["expert biases:BD"]) if "expert biases" in o else None,
                clamp=n.get("clamped swiglu at:L"),
                weighting_inputs="weighting inputs" in o,
                shared=(v["shared:G2"], v["shared:U2"], v["shared:D2"]) if "shared" in o else None,
                shared_gate=v.get("shared gate:S"),
                quotient_gate="quotient gate" in o,
                arithmetic=self.arithmetic,
            )
        raise ValueError(f"no numerical definition of `{op}`")

    def _update(self, target, new: np.ndarray, env: dict) -> None:
        if not isinstance(target, Name) or target.text not in self.states:
            raise ValueError(f"the state an update writes must be a declared state, not `{getattr(target, 'text', target)}`")
        self.states[target.text] = new
        env.pop(target.text, None)
        env[target.text] = new

    # ---- a step ----
    def step(self, tokens, pos: int, x: np.ndarray | None = None, *, keep: bool = True) -> Step:
        """``_step``, where float32 overflow is a value (an infinity, a NaN) and never a numpy warning on the user's
        terminal: whether a run's values are finite is its caller's to say (``streamed run`` refuses to print
        logits that are not)."""
        with np.errstate(all="ignore"):
            return self._step(tokens, pos, x, keep)

    def _step(self, tokens, pos: int, x: np.ndarray | None = None, keep: bool = True) -> Step:
        """Run embed → every layer → head for ``rows = len(tokens)`` tokens at positions ``pos…``. ``x`` replaces the
        embedding's output (the forward deployment, whose first hidden state is an input). Without ``keep``, a
        program's bound values are let go when it ends (``Step.values`` and ``hidden`` are empty): a run that wants
        only the logits does not hold every layer's every value at once — at a 40-token prefill of a 1B-shaped model,
        140 MB."""
        tokens = np.atleast_1d(np.asarray(tokens, dtype=np.int64))
        if pos + len(tokens) > self.ctx:
            raise ReferenceError("step", None, f"positions {pos}…{pos + len(tokens) - 1} do not fit ctx {self.ctx}")
        values: dict[str, dict[str, np.ndarray]] = {}
        p = self.programs
        if x is None:
            if p.embed is None:
                raise ReferenceError("embed", None, "the document has no `## Embed` and no first hidden state was given")
            env = self.run(p.embed, tokens, pos, None, owned=not keep)
            if keep:
                values["embed"] = env
            x = env["__output__"]
        x0 = nx.f32(x)
        h = x0
        hidden = []
        for layer in p.layers:
            env = self.run(layer, tokens, pos, h, owned=not keep)
            if keep:
                values[layer.label] = env
            h = nx.f32(env["__output__"])
            if keep:
                hidden.append(h)
        logits = None
        nxt = h
        if p.head is not None:
            env = self.run(p.head, tokens, pos, h, owned=not keep)
            if keep:
                values["head"] = env
            nxt = env["__output__"]
            logits = _argmax_operand(p.head, env)
        return Step(values, x0, hidden, logits, np.asarray(nxt))


def _held(state: np.ndarray, env: dict, name: str) -> bool:
    """Whether a value ``env`` binds to a name other than the state's own may share the state's memory (the state
    itself bound again, a view of its rows)."""
    return any(isinstance(v, np.ndarray) and np.may_share_memory(v, state) for k, v in env.items() if k != name)


def _argmax_operand(head: Program, env: dict) -> np.ndarray | None:
    """The value the head's ``index of the largest of X`` reads — the logits."""
    for st in head.statements:
        v = getattr(st, "value", None)
        if isinstance(v, Call) and v.op == "argmax" and isinstance(v.arg("X"), Name):
            return env.get(v.arg("X").text)
    return None


class Batch:
    """A batch of sequences as the language means it: the document run once per sequence, each with its own states
    and position. ``step(tokens, positions)`` takes one token per sequence."""

    def __init__(self, programs: Programs, weights: Weights, ctx: int, batch: int, arithmetic: Arithmetic = EXACT):
        self.sequences = [Reference(programs, weights, ctx, arithmetic) for _ in range(batch)]

    def step(self, tokens, positions) -> list[Step]:
        return [r.step([t], p) for r, t, p in zip(self.sequences, tokens, positions)]
