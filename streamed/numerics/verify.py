"""The certification: the executed bundle against the reference interpreter, tensor by tensor, step by step.

``compare_step`` is pure: given what the reference computed and what the bundle computed for one step, it measures
every tensor both hold under the same name (the layer's), in the order the authored program binds them, so the
first measure out of tolerance is where the lowering first went wrong — its layer and its tensor.

Tolerance (fp32 on both paths; the Q8_0 path dequantises exactly the stored weights the reference reads): a tensor
passes when ``max |got − want| ≤ RTOL · max |want|`` with ``RTOL = 1e-5`` — its normwise relative error in the
∞-norm. So the absolute floor for an element near zero is ``1e-5 × the largest magnitude in its tensor``: a sum
reassociated across chips (tensor parallel: partial products all-reduced) differs by rounding of the size of the
terms summed, not of the (possibly cancelled) result, and the tensor's largest element is the scale of those terms.
Integer tensors (token ids, positions) must be equal.

``run`` drives both for one deployment over N steps — decode, prefill-then-decode, batched (each sequence its own
reference: the batch must equal its sequences run one by one), tensor parallel — feeding both the reference's greedy
tokens, so the two never see different inputs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from .execute import ExecuteError, Executed, Executor, Plan, Session
from ..model.program import Programs
from .reference import Batch, Reference, ReferenceError, Step
from ..spatial.deployment import Deployment
from .weights import Weights

RTOL = 1e-5


@dataclass(frozen=True)
class Measure:
    """One tensor of one program at one step: the largest absolute and relative error, and whether it passed."""

    step: int
    program: str
    tensor: str
    max_abs: float
    max_rel: float
    ok: bool
    shape: tuple = ()

    def describe(self) -> str:
        return (f"step {self.step}, {self.program}, `{self.tensor}`: max abs {self.max_abs:.3g}, "
                f"max rel {self.max_rel:.3g}" + ("" if self.ok else f" (beyond {RTOL:g})"))


def measure(step: int, program: str, tensor: str, got, want, rtol: float = RTOL) -> Measure:
    """Compare one tensor (see the module docstring for the tolerance)."""
    g, w = np.asarray(got), np.asarray(want)
    if g.shape != w.shape:
        return Measure(step, program, tensor, float("inf"), float("inf"), False, g.shape)
    if w.size == 0:
        return Measure(step, program, tensor, 0.0, 0.0, True, w.shape)
    if np.issubdtype(w.dtype, np.integer) or np.issubdtype(g.dtype, np.integer):
        bad = int(np.sum(g.astype(np.int64) != w.astype(np.int64)))
        return Measure(step, program, tensor, float(bad), float(bad), bad == 0, w.shape)
    g64, w64 = g.astype(np.float64), w.astype(np.float64)
    if not (np.all(np.isfinite(g64)) and np.all(np.isfinite(w64))):
        same = bool(np.array_equal(g64, w64, equal_nan=True))
        return Measure(step, program, tensor, 0.0 if same else float("inf"), 0.0 if same else float("inf"), same, w.shape)
    diff = float(np.max(np.abs(g64 - w64)))
    scale = float(np.max(np.abs(w64)))
    mrel = diff / scale if scale > 0 else (0.0 if diff == 0 else float("inf"))
    return Measure(step, program, tensor, diff, mrel, mrel <= rtol, w.shape)


def _fit(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """A prefill head reads only its input's last row: where the bundle holds one row of what the reference holds for
    every row, compare that last row."""
    g, w = np.asarray(got), np.asarray(want)
    if g.shape != w.shape and g.ndim == w.ndim and g.ndim >= 1 and g.shape[0] == 1 and w.shape[1:] == g.shape[1:]:
        return w[-1:]
    return w


def compare_step(step: int, want: dict[str, dict[str, np.ndarray]], got: dict[str, dict[str, np.ndarray]],
                 skip: Callable[[str, str], bool] = lambda program, name: False) -> list[Measure]:
    """Every tensor the reference bound that the bundle also holds, program by program in execution order, tensors
    in the order the authored program binds them."""
    out: list[Measure] = []
    for label, ref_env in want.items():
        bundle_env = got.get(label)
        if bundle_env is None:
            continue
        for name, value in ref_env.items():
            if name.startswith("__") or skip(label, name):
                continue
            if not isinstance(value, np.ndarray) and not np.isscalar(value):
                continue
            held = bundle_env[name] if name in bundle_env else assembled(bundle_env, name, np.shape(value))
            if held is not None:
                out.append(measure(step, label, name, held, _fit(held, value)))
    return out


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


# ---- what the reference says a deployment's step is ----------------------------------------------------------------


def _roles(programs: Programs) -> dict[str, dict[str, str]]:
    return {p.label: {d.name: d.role for d in p.decls.values()} for p in programs.all()}


def stacked(programs: Programs, steps: list[Step]) -> Step:
    """A batch of one-row steps as the batched bundle names them: rows stacked in sequence order, sequence b's states
    and position under ``…_s{b}``."""
    roles = _roles(programs)
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

    def worst(self, program: str, tensor: str) -> Measure | None:
        ms = [m for m in self.measures if m.program == program and m.tensor == tensor]
        return max(ms, key=lambda m: (not m.ok, m.max_rel)) if ms else None


def _hidden_measures(step: int, want: Step, got: Executed, layers: list[str]) -> list[Measure]:
    out = [measure(step, label, "hidden state", g, w) for label, g, w in zip(layers, got.hidden, want.hidden)]
    if want.logits is not None and got.logits is not None:
        out.append(measure(step, "head", "logits", got.logits, _fit(got.logits, want.logits)))
    out.append(measure(step, "head", "next token", np.atleast_1d(got.next), _fit(np.atleast_1d(got.next), np.atleast_1d(want.next))))
    return out


def run(programs: Programs, weights: Weights, deployment: Deployment, plans: dict[str, Plan], steps: int = 8,
        seed: int = 0, stop_at_first: bool = True) -> Report:
    """Run the reference and the bundle side by side for ``steps`` steps of ``deployment`` (``streamed.Deployment``:
    its mode, ctx, prefill chunk, batch and chips). ``plans["step"]`` is the deployment's own
    bundle; a prefill deployment's first step runs ``plans["prefill"]`` over ``chunk`` tokens and continues with
    ``plans["step"]`` (the decode bundle) over the same state. Tokens: seeded for the first step, then each
    sequence's greedy next token from the reference."""
    dep = deployment
    report = Report(dep)
    rng = np.random.default_rng(seed)
    vocab = _vocab(programs)
    roles = _roles(programs)
    skip = lambda label, name: roles.get(label, {}).get(name) == "weight"  # noqa: E731
    layers = [p.label for p in programs.layers]
    executor = Executor(weights, Session(), _renamer())

    def record(s: int, want: Step, got: Executed) -> bool:
        """Measure one step; whether to stop here."""
        report.measures.extend(compare_step(s, want.values, got.values, skip) + _hidden_measures(s, want, got, layers))
        report.steps += 1
        return stop_at_first and report.first_failure is not None

    try:
        if dep.mode == "batched" or dep.mode == "batched-tp":
            ref = Batch(programs, weights, dep.ctx, dep.batch)
            positions = [2 * b for b in range(dep.batch)]  # sequences at different positions
            tokens = rng.integers(0, vocab, dep.batch)
            for s in range(steps):
                if max(positions) >= dep.ctx:
                    break
                want = stacked(programs, ref.step(tokens, positions))
                got = executor.step(plans["step"], tokens, positions)
                if record(s, want, got):
                    break
                tokens = np.asarray(want.next)
                positions = [p + 1 for p in positions]
        elif dep.mode == "forward":
            for s in range(steps):
                r = Reference(programs, weights, dep.ctx)
                tokens = rng.integers(0, vocab, dep.ctx)
                want = r.step(tokens, 0)
                got = executor.step(plans["step"], tokens, [0], want.x)
                if record(s, want, got):
                    break
        else:
            r = Reference(programs, weights, dep.ctx)
            pos = 0
            tokens = rng.integers(0, vocab, dep.chunk if dep.mode == "prefill" else 1)
            for s in range(steps):
                if pos + len(tokens) > dep.ctx:
                    break
                plan = plans["prefill"] if dep.mode == "prefill" and s == 0 else plans["step"]
                want = r.step(tokens, pos)
                got = executor.step(plan, tokens, [pos])
                if record(s, want, got):
                    break
                pos += len(tokens)
                tokens = np.atleast_1d(want.next)[-1:]
    except (ExecuteError, ReferenceError) as e:
        report.error = str(e)
    return report


def _vocab(programs: Programs) -> int:
    """Token ids are drawn below the embedding table's rows."""
    e = programs.embed
    if e is not None:
        for d in e.decls.values():
            if d.role == "weight" and len(d.shape) == 2 and isinstance(d.shape[0], int):
                return d.shape[0]
    return 2


def _renamer():
    return lambda bound, name: bound.bound(name)
