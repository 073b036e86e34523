"""``streamed run DOC --tokens 1,2,3 [--checkpoint G | --seed S] [--decode | --prefill N] [--bundle DIR] [--json]
[--save F.npz]``:
run the authored model (the reference interpreter) or a lowered bundle (the bundle executor) on those tokens and print
each position's logits — so anyone can hold ``streamed`` against their own runtime on the same checkpoint.

One sequence from position 0: by default every token in one step (a prefill of them all); ``--decode`` steps one
token at a time; ``--prefill N`` runs the first N in one step and decodes the rest. A bundle computes what its
deployment computes: a decode (or tensor-parallel) bundle one token per step; a prefill bundle its chunk in one step,
then the decode bundle of the same context lowered here from DOC — and a prefill bundle's head reads only its last
row, so positions before it have no logits (``positions`` says which do). JSON: ``{"positions": […], "logits": [[…],
…], "next": […]}``, ``next`` the greedy token after each position; ``--save`` writes the same as a NumPy ``.npz`` (the
float32 logits as computed, without the seconds a real vocabulary's text takes)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from .cluster import add_cluster_options
from .common import (UserError, add_arithmetic_option, add_memory_option, add_storage_option, arithmetic_line,
                     arithmetic_of, load_storage, open_checkpoint, print_errors, read_document, refuse_unless_it_fits,
                     refuse_unwritable, whole, write_atomically)


def add_parser(sub) -> None:
    r = sub.add_parser("run", help="run the model (or a lowered bundle) on tokens and print each position's logits")
    r.add_argument("doc", metavar="DOC", help="the model program (.lgm)")
    r.add_argument("--tokens", required=True, metavar="T,T,…", help="token ids, comma-separated (e.g. 1,2,3)")
    src = r.add_mutually_exclusive_group()
    src.add_argument("--checkpoint", metavar="CKPT", help="a GGUF checkpoint the document's `## Checkpoint` binds")
    add_storage_option(r)
    src.add_argument("--seed", type=whole("--seed"), default=0, help="seeded weights (default seed 0)")
    steps = r.add_mutually_exclusive_group()
    steps.add_argument("--decode", action="store_true", help="one token per step (default: all tokens in one step)")
    steps.add_argument("--prefill", type=whole("--prefill"), metavar="N",
                       help="the first N tokens in one step, then one per step")
    r.add_argument("--ctx", type=whole("--ctx"), metavar="N",
                   help="the context the model runs at, as llama.cpp's -c (default: the tokens given): what depends "
                        "on it — Phi-3's LongRoPE factors — is decided by it as llama.cpp decides, the context "
                        "rounded up to a multiple of 256; a bundle runs at its own")
    r.add_argument("--bundle", metavar="DIR", help="run this bundle lowered from DOC instead of the reference")
    r.add_argument("--target", default=None, help="target for the decode bundle a prefill bundle continues with")
    r.add_argument("--json", action="store_true", help="print {positions, logits, next} as JSON")
    r.add_argument("--save", metavar="FILE.npz",
                   help="write {positions, logits, next} to a NumPy .npz file (the float32 logits as computed, no "
                        "text; np.load reads it) and print only each position's largest logits")
    add_arithmetic_option(r)
    add_memory_option(r)
    add_cluster_options(r)
    r.set_defaults(run=cmd_run)


def parse_tokens(text: str) -> list[int]:
    """Token ids as ASCII decimal integers (``١``, ``𝟙``, ``1_000``, ``+1`` and ``0x1`` are not), at most
    ``MAX_CONTEXT`` of them (a sequence longer than any context runs nowhere), each below ``MAX_DIMENSION`` (no
    vocabulary is larger); ``UserError`` naming the first that is not."""
    from ..lang.files import display
    from ..lang.limits import MAX_CONTEXT, MAX_DIMENSION, show

    given = f"--tokens {display(text) if len(text) <= 40 else display(text[:39]) + '…'}"
    parts = text.split(",")
    if len(parts) > MAX_CONTEXT:
        raise UserError(f"{given}: {len(parts):,} tokens, past the limit of {MAX_CONTEXT:,} (the longest context)")
    out = []
    for i, part in enumerate(parts):
        part = part.strip(" ")
        if re.fullmatch(r"-[0-9]{1,12}", part):
            raise UserError(f"{given}: token {i + 1} is {part}; a token id is not negative")
        if not re.fullmatch(r"[0-9]+", part):
            shown = display(part) if len(part) <= 24 else display(part[:23]) + "…"
            raise UserError(f"{given}: token {i + 1} is {shown!r}, not a token id (a whole number in the digits 0-9)")
        digits = part.lstrip("0") or "0"
        if len(digits) > 12 or int(digits) >= MAX_DIMENSION:
            value = show(int(digits)) if len(digits) <= 30 else f"a number of {len(digits):,} digits"
            raise UserError(f"{given}: token {i + 1} is {value}, past the limit of {MAX_DIMENSION:,} (the largest "
                            f"vocabulary)")
        out.append(int(digits))
    return out


def vocabulary(programs) -> int | None:
    """How many token ids the embedding has rows for (``None`` when it has no lookup table of known size)."""
    if programs.embed is None:
        return None
    for d in programs.embed.decls.values():
        if d.role == "weight" and len(d.shape) == 2 and isinstance(d.shape[0], int):
            return d.shape[0]
    return None


def cmd_run(args) -> int:
    from ..analysis.whole import analyze
    from ..numerics.weights import WeightError, from_gguf, seeded

    from . import cluster

    tokens = parse_tokens(args.tokens)
    if args.save is not None:  # before anything is computed
        refuse_unwritable(args.save, f"--save {args.save}", "--save logits.npz")
    on_cluster = cluster.wanted(args)
    text = read_document(args.doc)
    # The file parsed and mapped once, its storage and then its weights read from that; on a cluster each actor
    # reads its own layers' weights, and only the storage is read here.
    storage, parsed = (load_storage(args.checkpoint, args.storage), None) if on_cluster \
        else open_checkpoint(args.checkpoint, args.storage)
    a = analyze(text, storage)
    if a.errors:
        return print_errors(args.doc, a, "run", "run")
    vocab = vocabulary(a.programs)
    bad = next((t for t in tokens if vocab is not None and t >= vocab), None)
    if bad is not None:
        raise UserError(f"--tokens: {bad} is not a token of {args.doc}, whose vocabulary has {vocab} ids")
    if args.ctx is not None:
        from ..spatial.deployment import size_problem

        why = size_problem("ctx", args.ctx, say_value=False)
        if why is not None:
            raise UserError(f"--ctx {args.ctx}: {why}")
        if args.ctx < len(tokens):
            raise UserError(f"--ctx {args.ctx}: the {len(tokens)} tokens given do not fit a context of {args.ctx}")
    from ..spatial.deployment import modelled_of, past_modelled

    why = past_modelled(len(tokens), modelled_of(a.programs.constants), "tokens")
    if why is not None:
        raise UserError(f"--tokens: {why}")
    prefill = 1 if args.decode else (args.prefill if args.prefill is not None else len(tokens))
    if not 1 <= prefill <= len(tokens):
        raise UserError(f"--prefill {prefill}: must be between 1 and the {len(tokens)} tokens given")
    from ..numerics.footprint import of_run
    from ..numerics.weights import read_as_q8
    from ..spatial.passes.errors import StreamedReject  # the lowering itself only when a bundle is run

    arithmetic, chosen_by = arithmetic_of(args)  # a path that cannot be computed is refused before anything is read
    if on_cluster:  # each actor reads its own layers' weights: nothing is read here
        try:
            plans, prefill = bundle_plans(args, a, tokens, prefill, storage) if args.bundle else (None, prefill)
        except StreamedReject as e:
            print(f"streamed run: {args.doc}: {e}", file=sys.stderr)
            return 1
        result, status = cluster.run(args, a, storage, tokens, prefill, arithmetic, plans)
        return status if result is None else show(args, result, tokens, arithmetic, chosen_by)

    # Before anything is read or made: the memory the run holds, against what it may use.
    refuse_unless_it_fits("run", args.doc, of_run(a.programs, storage if args.checkpoint else None, rows=prefill,
                                                  ctx=len(tokens), positions=len(tokens),
                                                  seeded_q8=read_as_q8(a.programs, storage)), args)
    try:
        weights = from_gguf(args.checkpoint, a.programs, storage, parsed=parsed) if args.checkpoint \
            else seeded(a.programs, args.seed)
    except WeightError as e:
        raise UserError(f"{args.checkpoint or 'seeded weights'}: {e}") from None
    if arithmetic.ggml:
        from ..numerics.ggml_quants import not_computed

        left = not_computed(weights.values.values(), arithmetic.path)
        if left:
            print(f"streamed run: note: in llama.cpp's arithmetic a product over a weight stored {', '.join(left)} "
                  f"is the float32 product of its exact dequantisation, not llama.cpp's", file=sys.stderr)
        from ..numerics.cpu import has_amx, repacked
        from ..numerics.ggml_quants import stored_types

        moved = repacked(stored_types(weights.values.values()), arithmetic.path, has_amx())
        if moved:
            print(f"streamed run: note: llama.cpp, by default, repacks {', '.join(moved)} weights here and "
                  f"multiplies them in kernels of their own; this is its arithmetic with repacking off "
                  f"(llama-cli --no-repack)", file=sys.stderr)
    progress = None if args.json or not sys.stderr.isatty() else Progress("streamed run")
    try:
        result = run_bundle(args, a, weights, tokens, prefill, storage, arithmetic, progress) if args.bundle \
            else run_reference(a, weights, tokens, prefill, arithmetic, progress, context=args.ctx)
    except StreamedReject as e:
        print(f"streamed run: {args.doc}: {e}", file=sys.stderr)
        return 1
    finally:
        if progress is not None:
            progress.done()
    return show(args, result, tokens, arithmetic, chosen_by)


def show(args, result, tokens: list[int], arithmetic, chosen_by) -> int:
    """Print the logits (``--json``: as JSON, a row at a time) and, in llama.cpp's arithmetic, the kernel path that
    computed them; exit status 0 — or 1, printing nothing, where a logit is not finite."""
    bad = _not_finite(result)
    if bad is not None:
        print(f"streamed run: {args.doc}: {bad}; no logits are printed", file=sys.stderr)
        return 1
    if args.save:
        save(args.save, result, arithmetic.label, chosen_by)
    for piece in (as_json(result, arithmetic.label, chosen_by) if args.json
                  else render(result, tokens, every=not args.save)):
        sys.stdout.write(piece)
    if args.save and not args.json:
        print(f"logits of {len(result.positions)} positions written to {args.save}")
    if arithmetic.ggml and not args.json:
        print(arithmetic_line(arithmetic, chosen_by))
    return 0


def _not_finite(result) -> str | None:
    """Why the run's logits cannot be printed as numbers — the first position with a NaN or an infinity, and how
    many — or ``None``. ★ ``run --json`` printed 512 bare ``NaN``s, which no JSON reader takes."""
    import numpy as np

    finite = np.isfinite(result.logits)
    if finite.all():
        return None
    k = int(np.argmin(finite.all(axis=-1)))
    row = result.logits[k]
    nan, inf = int(np.isnan(row).sum()), int(np.isinf(row).sum())
    said = " and ".join(f"{n:,} {w}" for n, w in ((nan, "NaN"), (inf, "infinite")) if n)
    return (f"the logits at position {result.positions[k]} are not finite ({said} of {row.size:,}): the model's "
            f"values overflowed float32 — its weights or its numbers are out of range")


class Progress:
    """``step 3 of 40`` on one line of stderr, rewritten in place (a terminal's only: the caller decides)."""

    def __init__(self, what: str):
        self.what, self.shown = what, False

    def __call__(self, done: int, total: int) -> None:
        if total > 1:
            print(f"\r{self.what}: step {done} of {total}", end="", file=sys.stderr, flush=True)
            self.shown = True

    def done(self) -> None:
        if self.shown:
            print("\r\033[K", end="", file=sys.stderr, flush=True)


def run_reference(a, weights, tokens, prefill, arithmetic, progress=None, context=None):
    from ..numerics.reference import ReferenceError
    from ..numerics.run import reference_logits

    try:
        return reference_logits(a.programs, weights, tokens, prefill, arithmetic=arithmetic, progress=progress,
                                context=context)
    except (ReferenceError, ValueError) as e:
        raise UserError(f"cannot run: {e}") from None


def run_bundle(args, a, weights, tokens, prefill, storage, arithmetic, progress=None):
    """The bundle at ``--bundle``: its own deployment decides how the tokens step (module docstring)."""
    from ..numerics.execute import ExecuteError
    from ..numerics.run import run_plans

    plans, prefill = bundle_plans(args, a, tokens, prefill, storage)
    try:
        return run_plans(plans, weights, tokens, prefill, arithmetic, progress)
    except (ExecuteError, ValueError) as e:
        raise UserError(f"cannot run {args.bundle}: {e}") from None


def bundle_plans(args, a, tokens, prefill, storage):
    """The plans of the bundle at ``--bundle`` (its ``step``, and its ``prefill`` when it is one) and the rows of the
    first step its deployment runs; ``UserError`` for a bundle that is not DOC's or does not run these tokens."""
    from ..numerics.execute import plan_of
    from ..spatial.bundle import BundleError, read_bundle
    from ..spatial.deployment import Deployment
    from ..spatial.streamed_model import lower_streamed
    from .verify import _of_this_document

    where = Path(args.bundle)
    try:
        model = read_bundle(where.parent if where.name == "manifest.json" and where.is_file() else where)
    except BundleError as e:
        raise UserError(str(e)) from None
    _of_this_document(model, a, args.doc, where, storage)
    dep = model.deployment
    if dep.mode not in ("decode", "tp", "prefill"):
        raise UserError(f"{where}: a {dep.mode} bundle; `run` steps one sequence through a decode, tp or prefill bundle")
    if len(tokens) > dep.ctx:
        raise UserError(f"--tokens: {len(tokens)} tokens do not fit the bundle's context of {dep.ctx}")
    if args.ctx is not None and args.ctx != dep.ctx:
        raise UserError(f"--ctx {args.ctx}: {where} was lowered at ctx {dep.ctx}, the context it runs at")
    if dep.mode == "prefill":
        if args.decode or args.prefill not in (None, dep.chunk):
            raise UserError(f"{where}: a prefill bundle runs its first {dep.chunk} tokens in one step; "
                            f"drop --decode/--prefill")
        if len(tokens) < dep.chunk:
            raise UserError(f"--tokens: a prefill bundle of {dep.chunk} rows needs at least {dep.chunk} tokens")
        prefill = dep.chunk
    elif prefill > 1:
        raise UserError(f"{where}: a {dep.mode} bundle runs one token per step; give --decode")
    plans = {"step": plan_of(model)}
    if dep.mode == "prefill":  # a refused lowering (StreamedReject) is the command's answer: cmd_run says it
        plans["prefill"] = plans["step"]
        continuing = Deployment("decode", ctx=dep.ctx, chunk=dep.chunk)  # the prefill's state, its rings alike
        plans["step"] = plan_of(lower_streamed(a, continuing, args.target, storage))
    return plans, prefill


def as_json(result, arithmetic: str = "exact", chosen_by: str | None = None):
    """``{"positions": […], "logits": [[…], …], "next": […], "arithmetic": …, "arithmetic_chosen_by": …}`` in
    pieces, a row of logits at a time: printing costs a row's text, never every position's logits as Python floats and
    text at once (which no estimate counts)."""
    import json  # only for --json: not imported by every command's start

    yield f'{{"positions": {json.dumps(result.positions)}, "logits": ['
    for k, row in enumerate(result.logits):
        yield ("" if k == 0 else ", ") + json.dumps(row.tolist())
    yield (f'], "next": {json.dumps(result.next)}, "arithmetic": {json.dumps(arithmetic)}, '
           f'"arithmetic_chosen_by": {json.dumps(chosen_by)}}}\n')


def save(path: str, result, arithmetic: str, chosen_by: str | None) -> None:
    """``--save``: the run's ``positions``, ``logits`` (float32, positions × vocabulary, bit for bit what was
    computed), ``next``, ``arithmetic`` and ``arithmetic_chosen_by`` as a NumPy ``.npz``, written atomically (a reader
    sees no file or the whole one). Text is the cost of ``--json`` at a real vocabulary (1.3 million floats for 40
    positions of 32,000 take seconds to print); the file takes the logits' own bytes."""
    import numpy as np

    arrays = {"positions": np.asarray(result.positions, dtype=np.int64), "logits": np.asarray(result.logits),
              "next": np.asarray(result.next, dtype=np.int64), "arithmetic": np.asarray(arithmetic),
              "arithmetic_chosen_by": np.asarray(chosen_by or "")}
    try:
        write_atomically(path, lambda f: np.savez(f, **arrays))
    except OSError as e:
        raise UserError(f"--save {path}: cannot be written ({e.strerror})") from None


def largest(row, k: int):
    """The indices of ``row``'s ``k`` largest values, largest first, equal values by index (NaN after every number):
    ``np.argsort(-row, kind="stable")[:k]``, without sorting a vocabulary's row for its first few — that sort was a
    tenth of a second of a 40-position run."""
    import numpy as np

    k = min(k, row.size)
    if k == 0 or np.isnan(row).any():  # a row with NaN (a broken model) is sorted whole: it is rare, and slow anyway
        return np.argsort(-row, kind="stable")[:k]
    least = np.partition(row, row.size - k)[row.size - k]
    at = np.flatnonzero(row >= least)
    return at[np.lexsort((at, -row[at]))][:k]


def render(result, tokens: list[int], shown: int = 8, every: bool = True):
    """Per position: its token, the greedy next token, its widest few logits and (``every``) all its logits — two
    lines a position, or one, yielded one position at a time."""
    import numpy as np

    for pos, row, nxt in zip(result.positions, result.logits, result.next):
        top = largest(row, shown)
        best = ", ".join(f"{int(i)}: {row[i]:.6g}" for i in top)
        yield f"position {pos} (token {tokens[pos]}): next {nxt}; largest logits {best}\n"
        if every:
            yield "  " + " ".join(f"{v:.6g}" for v in row) + "\n"
