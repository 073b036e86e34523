"""Runs and certifications over a Ray cluster: the model's layer ranges (``split``), one ``Stage`` actor a range,
the hidden state passed from one to the next by this process (the driver) step by step.

I/O: this module connects to (or starts) a Ray cluster, starts actors on its nodes and stops them. It is the only
module of ``streamed`` that imports Ray, and only inside ``connect`` — ``streamed run`` without ``--cluster`` never
loads it.

Invariants:
- No answer from a stage that lost its states: each stage numbers its steps (``stage.Stale``); the driver keeps what
  it fed each stage (a step's tokens and input hidden state — a few kilobytes a token), and when Ray restarts a stage
  that died (killed, out of memory) the driver replays those steps to it, which rebuilds its states bit for bit, then
  re-runs the step. The other stages keep theirs. A stage that cannot be restarted ends the run with one line naming
  its layer range and node (``ClusterFault``) — never a wrong answer or a wait without end: Ray's own retry of a task
  is off (``max_task_retries=0``: a retried step on a fresh stage would compute from empty states).
- Stopping — Ctrl-C, an error, the end — kills every actor this run started, and the local cluster when it started
  one (``Pipeline.close``).
- Logits do not depend on the split: each stage computes its programs as the single process does (``stage``), and
  the driver only passes values on.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Callable

import numpy as np

from ..model.program import Programs
from ..numerics.product import Arithmetic
from ..numerics.run import Logits, steps as run_steps
from ..numerics.verify import Report, vocab_of, sequence
from ..spatial.deployment import Deployment
from ..spatial.units import size
from .split import Range, Slot
from .stage import Out, Source, Stage, Stale, Task

#: A local cluster's resources: small, so it shares a machine (``--cluster auto``; tests start theirs alike).
LOCAL = {"num_cpus": 2, "object_store_memory": 80 * 1000 ** 2}
#: How long an actor may take to be placed and to read its weights before the run is given up, in seconds.
START_SECONDS = 600.0
#: How many times Ray restarts a stage that died, by default.
RESTARTS = 2


class ClusterFault(Exception):
    """A run that cannot go on: one line naming the layer range and node it stopped at, and why."""


class ClusterError(Exception):
    """A cluster that cannot be reached or used, said in one line (the address the user gave, and why)."""


def connect(address: str):
    """The ``ray`` module, connected: ``auto`` starts a local cluster (``LOCAL``) unless this process is connected
    already; ``ray://HOST:PORT`` joins an existing one. Returns ``(ray, started)`` — ``started`` when this call
    started the connection, so ``close`` ends it."""
    try:
        import ray
    except ImportError:
        raise ClusterError("--cluster needs Ray: pip install 'streamed-lgm[cluster]'") from None
    if ray.is_initialized():
        return ray, False
    import logging

    # A local cluster's processes start under the machine's load: Ray gives up waiting for them after its own
    # timeout, so a start that failed is tried once more from nothing before the run is given up.
    for attempt in range(2 if address == "auto" else 1):
        try:
            if address == "auto":
                ray.init(address="local", include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR,
                         **LOCAL)
            else:
                ray.init(address=address, log_to_driver=False, logging_level=logging.ERROR)
            return ray, True
        except Exception as e:  # Ray raises ConnectionError, RuntimeError, ValueError… for an address it cannot use
            ray.shutdown()
            failed = e
    first = str(failed).strip().splitlines()[0] if str(failed).strip() else type(failed).__name__
    raise ClusterError(f"--cluster {address}: cannot connect ({first[:200]})")


def slots(ray, actors: int | None, cap: int | None) -> list[Slot]:
    """Where ``actors`` actors run (default: one per node), each node's in a contiguous block of the ranges, and the
    bytes each may hold: ``cap`` when given, never more than its node's share of the memory Ray gives tasks there."""
    nodes = sorted((n for n in ray.nodes() if n.get("Alive")), key=lambda n: n["NodeID"])
    if not nodes:
        raise ClusterError("the cluster has no live node")
    actors = actors or len(nodes)
    out = []
    for i in range(actors):
        node = nodes[i * len(nodes) // actors]
        sharing = sum(1 for j in range(actors) if nodes[j * len(nodes) // actors] is node)
        share = int(node.get("Resources", {}).get("memory", 0)) // sharing
        out.append(Slot(node["NodeID"], node.get("NodeManagerAddress", "?"), min(share, cap) if cap else share))
    return out


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("Traceback", "File ", "ray::")):
            return line[:200]
    return type(e).__name__


@contextmanager
def _unlogged():
    """Standard error closed to Ray's core worker while an actor is made: it logs there (at error level, from C++)
    that the actor's arguments live in the object store, which ``_Held`` means them to — so that a run prints its
    answer and its own messages alone. Python's exceptions are raised as ever, not printed."""
    import os
    import sys

    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


class _Held(Stage):
    """A ``Stage`` made from its arguments in the object store, given as ``[ref]`` — in a list, so Ray passes the
    reference, not the value. A restarted actor runs its constructor again: the arguments must outlive the first
    start, and ``Pipeline`` holds the reference for the whole run (Ray frees an actor's own arguments after it
    starts, and a restart then fails)."""

    def __init__(self, held: list):
        import ray

        super().__init__(*ray.get(held[0]))


class Pipeline:
    """The stages of one run, started on their nodes and ready (their weights read), and the steps fed to each.
    ``progress(step, stage, ranges)`` after each stage's part of a step (``step`` counted from 1)."""

    def __init__(self, ray, ranges: list[Range], make: Callable[[Range], tuple], restarts: int = RESTARTS,
                 progress: Callable[[int, list[Range]], None] | None = None, started: bool = False):
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        self.ray, self.ranges, self.restarts, self.progress, self.started = ray, ranges, restarts, progress, started
        self.fed: list[list[Task]] = [[] for _ in ranges]
        self.steps = 0
        self.replays = 0  # how many times a restarted stage was replayed its steps
        self.actors = []
        self.arguments = []  # each stage's, in the object store: referenced here for the whole run (``_Held``)
        actor = ray.remote(_Held)
        try:
            for r in ranges:
                where = NodeAffinitySchedulingStrategy(r.place, soft=False) if r.place else "DEFAULT"
                self.arguments.append(ray.put(make(r)))
                with _unlogged():
                    self.actors.append(actor.options(num_cpus=0, max_restarts=restarts, max_task_retries=0,
                                                     scheduling_strategy=where).remote([self.arguments[-1]]))
            ready = [a.where.remote() for a in self.actors]
            for i, ref in enumerate(ready):
                try:
                    ray.get(ref, timeout=START_SECONDS)
                except ray.exceptions.GetTimeoutError:
                    raise self._fault(i, f"its actor was not placed and ready within {START_SECONDS:.0f} s") from None
                except ray.exceptions.RayError as e:
                    raise self._fault(i, f"its actor could not start: {_first_line(e)}") from None
        except BaseException:
            self.close()
            raise

    def _fault(self, i: int, why: str) -> ClusterFault:
        r = self.ranges[i]
        return ClusterFault(f"{r.label} on node {r.host}: {why}")

    def step(self, task: Task) -> list[Out]:
        """One step through every stage in order, each fed the hidden state(s) the one before passed on; every
        stage's ``Out``. A stage's error (a certification's) ends the chain there."""
        outs: list[Out] = []
        hidden = bundle = None
        for i in range(len(self.actors)):
            fed = replace(task, hidden=hidden, bundle=bundle)
            out = self._call(i, fed)
            self.fed[i].append(fed)
            outs.append(out)
            if self.progress is not None:
                self.progress(self.steps + 1, i, self.ranges)
            if out.error is not None:
                break
            hidden, bundle = out.hidden, out.bundle
        self.steps += 1
        return outs

    def _call(self, i: int, task: Task) -> Out:
        """Stage ``i``'s part of the current step. A stage Ray restarted (it died: killed, out of memory) is first
        replayed the steps it was fed (module docstring); one that died more than ``restarts`` times more, or that
        is not back within ``START_SECONDS``, ends the run (``ClusterFault``)."""
        errors = self.ray.exceptions
        deaths, died = 0, None
        deadline = time.monotonic() + START_SECONDS
        while True:
            try:
                out = self.ray.get(self.actors[i].run.remote(self.steps, task))
                if not isinstance(out, Stale):
                    return out
                done = self.ray.get(self.actors[i].replay.remote(self.fed[i]))
                self.replays += 1
                if done == len(self.fed[i]):
                    continue
            except errors.ActorUnavailableError:  # restarting: asked again once it is back
                pass
            except errors.RayActorError as e:
                deaths, died = deaths + 1, e
                if deaths > self.restarts + 1:
                    raise self._fault(i, f"its actor died ({_first_line(e)}) and was not restarted") from None
            except errors.RayTaskError as e:  # the stage's own error (a MemoryError in numpy, …)
                raise self._fault(i, _first_line(e)) from None
            if time.monotonic() > deadline:
                why = f"died ({_first_line(died)})" if died is not None else "stopped answering"
                raise self._fault(i, f"its actor {why} and was not back within {START_SECONDS:.0f} s")
            time.sleep(0.5)

    def peaks(self) -> list[int]:
        """Each stage's peak memory (its process's peak resident set), in bytes."""
        return self.ray.get([a.peak.remote() for a in self.actors])

    def close(self) -> None:
        """Kill every actor of this run (no restart), and end the connection when this run made it."""
        for a in self.actors:
            try:
                self.ray.kill(a, no_restart=True)
            except Exception:  # already gone
                pass
        self.actors, self.arguments = [], []
        if self.started:
            self.ray.shutdown()
            self.started = False


def place(address: str, c, actors: int | None, counts: list[int] | None, cap: int | None) -> "Placed":
    """Connect (``connect``) and split the model's ``Costs`` over the cluster's nodes (``split.split``): ``actors``
    ranges, or one of ``counts[i]`` layers each, each within ``cap`` bytes. ``split.SplitRefused`` (after
    disconnecting) when the cluster cannot hold the model."""
    from .split import split

    ray, started = connect(address)
    try:
        ranges = split(c, slots(ray, len(counts) if counts else actors, cap), counts)
    except BaseException:
        if started:
            ray.shutdown()
        raise
    return Placed(ray, ranges, started)


@dataclass
class Placed:
    """What ``plan`` decided: the connection, the ranges, and whether this run started the connection."""

    ray: object
    ranges: list[Range]
    started: bool


def run(placed: Placed, programs: Programs, source: Source, tokens: list[int], prefill: int,
        arithmetic: Arithmetic, plans: dict | None = None, restarts: int = RESTARTS, progress=None,
        peaks: list | None = None) -> Logits:
    """The logits of a run over the cluster: the document's (``numerics.run.reference_logits``'s, every position)
    or, with ``plans``, the bundle's (``run_plans``'s: the last row of each step). ``peaks`` receives each stage's
    peak memory."""
    schedule = run_steps(tokens, prefill)
    make = lambda r: (programs, r, source, arithmetic, len(tokens), prefill, plans)  # noqa: E731
    pipeline = Pipeline(placed.ray, placed.ranges, make, restarts, _per_step(progress, len(schedule)),
                        placed.started)
    try:
        positions, rows = [], []
        for pos, toks in schedule:
            plan = "prefill" if plans and len(toks) > 1 else "step"
            last = pipeline.step(Task(np.asarray(toks), (pos,), plan))[-1]
            if last.logits is None:
                raise ValueError("the document's head computes no logits (no `index of the largest of …`)")
            if plans:
                rows.append(np.atleast_2d(last.logits)[-1:])
                positions.append(pos + len(toks) - 1)
            else:
                rows.append(np.atleast_2d(last.logits))
        if peaks is not None:
            peaks.extend(pipeline.peaks())
    finally:
        pipeline.close()
    return Logits(positions if plans else list(range(len(tokens))), np.concatenate(rows).astype(np.float32))


class _Ended(Exception):
    pass


def verify(placed: Placed, programs: Programs, source: Source, dep: Deployment, plans: dict, steps: int,
           arithmetic: Arithmetic, seed: int = 0, restarts: int = RESTARTS, progress=None) -> Report:
    """``numerics.verify.run`` over the cluster, for one sequence (decode, prefill, tensor parallel): the same steps,
    the same tokens, each stage comparing its own programs — so the report's measures are the single process's,
    in its order (every program's compared tensors, then every layer's output, then the head's logits and token)."""
    report = Report(dep)
    make = lambda r: (programs, r, source, arithmetic, dep.ctx, max(dep.chunk, 1), plans, True,  # noqa: E731
                      dep.chips)
    pipeline = Pipeline(placed.ray, placed.ranges, make, restarts, _per_step(progress, steps), placed.started)

    def one(tokens, pos, plan):
        outs = pipeline.step(Task(np.asarray(tokens), (pos,), plan, index=report.steps))
        failed = next((o.error for o in outs if o.error is not None), None)
        if failed is not None:
            report.error = failed
            raise _Ended
        report.measures.extend([m for o in outs for m in o.compared] + [m for o in outs for m in o.measured])
        report.steps += 1
        if report.first_failure is not None:
            raise _Ended
        return outs[-1].next

    try:
        sequence(dep, steps, seed, vocab_of(programs), one)
    except _Ended:
        pass
    finally:
        pipeline.close()
    return report


def _per_step(progress, total: int):
    """``progress(step, total, stage, ranges)`` as a ``Pipeline`` calls it (``None`` stays ``None``)."""
    if progress is None:
        return None
    return lambda step, stage, ranges: progress(step, total, stage, ranges)


def describe(ranges: list[Range], peaks: list[int] | None = None) -> str:
    """The split as one line: each range, its node and the bytes it holds (and its peak, when measured)."""
    parts = []
    for i, r in enumerate(ranges):
        extra = [s for s in ("embedding" if r.embed else "", "head" if r.head else "") if s]
        held = f"{size(r.bytes)}" + (f", peak {size(peaks[i])}" if peaks else "")
        parts.append(f"{r.label}{' + ' + ' + '.join(extra) if extra else ''} on {r.host} ({held})")
    return "; ".join(parts)
