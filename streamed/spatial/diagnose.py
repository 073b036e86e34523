"""Lowering rejects as diagnostics: every refusal of each kind on the statement that caused it, in its representative
layer — a program with two statements it cannot lower shows both, and a program over the target's PCUs or PMUs
shows that on the statement that takes most of them.

``streamed check`` and the editor call ``reject_diagnostics``. Only the representative of each kind is lowered (the
other layers of a kind are that program renamed), so a reject costs one lowering per kind however deep the model,
and a ``cache`` kept by the caller makes an unchanged kind free — the same cache, and the same entries, as
``lower_streamed``'s: a kind checked here is not lowered again for the bundle. A document with errors gets no
reject diagnostics: its errors are the diagnostics, and a program that does not check cannot be lowered.
"""

from __future__ import annotations

from dataclasses import replace
from operator import itemgetter
from types import SimpleNamespace

from ..analysis.incremental import IncrementalAnalysis, as_analysis
from ..analysis.kinds import layer_of_kind
from ..analysis.whole import Analysis
from ..lang.syntax import Diagnostic, Related, SectionKind, Severity
from .deployment import Deployment, modelled_of, past_modelled, past_training, trained_of
from .streamed_model import StreamedReject, lower_kind, lower_streamed, lower_whole, shared_part, shared_tables
from .lower import LoweringError, TPError
from .passes.footprint import sram_footprint
from .residency import ResidencyError, plan, state_bytes, weight_bytes
from .target import TargetError, load_target

DEFAULT = Deployment(mode="decode", ctx=4096)


def _at(program, statement: int | None):
    """The range of ``statement`` in ``program`` (its heading when the reject names no statement)."""
    statements = program.section.statements
    if statement is not None:
        for st in statements:
            if st.index == statement:
                return st.range
    return program.section.heading


def _context(analysis: Analysis, deployment: Deployment) -> list:
    """On the ``## Model`` heading: an error when the deployment's context is past the positions the document
    computes as the model does (its ``modelled`` constant: the lowering refuses it, naming the largest ctx), a
    warning when it is past the one the model was trained at (its ``trained`` constant): the model computes there
    what it never learned to. As ``_rejects``' entries."""
    model = next((s for s in analysis.document.sections if s.kind is SectionKind.MODEL), None)
    if model is None:
        return []
    constants = analysis.programs.constants
    out = []
    refused = past_modelled(deployment.ctx, modelled_of(constants))
    if refused is not None:
        out.append(Diagnostic(model.heading, Severity.ERROR, refused, "context"))
    warned = past_training(deployment.ctx, trained_of(constants))
    if warned is not None:
        out.append(Diagnostic(model.heading, Severity.WARNING, warned, "context"))
    return [(SimpleNamespace(section=model), d, ()) for d in out]


def reject_diagnostics(analysis: Analysis, deployment: Deployment = DEFAULT, target=None,
                       cache: dict | None = None) -> list[Diagnostic]:
    return [d for _, d, _ in _rejects(analysis, deployment, target, cache)]


#: The tensor-parallel widths a refused width is told against, and how many times a refused context, chunk or batch
#: is halved looking for one that lowers: bounds on what a refusal costs (each try is a check of every kind).
TP_WIDTHS = (2, 4, 8, 16)
HALVINGS = 4


def values_that_lower(analysis: Analysis, deployment: Deployment, sizes, target=None,
                      cache: dict | None = None) -> str | None:
    """What to set instead of the refused ``deployment``, said as a person sets it — ``tp 2, 4 or 8 lower``,
    ``ctx 2048 lowers`` — or ``None`` when no one of ``sizes`` changed alone lowers the document.

    ``sizes``: the deployment's sizes that decide the refusal (``LoweringError.SIZES``), of those its mode reads.
    Every width of ``TP_WIDTHS`` that lowers is named; of a context, chunk or batch, the largest smaller one (halving,
    at most ``HALVINGS`` times) — a smaller one lowers too. Each try is the check ``reject_diagnostics`` makes, with
    the same ``cache``: a kind lowered at that size before is not lowered again."""
    deployment = deployment.normal()
    reads = {"tp": deployment.mode in ("tp", "batched-tp"), "ctx": True,
             "chunk": deployment.mode == "prefill", "batch": deployment.batched}
    said = []
    for size in (s for s in ("tp", "ctx", "chunk", "batch") if s in sizes and reads[s]):
        now = getattr(deployment, size)
        tries = ([w for w in TP_WIDTHS if w != now] if size == "tp" else
                 [v for v in (now >> k for k in range(1, HALVINGS + 1)) if v >= 1])
        good = []
        for value in tries:
            candidate = replace(deployment, **{size: value})
            if candidate.refusal() is None and not _rejects(analysis, candidate, target, cache, tell=False):
                good.append(value)
                if size != "tp":
                    break
        if good:
            values = [str(v) for v in good]
            listed = values[0] if len(values) == 1 else f"{', '.join(values[:-1])} or {values[-1]}"
            said.append(f"{size} {listed} {'lowers' if len(values) == 1 else 'lower'}")
    return "; ".join(said) or None


