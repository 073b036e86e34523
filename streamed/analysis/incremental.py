"""Incremental analysis: the same answer as ``analysis.analyze``, recomputing only the sections an edit touched.

A document is cut into **chunks** at its heading lines; each chunk is parsed *on its own*, as if it began at line 0,
byte 0, and the result is cached by the chunk's text. A section's ranges are therefore **relative to its chunk**; the
chunk's base ``(line, offset)`` turns them into document ranges. Because a chunk starts at a line start, a relative
range and its absolute one differ only in line and byte offset, never in UTF-16 column. Typing inside layer 5 changes
the text of one chunk: one section is re-lexed, re-parsed, re-checked and re-digested; every other section is served
from the caches, however far its position moved.

Invariant (tested against ``analyze`` on every example and on random edits): ``IncrementalAnalyzer().analyze(text)``
has exactly the diagnostics, kinds and divergences of ``analyze(text)``, in document coordinates. Section-relative
values (``document.sections``, ``programs``) are mapped with ``to_document``/``to_section``.

Also here, because the editor's text is this module's input: ``apply_change``, the LSP edit rule on a text addressed
by (line, UTF-16 column), total over any position a client may send.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, replace

from .whole import Analysis, divergence_diagnostic
from .kinds import Divergence, LayerKind, describe, divergences, shape_digest, stored_q8
from ..lang.lexer import Pos, Range, lex
from ..lang.limits import MAX_DOCUMENT_BYTES, document_too_large
from ..lang.parser import _heading, _section, _stray
from ..lang.syntax import Diagnostic, Document, Related, Section, SectionKind, Severity
from ..model.checkpoint import ALL_Q8, Storage
from ..model.program import Program, Programs, check_program, link_programs

# ---- the editor's text ---------------------------------------------------------------------------------------------

_SURROGATE = re.compile("[\ud800-\udfff]")


def clean(text: str) -> str:
    """Text a client may send (JSON allows lone UTF-16 surrogates) as text the core can encode: each lone surrogate
    becomes U+FFFD."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text)


def _index(line: str, character: int) -> int:
    """The ``str`` index of UTF-16 column ``character`` in ``line``: clamped to the line's end, and a column that
    falls inside a surrogate pair moves to the character's start."""
    if character <= 0:
        return 0
    if line.isascii():
        return min(character, len(line))
    units = 0
    for i, ch in enumerate(line):
        w = 2 if ord(ch) > 0xFFFF else 1
        if units + w > character:
            return i
        units += w
    return len(line)


def offset_at(text: str, line: int, character: int) -> int:
    """The ``str`` index of an editor position. Lines are cut at ``\\n`` (the lexer's rule); a line past the end
    is the end of the text, a column past a line's end is that line's end (LSP's rule)."""
    if line < 0:
        return 0
    parts = text.split("\n", line + 1)  # the lines before, the line itself, and (unsplit) the rest
    if len(parts) <= line:
        return len(text)
    start = sum(map(len, parts[:line])) + line
    return start + _index(parts[line], character)


def apply_change(text: str, start: tuple[int, int] | None, end: tuple[int, int] | None, new: str) -> str:
    """``text`` with the range ``start``–``end`` (editor positions) replaced by ``new``; no range replaces the whole
    text. A reversed range is read in order. Never raises."""
    new = clean(new)
    if start is None or end is None:
        return new
    a, b = offset_at(text, *start), offset_at(text, *end)
    if b < a:
        a, b = b, a
    return text[:a] + new + text[b:]


# ---- chunks --------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Chunk:
    text: str
    line: int  # the document line of the chunk's first line
    offset: int  # the byte offset of the chunk's first line


def _heading_starts(text: str) -> list[int]:
    """Where each heading line starts: a line whose first non-space character is ``#``. ``#`` is rare outside
    headings, so finding each one (at C speed) and looking back to its line start beats scanning every line."""
    out = []
    i = text.find("#")
    while i >= 0:
        start = text.rfind("\n", 0, i) + 1
        if start == i or text[start:i].isspace():
            out.append(start)
        nl = text.find("\n", i)
        if nl < 0:
            break
        i = text.find("#", nl)
    return out


def chunks(text: str) -> list[Chunk]:
    """The document cut before each heading line; text before the first heading is a chunk of its own.

    A heading line is one whose first non-space character is ``#`` (a ``--`` comment before it would make it a
    comment) — the parser's rule; this runs on every keystroke, so it looks only at the ``#`` characters."""
    starts = _heading_starts(text)
    if not starts or starts[0] != 0:
        starts.insert(0, 0)
    out: list[Chunk] = []
    line = offset = 0
    prev = 0
    for k, a in enumerate(starts):
        if k:
            between = text[prev:a]
            line += between.count("\n")
            offset += len(between) if between.isascii() else len(between.encode("utf-8"))
        b = starts[k + 1] - 1 if k + 1 < len(starts) else len(text)
        out.append(Chunk(text[a:b], line, offset))
        prev = a
    return out


