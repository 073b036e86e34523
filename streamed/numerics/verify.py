"""The certification: the executed bundle against the reference interpreter, tensor by tensor, step by step.

``compare_step`` is pure: given what the reference computed and what the bundle computed for one step, it measures
every tensor both hold under the same name (the layer's) — every bound name, every state, every table the bundle
filled by its own rule — in the order the authored program binds them, so the first measure beyond its bound is
where the lowering first went wrong: its layer and its tensor.

Tolerance. Both paths are float32 over the same stored weights and the same per-op arithmetic (``kernels``), so
what may differ is only what the lowering changed about the order of the arithmetic:

- **Not tensor parallel: nothing.** Every op of the bundle computes one authored operation over whole rows, as the
  reference does (every product follows ``product``'s rule, whose order of arithmetic makes a row independent of the
  rows beside it): every tensor must be equal, bit for bit. An rmsnorm epsilon three times too large changes the
  sixth digit of a norm and is a failure here, not a rounding.
- **Tensor parallel: the reassociation of each all-reduce, bounded, one layer at a time.** A row-split product is
  computed as ``tp`` partial products, each rounded to float32, then summed in float32; the reference rounds the
  whole product once (by the product rule both sum the same 32-element block partials in float64 when a chip's
  slice is whole blocks: only those roundings differ). By the standard bound on summation (Higham, *Accuracy and Stability*, §4.2) the two differ
  elementwise by at most ``γ · Σ_c |P_c|`` with ``γ = (tp + 1) · u``, ``u = 2⁻²⁴`` — ``tp`` roundings of the
  partials and their sums, one of the reference's — so relative to the terms summed the difference is at most
  ``(tp + 1) · u``. Everything a layer computes before its first all-reduce must still be bit for bit equal (the
  column and head splits reorder nothing). Everything after it — the tensors the all-reduced value flows into — may
  carry that difference as the layer's remaining operations (residual adds, norms, the router's softmax, the
  experts) amplify it; ``TP_AMPLIFICATION`` bounds that amplification, so such a tensor passes when
  ``max |got − want| ≤ TP_AMPLIFICATION · (tp + 1) · u · max |want|`` (its bound is printed beside it). Because
  the bound holds for one layer, each layer of a tensor-parallel bundle is fed the reference's input and the
  reference's carried state (split over the chips as the bundle holds it) at every step: the error of one layer
  never becomes the input of the next, so it does not compound over depth or steps, and a bug is still a
  difference of its own size in the layer that has it. A tensor the bundle holds only as chips' shares (its
  ``of`` and ``slice``) is measured share by share against that part of the reference's — each copy of a key/value
  head replicated over several chips on its own chip, so a copy that reads the wrong head is named with its chip.
- Integer tensors (token ids, positions, the next token) are equal in every deployment.

``run`` drives both for one deployment over N steps — decode, prefill of at least ``PREFILL_CHUNKS`` chunks then
decode, batched (each sequence its own reference: the batch must equal its sequences run one by one), tensor
parallel, forward — feeding both the reference's greedy tokens, so the two never see different inputs. Its default
steps cover the document: decode runs past every attention window and chunk it declares (``covering``), so every
windowed cache's ring (LANGUAGE §8) wraps round before the certification ends.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from .execute import Bound, ExecuteError, Executed, Executor, Plan, Session
from .product import EXACT, Arithmetic
from ..lang.syntax import Call
from ..model.program import Programs
from .reference import Batch, Reference, ReferenceError, Step, operands
from ..spatial.deployment import Deployment
from ..spatial.ir import SpatialProgram

#: The unit roundoff of float32: the largest relative error of one rounding.
UNIT_ROUNDOFF = 2.0 ** -24
#: How far the operations after an all-reduce within one layer may amplify its reassociation error, relative to the
#: tensor's largest magnitude (see the module docstring; measured over seeds 0–31 of every small example in
#: tests/numerics/test_certification.py, where the largest seen is recorded beside the bound in docs/performance.md).
TP_AMPLIFICATION = 16.0
#: A prefill deployment prefills this many chunks before it decodes: the second and third chunks read a cache the
#: chunks before them wrote, at positions that are not 0.
PREFILL_CHUNKS = 3
#: Decode at least this many steps, and this many past the widest window.
MIN_STEPS = 8
PAST_WINDOW = 4
#: What a layer's output is called in a report.
HIDDEN = "hidden state"


def tp_rtol(tp: int) -> float:
    """The relative tolerance of a tensor an all-reduce of ``tp`` chips flows into (module docstring)."""
    return TP_AMPLIFICATION * (tp + 1) * UNIT_ROUNDOFF


@dataclass(frozen=True)
class Measure:
    """One tensor of one program at one step: the largest absolute and relative error, the absolute error allowed
    (``bound``: 0 — bit for bit — unless a reassociated sum flows into it), and whether it passed."""

    step: int
    program: str
    tensor: str
    max_abs: float
    max_rel: float
    ok: bool
    shape: tuple = ()
    bound: float = 0.0

    def describe(self) -> str:
        allowed = "bit for bit" if self.bound == 0 else f"its bound {self.bound:.3g} (reassociated sums)"
        return (f"step {self.step}, {self.program}, `{self.tensor}`: max abs {self.max_abs:.3g}, "
                f"max rel {self.max_rel:.3g}" + ("" if self.ok else f", beyond {allowed}"))


def measure(step: int, program: str, tensor: str, got, want, rtol: float = 0.0) -> Measure:
    """Compare one tensor: equal bit for bit when ``rtol`` is 0, else within ``rtol · max |want|`` (the bound the
    measure records). Non-finite values pass only where both hold the same; integers must be equal."""
    g, w = np.asarray(got), np.asarray(want)
    if g.shape != w.shape:
        return Measure(step, program, tensor, float("inf"), float("inf"), False, g.shape)
    if w.size == 0 or np.array_equal(g, w):  # the common case, at the cost of one comparison (NaN never equals)
        return Measure(step, program, tensor, 0.0, 0.0, True, w.shape, rtol * float(np.max(np.abs(w))) if rtol and w.size else 0.0)
    if np.issubdtype(w.dtype, np.integer) or np.issubdtype(g.dtype, np.integer):
        bad = int(np.sum(g.astype(np.int64) != w.astype(np.int64)))
        return Measure(step, program, tensor, float(bad), float(bad), bad == 0, w.shape)
    g64, w64 = g.astype(np.float64), w.astype(np.float64)
    finite = np.isfinite(g64) & np.isfinite(w64)
    if not finite.all():
        same = bool(np.array_equal(g64, w64, equal_nan=True))
        return Measure(step, program, tensor, 0.0 if same else float("inf"), 0.0 if same else float("inf"), same,
                       w.shape)
    diff = float(np.max(np.abs(g64 - w64)))
    scale = float(np.max(np.abs(w64)))
    mrel = diff / scale if scale > 0 else (0.0 if diff == 0 else float("inf"))
    bound = rtol * scale
    return Measure(step, program, tensor, diff, mrel, diff <= bound, w.shape, bound)


def _fit(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """A prefill head reads only its input's last row: where the bundle holds one row of what the reference holds for
    every row, compare that last row."""
    g, w = np.asarray(got), np.asarray(want)
    if g.shape != w.shape and g.ndim == w.ndim and g.ndim >= 1 and g.shape[0] == 1 and w.shape[1:] == g.shape[1:]:
        return w[-1:]
    return w


#: A tensor a tensor-parallel program holds only as chips' shares: each share's name (the layer's) and the
#: ``(axis, start, stop)`` of the whole it holds — two chips holding the same share each hold a copy.
Shares = dict[str, list[tuple[str, tuple[int, int, int]]]]


def compare_step(step: int, want: dict[str, dict[str, np.ndarray]], got: dict[str, dict[str, np.ndarray]],
                 skip: Callable[[str, str], bool] = lambda program, name: False,
                 rtol: Callable[[str, str], float] = lambda program, name: 0.0,
                 shares: dict[str, Shares] | None = None) -> list[Measure]:
    """Every tensor the reference bound that the bundle also holds, program by program in execution order, tensors
    in the order the authored program binds them; ``rtol(program, name)`` the tolerance of each (0: bit for bit). A
    tensor the bundle holds as chips' shares (``shares[program]``) is measured share by share, each against its
    part of the reference's — so a replicated key/value head is held to the reference on every chip that holds it."""
    out: list[Measure] = []
    for label, ref_env in want.items():
        bundle_env = got.get(label)
        if bundle_env is None:
            continue
        held_as = (shares or {}).get(label, {})
        for name, value in ref_env.items():
            if name.startswith("__") or skip(label, name):
                continue
            if not isinstance(value, np.ndarray) and not np.isscalar(value):
                continue
            if name not in bundle_env and held_as.get(name):
                for part, cut in held_as[name]:
                    if part in bundle_env:
                        out.append(measure(step, label, part, bundle_env[part], share_of(np.asarray(value), cut),
                                           rtol(label, part)))
                continue
            held = bundle_env[name] if name in bundle_env else assembled(bundle_env, name, np.shape(value))
            if held is not None:
                out.append(measure(step, label, name, held, _fit(held, value), rtol(label, name)))
    return out


