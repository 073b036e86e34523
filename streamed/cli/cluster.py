"""``--cluster`` of ``streamed run`` and ``streamed verify``: the options, and the run handed to
``streamed.cluster`` — the model split into layer ranges over a Ray cluster's actors. Ray is imported only here, and
only when ``--cluster`` is given (``streamed.cluster.engine.connect``).

On a terminal: the split before the run (each range, its node, its bytes), then ``step 3 of 40 · layers 8-15 on
10.0.0.2`` as each actor finishes its part of a step; with ``--json`` (or off a terminal) nothing but the answer."""

from __future__ import annotations

import os
import sys

from .common import UserError, parse_bytes


def add_cluster_options(p) -> None:
    g = p.add_argument_group("over a Ray cluster (pip install 'streamed-lgm[cluster]')")
    g.add_argument("--cluster", metavar="ADDRESS", default=None,
                   help="run over Ray actors, one a range of layers: `auto` (a local cluster) or ray://HOST:PORT")
    g.add_argument("--actors", metavar="N|A,B,…", default=None,
                   help="with --cluster: N actors (default one a node), or the layers of each actor in model order")
    g.add_argument("--actor-memory", metavar="BYTES", default=None,
                   help="with --cluster: the memory each actor may hold (default its node's share of what Ray gives)")


def wanted(args) -> bool:
    """Whether the run goes over a cluster; ``UserError`` for a cluster option given without ``--cluster``, or for
    ``--memory`` beside it (that bounds this machine; the actors' bound is ``--actor-memory``)."""
    if args.cluster is None:
        for flag in ("actors", "actor_memory"):
            if getattr(args, flag) is not None:
                raise UserError(f"--{flag.replace('_', '-')} {getattr(args, flag)}: only with --cluster")
        return False
    if args.cluster != "auto" and not args.cluster.startswith("ray://"):
        raise UserError(f"--cluster {args.cluster}: say `auto` (a local Ray cluster) or ray://HOST:PORT")
    if args.memory is not None:
        raise UserError(f"--memory {args.memory}: bounds this machine; over --cluster each actor's bound is "
                        f"--actor-memory")
    return True


def _actors(args) -> tuple[int | None, list[int] | None]:
    text = args.actors
    if text is None:
        return None, None
    parts = text.split(",")
    if not all(p.strip().isdigit() and int(p) > 0 for p in parts):
        raise UserError(f"--actors {text}: a number of actors, or each actor's number of layers (2,5,1)")
    counts = [int(p) for p in parts]
    return (counts[0], None) if len(counts) == 1 else (len(counts), counts)


def _place(args, costs, command: str, doc: str):
    from ..cluster.engine import ClusterError, place
    from ..cluster.split import SplitRefused

    actors, counts = _actors(args)
    layers = len(costs.held)
    if counts is not None and sum(counts) != layers:
        raise UserError(f"--actors {args.actors}: {'+'.join(map(str, counts))} layers, but {doc} has {layers}")
    if actors is not None and actors > layers:
        raise UserError(f"--actors {args.actors}: more actors than {doc}'s {layers} layers")
    cap = parse_bytes(args.actor_memory, "--actor-memory") if args.actor_memory is not None else None
    try:
        placed = place(args.cluster, costs, actors, counts, cap)
    except ClusterError as e:
        raise UserError(str(e)) from None
    except SplitRefused as e:
        print(f"streamed {command}: {doc}: {e}", file=sys.stderr)
        return None
    return placed


def _source(args, storage):
    from ..cluster.stage import Source

    if args.checkpoint:
        return Source(os.path.abspath(args.checkpoint), storage), f"checkpoint {storage.source}"
    return Source(seed=args.seed), f"random weights from seed {args.seed}"  # as seeded() names them


class Progress:
    """``streamed run: step 3 of 40 · layers 8-15 on 10.0.0.2`` on one line of stderr, rewritten in place."""

    def __init__(self, what: str):
        self.what, self.shown = what, False

    def __call__(self, step: int, total: int, stage: int, ranges) -> None:
        r = ranges[stage]
        print(f"\r\033[K{self.what}: step {step} of {total} · {r.label} on {r.host} ({stage + 1} of {len(ranges)})",
              end="", file=sys.stderr, flush=True)
        self.shown = True

    def done(self) -> None:
        if self.shown:
            print("\r\033[K", end="", file=sys.stderr, flush=True)


def _progress(args, command: str, placed) -> Progress | None:
    from ..cluster.engine import describe

    if getattr(args, "json", False) or not sys.stderr.isatty():
        return None
    print(f"streamed {command}: {len(placed.ranges)} actors: {describe(placed.ranges)}", file=sys.stderr)
    return Progress(f"streamed {command}")


def _run_guarded(command: str, doc: str, work):
    """``work()``, its one-line faults said as the command's (exit 1)."""
    from ..cluster.engine import ClusterFault

    try:
        return work(), 0
    except ClusterFault as e:
        print(f"streamed {command}: {doc}: {e}", file=sys.stderr)
        return None, 1


def run(args, a, storage, tokens: list[int], prefill: int, arithmetic, plans=None):
    """``streamed run --cluster``: the logits, or ``None`` and the exit status when refused or stopped."""
    from ..cluster import engine
    from ..cluster.split import costs
    from ..numerics.weights import read_as_q8

    c = costs(a.programs, storage if args.checkpoint else None, rows=prefill, ctx=len(tokens),
              positions=len(tokens), seeded_q8=read_as_q8(a.programs, storage))
    placed = _place(args, c, "run", args.doc)
    if placed is None:
        return None, 1
    progress = _progress(args, "run", placed)
    source, _ = _source(args, storage)
    try:
        return _run_guarded("run", args.doc, lambda: engine.run(placed, a.programs, source, tokens, prefill,
                                                                 arithmetic, plans, progress=progress))
    finally:
        if progress is not None:
            progress.done()


def verify(args, a, storage, dep, plans, steps: int, arithmetic):
    """``streamed verify --cluster``: the report and the weights' name, or ``None`` and the exit status."""
    from ..cluster import engine
    from ..cluster.split import costs
    from ..numerics.weights import read_as_q8

    if dep.batched or dep.mode == "forward":
        raise UserError(f"--mode {dep.mode}: --cluster certifies one sequence (decode, prefill or tp)")
    rows = max(dep.chunk, dep.batch, 1)
    c = costs(a.programs, storage if args.checkpoint else None, rows=rows, ctx=dep.ctx, positions=0, copies=2,
              seeded_q8=read_as_q8(a.programs, storage))
    placed = _place(args, c, "verify", args.doc)
    if placed is None:
        return None, None, 1
    progress = _progress(args, "verify", placed)
    source, name = _source(args, storage)
    try:
        report, status = _run_guarded("verify", args.doc, lambda: engine.verify(
            placed, a.programs, source, dep, plans, steps, arithmetic, progress=progress))
    finally:
        if progress is not None:
            progress.done()
    return report, name, status
