"""A model run on given tokens: the logits at each position, from the reference interpreter or a lowered bundle —
what ``streamed run`` prints and what the oracle tests hold against llama.cpp.

A run is one sequence from position 0: its first ``prefill`` tokens in one step (rows = ``prefill``), then one
decode step per token, every state carried from step to step (LANGUAGE §8). ``prefill`` 1 is decoding every token.
The reference gives the logits of every row of every step. A bundle gives what its head computes: a prefill bundle's
head reads only its last row, so a bundle run has the logits of the prefill's last position and of every decode step
(``Logits.positions`` says which). Invariant: both runs read the same weights, and each fills its tables by its own
rules (the document's, the bundle's); neither is compared here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..model.checkpoint import ALL_Q8, Storage
from ..model.program import Programs
from .execute import Executor, Plan, plan_of
from .product import EXACT, Arithmetic
from .reference import Reference
from .weights import Weights


@dataclass
class Logits:
    """``logits[k]`` is position ``positions[k]``'s; ``next`` the greedy next token after each of them."""

    positions: list[int]
    logits: np.ndarray  # len(positions) × vocab, float32

    @property
    def next(self) -> list[int]:
        return [int(i) for i in np.argmax(self.logits, axis=-1)]


def _stacked(rows: list[np.ndarray]) -> np.ndarray:
    """The steps' logits as one float32 array, copied only when there are several (a prefill's are 40 × 32,000 floats
    at a 1B shape: copying them twice was 10 MB of a run's peak)."""
    return (rows[0] if len(rows) == 1 else np.concatenate(rows)).astype(np.float32, copy=False)


def steps(tokens: list[int], prefill: int) -> list[tuple[int, list[int]]]:
    """``(position, tokens)`` of each step: the first ``prefill`` tokens at 0, then one token per step."""
    if not 1 <= prefill <= len(tokens):
        raise ValueError(f"a prefill of {prefill} tokens is not within the {len(tokens)} given")
    return [(0, list(tokens[:prefill]))] + [(p, [tokens[p]]) for p in range(prefill, len(tokens))]


def reference_logits(programs: Programs, weights: Weights, tokens: list[int], prefill: int,
                     ctx: int | None = None, arithmetic: Arithmetic = EXACT, progress=None,
                     context: int | None = None) -> Logits:
    """The document's logits at every position (its head's argmax operand), run by the reference interpreter with
    KV caches of ``ctx`` positions (default: just the tokens; a windowed cache a ring for steps of ``prefill`` rows,
    LANGUAGE §8), in ``arithmetic``, the model run at ``context`` positions (default ``ctx``: what depends on the
    context, ``Reference``); ``progress(done, total)`` after each step when given."""
    ref = Reference(programs, weights, ctx or len(tokens), arithmetic, rows=prefill, context=context)
    rows = []
    plan = steps(tokens, prefill)
    for done, (pos, toks) in enumerate(plan, 1):
        step = ref.step(toks, pos, keep=False)  # only the logits are read: each layer's values let go
        if progress is not None:
            progress(done, len(plan))
        if step.logits is None:
            raise ValueError("the document's head computes no logits (no `index of the largest of …`)")
        rows.append(np.atleast_2d(step.logits))
    return Logits(list(range(len(tokens))), _stacked(rows))


def run_plans(plans: dict[str, Plan], weights: Weights, tokens: list[int], prefill: int,
              arithmetic: Arithmetic = EXACT, progress=None) -> Logits:
    """A bundle's logits: ``plans["prefill"]`` runs the first step when ``prefill`` > 1, ``plans["step"]`` (a decode
    bundle) every other; the head's logits are those of the last row it reads. The bundle's tables are filled by its
    own fill rules (the executor's), never the document's."""
    executor = Executor(weights, arithmetic=arithmetic)
    positions, rows = [], []
    schedule = steps(tokens, prefill)
    for done, (pos, toks) in enumerate(schedule, 1):
        plan = plans["prefill"] if len(toks) > 1 else plans["step"]
        got = executor.step(plan, toks, [pos], keep=False)
        if progress is not None:
            progress(done, len(schedule))
        if got.logits is None:
            raise ValueError("the bundle's head computes no logits")
        rows.append(np.atleast_2d(got.logits)[-1:])
        positions.append(pos + len(toks) - 1)
    return Logits(positions, _stacked(rows))


def bundle_logits(analysis, weights: Weights, tokens: list[int], prefill: int, storage: Storage = ALL_Q8,
                  target: str | None = None, ctx: int | None = None, arithmetic: Arithmetic = EXACT) -> Logits:
    """The logits of the document's bundles, lowered here: a prefill bundle of ``prefill`` rows (when ``prefill`` >
    1) and a decode bundle continuing it, both with KV caches of ``ctx`` positions (default: just the tokens)."""
    from ..spatial.deployment import Deployment  # lowering: not imported by a reference run
    from ..spatial.streamed_model import lower_streamed

    ctx = ctx or len(tokens)
    chunk = prefill if prefill > 1 else 0  # the decode continues the prefill's state: its rings sized alike
    plans = {"step": plan_of(lower_streamed(analysis, Deployment("decode", ctx=ctx, chunk=chunk), target, storage))}
    if prefill > 1:
        plans["prefill"] = plan_of(lower_streamed(analysis, Deployment("prefill", ctx=ctx, chunk=prefill), target,
                                                  storage))
    return run_plans(plans, weights, tokens, prefill, arithmetic)