def share_of(whole: np.ndarray, cut: tuple[int, int, int]) -> np.ndarray:
    """The part ``(axis, start, stop)`` of ``whole`` a chip's share holds."""
    axis, start, stop = cut
    index = [slice(None)] * whole.ndim
    index[axis] = slice(start, stop)
    return whole[tuple(index)]


def shares_of(plans: dict[str, Plan], rename: Callable[[Bound, str], str]) -> dict[str, Shares]:
    """Per layer program, the tensors its chips hold as shares, by the layer's names (``Kc7`` → ``Kc7_c0`` holding
    columns 0–16, …): every chip-local tensor whose ``slice`` says which part of which whole it is."""
    out: dict[str, Shares] = {}
    for plan in plans.values():
        for b in plan.layers:
            mine = out.setdefault(b.label, {})
            for t in b.program.tensors:
                if t.chip is not None and t.of and t.slice is not None and t.role != "weight":
                    mine.setdefault(rename(b, t.of), []).append((rename(b, t.name), tuple(t.slice)))
    return out


_CHIP = re.compile(r"(.+)_c(\d+)\Z")


def _split_axis(part: tuple, whole: tuple) -> int | None:
    """The one axis along which a chip's part of a tensor is narrower than the whole."""
    if len(part) != len(whole):
        return None
    axes = [a for a, (p, w) in enumerate(zip(part, whole)) if p != w]
    return axes[0] if len(axes) == 1 else None