def _told(analysis: Analysis, deployment: Deployment, target, cache: dict, out: list) -> list:
    """``out`` with each reject a size decides told what lowers instead (``values_that_lower``): at the end of its
    message, and as ``data["lowers"]``."""
    told = []
    answers: dict[tuple, str | None] = {}
    for program, d, sections in out:
        sizes = tuple((d.data or {}).get("sizes", ()))
        if sizes and sizes not in answers:
            answers[sizes] = values_that_lower(analysis, deployment, sizes, target, cache)
        lowers = answers.get(sizes)
        if lowers:
            d = replace(d, message=f"{d.message}; {lowers}", data={**d.data, "lowers": lowers})
        told.append((program, d, sections))
    return told


def _rejects(analysis: Analysis, deployment: Deployment, target, cache: dict | None, tell: bool = True):
    """Each reject as ``(the program it is in, the diagnostic, the section of each related range)``: the
    incremental analysis places them by those sections. ``tell``: a reject a size decides also says which values
    of it lower (``_told``)."""
    cache = cache if cache is not None else {}
    out = _found(analysis, deployment, target, cache)
    return _told(analysis, deployment, target, cache, out) if tell and out else out


def _found(analysis: Analysis, deployment: Deployment, target, cache: dict):
    if analysis.errors or deployment.refusal():
        return []
    deployment = deployment.normal()
    context = _context(analysis, deployment)
    try:
        target = load_target(target)
    except TargetError:
        return context
    progs = analysis.programs
    constants = tuple(sorted(progs.constants.items()))
    out: list = []
    chain = [("embed", progs.embed, deployment.cut("embed"), None)] if progs.embed is not None and deployment.mode != "forward" else []
    layer_cut = deployment.cut("layer")
    for k in analysis.kinds:
        chain.append((layer_of_kind(k.representative, k.name), progs.layer(k.representative), layer_cut, k))
    if progs.head is not None:
        chain.append(("head", progs.head, deployment.cut("head"), None))
    memo_key = ("outcomes", deployment, target)
    memo = cache.get(memo_key)
    tables = {} if memo is None else memo[4]  # each program's tables, by the program (carried from the last check)
    try:
        shared = shared_tables(analysis, [(label, p) for label, p, _, _ in chain], tables)
    except StreamedReject as r:
        where = next((p for label, p, _, _ in chain if label == r.program), None)
        if where is not None:
            out.append((where, Diagnostic(_at(where, r.statement), Severity.ERROR, str(r), "reject"), ()))
        return context + out
    # Each program's outcome, as the last check found it while its program, its kind's digest, its part of the shared
    # tables, the constants, the storage and the checkpoint's bindings are the same: a keystroke asks the kind cache
    # only for what it changed.
    stored = (analysis.storage, progs.document.checkpoint)
    if memo is None or memo[1] != constants or memo[2][0] is not stored[0] or memo[2][1] != stored[1]:
        memo = (shared, constants, stored, {}, tables)
    known, outcomes, moved = memo[3], {}, memo[0] != shared
    lowered = []
    for label, program, cut, kind in chain:
        entry = (label, id(program), kind.digest if kind is not None else None)
        hit = known.get(entry)
        if hit is None or hit[0] is not program or (moved and hit[1] != shared_part(program, shared)):
            try:
                if kind is not None:
                    found = lower_kind(progs, kind, label, program, cut, target, analysis.storage, constants, shared, cache)
                else:
                    found = lower_whole(progs, label, program, cut, target, analysis.storage, constants, shared, cache)
            except LoweringError as e:
                found = e
            hit = (program, shared_part(program, shared), found)
        outcomes[entry] = hit
        if not isinstance(hit[2], LoweringError):
            lowered.append(hit[2])
            continue
        found = hit[2].every
        members = [m for m in (progs.layer(l) for l in kind.layers) if m is not None] if kind is not None else []
        for e in found:
            related, sections = (), ()
            data = {"program": label, "statement": e.statement, "binder": e.binder, "sizes": list(e.SIZES)}
            if kind is not None:
                related = tuple(Related(m.section.heading, f"layer {m.section.index} is of kind `{kind.name}` and is "
                                                           f"refused with it") for m in members)
                sections = tuple(m.section for m in members)
                data["layers"] = list(kind.layers)
            # A width the model's heads do not admit refuses the bundle, as `streamed lower` says; the why names the
            # kind.
            why = f"tensor parallel over {cut.tp} chips: {e.why}" if isinstance(e, TPError) else e.why
            data["why"] = why
            message = str(StreamedReject("bundle" if isinstance(e, TPError) else label, why))
            if kind is not None and len(kind.layers) > 1:
                others = len(kind.layers) - 1
                message += (f" (and so does the other layer of `{kind.name}`)" if others == 1 else
                            f" (and so do the {others} other layers of `{kind.name}`)")
            out.append((program, Diagnostic(_at(program, e.statement), Severity.ERROR, message, "reject", related, data),
                        sections))
    current = {("tables", id(p)) for _, p, _, _ in chain} | {"last"}
    cache[memo_key] = (shared, constants, stored, outcomes, {k: v for k, v in tables.items() if k in current})
    if not out:
        out += _residency(analysis, deployment, target, cache, [p for _, p, _, _ in chain], lowered)
    return context + out


