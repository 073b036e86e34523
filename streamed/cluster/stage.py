"""One actor's part of a run: a range of layers (with the embedding when it is first, the head when it is last), the
weights of those programs alone, and their carried states. Plain Python — ``engine`` makes it a Ray actor; nothing
here imports Ray, so a stage can be run and tested in one process.

Invariants:
- A stage reads only the weights its programs declare (``from_gguf``/``seeded`` with ``only``): from a checkpoint,
  memory-mapped, so the pages of other ranges' tensors are never read in; seeded, each the same array as in the whole
  model (seeding is a function of the name).
- A stage computes its programs exactly as the single process does — the same ``Reference.step`` over the
  document's programs of its range (a ``Programs`` with only those), the same ``Executor.run`` over the bundle's bound
  programs, the same ``Arithmetic`` — so the hidden state it passes on, and the logits of the last, are the single
  process's, bit for bit, whatever the split.
- Steps are numbered. A stage runs step ``i`` only when it has run steps ``0…i−1`` (``Stale`` otherwise): a stage
  Ray restarted (empty states) is never asked a step it cannot answer rightly; the engine first replays to it the
  inputs it was fed, which rebuilds its states bit for bit.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, replace

import numpy as np

from ..model.program import Programs
from ..numerics.execute import Bound, ExecuteError, Executed, Executor, Session
from ..numerics.product import Arithmetic
from ..numerics.reference import Reference, ReferenceError
from ..numerics.verify import (Measure, feed_states, hidden_measures, renamer, roles_of, Tolerances, compare_step,
                               shares_of, states_of)
from ..numerics.weights import declared_weights, from_gguf, seeded
from .split import Range


@dataclass(frozen=True)
class Source:
    """Where the weights come from: a GGUF ``checkpoint`` path every node can read (with its ``storage``), or a
    ``seed`` (as ``streamed run`` seeds them: every ``q8`` weight quantised)."""

    checkpoint: str | None = None
    storage: object = None
    seed: int = 0


@dataclass(frozen=True)
class Stale:
    """The answer of a stage asked step ``asked`` when it has run ``done`` steps (Ray restarted it)."""

    done: int
    asked: int


@dataclass(frozen=True)
class Task:
    """One step as a stage is fed it: the tokens, the position of each sequence, which plan runs it (``step`` or
    ``prefill``), and the hidden state from the range before (``None`` for the first). Certifying, ``bundle`` is the
    bundle's hidden state beside the reference's and ``index`` the step's number in the report."""

    tokens: np.ndarray
    positions: tuple[int, ...]
    plan: str = "step"
    hidden: np.ndarray | None = None
    bundle: np.ndarray | None = None
    index: int = 0


@dataclass
class Out:
    """What a stage passes on: the hidden state (the reference's, or the bundle's on a bundle run), the bundle's
    beside it when certifying; the last stage's logits and next token (the reference's when certifying); the
    measures of its programs (``compared``: ``compare_step``'s; ``hidden``: its layers' outputs, then the head's);
    ``error`` what stopped a certification."""

    hidden: np.ndarray | None = None
    bundle: np.ndarray | None = None
    logits: np.ndarray | None = None
    next: np.ndarray | None = None
    compared: list[Measure] | None = None
    measured: list[Measure] | None = None
    error: str | None = None


def part_of(programs: Programs, r: Range) -> Programs:
    """The document's programs of range ``r`` alone."""
    return replace(programs, embed=programs.embed if r.embed else None, layers=programs.layers[r.first:r.stop],
                   head=programs.head if r.head else None)


def part_of_plan(plan, r: Range) -> tuple[Bound | None, list[Bound], Bound | None]:
    """A bundle plan's bound programs of range ``r``: its embed (first range), layers, head (last range)."""
    return plan.embed if r.embed else None, plan.layers[r.first:r.stop], plan.head if r.head else None