def assembled(env: dict[str, np.ndarray], name: str, shape: tuple) -> np.ndarray | None:
    """A tensor a tensor-parallel program holds only as chip parts (``Kc0_c0``, ``Kc0_c1``…, split by heads or
    columns): the parts joined along the one axis they split, when that gives the whole's shape."""
    parts = []
    while f"{name}_c{len(parts)}" in env:
        parts.append(np.asarray(env[f"{name}_c{len(parts)}"]))
    if len(parts) < 2 or any(p.ndim != len(shape) for p in parts):
        return None
    for axis in range(len(shape)):
        if all(p.shape[:axis] + p.shape[axis + 1:] == shape[:axis] + shape[axis + 1:] for p in parts) \
                and sum(p.shape[axis] for p in parts) == shape[axis]:
            return np.concatenate(parts, axis=axis)
    return None


def chip_part(whole: np.ndarray, part_shape: tuple, chip: int) -> np.ndarray | None:
    """Chip ``chip``'s part of ``whole`` (the inverse of ``assembled``): the ``chip``-th equal slice along the one
    axis where ``part_shape`` is narrower."""
    axis = _split_axis(tuple(part_shape), whole.shape)
    if axis is None:
        return None
    size = part_shape[axis]
    index = [slice(None)] * whole.ndim
    index[axis] = slice(chip * size, (chip + 1) * size)
    return whole[tuple(index)]


# ---- what the reference says a deployment's step is ----------------------------------------------------------------