def _sizes(program, known: dict) -> tuple[int, int, int]:
    """A lowered program's own SRAM (activations, tables and what its ops hold while they run), weight bytes and state bytes per chip — what the
    residency plan reads of it — computed once per program (``known``, carried from check to check)."""
    key = id(program)
    hit = known.get(key)
    if hit is None or hit[0] is not program:
        use = sram_footprint(program)
        hit = known[key] = (program, (use["activations"] + use["tables"] + use["held"], weight_bytes(program), state_bytes(program)))
    return hit[1]


def _residency(analysis: Analysis, deployment: Deployment, target, cache: dict, sources, lowered) -> list:
    """The reject no single kind shows: every layer's states (and weights) together not fitting the target's SRAM,
    HBM and DDR — on the declaration of the state of the first layer that does not fit.

    The plan reads of each program only its sizes (and the tables held off chip), and of the layers only which kind each
    is: so its answer is remembered with the per-layer sizes it was given, and a keystroke that leaves the kinds (or
    only their sizes) as they were costs a comparison of two lists. Only a new size sequence is planned, and only a plan
    that does not fit is lowered in full (``lower_streamed``), for the exact reject and its statement."""
    kinds = analysis.kinds
    offset = len(lowered) - len(kinds) - (1 if analysis.programs.head is not None else 0)
    memo_key = ("residency", deployment, target)
    memo = cache.get(memo_key)
    programs = tuple(map(id, lowered))
    if memo is not None and memo[0] is kinds and memo[1] == programs:
        return memo[3]
    known = memo[4] if memo is not None else {}
    sizes = [_sizes(p, known) for p in lowered]
    layer_kinds = [0] * sum(len(k.layers) for k in kinds)
    for i, k in enumerate(kinds):
        for l in k.layers:
            layer_kinds[l] = offset + i
    key = (max(s[0] for s in sizes) if sizes else 0,
           [s[1] for i, s in enumerate(sizes) if not offset <= i < offset + len(kinds)],
           list(map(itemgetter(1), map(sizes.__getitem__, layer_kinds))),
           list(map(itemgetter(2), map(sizes.__getitem__, layer_kinds))),
           sorted({(t.name, t.bytes) for p in lowered for t in p.tensors if t.role == "table" and t.tier != "sram"}))
    if memo is not None and memo[2] == key:
        found = memo[3]
    else:
        entries = [("", None, p) for p in lowered]
        for i, k in enumerate(kinds):
            entries[offset + i] = (k.name, list(k.layers), lowered[offset + i])
        try:
            plan(entries, layer_kinds, target)
            found = []
        except ResidencyError:
            found = _full_residency(analysis, deployment, target, cache)
    cache[memo_key] = (kinds, programs, key, found, {id(p): known[id(p)] for p in lowered})
    return found


def _full_residency(analysis: Analysis, deployment: Deployment, target, cache: dict) -> list:
    """The residency reject as ``streamed lower`` gives it, placed on the declaration of the state that does not
    fit (every program comes from ``cache``: this costs the bindings and the residency arithmetic)."""
    try:
        lower_streamed(analysis, deployment, target, analysis.storage, cache=cache)
    except StreamedReject as r:
        layer = analysis.programs.layer(r.layer) if r.layer is not None else None
        if r.program == "bundle" and layer is not None:
            data = {"program": "bundle", "statement": r.statement, "binder": r.binder, "layer": r.layer,
                    "sizes": ["ctx", "batch"], "why": r.why}
            return [(layer, Diagnostic(_at(layer, r.statement), Severity.ERROR, str(r), "reject", (), data), ())]
    return []


def reject_diagnostics_of(a: IncrementalAnalysis, deployment, target=None, cache: dict | None = None) -> tuple[Diagnostic, ...]:
    """``reject_diagnostics`` of an incremental analysis (the editor's), in document coordinates. ``cache`` is keyed
    by kind digest, so a kind lowered before — however its layers were renamed since — is not lowered again."""
    out = []
    for program, d, sections in _rejects(as_analysis(a), deployment, target, cache):
        base = a.base_of(program.section)
        related = tuple(Related(a.base_of(s).range(r.range), r.message) for s, r in zip(sections, d.related))
        out.append(replace(d, range=base.range(d.range), related=related))
    return tuple(out)
