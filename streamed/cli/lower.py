"""``streamed lower DOC --mode … -o DIR``: lower a document to a bundle and write it — with the estimate at
neighbouring batch sizes and contexts (``spatial.sweep``, the roofline ``streamed show`` draws) unless ``--no-sweep``.

Exit status 0 with a short summary on stdout; 1 when a program does not lower (``the <program> program does not
lower: <why>`` on stderr, then where — for every reject of every program); 2 for bad input (a missing file, a missing size, a bad target file). A progress
bar goes to stderr only when stderr is a terminal.
"""

from __future__ import annotations

import sys
import time

from ..spatial.units import size
from .signals import SIGNALS
from .common import (
    UserError, add_deployment_options, add_storage_option, deployment_from, load_storage, load_target_or_fail,
    print_errors, read_document,
)


def _rate(x: float | None) -> str:
    if x is None:
        return "?"
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if x >= scale:
            return f"{x / scale:.3g}{unit}"
    return f"{x:.3g}"


def summary(model, out_dir: str) -> str:
    d = model.deployment
    sizes = [f"ctx {d.ctx}"] + ([f"chunk {d.chunk}"] if d.chunk else []) + \
            ([f"batch {d.batch}"] if d.batched else []) + ([f"tp {d.tp}"] if d.chips > 1 else [])
    lines = [f"{out_dir}: {d.mode} bundle ({', '.join(sizes)}) for {model.target.name.upper()}"]
    from ..analysis.whole import layers_named

    kinds = "; ".join(f"{k.name}: {layers_named(k.layers)}" for k in model.kinds)
    lines.append(f"  kinds lowered  {len(model.kinds)} ({kinds})")
    lines.append(f"  layers bound   {len(model.layers)} (each layer runs its kind's program on its own weights and state)")
    lines.append(f"  storage        {_storage(model)}")
    if model.past_training:
        lines.append(f"  context        warning: {model.past_training}")
    lines += _held(model)
    tiled = [_tiles(name, p, model.estimate["programs"][name]["weight_reads"]) for name, p in model.programs()
             if p.tiles]
    if tiled:
        lines.append(f"  tiles          {'; '.join(tiled)}")
    r = model.residency
    states = ", ".join(f"{size(v)} in {t.upper()}" for t, v in r["states"].items() if v) or "none carried"
    weights = ", ".join(f"{size(v)} in {t.upper()}" for t, v in r["weights"].items() if v) or "none"
    tables = ", ".join(f"{size(v)} in {t.upper()}" for t, v in r.get("tables", {}).items() if v)
    lines.append(f"  residency      {f'per chip of {d.chips}: ' if d.chips > 1 else ''}states {states}; weights "
                 f"{weights}{f'; tables {tables}' if tables else ''}; {size(r['reserved_sram_bytes'])} SRAM reserved "
                 f"for the largest program's own buffers")
    e = model.estimate
    moved = ", ".join(f"{size(v)} from {t.upper()}" for t, v in e["step"]["bytes"].items() if v and t != "sram")
    lines.append(f"  estimate       {_rate(e['tokens_per_second'])} tokens/s, modelled from the target's roofs "
                 f"({e['tokens_per_step']} per step of "
                 f"{_seconds(e['step']['seconds'])}, {e['bound']}-bound{', reading ' + moved if moved else ''}"
                 f"{' per chip' if moved and d.chips > 1 else ''})")
    return "\n".join(lines)


def _storage(model) -> str:
    """Whether the weights' storage was read or assumed, and from what; assumed, how many weights of each type and
    which are not the file's type (a router kept F32, a weight too narrow for Q8_0 blocks kept F16)."""
    naming = model.naming
    if naming is None or naming.assumed is None:
        return naming.said if naming is not None else "read"
    by_type: dict[str, list[str]] = {}
    for name, t in naming.declared_q8.items():
        by_type.setdefault(t, []).append(name)
    counts = "; ".join(f"{len(names)} {t}" + ("" if t == naming.assumed else f" ({', '.join(names[:3])}"
                                               f"{', …' if len(names) > 3 else ''})")
                       for t, names in sorted(by_type.items(), key=lambda tn: (tn[0] != naming.assumed, tn[0])))
    return f"{naming.said}: {counts}" if counts else naming.said


def _held(model) -> list[str]:
    """What a person should know of how the chips hold the weights and caches: the weights stored Q8_0 that some
    program reads dense, with why (grouped by why), and the kinds whose key/value heads are replicated over the
    chips (each share and how many chips hold a copy)."""
    from ..spatial.passes.fold_q8 import read_dense

    why_of: dict[str, list[str]] = {}
    for _, p in model.programs():
        for d in read_dense(p):
            why_of.setdefault(d["why"], []).append(d["of"])
    lines = [f"  read dense     {', '.join(names)}: {why}" for why, names in why_of.items()]
    copies = []
    for k in model.kinds:
        states = set(k.carried)
        shared = [r for r in (k.tp or {}).get("replicas", ()) if any(f"{r['of']}_c{c}" in states
                                                                     for c in range(k.tp["chips"]))]
        if shared:
            shares = shared[0]["shares"]
            copies.append(f"{k.name}: {len(shares)} KV share{'s' if len(shares) > 1 else ''}, each held by "
                          f"{len(shares[0]['chips'])} chips")
    if copies:
        lines.append(f"  replicated     {'; '.join(copies)}")
    return lines