@dataclass(frozen=True)
class ChunkParse:
    """One chunk parsed on its own: its section (``None`` for text before the first heading), its heading level and
    the parser's diagnostics, all relative to the chunk."""

    section: Section | None
    level: int
    diagnostics: tuple[Diagnostic, ...]


def _utf16(s: str) -> int:
    return len(s) if s.isascii() else len(s.encode("utf-16-le")) // 2


def parse_chunk(text: str) -> ChunkParse:
    """Parse one chunk exactly as ``parse`` parses it within a whole document."""
    lines = lex(text)
    diags: list[Diagnostic] = []
    h = _heading(lines[0])
    if h is None:
        pre = [ln for ln in lines if ln.tokens]
        if pre:
            rng = Range(pre[0].tokens[0].range.start, pre[-1].tokens[-1].range.end)
            diags.append(Diagnostic(rng, Severity.ERROR, "text before the first heading belongs to no section; start with `# Title`", "syntax"))
        return ChunkParse(None, 0, tuple(diags))
    level, head_text = h
    line = lines[0]
    end_of = lambda ln: Pos(ln.number, _utf16(ln.text), ln.offset + len(ln.text.encode("utf-8")))
    heading = Range(line.tokens[0].range.start, end_of(line))
    body = lines[1:]
    full = Range(heading.start, end_of(body[-1] if body else line))
    if level == 1:
        section = Section(SectionKind.TITLE, heading, head_text, None, None, full)
        _stray(body, diags, "the title")
        return ChunkParse(section, 1, tuple(diags))
    return ChunkParse(_section(head_text, line, heading, body, full, diags), 2, tuple(diags))


# ---- moving ranges between a chunk and the document ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Base:
    line: int
    offset: int

    def pos(self, p: Pos) -> Pos:
        return Pos(p.line + self.line, p.character, p.offset + self.offset)

    def range(self, r: Range) -> Range:
        return Range(self.pos(r.start), self.pos(r.end))

    def diagnostic(self, d: Diagnostic, related: "Base | None" = None) -> Diagnostic:
        rb = related or self
        return replace(d, range=self.range(d.range), related=tuple(Related(rb.range(x.range), x.message) for x in d.related))


_BOUND_AT_LINE = re.compile(r"(is already bound at line )(\d+)(;)")


def _relocated(d: Diagnostic, base: "Base") -> Diagnostic:
    """The one checker message that names a line (``already bound at line N``) computed on a chunk-relative section,
    with N made a document line."""
    if d.code != "rebound" or base.line == 0:
        return d
    msg = _BOUND_AT_LINE.sub(lambda m: f"{m.group(1)}{int(m.group(2)) + base.line}{m.group(3)}", d.message)
    return replace(d, message=msg)


# ---- the analysis ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class IncrementalAnalysis:
    """An analysis whose sections and programs are chunk-relative; ``diagnostics``, ``divergences`` and ``kinds`` are
    in document coordinates, equal to ``analyze(text)``'s."""

    text: str
    document: Document  # sections relative to their chunks
    bases: tuple[Base, ...]  # per section of ``document.sections``
    programs: Programs  # programs over the relative sections
    kinds: tuple[LayerKind, ...]
    divergences: tuple[Divergence, ...]  # document coordinates
    diagnostics: tuple[Diagnostic, ...]  # document coordinates
    storage: Storage
    chunk_texts: tuple[str, ...]  # per section
    digests: dict[int, str]  # layer index → shape digest

    # -- where things are --
    def section_at(self, line: int) -> int | None:
        """The index (into ``document.sections``) of the section holding document line ``line``."""
        lines = [b.line for b in self.bases]
        i = bisect.bisect_right(lines, line) - 1
        return i if i >= 0 else None

    def index_of(self, section: Section) -> int:
        for i, s in enumerate(self.document.sections):
            if s is section:
                return i
        raise ValueError("not a section of this analysis")

    def base_of(self, section: Section) -> Base:
        return self.bases[self.index_of(section)]

    def to_document(self, section: Section, r: Range) -> Range:
        return self.base_of(section).range(r)

    def program_of(self, section: Section) -> Program | None:
        for p in self.programs.all():
            if p.section is section:
                return p
        return None

    def layer_section(self, layer: int) -> Section | None:
        p = self.programs.layer(layer)
        return p.section if p is not None else None

    def kind_of(self, layer: int) -> LayerKind | None:
        for k in self.kinds:
            if layer in k.layers:
                return k
        return None

    def divergence_of(self, layer: int) -> Divergence | None:
        return next((d for d in self.divergences if d.layer == layer), None)

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.severity is Severity.ERROR]

    def absolute(self) -> Analysis:
        """The plain ``Analysis`` of the same text (a full parse: for tools that want document coordinates
        everywhere, not for the editor's hot path)."""
        from .whole import analyze

        return analyze(self.text, self.storage)