def roles_of(programs: Programs) -> dict[str, dict[str, str]]:
    return {p.label: {d.name: d.role for d in p.decls.values()} for p in programs.all()}


def stacked(programs: Programs, steps: list[Step]) -> Step:
    """A batch of one-row steps as the batched bundle names them: rows stacked in sequence order, sequence b's states
    and position under ``…_s{b}``."""
    roles = roles_of(programs)
    values: dict[str, dict[str, np.ndarray]] = {}
    for label in steps[0].values:
        env: dict[str, np.ndarray] = {}
        role = roles.get(label, {})
        for name, v0 in steps[0].values[label].items():
            if role.get(name) in ("state", "position"):
                for b, s in enumerate(steps):
                    env[f"{name}_s{b}"] = s.values[label][name]
            elif name == "__output__" or role.get(name) == "weight":
                continue
            elif role.get(name) == "table":
                env[name] = v0
            elif isinstance(v0, np.ndarray) and v0.ndim >= 1 and v0.shape[0] == 1:
                env[name] = np.concatenate([s.values[label][name] for s in steps], axis=0)
        values[label] = env
    hidden = [np.concatenate([s.hidden[i] for s in steps]) for i in range(len(steps[0].hidden))]
    logits = None if steps[0].logits is None else np.concatenate([s.logits for s in steps])
    return Step(values, np.concatenate([s.x for s in steps]), hidden, logits,
                np.concatenate([np.atleast_1d(s.next) for s in steps]))


def states_of(reference: Reference | Batch) -> dict[str, np.ndarray]:
    """The reference's carried states as the bundle names them (a batch's sequence b under ``…_s{b}``)."""
    if isinstance(reference, Batch):
        return {f"{n}_s{b}": v for b, r in enumerate(reference.sequences) for n, v in r.states.items()}
    return dict(reference.states)


# ---- the document's reach: windows and chunks ----------------------------------------------------------------------


def reach(programs: Programs) -> int:
    """The widest attention window or chunk any program declares (0 when none does): how far decode must run for
    every window to have dropped a position and every chunk to have ended."""
    widest = 0

    def walk(e) -> None:
        nonlocal widest
        if isinstance(e, Call):
            if e.op == "attention":
                _, numbers = operands(e)
                for key in ("window:W", "chunks of:C"):
                    n = numbers.get(key)
                    if n is not None:
                        value = n.value if hasattr(n, "value") else programs.constants.get(n.text, 0)
                        widest = max(widest, int(value))
            for _, a in e.args:
                walk(a)
        for part in ("left", "right"):
            if hasattr(e, part):
                walk(getattr(e, part))

    for p in programs.all():
        for st in p.statements:
            v = getattr(st, "value", None)
            if v is not None:
                walk(v)
    return widest


def covering(programs: Programs, deployment: Deployment) -> tuple[int, int]:
    """The steps a certification of ``deployment`` runs by default, and the context those steps need: decode runs
    ``PAST_WINDOW`` positions past the widest window or chunk (at least ``MIN_STEPS`` steps); a prefill first
    prefills ``PREFILL_CHUNKS`` chunks; a batch's last sequence starts ``2·(batch − 1)`` positions in; a forward
    step is one sequence longer than the widest window."""
    widest = reach(programs)
    positions = max(MIN_STEPS, widest + PAST_WINDOW)
    mode = deployment.mode
    if mode == "forward":
        return 3, widest + PAST_WINDOW
    if mode == "prefill":
        prefilled = PREFILL_CHUNKS * deployment.chunk
        decoded = max(MIN_STEPS - PREFILL_CHUNKS, positions - prefilled)
        return PREFILL_CHUNKS + decoded, prefilled + decoded
    if deployment.batched:
        return positions, positions + 2 * (deployment.batch - 1)
    return positions, positions


# ---- a deployment over N steps -------------------------------------------------------------------------------------


