"""A document's programs, linked: ``programs_of`` checks every program (``program.check_program``, once per shape)
and the links between them — constants bound once, one section of each single kind, layers numbered 0, 1, 2, … in
order, each program's input the previous program's output.

``link_programs`` is the one function both analyses link with: the whole document's, whose ranges are the
document's, and the incremental one's, whose sections are parsed alone and placed by their chunk's base — so the two
say the same thing in the same words.
"""

from __future__ import annotations

from ..lang.lexer import Range
from ..lang.syntax import Diagnostic, Document, Section, SectionKind, Severity
from .program import Program, Programs, check_program, checked_program, show, unparsed_statements


def programs_of(doc: Document, checked: dict | None = None, share: bool = True) -> Programs:
    """Check every program of the document and the links between them (layer order, each input the previous
    program's output); a layer whose shape was checked before is that program renamed (``checked_program``).
    ``share=False`` checks every program on its own (what the shared check is tested against)."""
    constants = doc.constants
    if not share:
        return link_programs(doc, lambda section: check_program(section, constants), lambda section, r: r)
    checked = {} if checked is None else checked
    return link_programs(doc, lambda section: checked_program(section, constants, checked), lambda section, r: r)


def section_links(doc: Document, at) -> list[Diagnostic]:
    """Constants bound once; one section of each single kind (``at``: as in ``link_programs``)."""
    diagnostics: list[Diagnostic] = []
    seen_consts: dict[str, tuple[Section, Range]] = {}
    for s in doc.of_kind(SectionKind.MODEL):
        for k in s.constants:
            if k.name.text in seen_consts:
                first = at(*seen_consts[k.name.text])
                diagnostics.append(Diagnostic(at(s, k.name.range), Severity.ERROR, f"`{k.name.text}` is already a constant (line {first.start.line + 1})", "rebound"))
            seen_consts.setdefault(k.name.text, (s, k.name.range))
    for kind in (SectionKind.MODEL, SectionKind.CHECKPOINT, SectionKind.EMBED, SectionKind.HEAD):
        found = doc.of_kind(kind)
        for extra in found[1:]:
            first = at(found[0], found[0].heading)
            diagnostics.append(Diagnostic(at(extra, extra.heading), Severity.ERROR, f"a second `## {kind.value.capitalize()}` section (the first is at line {first.start.line + 1})", "section"))
    return diagnostics


def chain_link(prev: Program, nxt: Program, at) -> Diagnostic | None:
    """What is wrong, if anything, with ``nxt`` reading ``prev``'s output as its input."""
    if prev.output is None:
        return None
    if nxt.input is None:
        if nxt.section.kind is not SectionKind.EMBED and not unparsed_statements(nxt.section):
            return Diagnostic(at(nxt.section, nxt.section.heading), Severity.ERROR, f"{nxt.label} declares no input: add `Let {prev.output} be an input of rows by d.`", "input")
        return None
    if nxt.input != prev.output:
        return Diagnostic(at(nxt.section, nxt.decls[nxt.input].range), Severity.ERROR, f"{nxt.label}'s input is `{nxt.input}` but {prev.label} returns `{prev.output}`", "input")
    a, b = prev.out_shape, nxt.in_shape
    if a is not None and b is not None and a != b:
        return Diagnostic(at(nxt.section, nxt.decls[nxt.input].range), Severity.ERROR, f"{nxt.label}'s input `{nxt.input}` is {show(b)} but {prev.label} returns {show(a)}", "shape")
    return None


def link_programs(doc: Document, check, at) -> Programs:
    """The programs of ``doc`` and the diagnostics that link them: constants bound once, one section of each single
    kind, layers numbered 0, 1, 2, … in order, each program's input the previous program's output.

    ``check(section) -> (Program, diagnostics)`` checks one program (``check_program``, or a cached one) with its
    diagnostics already where they belong; ``at(section, range) -> range`` places a range of ``section`` in the
    document (the identity for a whole parsed document; a chunk's base for the incremental analysis, whose sections
    are parsed alone). One function for both, so the two analyses say the same thing in the same words."""
    diagnostics = section_links(doc, at)
    constants = doc.constants

    def checked(section: Section | None) -> Program | None:
        if section is None:
            return None
        p, d = check(section)
        diagnostics.extend(d)
        return p

    embed = checked(doc.embed)
    layers: list[Program] = []
    expected = 0
    first_at: dict[int, Section] = {}
    for s in doc.layers:
        if s.index is None:
            continue
        # Document ranges are made only for what is reported: the editor runs this loop over every layer per keystroke.
        where = lambda: at(s, s.index_range or s.heading)
        if s.index in first_at:
            first = at(first_at[s.index], first_at[s.index].heading)
            diagnostics.append(Diagnostic(where(), Severity.ERROR, f"layer {s.index} is written twice (first at line {first.start.line + 1})", "layers"))
            continue
        if s.index != expected:
            if s.index > expected:
                missing = f"layer {expected}" if s.index == expected + 1 else f"layers {expected}–{s.index - 1}"
                diagnostics.append(Diagnostic(where(), Severity.ERROR, f"{missing} {'is' if s.index == expected + 1 else 'are'} missing: layer {s.index} follows {'the start' if expected == 0 else f'layer {expected - 1}'}", "layers"))
            else:
                diagnostics.append(Diagnostic(where(), Severity.ERROR, f"layer {s.index} comes after layer {expected - 1}: layers are numbered 0, 1, 2, … in order", "layers"))
                continue
        first_at[s.index] = s
        expected = s.index + 1
        p = checked(s)
        if p is not None:
            layers.append(p)
    head = checked(doc.head)
    if not doc.layers and doc.title is not None:
        diagnostics.append(Diagnostic(at(doc.sections[0], doc.sections[0].heading), Severity.ERROR, "the model has no layers: add `## Layer 0`", "layers"))

    # Each program's input is the previous program's output.
    chain = [p for p in (embed, *layers, head) if p is not None]
    for prev, nxt in zip(chain, chain[1:]):
        d = chain_link(prev, nxt, at)
        if d is not None:
            diagnostics.append(d)
    return Programs(doc, embed, tuple(layers), head, constants, tuple(diagnostics))