def unanalysed(text: str, why: Diagnostic, storage: Storage = ALL_Q8) -> IncrementalAnalysis:
    """The analysis of a text that was not analysed — too large to read, or one the analysis failed on: no sections,
    no programs, and ``why`` as its one diagnostic, so an editor still shows what happened."""
    doc = Document(text, None, (), (why,))
    return IncrementalAnalysis(text, doc, (), Programs(doc, None, (), None, {}), (), (), (why,), storage, (), {})


class _Generations:
    """A cache that keeps what the last two analyses used: memory stays proportional to the document however long
    the editing session, and undoing the last edit still hits. Keyed by value, so an entry is never wrong."""

    def __init__(self):
        self.current: dict = {}
        self.previous: dict = {}

    def get(self, key):
        hit = self.current.get(key)
        if hit is None:
            hit = self.previous.get(key)
            if hit is not None:
                self.current[key] = hit
        return hit

    def put(self, key, value) -> None:
        self.current[key] = value

    def turn(self) -> None:
        """An analysis finished: what it did not use ages by one generation."""
        self.previous, self.current = self.current, {}


class IncrementalAnalyzer:
    """Analyses successive texts of one document, reusing every section whose text did not change.

    Caches (each keeping what the last two analyses used): parsed chunks by text, checked programs by (text,
    constants), digests by (text, how the checkpoint stores its weights)."""

    def __init__(self, storage: Storage = ALL_Q8):
        self.storage = storage
        self._parsed = _Generations()
        self._checked = _Generations()
        self._digests = _Generations()
        self.parsed = 0  # sections parsed (a cache miss) — for tests and benchmarks
        self.digested = 0

    def _parse(self, text: str) -> ChunkParse:
        hit = self._parsed.get(text)
        if hit is None:
            hit = parse_chunk(text)
            self._parsed.put(text, hit)
            self.parsed += 1
        return hit

    def unparsed(self, cut: list[Chunk]) -> int:
        """How many characters of ``cut`` (a text's chunks) the caches do not hold: what analysing it will parse."""
        return sum(len(c.text) for c in cut if self._parsed.get(c.text) is None)

    def analyze(self, text: str, cut: list[Chunk] | None = None) -> IncrementalAnalysis:
        """The analysis of ``text``; ``cut`` is ``chunks(text)`` if the caller has it already. A text over
        ``MAX_DOCUMENT_BYTES`` is refused as ``parse`` refuses it: one diagnostic, nothing lexed."""
        if len(text) * 4 > MAX_DOCUMENT_BYTES:
            too_large = document_too_large(len(text.encode("utf-8", "replace")))
            if too_large is not None:
                return unanalysed(text, Diagnostic(Range(Pos(0, 0, 0), Pos(0, 0, 0)), Severity.ERROR, too_large, "size"),
                                  self.storage)
        if cut is None or clean(text) is not text:
            text = clean(text)
            cut = chunks(text)
        storage = self.storage
        parts = []
        for c in cut:
            parts.append((c, self._parse(c.text)))

        diags: list[Diagnostic] = []
        sections: list[Section] = []
        bases: list[Base] = []
        texts: list[str] = []
        title = None
        for c, p in parts:
            base = Base(c.line, c.offset)
            if p.section is None:
                diags += [base.diagnostic(d) for d in p.diagnostics]
                continue
            if p.level == 1:
                if title is None and not sections:
                    title = p.section.title
                else:
                    diags.append(Diagnostic(base.range(p.section.heading), Severity.ERROR,
                                            "only the first heading is a `# Title`; sections are `## Model`, `## Layer N`, …", "syntax"))
            diags += [base.diagnostic(d) for d in p.diagnostics]
            sections.append(p.section)
            bases.append(base)
            texts.append(c.text)
        if title is None:
            diags.append(Diagnostic(Range(Pos(0, 0, 0), Pos(0, 0, 0)), Severity.ERROR, "the document has no `# Title` first line", "syntax"))
        doc = Document(text, title, tuple(sections), tuple(diags))
        where = {id(s): (b, t) for s, b, t in zip(sections, bases, texts)}
        programs, program_diags = self._programs(doc, where)

        # Kinds: digests cached by the layer's text and how the checkpoint stores what it reads.
        ckpt = tuple(t for s, t in zip(sections, texts) if s.kind is SectionKind.CHECKPOINT)
        groups: dict[str, list[Program]] = {}
        digests: dict[int, str] = {}
        for p in programs.layers:
            key = (where[id(p.section)][1], ckpt, id(storage))
            d = self._digests.get(key)
            if d is None:
                d = shape_digest(p.tokens, stored_q8(programs, p, storage))
                self._digests.put(key, d)
                self.digested += 1
            digests[p.section.index] = d
            groups.setdefault(d, []).append(p)
        names = [describe(m[0], programs.constants) for m in groups.values()]
        kinds = []
        for (digest, members), name in zip(groups.items(), names):
            layers = tuple(m.section.index for m in members)
            kinds.append(LayerKind(name if names.count(name) == 1 else f"{name} (layer {layers[0]})", layers, digest))

        divs_rel = divergences(programs, kinds, storage) if len(kinds) > 1 else []
        divs: list[Divergence] = []
        for d in divs_rel:
            lb = where[id(programs.layer(d.layer).section)][0]
            rb = where[id(programs.layer(d.representative).section)][0]
            diags_d = divergence_diagnostic(programs, d)
            program_diags.append(lb.diagnostic(diags_d, related=rb))
            divs.append(replace(d, range=lb.range(d.range), representative_range=rb.range(d.representative_range)))

        for cache in (self._parsed, self._checked, self._digests):
            cache.turn()
        all_diags = list(diags) + program_diags
        all_diags.sort(key=lambda d: (d.range.start.offset, d.severity.value))
        return IncrementalAnalysis(text, doc, tuple(bases), programs, tuple(kinds), tuple(divs), tuple(all_diags),
                                   storage, tuple(texts), digests)

    def _check(self, section: Section, chunk_text: str, constants: dict[str, float]) -> tuple[Program, tuple[Diagnostic, ...]]:
        key = (chunk_text, tuple(constants.items()))
        hit = self._checked.get(key)
        if hit is None or hit[0].section is not section:
            p, d = check_program(section, constants, chunk_text.encode("utf-8"))
            hit = (p, tuple(d))
            self._checked.put(key, hit)
        return hit

    def _programs(self, doc: Document, where: dict) -> tuple[Programs, list[Diagnostic]]:
        """``link_programs`` over chunk-relative sections: each program checked alone (cached), every diagnostic
        placed in document coordinates by its chunk's base."""
        constants = doc.constants

        def check(section: Section):
            p, d = self._check(section, where[id(section)][1], constants)
            base = where[id(section)][0]
            return p, [_relocated(base.diagnostic(x), base) for x in d]

        programs = link_programs(doc, check, lambda s, r: where[id(s)][0].range(r))
        return programs, list(programs.diagnostics)