class Stage:
    """A range's programs, weights and states (module docstring). ``plans`` are the bundle's (``None``: run the
    document); ``certify`` compares them with the document's, each layer fed the reference's input and state when
    the deployment runs on ``chips`` > 1 (tensor parallel, as ``numerics.verify.run`` does)."""

    def __init__(self, programs: Programs, r: Range, source: Source, arithmetic: Arithmetic, ctx: int, rows: int,
                 plans: dict | None = None, certify: bool = False, chips: int = 1):
        self.whole, self.range, self.arithmetic = programs, r, arithmetic
        self.ctx, self.rows = ctx, rows
        self.programs = part_of(programs, r)
        names = frozenset(declared_weights(self.programs))
        if source.checkpoint is not None:
            self.weights = from_gguf(source.checkpoint, programs, source.storage, only=names)
        else:
            self.weights = seeded(programs, source.seed, only=names)
        self.plans = {k: part_of_plan(p, r) for k, p in (plans or {}).items()}
        self.certify, self.per_layer = certify, chips > 1
        if certify:
            rename = renamer()
            self.rtol = Tolerances(plans, rename, chips) if self.per_layer else (lambda program, name: 0.0)
            self.shares = shares_of(plans, rename) if self.per_layer else None
            roles = roles_of(self.programs)
            self.skip = lambda label, name: roles.get(label, {}).get(name) == "weight"  # noqa: E731
        self._reset()

    def _reset(self) -> None:
        self.reference = Reference(self.programs, self.weights, self.ctx, self.arithmetic, rows=self.rows) \
            if self.certify or not self.plans else None
        self.executor = Executor(self.weights, Session(), renamer(), self.arithmetic) if self.plans else None
        self.done = 0

    def where(self) -> tuple[str, int]:
        """The host this stage runs on and its process id."""
        return socket.gethostname(), os.getpid()

    def peak(self) -> int:
        """The most memory this stage's process has held (its peak resident set), in bytes."""
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

    def replay(self, tasks: list[Task]) -> int:
        """Run ``tasks`` — every step this stage was fed, in order — from empty states; the steps it has run."""
        self._reset()
        for t in tasks:
            self._step(t)
        return self.done

    def run(self, index: int, task: Task) -> Out | Stale:
        """Step ``index`` of the run (``Stale`` unless it is the next this stage has not run)."""
        if index != self.done:
            return Stale(self.done, index)
        return self._step(task)

    def _step(self, t: Task) -> Out:
        out = self._certify(t) if self.certify else self._bundle(t) if self.plans else self._document(t)
        self.done += 1
        return out

    def _document(self, t: Task) -> Out:
        step = self.reference.step(t.tokens, t.positions[0], None if self.range.embed else t.hidden)
        return Out(hidden=step.hidden[-1], logits=step.logits, next=step.next if self.range.head else None)

    def _bundle(self, t: Task) -> Out:
        embed, layers, head = self.plans[t.plan]
        tokens = np.atleast_1d(np.asarray(t.tokens, dtype=np.int32))
        positions = list(t.positions)
        h = t.hidden
        if embed is not None:
            env, _ = self.executor.run(embed, tokens, positions, None)
            h = env[embed.program.output]
        for b in layers:
            env, _ = self.executor.run(b, tokens, positions, h)
            h = env[b.program.output]
        if head is None:
            return Out(hidden=h)
        env, _ = self.executor.run(head, tokens, positions, h)
        a = next((op.inputs[0] for op in head.program.ops if op.kind == "argmax"), None)
        return Out(hidden=h, logits=env.get(a) if a else None, next=env[head.program.output])

    def _certify(self, t: Task) -> Out:
        """The reference and the bundle over this range for one step, compared here (``numerics.verify.run``'s
        step, cut to the range): the bundle's layers chained from the bundle's hidden state, or — tensor parallel —
        each fed the reference's input and carried state."""
        embed, layers, head = self.plans[t.plan]
        tokens = np.atleast_1d(np.asarray(t.tokens, dtype=np.int32))
        positions = list(t.positions)
        try:
            before = states_of(self.reference)
            want = self.reference.step(t.tokens, positions[0], None if self.range.embed else t.hidden)
            values: dict[str, dict[str, np.ndarray]] = {}
            h = t.bundle
            if embed is not None:
                env, values["embed"] = self.executor.run(embed, tokens, positions, None)
                h = env[embed.program.output]
            inputs = [want.x] + list(want.hidden[:-1])
            hidden = []
            for b, fed in zip(layers, inputs):
                if self.per_layer:
                    feed_states(self.executor.session, b, before)
                    h = fed
                env, values[b.label] = self.executor.run(b, tokens, positions, h)
                h = env[b.program.output]
                hidden.append(h)
            logits = nxt = None
            if head is not None:
                env, values["head"] = self.executor.run(head, tokens, positions,
                                                        want.hidden[-1] if self.per_layer else h)
                a = next((op.inputs[0] for op in head.program.ops if op.kind == "argmax"), None)
                logits, nxt = (env.get(a) if a else None), env[head.program.output]
        except (ExecuteError, ReferenceError) as e:
            return Out(error=str(e))
        got = Executed(values, np.asarray(want.x), hidden, logits, nxt if nxt is not None else np.zeros(0))
        labels = [p.label for p in self.programs.layers]
        return Out(hidden=want.hidden[-1], bundle=h, next=want.next if head is not None else None,
                   compared=compare_step(t.index, want.values, values, self.skip, self.rtol, self.shares),
                   measured=hidden_measures(t.index, want, got, labels, self.rtol, head=head is not None))