def label(dep: Deployment) -> str:
    """A deployment as the report names it: ``tp (ctx 16, tp 2)``."""
    extra = [f"ctx {dep.ctx}"]
    if dep.mode == "prefill":
        extra.append(f"chunk {dep.chunk}")
    if dep.batch > 1:
        extra.append(f"batch {dep.batch}")
    if dep.tp > 1:
        extra.append(f"tp {dep.tp}")
    return f"{dep.mode} ({', '.join(extra)})"


@dataclass
class Report:
    deployment: Deployment
    steps: int = 0
    measures: list[Measure] = field(default_factory=list)
    error: str | None = None

    @property
    def first_failure(self) -> Measure | None:
        return next((m for m in self.measures if not m.ok), None)

    @property
    def ok(self) -> bool:
        return self.error is None and self.first_failure is None and bool(self.measures)

    @property
    def per_layer(self) -> bool:
        """Whether each layer was fed the reference's input (tensor parallel: see the module docstring)."""
        return self.deployment.chips > 1

    def worst(self, program: str, tensor: str) -> Measure | None:
        ms = [m for m in self.measures if m.program == program and m.tensor == tensor]
        return max(ms, key=lambda m: (not m.ok, m.max_rel)) if ms else None


def reassociated(program: SpatialProgram) -> set[str]:
    """The program's tensors an all-reduce's value flows into (its output, and every tensor an op computes from one
    of them, in schedule order): the only ones a tensor-parallel step may compute with another rounding."""
    out: set[str] = set()
    for _, op in program.schedule():
        if op.kind == "allreduce" or any(n in out for n in op.inputs):
            out.update(op.outputs)
    return out


class Tolerances:
    """Which layer tensors of a tensor-parallel plan an all-reduce flows into, by the name the layer gives them (a
    chip's part ``Kc3_c1`` under the whole ``Kc3``): those are measured within ``tp_rtol``, every other bit for bit."""

    def __init__(self, plans: dict[str, Plan], rename: Callable[[Bound, str], str], tp: int):
        self.rtol = tp_rtol(tp)
        self.names: dict[str, set[str]] = {}
        for plan in plans.values():
            for b in plan.layers:
                names = self.names.setdefault(b.label, set())
                flows = reassociated(b.program)
                if b.program.output in flows:
                    names.add(HIDDEN)
                for n in flows:
                    layer_name = rename(b, n)
                    names.add(layer_name)
                    m = _CHIP.match(layer_name)
                    if m:
                        names.add(m.group(1))

    def __call__(self, program: str, name: str) -> float:
        return self.rtol if name in self.names.get(program, ()) else 0.0


def hidden_measures(step: int, want: Step, got: Executed, layers: list[str], rtol, head: bool = True) -> list[Measure]:
    """Each layer's output, then (``head``) the logits and the next token: what a step's report adds after
    ``compare_step``'s. A layer range run apart (``streamed.cluster``) measures its own layers, and the range with
    the head the head's."""
    out = []
    for label, g, w in zip(layers, got.hidden, want.hidden):
        out.append(measure(step, label, HIDDEN, g, w, rtol(label, HIDDEN)))
    if not head:
        return out
    if want.logits is not None and got.logits is not None:
        out.append(measure(step, "head", "logits", got.logits, _fit(got.logits, want.logits)))
    out.append(measure(step, "head", "next token", np.atleast_1d(got.next), _fit(np.atleast_1d(got.next), np.atleast_1d(want.next))))
    return out


def feed_states(session: Session, b: Bound, before: dict[str, np.ndarray]) -> None:
    """Layer ``b``'s carried states as the reference held them before this step, each chip's share cut from the
    reference's whole (a share two chips hold, a copy for each)."""
    p = b.program
    for t in p.tensors:
        if t.role != "state" or t.name not in p.carried:
            continue
        name = b.bound(t.name)
        value = before.get(name)
        if value is None and t.of and t.slice is not None and before.get(b.bound(t.of)) is not None:
            value = share_of(np.asarray(before[b.bound(t.of)]), tuple(t.slice))
        elif value is None:
            m = _CHIP.match(name)
            whole = before.get(m.group(1)) if m else None
            value = chip_part(np.asarray(whole), t.shape, int(m.group(2))) if whole is not None else None
        if value is not None and tuple(np.shape(value)) == tuple(t.shape):
            session.states[name] = np.array(value, dtype=np.float32)