def _tiles(name: str, p, reads: int) -> str:
    """``head: 2 × 26 tiles (16384 rows × 4933 of 128256 columns), weights read 2 times a step``: a tiled program's
    tiles and what they cost in weight reads."""
    row_tiles = len({t.rows for t in p.tiles})
    if p.tile_cols is not None:
        shape = f"{row_tiles} × {len(p.tiles) // row_tiles} tiles ({p.tile_rows} rows × {p.tile_cols} of {p.cols} columns)"
    else:
        shape = f"{len(p.tiles)} tiles of {p.tile_rows} rows"
    cost = "weights kept on chip" if p.weights_on_chip else \
        "weights read once" if reads == 1 else f"weights read {reads} times a step"
    return f"{name}: {shape}, {cost}"


def _seconds(s: float) -> str:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if s >= scale:
            return f"{s / scale:.3g} {unit}"
    return f"{s * 1e9:.3g} ns"


class _Bar:
    def __init__(self, stream):
        self.stream = stream
        self.tty = stream.isatty()
        self.closed = False

    def __call__(self, message: str, done: int, total: int) -> None:
        if not self.tty:
            return
        width = 24
        filled = width * done // max(total, 1)
        self.stream.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} {message[:40]:<40}")
        self.stream.flush()

    def close(self) -> None:
        if self.tty and not self.closed:
            self.closed = True
            self.stream.write("\r" + " " * 80 + "\r")
            self.stream.flush()


def cmd_lower(args) -> int:
    from ..analysis.whole import analyze, position
    from ..spatial.bundle import BundleError, write_bundle
    from ..spatial.streamed_model import StreamedReject, lower_streamed
    from ..spatial.sweep import with_sweep

    deployment = deployment_from(args)
    target = load_target_or_fail(args.target)
    text = read_document(args.doc)
    storage = load_storage(args.checkpoint, args.storage)
    started = time.perf_counter()
    analysis = analyze(text, storage)
    if analysis.errors:
        return print_errors(args.doc, analysis, "lower", "lowered")
    # A checkpoint that lacks the tensors the document binds still lowers (storage only decides Q8_0 folding), but
    # the bundle would load nothing from it: say so, as `check` does, before the summary.
    for d in analysis.diagnostics:
        if d.code == "checkpoint":
            line, col = position(d.range)
            print(f"{args.doc}:{line}:{col}: warning: {d.message}", file=sys.stderr)
    bar = _Bar(sys.stderr)
    cache: dict = {}
    try:
        model = lower_streamed(analysis, deployment, target=target, storage=storage, progress=bar, cache=cache)
        if args.sweep:  # the roofline's neighbours (other batches and contexts): `streamed show` draws them
            model = with_sweep(model, analysis, storage, cache)
    except StreamedReject as r:
        bar.close()
        for one in r.every:
            print(str(one), file=sys.stderr)
            where = _where(analysis, one)
            if where:
                print(f"  at {args.doc}:{where}", file=sys.stderr)
        return 1
    finally:
        bar.close()  # also on Ctrl-C: the message after it starts on a clean line
    try:
        write_bundle(model, args.output, source=args.doc, uninterrupted=SIGNALS.deferred)
    except BundleError as e:
        raise UserError(str(e)) from None
    print(summary(model, args.output))
    if not sys.stderr.isatty():
        print(f"lowered {len(model.kinds)} kind{'s' if len(model.kinds) != 1 else ''} in "
              f"{time.perf_counter() - started:.2f} s", file=sys.stderr)
    return 0


def _where(analysis, r) -> str | None:
    """``line:column (statement N, `binder`)`` of a reject's statement, when it names one."""
    if r.statement is None:
        return None
    progs = analysis.programs
    program = None
    if r.layer is not None:
        program = progs.layer(r.layer)
    elif r.program == "embed":
        program = progs.embed
    elif r.program == "head":
        program = progs.head
    if program is None:
        return None
    for st in program.statements:
        if st.index == r.statement:
            s = st.range.start
            binder = f", `{r.binder}`" if r.binder else ""
            return f"{s.line + 1}:{s.character + 1} (statement {r.statement + 1} of {program.label}{binder})"
    return None


def add_parser(sub) -> None:
    p = sub.add_parser("lower", help="lower a document to a certified SN50 bundle: one program per layer kind")
    p.add_argument("doc", metavar="DOC")
    add_deployment_options(p)
    p.add_argument("--checkpoint", metavar="CKPT", help="a GGUF checkpoint whose storage decides Q8_0 folding")
    add_storage_option(p)
    p.add_argument("--target", default="sn50", metavar="TARGET", help="sn50 (default), sn40l, or a .toml file")
    p.add_argument("-o", "--output", required=True, metavar="DIR", help="the bundle directory")
    p.add_argument("--no-sweep", dest="sweep", action="store_false",
                   help="skip the estimate at other batch sizes and contexts (the roofline's neighbours, one "
                        "lowering each)")
    p.set_defaults(run=cmd_lower)
