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

from ..analysis.incremental import Base, IncrementalAnalysis, as_analysis
from ..analysis.whole import Analysis
from ..lang.syntax import Diagnostic, Related, Severity
from .deployment import Deployment
from .streamed_model import StreamedReject, lower_kind, lower_streamed, lower_whole, shared_tables
from .lower import LoweringError, TPError
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


def reject_diagnostics(analysis: Analysis, deployment: Deployment = DEFAULT, target=None,
                       cache: dict | None = None) -> list[Diagnostic]:
    if analysis.errors or deployment.refusal():
        return []
    deployment = deployment.normal()
    try:
        target = load_target(target)
    except TargetError:
        return []
    progs = analysis.programs
    by_layer = {p.section.index: p for p in progs.layers}
    cache = cache if cache is not None else {}
    constants = tuple(sorted(progs.constants.items()))
    out: list[Diagnostic] = []
    chain = [("embed", progs.embed, deployment.cut("embed"), None)] if progs.embed is not None and deployment.mode != "forward" else []
    for k in analysis.kinds:
        chain.append((f"layer {k.representative} ({k.name})", by_layer[k.representative], deployment.cut("layer"), k))
    if progs.head is not None:
        chain.append(("head", progs.head, deployment.cut("head"), None))
    try:
        shared = shared_tables(analysis, [(label, p) for label, p, _, _ in chain])
    except StreamedReject as r:
        where = next((p for label, p, _, _ in chain if label == r.program), None)
        if where is not None:
            out.append(Diagnostic(_at(where, r.statement), Severity.ERROR, str(r), "reject"))
        return out
    for label, program, cut, kind in chain:
        try:
            if kind is not None:
                lower_kind(progs, kind, label, program, cut, target, analysis.storage, constants, shared, cache)
            else:
                lower_whole(progs, label, program, cut, target, analysis.storage, constants, shared, cache)
            continue
        except LoweringError as e:
            found = e.every
        for e in found:
            related = ()
            data = {"program": label, "statement": e.statement, "binder": e.binder}
            if kind is not None:
                related = tuple(Related(by_layer[l].section.heading,
                                        f"layer {l} is of kind `{kind.name}` and is refused with it")
                                for l in kind.layers if l in by_layer)
                data["layers"] = list(kind.layers)
            # A width the model's heads do not admit refuses the bundle, as `streamed lower` says; the why names the
            # kind.
            message = str(StreamedReject("bundle", f"tensor parallel over {cut.tp} chips: {e.why}")
                          if isinstance(e, TPError) else StreamedReject(label, e.why))
            if kind is not None and len(kind.layers) > 1:
                message += f" (and so do the {len(kind.layers) - 1} other layers of `{kind.name}`)"
            out.append(Diagnostic(_at(program, e.statement), Severity.ERROR, message, "reject", related, data))
    if not out:
        out += _residency(analysis, deployment, target, cache, by_layer)
    return out


def _residency(analysis: Analysis, deployment: Deployment, target, cache: dict, by_layer) -> list[Diagnostic]:
    """The reject no single kind shows: every layer's states (and weights) together not fitting the target's SRAM,
    HBM and DDR — on the declaration of the state of the first layer that does not fit. Every program comes from
    ``cache``, so this costs the bindings and the residency arithmetic, linear in the layers."""
    try:
        lower_streamed(analysis, deployment, target, analysis.storage, cache=cache)
    except StreamedReject as r:
        if r.program == "bundle" and r.layer in by_layer:
            data = {"program": "bundle", "statement": r.statement, "binder": r.binder, "layer": r.layer}
            return [Diagnostic(_at(by_layer[r.layer], r.statement), Severity.ERROR, str(r), "reject", (), data)]
    return []


def reject_diagnostics_of(a: IncrementalAnalysis, deployment, target=None, cache: dict | None = None) -> tuple[Diagnostic, ...]:
    """``reject_diagnostics`` of an incremental analysis (the editor's), in document coordinates. ``cache`` is keyed
    by kind digest, so a kind lowered before — however its layers were renamed since — is not lowered again."""
    found = reject_diagnostics(as_analysis(a), deployment, target, cache)
    if not found:
        return ()
    # Every range a reject carries is a statement's range or a heading of some program's section (the very objects):
    # place each by the section it came from.
    where: dict[int, Base] = {}
    for p in a.programs.all():
        base = a.base_of(p.section)
        where[id(p.section.heading)] = base
        for st in p.section.statements:
            where[id(st.range)] = base
    out = []
    for d in found:
        base = where.get(id(d.range))
        if base is None:
            continue
        related = tuple(Related(where[id(r.range)].range(r.range), r.message) for r in d.related if id(r.range) in where)
        out.append(replace(d, range=base.range(d.range), related=related))
    return tuple(out)