def fed_step(executor: Executor, plan: Plan, tokens, positions: list[int], want: Step,
             before: dict[str, np.ndarray]) -> Executed:
    """One step of ``plan`` with every layer fed the reference's input hidden state and its carried state before the
    step (``before``, named as the bundle names them), and the head fed the reference's last hidden state: each
    program's error is its own (module docstring)."""
    tokens = np.atleast_1d(np.asarray(tokens, dtype=np.int32))
    values: dict[str, dict[str, np.ndarray]] = {}
    if plan.embed is not None:
        _, values["embed"] = executor.run(plan.embed, tokens, positions, None)
    inputs = [want.x] + list(want.hidden[:-1])
    hidden = []
    for b, h in zip(plan.layers, inputs):
        feed_states(executor.session, b, before)
        env, values[b.label] = executor.run(b, tokens, positions, h)
        hidden.append(env[b.program.output])
    env, values["head"] = executor.run(plan.head, tokens, positions, want.hidden[-1])
    a = next((op.inputs[0] for op in plan.head.program.ops if op.kind == "argmax"), None)
    return Executed(values, np.asarray(want.x), hidden, env.get(a) if a else None, env[plan.head.program.output])


@dataclass(frozen=True)
class ReferenceStep:
    """One step as the reference ran it: the tokens and positions fed, which plan of the deployment runs it
    (``prefill`` or ``step``), what the reference computed, and its carried state before the step (named as the
    bundle names it)."""

    tokens: np.ndarray
    positions: list[int]
    plan: str
    want: Step
    before: dict[str, np.ndarray]


def reference_steps(programs: Programs, weights, dep: Deployment, steps: int, seed: int,
                    arithmetic: Arithmetic = EXACT) -> list[ReferenceStep]:
    """Up to ``steps`` steps of the reference for ``dep`` (fewer when the positions reach ``ctx``). Tokens: seeded
    for the first step and for every prefill chunk, then each sequence's greedy next token — so the sequence is a
    function of the document, the weights, the deployment's shape and the seed alone."""
    rng = np.random.default_rng(seed)
    vocab = vocab_of(programs)
    out: list[ReferenceStep] = []
    if dep.batched:
        ref = Batch(programs, weights, dep.ctx, dep.batch, arithmetic)
        positions = [2 * b for b in range(dep.batch)]  # sequences at different positions
        tokens = rng.integers(0, vocab, dep.batch)
        for _ in range(steps):
            if max(positions) >= dep.ctx:
                break
            before = states_of(ref)
            want = stacked(programs, ref.step(tokens, positions))
            out.append(ReferenceStep(tokens, positions, "step", want, before))
            tokens = np.asarray(want.next)
            positions = [p + 1 for p in positions]
    elif dep.mode == "forward":
        for _ in range(steps):
            tokens = rng.integers(0, vocab, dep.ctx)
            ref = Reference(programs, weights, dep.ctx, arithmetic, rows=dep.ctx)
            out.append(ReferenceStep(tokens, [0], "step", ref.step(tokens, 0), {}))
    else:
        r = Reference(programs, weights, dep.ctx, arithmetic, rows=max(dep.chunk, 1))  # rings as the bundle's (§8)

        def one(tokens, pos, plan):
            before = states_of(r)
            want = r.step(tokens, pos)
            out.append(ReferenceStep(tokens, [pos], plan, want, before))
            return want.next

        sequence(dep, steps, seed, vocab, one)
    return out


