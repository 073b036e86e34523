"""How a deployment's estimate moves with its batch and its context: the same document lowered at neighbouring sizes.

The roofline picture (``pictures.py``) draws a bundle's own point and, beside it, these. Each point is a whole
``lower_streamed`` of the document at that size — its own programs, tiles, residency and estimate — never the
bundle's figures scaled: a batch whose caches spill to HBM, a context whose programs tile, shows it, and a size that
does not lower at all is a point that says why (``refused``). The points are computed where the document is (the
command line's ``lower`` and the server's ``lowerBundle``) and recorded in the manifest's ``estimate.sweep``, so a
bundle draws its roofline without its document.

The axes (``SWEEP_SIZES``): the rows a step serves — ``batch`` 1, 2, 4 … 64 (a batch of one is the unbatched
deployment: ``decode`` or ``tp``; more are ``batched`` or ``batched-tp``), ``chunk`` for a prefill (64 … 2048 up to
its context) — and ``ctx``, the context from an eighth to eight times the deployment's (within ``MAX_CONTEXT``; a
forward bundle's rows are its context, so it has only that axis). The deployment's own size is on each axis, as its
own estimate. Cost: one lowering per point, depth-independent like every lowering (``benchmarks/bench_pictures.py``
measures what it adds to ``streamed lower``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable

from ..lang.limits import MAX_CONTEXT
from .deployment import Deployment
from .streamed_model import StreamedModel, StreamedReject, lower_streamed

BATCHES = (1, 2, 4, 8, 16, 32, 64)
CHUNKS = (64, 128, 256, 512, 1024, 2048)
CONTEXT_STEPS = (-3, -2, -1, 1, 2, 3)  # powers of two around the deployment's context
#: The sizes a sweep varies, by mode: the rows a step serves, then the context.
SWEEP_SIZES = {"decode": ("batch", "ctx"), "batched": ("batch", "ctx"), "tp": ("batch", "ctx"),
               "batched-tp": ("batch", "ctx"), "prefill": ("chunk", "ctx"), "forward": ("ctx",)}


def at_size(d: Deployment, size: str, value: int) -> Deployment:
    """``d`` with one size changed: a batch of one unbatched (``decode``, ``tp``), more batched."""
    if size == "batch":
        chips = d.chips > 1
        mode = ("batched-tp" if chips else "batched") if value > 1 else ("tp" if chips else "decode")
        return Deployment(mode, ctx=d.ctx, batch=value, tp=d.tp).normal()
    if size == "chunk":
        return Deployment(d.mode, ctx=d.ctx, chunk=value).normal()
    return replace(d, ctx=value)


def _values(d: Deployment, size: str) -> list[int]:
    if size == "batch":
        own = d.batch if d.batched else 1
        return sorted({*BATCHES, own})
    if size == "chunk":
        return sorted({c for c in CHUNKS if c <= d.ctx} | {d.chunk})
    around = {d.ctx * 2**s if s > 0 else d.ctx >> -s for s in CONTEXT_STEPS}
    low = d.chunk if d.mode == "prefill" else 1
    return sorted({c for c in around if low <= c <= MAX_CONTEXT} | {d.ctx})


def point(d: Deployment, estimate: dict) -> dict:
    """One point of a sweep: the deployment's sizes, and its estimate in brief (what the roofline draws)."""
    step = estimate["step"]
    return {**d.to_json(), "tokens_per_second": estimate["tokens_per_second"], "seconds": step["seconds"],
            "flops": step["flops"], "bytes": dict(step["bytes"]), "bound": estimate["bound"]}


def sweep(model: StreamedModel, analysis, storage=None, cache: dict | None = None,
          cancelled: Callable[[], bool] | None = None) -> dict:
    """``{size: [point, …]}`` for each size ``SWEEP_SIZES`` varies in ``model``'s deployment, in increasing order;
    the deployment's own point is its estimate, every other a lowering of ``analysis`` at that size (``refused``: the
    one-line reason when it does not lower). ``cache`` is the caller's kind cache; ``cancelled`` stops between
    points (``streamed_model.Cancelled``)."""
    d = model.deployment
    cache = cache if cache is not None else {}
    out: dict[str, list[dict]] = {}
    for size in SWEEP_SIZES[d.mode]:
        points = []
        for value in _values(d, size):
            there = at_size(d, size, value)
            if there == d:
                points.append(point(d, model.estimate))
                continue
            try:
                lowered = lower_streamed(analysis, there, target=model.target, storage=storage, cache=cache,
                                         cancelled=cancelled)
            except StreamedReject as r:
                points.append({**there.to_json(), "refused": str(r)})
                continue
            points.append(point(there, lowered.estimate))
        out[size] = points
    return out


def with_sweep(model: StreamedModel, analysis, storage=None, cache: dict | None = None,
               cancelled: Callable[[], bool] | None = None) -> StreamedModel:
    """``model`` with its estimate's ``sweep`` (``sweep``), as the manifest records it."""
    return replace(model, estimate={**model.estimate, "sweep": sweep(model, analysis, storage, cache, cancelled)})