# ---- what is at an editor position ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Spot:
    """What an editor position falls on: its section (chunk-relative), the section's base, the program (for
    embed, layers and head), and the token under the position (``token_index`` into ``section.tokens``) or the
    heading."""

    section: Section
    base: Base
    program: Program | None
    token_index: int | None
    on_heading: bool

    @property
    def token(self):
        return None if self.token_index is None else self.section.tokens[self.token_index]

    def to_document(self, r: Range) -> Range:
        return self.base.range(r)


def token_at(section: Section, line: int, character: int) -> int | None:
    """The index of the token of ``section`` at a chunk-relative position: the token that contains it, else one that
    ends exactly there (the cursor just after a word)."""
    toks = section.tokens
    keys = [(t.range.start.line, t.range.start.character) for t in toks]
    i = bisect.bisect_right(keys, (line, character)) - 1
    if i < 0:
        return None
    r = toks[i].range
    if (line, character) <= (r.end.line, r.end.character):
        return i
    return None


def spot(a: IncrementalAnalysis, line: int, character: int) -> Spot | None:
    i = a.section_at(line)
    if i is None:
        return None
    section, base = a.document.sections[i], a.bases[i]
    rel = line - base.line
    on_heading = rel == section.heading.start.line
    return Spot(section, base, a.program_of(section), None if on_heading else token_at(section, rel, character), on_heading)


# ---- the analysis as the whole-document analysis -------------------------------------------------------------------


def as_analysis(a: IncrementalAnalysis) -> Analysis:
    """The incremental analysis in ``Analysis``'s shape (sections still chunk-relative): for core functions that read
    programs, kinds and errors but place nothing by document position."""
    return Analysis(a.document, a.programs, a.kinds, a.divergences, a.diagnostics, a.storage)