def sequence(dep: Deployment, steps: int, seed: int, vocab: int, step: Callable) -> None:
    """The steps of one sequence (decode, tensor parallel, prefill) as ``reference_steps`` feeds them: seeded tokens
    for the first step and every prefill chunk, then the greedy next token; ``step(tokens, position, plan)`` runs one
    and returns the reference's next tokens. Stops after ``steps`` or where the next would pass ``ctx``."""
    rng = np.random.default_rng(seed)
    prefill = dep.mode == "prefill"
    pos = 0
    tokens = rng.integers(0, vocab, dep.chunk if prefill else 1)
    for s in range(steps):
        if pos + len(tokens) > dep.ctx:
            break
        nxt = step(tokens, pos, "prefill" if prefill and s < PREFILL_CHUNKS else "step")
        pos += len(tokens)
        tokens = rng.integers(0, vocab, dep.chunk) if prefill and s + 1 < PREFILL_CHUNKS else \
            np.atleast_1d(nxt)[-1:]


class References:
    """The reference's steps for one document and one set of weights, kept for every deployment that feeds it the
    same tokens — decode and tensor parallel, batched and batched tensor parallel of one batch — so a certification
    of several deployments runs the reference once for each shape of step, not once per deployment."""

    def __init__(self, programs: Programs, weights, arithmetic: Arithmetic = EXACT) -> None:
        self.programs, self.weights, self.arithmetic = programs, weights, arithmetic
        self.runs: dict[tuple, tuple[int, list[ReferenceStep]]] = {}  # key → (steps asked for, steps run)

    def steps(self, dep: Deployment, steps: int, seed: int) -> list[ReferenceStep]:
        family = "batched" if dep.batched else dep.mode if dep.mode in ("forward", "prefill") else "decode"
        key = (family, dep.ctx, dep.chunk if family == "prefill" else 0, dep.batch if dep.batched else 1, seed)
        asked, have = self.runs.get(key, (0, []))
        if asked < steps:
            have = reference_steps(self.programs, self.weights, dep, steps, seed, self.arithmetic)
            self.runs[key] = (steps, have)
        return have[:steps]


def run(programs: Programs, weights, deployment: Deployment, plans: dict[str, Plan], steps: int | None = None,
        seed: int = 0, stop_at_first: bool = True, references: References | None = None,
        arithmetic: Arithmetic = EXACT) -> Report:
    """Run the reference and the bundle side by side for ``steps`` steps of ``deployment`` (default: ``covering``).
    ``plans["step"]`` is the deployment's own bundle; a prefill deployment runs ``plans["prefill"]`` over its first
    ``PREFILL_CHUNKS`` chunks and continues with ``plans["step"]`` (the decode bundle) over the same state; the
    reference's steps are ``reference_steps`` (from ``references`` when several deployments share them). A
    tensor-parallel deployment is certified one layer at a time (module docstring)."""
    dep = deployment
    steps = covering(programs, dep)[0] if steps is None else steps
    report = Report(dep)
    roles = roles_of(programs)
    skip = lambda label, name: roles.get(label, {}).get(name) == "weight"  # noqa: E731
    layers = [p.label for p in programs.layers]
    rename = renamer()
    executor = Executor(weights, Session(), rename, arithmetic)
    per_layer = report.per_layer
    rtol = Tolerances(plans, rename, dep.chips) if per_layer else (lambda program, name: 0.0)
    shares = shares_of(plans, rename) if per_layer else None
    try:
        trajectory = (references or References(programs, weights, arithmetic)).steps(dep, steps, seed)
        for s, r in enumerate(trajectory):
            plan = plans[r.plan]
            if per_layer:
                got = fed_step(executor, plan, r.tokens, r.positions, r.want, r.before)
            else:
                got = executor.step(plan, r.tokens, r.positions, r.want.x if dep.mode == "forward" else None)
            report.measures.extend(compare_step(s, r.want.values, got.values, skip, rtol, shares)
                                   + hidden_measures(s, r.want, got, layers, rtol))
            report.steps += 1
            if stop_at_first and report.first_failure is not None:
                break
    except (ExecuteError, ReferenceError) as e:
        report.error = str(e)
    return report


def vocab_of(programs: Programs) -> int:
    """Token ids are drawn below the embedding table's rows."""
    e = programs.embed
    if e is not None:
        for d in e.decls.values():
            if d.role == "weight" and len(d.shape) == 2 and isinstance(d.shape[0], int):
                return d.shape[0]
    return 2


def renamer():
    return lambda bound, name: bound.bound(name)
