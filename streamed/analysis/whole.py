"""One analysis of a document: parse, check, kinds, divergences — the value the CLI prints and the editor shows.

``analyze`` is pure and total: any text at all gives an ``Analysis`` whose diagnostics say what is wrong, in order of
position. Kinds are computed from every numbered layer's tokens, errors or not: a typo inside one layer shows both
as the error it is and, where it splits the layer from its siblings, as a divergence.
"""

from __future__ import annotations

import gc
import threading
from contextlib import contextmanager
from dataclasses import dataclass

from .kinds import Divergence, LayerKind, divergences, layer_kinds, layer_of_kind
from ..lang.lexer import Range
from ..lang.parser import parse
from ..lang.syntax import Diagnostic, Document, Related, Severity
from ..model.checkpoint import ALL_Q8, Storage
from ..model.links import programs_of
from ..model.program import Programs


@dataclass(frozen=True)
class Analysis:
    document: Document
    programs: Programs
    kinds: tuple[LayerKind, ...]
    divergences: tuple[Divergence, ...]
    diagnostics: tuple[Diagnostic, ...]
    storage: Storage

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.severity is Severity.ERROR]

    def kind_of(self, layer: int) -> LayerKind | None:
        for k in self.kinds:
            if layer in k.layers:
                return k
        return None


def divergence_diagnostic(a_programs: Programs, d: Divergence) -> Diagnostic:
    rep = a_programs.layer(d.representative)
    related = [Related(d.representative_range, f"layer {d.representative}, the first layer of `{d.kind}`, here")]
    if rep is not None:
        related.append(Related(rep.section.heading, f"`{d.kind}`"))
    return Diagnostic(
        d.range, Severity.WARNING,
        f"layer {d.layer} is not one program with {layer_of_kind(d.representative, d.kind)}: {d.why}",
        "divergence", tuple(related),
        {"layer": d.layer, "representative": d.representative, "statement": d.statement,
         "representative_statement": d.representative_statement},
    )


def checkpoint_diagnostics(programs: Programs, storage: Storage, at=None) -> list[Diagnostic]:
    """Where a checkpoint is given, every declared weight must reach one of its tensors — else the weight would be
    read dense without a word, and kinds would be decided by a checkpoint the document does not describe. One warning
    per binding pattern (at its first weight), counting the others, so a document written for another checkpoint's
    names gets a handful of warnings, not thousands. ``at(program, range)`` places a program's range in the document
    (the editor's sections are parsed alone)."""
    if storage.all_q8:
        return []
    from ..model.checkpoint import bind

    entries = programs.document.checkpoint
    first: dict[str, tuple[Diagnostic, int]] = {}
    for p in programs.all():
        for d in p.decls.values():
            if d.role != "weight":
                continue
            ref = bind(entries, d.name)
            if ref is None:
                key, why = f"unbound {d.name.rstrip('0123456789')}", f"no `## Checkpoint` entry binds `{d.name}`"
            elif ref.tensor not in storage.types:
                key = f"missing {ref.entry.pattern if ref.entry else d.name}"
                why = f"`{d.name}` is bound to \"{ref.tensor}\", which {storage.source} does not have"
            else:
                continue
            if key in first:
                first[key] = (first[key][0], first[key][1] + 1)
            else:
                first[key] = (Diagnostic(d.range if at is None else at(p, d.range), Severity.WARNING, why, "checkpoint"), 0)
    out = []
    for diag, more in first.values():
        if more:
            diag = Diagnostic(diag.range, diag.severity, f"{diag.message} (and {more} more like it)", diag.code)
        out.append(diag)
    return out


_PACE = threading.Lock()
_paced = 0
_threshold: tuple | None = None


@contextmanager
def paced_collector(young: int = 20_000):
    """While analysing, the young generation is collected every ``young`` allocations instead of 700: an analysis
    makes tens of thousands of objects that all outlive it, and collecting them 700 at a time only walks them
    again and again (about 5 % of a 512-layer analysis). Nothing is frozen or disabled — every object is collected
    as ever, so nothing leaks — and the threshold is restored when the last of any overlapping analyses ends."""
    global _paced, _threshold
    with _PACE:
        if _paced == 0:
            _threshold = gc.get_threshold()
            gc.set_threshold(max(young, _threshold[0]), *_threshold[1:])
        _paced += 1
    try:
        yield
    finally:
        with _PACE:
            _paced -= 1
            if _paced == 0:
                gc.set_threshold(*_threshold)


def diagnostic_order(d: Diagnostic) -> tuple:
    """The order diagnostics are reported in: by place, errors first at one place, then by what they say — a total
    order, so two analyses that find the same diagnostics in different orders report them alike."""
    return d.range.start.offset, d.severity.value, d.range.end.offset, d.code, d.message


def analyze(text: str | bytes, storage: Storage = ALL_Q8) -> Analysis:
    """Parse, check, kinds and divergences of ``text``: each program of one shape parsed and checked once, every
    other layer of that shape given its tree and program by renaming (``lang.parser``, ``model.program``)."""
    with paced_collector():
        doc = parse(text)
        programs = programs_of(doc)
        kinds = layer_kinds(programs, storage)
        divs = divergences(programs, kinds, storage)
        diags = list(doc.diagnostics) + list(programs.diagnostics) + checkpoint_diagnostics(programs, storage)
        diags += [divergence_diagnostic(programs, d) for d in divs]
        diags.sort(key=diagnostic_order)
        return Analysis(doc, programs, tuple(kinds), tuple(divs), tuple(diags), storage)


def layer_ranges(layers) -> str:
    """Layers as a person reads them: ``0-2, 4-6, 9``."""
    out: list[str] = []
    layers = list(layers)
    i = 0
    while i < len(layers):
        j = i
        while j + 1 < len(layers) and layers[j + 1] == layers[j] + 1:
            j += 1
        out.append(str(layers[i]) if i == j else f"{layers[i]}-{layers[j]}")
        i = j + 1
    return ", ".join(out)


def layers_named(layers) -> str:
    """Layers as a sentence names them: ``layers 0-3, 8``, or, spread over many runs, ``48 layers from 0``."""
    ranges = layer_ranges(layers)
    if ranges.count(",") < 4:
        return f"layer{'s' if len(layers) > 1 else ''} {ranges}"
    return f"{len(layers)} layers from {layers[0]}"


def position(r: Range) -> tuple[int, int]:
    """1-based line and column (UTF-16) of a range's start, for people and for ``--json``."""
    return r.start.line + 1, r.start.character + 1
