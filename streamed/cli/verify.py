"""``streamed verify DOC --mode …``: run the reference interpreter and the lowered bundle side by side and print the
largest absolute and relative error of every output and every layer's hidden state; exit 1 naming the first layer
and tensor that differ beyond tolerance. The command line is the edge: it reads the document and the checkpoint,
lowers, and prints; the comparison itself is ``streamed.numerics.verify``."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

from .cluster import add_cluster_options
from .common import (UserError, add_arithmetic_option, add_deployment_options, add_memory_option, add_storage_option,
                     arithmetic_line, arithmetic_of, deployment_from, load_storage, open_checkpoint, print_errors,
                     read_document, refuse_unless_it_fits, whole)


def add_parser(sub) -> None:
    v = sub.add_parser("verify", help="certify a bundle: execute it and the authored document, compare every tensor")
    v.add_argument("doc", metavar="DOC", help="the model program (.lgm)")
    add_deployment_options(v, mode=None, ctx=None, ctx_help="KV-cache length; the sequence for forward (default: what "
                                                            "the steps need, at least 32)",
                           sizes_help={"chunk": "prefill rows before the decode steps (default 4)",
                                       "batch": "sequences of a batched step (default 2)",
                                       "tp": "chips of a tensor-parallel deployment (default 2)"})
    src = v.add_mutually_exclusive_group()
    src.add_argument("--checkpoint", metavar="CKPT", help="a GGUF checkpoint the document's `## Checkpoint` binds")
    add_storage_option(v)
    src.add_argument("--seed", type=whole("--seed"), default=0, help="seeded weights (default seed 0)")
    v.add_argument("--steps", type=whole("--steps"), default=None,
                   help="steps to run (default: enough to cover the document — decode past every attention window "
                        "and chunk it declares, at least 8; a prefill first prefills 3 chunks)")
    v.add_argument("--target", default=None, help="target name or TOML file (default sn50)")
    v.add_argument("--bundle", metavar="DIR", help="certify this written bundle (its own deployment) instead of "
                                                   "lowering DOC here")
    add_arithmetic_option(v)
    add_memory_option(v)
    add_cluster_options(v)
    v.set_defaults(run=cmd_verify)


#: The sizes a certification runs at unless told: small, so that it runs in a second. The context grows to what the
#: default steps need (``streamed.numerics.verify.covering``).
DEFAULTS = {"ctx": 32, "chunk": 4, "batch": 2, "tp": 2}


def deployment_of(args):
    """The deployment to certify; ``None`` for ``--bundle``, which certifies the bundle's own (so a size given beside
    it would be ignored: refused instead)."""
    if args.steps is not None and args.steps <= 0:
        raise UserError(f"--steps {args.steps}: must be a positive number")
    given = [f"--{f} {getattr(args, f)}" for f in ("mode", "ctx", "chunk", "batch", "tp") if getattr(args, f) is not None]
    if args.bundle is not None:
        if given:
            raise UserError(f"{given[0]}: --bundle certifies the deployment the bundle was lowered for; give one or "
                            f"the other")
        return None
    if args.mode is None:
        args.mode = "decode"
    return deployment_from(args, DEFAULTS)


def covering_deployment(args, dep, programs):
    """``dep`` with the context its default steps need when ``--ctx`` was not given (at least the default 32), and
    the steps to run: ``--steps``, or what covers the document."""
    from ..numerics.verify import covering

    steps, needed = covering(programs, dep)
    if args.ctx is None and needed > dep.ctx:
        dep = replace(dep, ctx=needed)
    return dep, (args.steps if args.steps is not None else steps)


def _of_this_document(model, a, doc: str, where: Path, storage=None) -> None:
    """A written bundle is certified against the document it was lowered from: the same kinds over the same layers,
    each weight read from the checkpoint tensor the document binds (``bundle.document_problem``). Anything else is
    bad input, said before anything runs."""
    from ..model.checkpoint import ALL_Q8
    from ..spatial.bundle import document_problem

    why = document_problem(model, a, storage if storage is not None else ALL_Q8)
    if why is not None:
        raise UserError(f"{where} is not a bundle of {doc}: {why}")


def cmd_verify(args) -> int:
    from ..analysis.whole import analyze
    from ..spatial.bundle import BundleError, read_bundle
    from ..numerics.execute import plan_of
    from ..spatial.deployment import Deployment
    from ..spatial.streamed_model import StreamedReject, lower_streamed
    from ..numerics.footprint import of_run
    from ..numerics.verify import covering, label, reach, run
    from ..numerics.weights import WeightError, from_gguf, read_as_q8, seeded

    from . import cluster

    text = read_document(args.doc)
    arithmetic, chosen_by = arithmetic_of(args)
    dep = deployment_of(args)  # bad sizes are refused before anything is read
    on_cluster = cluster.wanted(args)
    storage, parsed = (load_storage(args.checkpoint, args.storage), None) if on_cluster \
        else open_checkpoint(args.checkpoint, args.storage)  # parsed once, as ``run`` does
    a = analyze(text, storage)
    if a.errors:
        return print_errors(args.doc, a, "verify", "verified")
    def fits(dep, steps) -> None:
        # Both runs read the weights once, together; the reference keeps each step it compares against. Counted
        # before anything is lowered, read or made. Over a cluster, the split counts each actor's part instead.
        if on_cluster:
            return
        rows = dep.ctx if dep.mode == "forward" else max(dep.chunk, dep.batch, 1)
        refuse_unless_it_fits("verify", args.doc, of_run(
            a.programs, storage if args.checkpoint else None, rows=rows, ctx=dep.ctx, positions=0,
            copies=2 * dep.batch, seeded_q8=read_as_q8(a.programs, storage), held_steps=steps), args)

    try:
        if args.bundle is not None:
            where = Path(args.bundle)
            model = read_bundle(where.parent if where.name == "manifest.json" and where.is_file() else where)
            _of_this_document(model, a, args.doc, where, storage)
            dep = model.deployment
            steps = args.steps if args.steps is not None else covering(a.programs, dep)[0]
            fits(dep, steps)
        else:
            dep, steps = covering_deployment(args, dep, a.programs)
            fits(dep, steps)
            model = lower_streamed(a, dep, args.target, storage)
        plans = {"step": plan_of(model)}
        if dep.mode == "prefill":  # the prefill's state continues in a decode bundle of its context and chunk
            plans["prefill"] = plans["step"]
            continuing = Deployment("decode", ctx=dep.ctx, chunk=dep.chunk)
            plans["step"] = plan_of(lower_streamed(a, continuing, args.target, storage))
    except StreamedReject as e:  # a refused lowering is the verification's answer, not bad input
        print(f"streamed verify: {args.doc}: {e}", file=sys.stderr)
        return 1
    except BundleError as e:
        raise UserError(str(e)) from None
    if on_cluster:  # each actor reads its own layers' weights and certifies them: nothing is read here
        report, source, status = cluster.verify(args, a, storage, dep, plans, steps, arithmetic)
        if report is None:
            return status
    else:
        try:
            weights = from_gguf(args.checkpoint, a.programs, storage, parsed=parsed) if args.checkpoint \
                else seeded(a.programs, args.seed)
        except WeightError as e:
            raise UserError(f"{args.checkpoint or 'seeded weights'}: {e}") from None
        try:
            report = run(a.programs, weights, dep, plans, steps, arithmetic=arithmetic)
        except MemoryError as e:  # both runs are numpy on this machine: a long context can ask for more than it has
            raise UserError(f"{args.doc}: certifying {label(dep)} needs more memory than this machine gives ({e}); "
                            f"certify at a smaller --ctx (the programs are the same; only their sizes change)") from None
        source = weights.source
    print(render(report, source, [p.label for p in a.programs.layers], reach(a.programs)))
    if arithmetic.ggml:
        print(arithmetic_line(arithmetic, chosen_by))
    if report.steps < steps and report.ok:
        print(f"note: {report.steps} of {steps} steps ran: the positions after them do not fit ctx {dep.ctx}")
    if report.error:
        print(f"streamed verify: {report.error}", file=sys.stderr)
        return 1
    bad = report.first_failure
    if bad is not None:
        allowed = "bit for bit" if bad.bound == 0 else f"within {bad.bound:.3g}, its reassociation bound"
        print(f"FAIL: {bad.program}, tensor `{bad.tensor}` differs at step {bad.step}: max abs {bad.max_abs:.3g}, "
              f"max rel {bad.max_rel:.3g} (it must agree {allowed})", file=sys.stderr)
        return 1
    return 0


def _steps(report, widest: int) -> str:
    """How many steps ran, and what they covered: the prefill chunks, and the positions past the widest window."""
    from ..numerics.verify import PREFILL_CHUNKS

    dep, n = report.deployment, report.steps
    text = f"{n} step{'s' if n != 1 else ''}"
    if dep.mode == "prefill":
        chunks = min(n, PREFILL_CHUNKS)
        text += f" ({chunks} prefill chunk{'s' if chunks != 1 else ''} of {dep.chunk}, then {n - chunks} decode)"
    if widest and dep.mode != "forward":
        last = n - 1 if dep.mode != "prefill" else min(n, PREFILL_CHUNKS) * dep.chunk + max(n - PREFILL_CHUNKS, 0) - 1
        text += f", to position {last}" + (" — past" if last >= widest else " — short of") + \
            f" the widest window or chunk ({widest})"
    return text


def render(report, source: str, layers: list[str], widest: int = 0) -> str:
    """The per-output and per-layer table: the worst of every step, each with the bound it is held to."""
    from ..numerics.verify import HIDDEN, label, tp_rtol

    rows = []
    for program, tensor in [(l, HIDDEN) for l in layers] + [("head", "logits"), ("head", "next token")]:
        m = report.worst(program, tensor)
        if m is not None:
            bound = "equal" if m.bound == 0 else f"{m.bound:.3g}"
            rows.append((program, tensor, f"{m.max_abs:.3g}", f"{m.max_rel:.3g}", bound, "ok" if m.ok else "DIFFERS"))
    compared = len({(m.program, m.tensor) for m in report.measures})
    head = (f"{label(report.deployment)}, {source}: {_steps(report, widest)}; {compared} tensors compared, "
            f"{len(report.measures)} comparisons in all (a tensor, every element, at one step)")
    header = ("program", "tensor", "max abs", "max rel", "bound", "")
    widths = [max(len(r[i]) for r in rows + [header]) for i in range(len(header))]
    row = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()
    lines = [head]
    if report.per_layer:
        tp = report.deployment.chips
        lines.append(f"each layer fed the reference's input and state; a tensor an all-reduce over {tp} chips flows "
                     f"into agrees within {tp_rtol(tp):.3g} of its largest magnitude, every other bit for bit")
    else:
        lines.append("every tensor must agree bit for bit")
    lines += [row(header)] + [row(r) for r in rows]
    if report.measures:
        w = max(report.measures, key=lambda m: (not m.ok, m.max_rel, m.max_abs))
        if w.ok and w.max_abs == 0:  # naming one tensor as "worst" of a tie at zero would point at nothing
            lines.append("every tensor compared is equal in both runs, bit for bit")
        else:
            lines.append(f"worst of every tensor: {w.program}, `{w.tensor}` at step {w.step}: max abs "
                         f"{w.max_abs:.3g}, max rel {w.max_rel:.3g}"
                         + (f" (bound {w.bound:.3g})" if w.bound else ""))
    verdict = "agree" if report.ok else "DIFFER"
    lines.append(f"bundle and reference {verdict}")
    return "\n".join(lines)
