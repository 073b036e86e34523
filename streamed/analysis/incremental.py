"""Incremental analysis: the same answer as ``analysis.analyze``, recomputing only what an edit touched.

A document is cut into **chunks** at its heading lines (``lang.parser.cut``); each chunk is parsed *on its own*, as
if it began at line 0, byte 0, and the result is cached by the chunk's text. A section's ranges are therefore
**relative to its chunk**; the chunk's base ``(line, offset)`` turns them into document ranges. Because a chunk starts
at a line start, a relative range and its absolute one differ only in line and byte offset, never in UTF-16 column.

The editor's text is a ``Text``: its chunks, of which an edit replaces the few it touches (the rest stay the very same
strings). An analysis finds what changed by comparing the chunk lists — at C speed, by identity first — and computes
only those chunks: one is re-lexed, re-parsed (or renamed from a layer of its shape), re-checked and re-digested;
every other chunk's parse, program, digest and diagnostics are the previous analysis's, their bases shifted. What
spans chunks is kept in per-chunk columns and answered by list operations that run at C speed however deep the
model: layers numbered 0, 1, 2… in order and each input the previous output are two list comparisons, kinds are the
previous kinds unless a digest changed, divergences are the previous ones unless a kind or a layer they involve did;
only a document whose layers are misnumbered falls back to the sentence-by-sentence link.

Invariant (tested against ``analyze`` on every example and on random edits): ``IncrementalAnalyzer().analyze(text)``
has exactly the diagnostics, kinds and divergences of ``analyze(text)``, in document coordinates. Section-relative
values (``document.sections``, ``programs``) are mapped with ``to_document``.

Also here, because the editor's text is this module's input: ``apply_change``, the LSP edit rule on a text addressed
by (line, UTF-16 column), total over any position a client may send.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, replace
from itertools import accumulate, chain, compress, islice, repeat
from operator import attrgetter, eq, is_, is_not, ne

from .whole import Analysis, checkpoint_diagnostics, diagnostic_order, divergence_diagnostic
from .kinds import Divergence, LayerKind, describe, digest_of, divergences
from ..lang.lexer import Pos, Range, line_ends, utf8_length
from ..lang.parser import Chunk, ChunkParse, cut, parse_chunk
from ..lang.syntax import Diagnostic, Document, Related, Section, SectionKind, Severity
from ..model.checkpoint import ALL_Q8, Storage
from ..model.program import Program, Programs, chain_link, checked_program, link_programs, section_links

__all__ = [
    "Base", "Chunk", "ChunkParse", "IncrementalAnalysis", "IncrementalAnalyzer", "Spot", "Text", "apply_change",
    "as_analysis", "chunks", "clean", "offset_at", "parse_chunk", "spot", "token_at",
]

# ---- the editor's text ---------------------------------------------------------------------------------------------

_SURROGATE = re.compile("[\ud800-\udfff]")
_LINE_END = re.compile(r"\r\n?|\n")


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
    """The ``str`` index of an editor position. Lines end at ``\\n``, ``\\r\\n`` or ``\\r`` (the lexer's rule); a
    line past the end is the end of the text, a column past a line's end is that line's end (LSP's rule)."""
    if line < 0:
        return 0
    if "\r" not in text:
        parts = text.split("\n", line + 1)  # the lines before, the line itself, and (unsplit) the rest
        if len(parts) <= line:
            return len(text)
        return sum(map(len, parts[:line])) + line + _index(parts[line], character)
    start = 0
    for _ in range(line):
        m = _LINE_END.search(text, start)
        if m is None:
            return len(text)
        start = m.end()
    m = _LINE_END.search(text, start)
    return start + _index(text[start:m.start() if m else len(text)], character)


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


def chunks(text: str) -> list[Chunk]:
    """The document cut before each heading line (``lang.parser.cut``)."""
    return cut(text)


class Text:
    """A document as its chunks: ``texts[i]`` and the line end ``seps[i]`` after it (``""`` for the last). An edit
    replaces the chunks it touches and keeps every other chunk the very same string, so an analysis finds what
    changed by identity. Immutable; ``str(t)`` is the whole text."""

    __slots__ = ("texts", "seps", "lines", "_line_starts", "_string")

    def __init__(self, texts: list[str], seps: list[str], lines: list[int]):
        self.texts = texts
        self.seps = seps
        self.lines = lines  # line ends in each chunk and its separator
        self._line_starts: list[int] | None = None
        self._string: str | None = None

    @classmethod
    def of(cls, text: str) -> "Text":
        cs = cut(text)
        texts = [c.text for c in cs]
        seps = [c.sep for c in cs]
        return cls(texts, seps, [line_ends(t + s) for t, s in zip(texts, seps)])

    def __str__(self) -> str:
        if self._string is None:
            self._string = "".join(chain.from_iterable(zip(self.texts, self.seps)))
        return self._string

    @property
    def line_starts(self) -> list[int]:
        """The document line each chunk starts on."""
        if self._line_starts is None:
            self._line_starts = list(accumulate(self.lines, initial=0))[:-1]
        return self._line_starts

    def _locate(self, line: int, character: int) -> tuple[int, int]:
        """(chunk, ``str`` index in its text) of an editor position, clamped as ``offset_at`` clamps."""
        if line < 0:
            return 0, 0
        k = bisect.bisect_right(self.line_starts, line) - 1
        return k, offset_at(self.texts[k], line - self.line_starts[k], character)

    def edit(self, start: tuple[int, int] | None, end: tuple[int, int] | None, new: str) -> "Text":
        """The text with ``start``–``end`` replaced by ``new`` (``apply_change``'s rule). Only the chunks from the
        one before the edit to the one after it are cut again: a heading line is one whose first character is
        ``#``, which an edit elsewhere cannot change."""
        new = clean(new)
        if start is None or end is None:
            return Text.of(new)
        (k1, i1), (k2, i2) = self._locate(*start), self._locate(*end)
        if (k2, i2) < (k1, i1):
            (k1, i1), (k2, i2) = (k2, i2), (k1, i1)
        a, b = max(k1 - 1, 0), min(k2 + 2, len(self.texts))
        texts, seps = self.texts, self.seps
        before = sum(len(texts[j]) + len(seps[j]) for j in range(a, k1)) + i1
        upto = sum(len(texts[j]) + len(seps[j]) for j in range(a, k2)) + i2
        region = "".join(texts[j] + seps[j] for j in range(a, b - 1)) + texts[b - 1]
        region = region[:before] + new + region[upto:]
        pieces = cut(region)
        new_texts = [c.text for c in pieces]
        new_seps = [c.sep for c in pieces[:-1]] + [seps[b - 1]]
        # Keep the very same string for a chunk the edit did not change (the analysis compares by identity first).
        for j, t in enumerate(new_texts):
            k = a + j
            if k < b and texts[k] == t:
                new_texts[j] = texts[k]
        return Text(texts[:a] + new_texts + texts[b:], seps[:a] + new_seps + seps[b:],
                    self.lines[:a] + [line_ends(t + s) for t, s in zip(new_texts, new_seps)] + self.lines[b:])


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


def _relocated(d: Diagnostic, base: Base) -> Diagnostic:
    """The one checker message that names a line (``already bound at line N``) computed on a chunk-relative section,
    with N made a document line."""
    if d.code != "rebound" or base.line == 0:
        return d
    msg = _BOUND_AT_LINE.sub(lambda m: f"{m.group(1)}{int(m.group(2)) + base.line}{m.group(3)}", d.message)
    return replace(d, message=msg)


def _placed(diags, base: Base) -> tuple[Diagnostic, ...]:
    return tuple(_relocated(base.diagnostic(d), base) for d in diags) if diags else ()


# ---- the analysis ---------------------------------------------------------------------------------------------------

_PROGRAM_KINDS = (SectionKind.EMBED, SectionKind.LAYER, SectionKind.HEAD)
_input, _output, _in_shape, _out_shape = attrgetter("input"), attrgetter("output"), attrgetter("in_shape"), attrgetter("out_shape")


@dataclass(frozen=True, eq=False)
class _Columns:
    """What an analysis knows per chunk, in chunk order — the previous analysis's, spliced where chunks changed."""

    texts: list[str]
    seps: list[str]
    lines: list[int]  # line ends in the chunk and its separator
    sizes: list[int]  # UTF-8 bytes of the chunk and its separator
    parses: list[ChunkParse]
    programs: list  # the checked program of a program section (under the analysis's constants), else None
    checks: list  # that check's diagnostics, chunk-relative
    digests: list  # a checked layer's digest, else None


class IncrementalAnalysis:
    """An analysis whose sections and programs are chunk-relative; ``diagnostics``, ``divergences`` and ``kinds``
    are in document coordinates, equal to ``analyze(text)``'s. Immutable."""

    def __init__(self, text_of, document: Document, programs: Programs, kinds: tuple[LayerKind, ...],
                 divergences: tuple[Divergence, ...], diagnostics: tuple[Diagnostic, ...], storage: Storage,
                 columns: _Columns, line0: list[int], byte0: list[int], first: int, constants_key: tuple,
                 relative_divergences: tuple[Divergence, ...], layer_digests: list):
        self._text_of = text_of
        self._text: str | None = None
        self.document = document
        self.programs = programs
        self.kinds = kinds
        self.divergences = divergences
        self.diagnostics = diagnostics
        self.storage = storage
        self._columns = columns
        self._line0 = line0  # the document line and byte each chunk starts at
        self._byte0 = byte0
        self._first = first  # 1 when the first chunk is text before any heading (no section)
        self._constants_key = constants_key
        self._relative_divergences = relative_divergences
        self._layer_digests = layer_digests
        self._layer_indices: list = []
        self._index: dict[int, int] | None = None
        self._program_at: dict[int, Program] | None = None

    @property
    def text(self) -> str:
        if self._text is None:
            self._text = self._text_of()
        return self._text

    @property
    def chunk_texts(self) -> tuple[str, ...]:
        """Per section (``document.sections``), its chunk's text."""
        return tuple(self._columns.texts[self._first:])

    @property
    def bases(self) -> tuple[Base, ...]:
        """Per section, where its chunk starts in the document."""
        f = self._first
        return tuple(map(Base, self._line0[f:], self._byte0[f:]))

    @property
    def digests(self) -> dict[int, str]:
        """Layer index → shape digest, for every checked layer."""
        return {p.section.index: d for p, d in zip(self.programs.layers, self._layer_digests)}

    # -- where things are --
    def section_at(self, line: int) -> int | None:
        """The index (into ``document.sections``) of the section holding document line ``line``."""
        i = bisect.bisect_right(self._line0, line, self._first) - 1 - self._first
        return i if i >= 0 else None

    def index_of(self, section: Section) -> int:
        if self._index is None:
            self._index = {id(s): i for i, s in enumerate(self.document.sections)}
        i = self._index.get(id(section))
        if i is None or self.document.sections[i] is not section:
            raise ValueError("not a section of this analysis")
        return i

    def base_of(self, section: Section) -> Base:
        i = self.index_of(section) + self._first
        return Base(self._line0[i], self._byte0[i])

    def to_document(self, section: Section, r: Range) -> Range:
        return self.base_of(section).range(r)

    def program_of(self, section: Section) -> Program | None:
        if self._program_at is None:
            self._program_at = {id(p.section): p for p in self.programs.all()}
        p = self._program_at.get(id(section))
        return p if p is not None and p.section is section else None

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


class _Generations:
    """A cache that keeps what the last two analyses used: memory stays proportional to the document however long
    the editing session, and undoing the last edit still hits. Keyed by value, so an entry is never wrong. Reads and
    writes as a mapping (``get``, ``[key] = value``), so the parser and the checker keep their shapes in one."""

    def __init__(self):
        self.current: dict = {}
        self.previous: dict = {}

    def get(self, key, default=None):
        hit = self.current.get(key)
        if hit is None:
            hit = self.previous.get(key)
            if hit is None:
                return default
            self.current[key] = hit
        return hit

    def put(self, key, value) -> None:
        self.current[key] = value

    __setitem__ = put

    def turn(self) -> None:
        """An analysis finished: what it did not use ages by one generation."""
        self.previous, self.current = self.current, {}


class _ShapeCache:
    """A program of each shape (parsed, or checked) kept while some layer of the document has that shape — the
    analyzer counts them (``use``) — and for two analyses after (``_Generations``), so undoing an edit still hits.
    A layer retyped into a shape the document already has is renamed, however long ago that shape was parsed."""

    def __init__(self):
        self.live: dict = {}
        self.aging = _Generations()

    def get(self, key, default=None):
        hit = self.live.get(key)
        if hit is None:
            hit = self.aging.get(key)
        return default if hit is None else hit

    def __setitem__(self, key, value) -> None:
        self.live[key] = value

    def retire(self, key) -> None:
        hit = self.live.pop(key, None)
        if hit is not None:
            self.aging.put(key, hit)

    def revive(self, key) -> None:
        if key not in self.live:
            hit = self.aging.get(key)
            if hit is not None:
                self.live[key] = hit

    def turn(self) -> None:
        self.aging.turn()


def _common(old: list, new: list) -> tuple[int, int]:
    """How many leading and trailing items of two lists are equal (compared at C speed, by identity first)."""
    m = min(len(old), len(new))
    same = list(map(eq, old[:m], new[:m]))
    p = same.index(False) if False in same else m
    if p == m:
        return m, m  # one is the other's start: the caller clamps the two to what does not overlap
    k = m - p
    tail = list(map(eq, islice(reversed(old), k), islice(reversed(new), k)))
    q = tail.index(False) if False in tail else k
    return p, q


class IncrementalAnalyzer:
    """Analyses successive texts of one document, reusing every chunk whose text did not change.

    Caches (each keeping what the last two analyses used): parsed chunks by text; shapes parsed cleanly (a layer of
    a known shape is renamed, not parsed); checked programs by (text, constants); programs by shape (a layer of a
    checked shape is renamed, not checked); digests by shape."""

    def __init__(self, storage: Storage = ALL_Q8):
        self.storage = storage
        self._parsed = _Generations()
        self._shared = _ShapeCache()
        self._checked = _Generations()
        self._by_shape: dict[tuple, _ShapeCache] = {}
        self._uses: dict[tuple, int] = {}  # how many layers of the current text have each shape
        self._digests = _Generations()
        self._last: IncrementalAnalysis | None = None
        self.parsed = 0  # chunks parsed (a cache miss) — for tests and benchmarks
        self.digested = 0

    def _parse(self, text: str) -> ChunkParse:
        hit = self._parsed.get(text)
        if hit is None:
            hit = parse_chunk(text, shared=self._shared)
            self._parsed.put(text, hit)
            if hit.section is None or hit.section.shared_from is None:
                self.parsed += 1
        return hit

    def unparsed(self, text: "Text") -> int:
        """How many characters of ``text`` the caches do not hold: what analysing it will read."""
        last = self._last
        if last is None:
            return sum(map(len, text.texts))
        p, q = _common(last._columns.texts, text.texts)
        return sum(len(t) for t in text.texts[p:len(text.texts) - q] if self._parsed.get(t) is None)

    def _check(self, section: Section, chunk_text: str, constants: dict[str, float], key: tuple) -> tuple[Program, tuple[Diagnostic, ...]]:
        hit = self._checked.get((chunk_text, key))
        if hit is None or hit[0].section is not section:
            shapes = self._by_shape.get(key)
            if shapes is None:
                self._by_shape = {key: _ShapeCache()}  # other constants' programs are of no use any more
                shapes = self._by_shape[key]
            p, d = checked_program(section, constants, shapes)
            hit = (p, tuple(d))
            self._checked.put((chunk_text, key), hit)
        return hit

    def analyze(self, text: "str | Text", cut: list | None = None) -> IncrementalAnalysis:
        """The analysis of ``text`` (a ``str``, or the editor's ``Text``, whose unchanged chunks are found by
        identity). ``cut`` is ignored (kept for callers that cut the text themselves)."""
        if isinstance(text, str):
            text = Text.of(clean(text))
        try:
            a = self._analyze(text)
        finally:
            for cache in (self._parsed, self._shared, self._checked, self._digests, *self._by_shape.values()):
                cache.turn()
        self._last = a
        return a

    def _count(self, gone, came) -> None:
        """The shapes of the layers an edit removed (``gone``) and added (``came``): a shape no layer has any more
        ages in the shape caches, one a layer has again is kept."""
        uses = self._uses
        caches = (self._shared, *self._by_shape.values())
        for s in came:
            if s is not None and s.shape is not None and s.shape.key is not None:
                k = s.shape.key
                uses[k] = uses.get(k, 0) + 1
                if uses[k] == 1:
                    for c in caches:
                        c.revive(k)
        for s in gone:
            if s is not None and s.shape is not None and s.shape.key is not None:
                k = s.shape.key
                uses[k] -= 1
                if uses[k] == 0:
                    del uses[k]
                    for c in caches:
                        c.retire(k)

    def _analyze(self, text: Text) -> IncrementalAnalysis:
        storage = self.storage
        last = self._last
        texts, seps, lines = text.texts, text.seps, text.lines
        n = len(texts)
        old = last._columns if last is not None else None
        if old is not None:
            p, q = _common(old.texts, texts)
            if old.seps != seps:
                ps, qs = _common(old.seps, seps)
                p, q = min(p, ps), min(q, qs)
            q = min(q, n - p, len(old.texts) - p)
        else:
            p, q = 0, 0
        lo, hi, old_hi = p, n - q, (len(old.texts) - q if old is not None else 0)

        # Per chunk: its parse (cached by text) and size; the chunks outside the edit are the last analysis's.
        new_parses = [self._parse(t) for t in texts[lo:hi]]
        new_sizes = [utf8_length(t) + len(s) for t, s in zip(texts[lo:hi], seps[lo:hi])]
        if old is not None:
            parses = old.parses[:lo] + new_parses + old.parses[old_hi:]
            sizes = old.sizes[:lo] + new_sizes + old.sizes[old_hi:]
            self._count(map(_section, old.parses[lo:old_hi]), map(_section, new_parses))
        else:
            parses, sizes = new_parses, new_sizes
            self._uses.clear()
            self._count((), map(_section, new_parses))
        line0 = list(accumulate(lines, initial=0))[:-1]
        byte0 = list(accumulate(sizes, initial=0))[:-1]
        sections_col = list(map(_section, parses))
        first = 1 if n and sections_col[0] is None else 0
        sections = tuple(sections_col[first:])
        kinds_of = list(map(_kind, sections))
        layer_at = list(compress(range(first, n), map(is_, kinds_of, repeat(SectionKind.LAYER))))
        special = [i for i in compress(range(first, n), map(is_not, kinds_of, repeat(SectionKind.LAYER)))
                   if sections_col[i].kind in _LINKED]
        by_kind: dict = {SectionKind.LAYER: list(map(sections_col.__getitem__, layer_at))}
        for i in special:
            by_kind.setdefault(sections_col[i].kind, []).append(sections_col[i])

        # The document: its title, and what the parser says about the whole (text before any heading, titles).
        doc_diags: list[Diagnostic] = []
        if first:
            doc_diags += _placed(parses[0].diagnostics, Base(0, 0))
        title = None
        for i in compress(range(n), map(eq, map(_level, parses), repeat(1))):
            if title is None and i == first:
                title = sections_col[i].title
            else:
                doc_diags.append(Diagnostic(Base(line0[i], byte0[i]).range(sections_col[i].heading), Severity.ERROR,
                                            "only the first heading is a `# Title`; sections are `## Model`, `## Layer N`, …", "syntax"))
        if title is None:
            doc_diags.append(Diagnostic(Range(Pos(0, 0, 0), Pos(0, 0, 0)), Severity.ERROR, "the document has no `# Title` first line", "syntax"))
        document = Document(text.__str__, title, sections, (), by_kind)
        where = _Where(sections_col, line0, byte0, layer_at, special)

        # Constants (and, under a checkpoint's storage, its entries): when they change, every program again.
        constants = document.constants
        constants_key = tuple(constants.items())
        recheck = old is None or constants_key != last._constants_key
        if not recheck and not storage.all_q8 and document.checkpoint != last.document.checkpoint:
            recheck = True
        if recheck:
            lo, hi, old_hi = 0, n, 0
            programs_col, checks_col, digests_col = [None] * n, [()] * n, [None] * n
        else:
            programs_col = old.programs[:lo] + [None] * (hi - lo) + old.programs[old_hi:]
            checks_col = old.checks[:lo] + [()] * (hi - lo) + old.checks[old_hi:]
            digests_col = old.digests[:lo] + [None] * (hi - lo) + old.digests[old_hi:]
        for i in range(lo, hi):
            s = sections_col[i]
            if s is not None and s.kind in _PROGRAM_KINDS:
                programs_col[i], checks_col[i] = self._check(s, texts[i], constants, constants_key)
        columns = _Columns(texts, seps, lines, sizes, parses, programs_col, checks_col, digests_col)

        # What the parser says in each chunk, in document coordinates (only chunks that say something are read).
        parse_diags: list[Diagnostic] = []
        for i in compress(range(first, n), map(_diagnostics, islice(parses, first, None))):
            parse_diags += _placed(parses[i].diagnostics, Base(line0[i], byte0[i]))

        # Links between programs: the usual document (layers numbered 0, 1, 2… in order, one embed, one head) is
        # answered by list comparisons at C speed; any other by the sentence-level link.
        indices = list(map(_number, map(sections_col.__getitem__, layer_at)))
        embeds = [i for i in special if sections_col[i].kind is SectionKind.EMBED]
        heads = [i for i in special if sections_col[i].kind is SectionKind.HEAD]
        at = where.at
        ordered = indices == list(range(len(indices))) and len(embeds) <= 1 and len(heads) <= 1
        if ordered:
            link_diags = section_links(document, at)
            layer_programs = list(map(programs_col.__getitem__, layer_at))
            embed = programs_col[embeds[0]] if embeds else None
            head = programs_col[heads[0]] if heads else None
            checked_at = embeds + layer_at + heads
            for i in compress(checked_at, map(checks_col.__getitem__, checked_at)):
                link_diags += _placed(checks_col[i], Base(line0[i], byte0[i]))
            if not layer_at and title is not None:
                link_diags.append(Diagnostic(at(sections[0], sections[0].heading), Severity.ERROR, "the model has no layers: add `## Layer 0`", "layers"))
            chain_ = ([embed] if embed is not None else []) + layer_programs + ([head] if head is not None else [])
            odd = set(compress(range(len(chain_) - 1), map(ne, map(_output, chain_[:-1]), map(_input, chain_[1:]))))
            odd.update(compress(range(len(chain_) - 1), map(ne, map(_out_shape, chain_[:-1]), map(_in_shape, chain_[1:]))))
            for k in sorted(odd):
                d = chain_link(chain_[k], chain_[k + 1], at)
                if d is not None:
                    link_diags.append(d)
            programs = Programs(document, embed, tuple(layer_programs), head, constants, tuple(link_diags))
        else:
            def check(section: Section):
                i = where.chunk(section)
                return programs_col[i], _placed(checks_col[i], Base(line0[i], byte0[i]))

            programs = link_programs(document, check, at)
            layer_programs = list(programs.layers)

        # Kinds: digests cached by shape; the kinds are the last analysis's unless a layer's digest changed.
        cache = self._digests
        if ordered:
            layer_digests = list(map(digests_col.__getitem__, layer_at))
            for k in compress(range(len(layer_at)), map(_is_none, layer_digests)):
                i = layer_at[k]
                before = self._digests_known(programs_col[i], storage)
                layer_digests[k] = digests_col[i] = digest_of(programs, programs_col[i], storage, cache)
                self.digested += not before
        else:
            layer_digests = [digest_of(programs, prog, storage, cache) for prog in layer_programs]
        layer_indices = list(map(_program_index, layer_programs))
        if last is not None and not recheck and layer_digests == last._layer_digests and layer_indices == last._layer_indices:
            kinds = last.kinds
        else:
            kinds = tuple(_kinds(programs, layer_programs, layer_digests))

        # Divergences: the last analysis's unless a kind, or a layer one names, changed.
        changed = {s.index for s in sections_col[lo:hi] if s is not None and s.kind is SectionKind.LAYER}
        if last is not None and kinds is last.kinds and not recheck and not any(
                d.layer in changed or d.representative in changed for d in last._relative_divergences):
            divs_rel = last._relative_divergences
        else:
            divs_rel = tuple(divergences(programs, list(kinds), storage)) if len(kinds) > 1 else ()
        divs: list[Divergence] = []
        div_diags: list[Diagnostic] = []
        for d in divs_rel:
            lb = where.base(programs.layer(d.layer).section)
            rb = where.base(programs.layer(d.representative).section)
            div_diags.append(lb.diagnostic(divergence_diagnostic(programs, d), related=rb))
            divs.append(replace(d, range=lb.range(d.range), representative_range=rb.range(d.representative_range)))

        ckpt = checkpoint_diagnostics(programs, storage, lambda prog, r: where.base(prog.section).range(r))
        all_diags = doc_diags + parse_diags + list(programs.diagnostics) + ckpt + div_diags
        all_diags.sort(key=diagnostic_order)
        a = IncrementalAnalysis(text.__str__, document, programs, kinds, tuple(divs), tuple(all_diags), storage,
                                columns, line0, byte0, first, constants_key, divs_rel, layer_digests)
        a._layer_indices = layer_indices
        return a

    def _digests_known(self, p: Program, storage: Storage) -> bool:
        shape = p.section.shape
        return storage.all_q8 and shape is not None and shape.key is not None and self._digests.get(shape.key) is not None


_LINKED = frozenset((SectionKind.MODEL, SectionKind.CHECKPOINT, SectionKind.EMBED, SectionKind.HEAD))
_section = attrgetter("section")
_kind = attrgetter("kind")
_level = attrgetter("level")
_diagnostics = attrgetter("diagnostics")
_number = attrgetter("index")
_program_index = attrgetter("section.index")


def _is_none(x) -> bool:
    return x is None


class _Where:
    """Where each section's chunk starts, for placing its ranges in the document."""

    def __init__(self, sections_col, line0, byte0, layer_at, special):
        self.sections_col = sections_col
        self.line0 = line0
        self.byte0 = byte0
        self.layer_at = layer_at
        self.special = special
        self._chunk: dict[int, int] | None = None

    def chunk(self, section: Section) -> int:
        layer_at, i = self.layer_at, section.index
        if i is not None and i < len(layer_at) and self.sections_col[layer_at[i]] is section:
            return layer_at[i]  # layers numbered in order: layer i is the i-th layer chunk
        for k in self.special:  # the model, checkpoint, embed and head: a handful
            if self.sections_col[k] is section:
                return k
        if self._chunk is None:
            self._chunk = {id(s): k for k, s in enumerate(self.sections_col) if s is not None}
        return self._chunk[id(section)]

    def base(self, section: Section) -> Base:
        i = self.chunk(section)
        return Base(self.line0[i], self.byte0[i])

    def at(self, section: Section, r: Range) -> Range:
        return self.base(section).range(r)


def _kinds(programs: Programs, layers: list[Program], digests: list[str]) -> list[LayerKind]:
    groups: dict[str, list[Program]] = {}
    for p, d in zip(layers, digests):
        groups.setdefault(d, []).append(p)
    names = [describe(m[0], programs.constants) for m in groups.values()]
    out = []
    for (digest, members), name in zip(groups.items(), names):
        layers_ = tuple(m.section.index for m in members)
        out.append(LayerKind(name if names.count(name) == 1 else f"{name} (layer {layers_[0]})", layers_, digest))
    return out


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
    keys = [(t.line, t.start_character) for t in toks]
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
    section, base = a.document.sections[i], a.base_of(a.document.sections[i])
    rel = line - base.line
    on_heading = rel == section.heading.start.line
    return Spot(section, base, a.program_of(section), None if on_heading else token_at(section, rel, character), on_heading)


# ---- the analysis as the whole-document analysis -------------------------------------------------------------------


def as_analysis(a: IncrementalAnalysis) -> Analysis:
    """The incremental analysis in ``Analysis``'s shape (sections still chunk-relative): for core functions that read
    programs, kinds and errors but place nothing by document position."""
    return Analysis(a.document, a.programs, a.kinds, a.divergences, a.diagnostics, a.storage)
