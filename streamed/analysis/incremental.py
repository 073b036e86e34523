"""Incremental analysis: the same answer as ``analysis.analyze``, recomputing only what an edit touched.

A document is cut into **chunks** at its heading lines (``lang.chunks.cut``); each chunk is parsed *on its own*, as
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

The editor's text, ``Text``, and the LSP edit rule, ``apply_change``, are ``analysis.text``'s; placing a chunk's
ranges in the document, and what is at an editor position, ``analysis.places``'s.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, replace
from itertools import accumulate, chain, compress, islice, repeat
from operator import attrgetter, eq, is_, is_not, ne

from .whole import Analysis, checkpoint_diagnostics, diagnostic_order, divergence_diagnostic
from .kinds import Divergence, LayerKind, describe, digest_key, digest_of, divergences, named_kinds
from .places import Base, Block, Spot, Where, in_order, placed, placed_runs, spot, token_at
from ..lang.lexer import Pos, Range, utf8_length
from ..lang.limits import MAX_DOCUMENT_BYTES, document_too_large
from ..lang.chunks import Chunk
from ..lang.parser import ChunkParse, parse_chunk
from ..lang.shapes import broken_key
from ..lang.syntax import Diagnostic, Document, Section, SectionKind, Severity
from ..model.checkpoint import ALL_Q8, Storage
from ..model.links import chain_link, link_programs, section_links
from ..model.program import Program, Programs, checked_program
from .text import Text, clean

__all__ = [
    "Base", "Chunk", "ChunkParse", "IncrementalAnalysis", "IncrementalAnalyzer", "Spot", "as_analysis", "parse_chunk",
    "spot", "token_at", "unanalysed",
]

# ---- the analysis ---------------------------------------------------------------------------------------------------

_PROGRAM_KINDS = (SectionKind.EMBED, SectionKind.LAYER, SectionKind.HEAD)
_LINKED = frozenset((SectionKind.MODEL, SectionKind.CHECKPOINT, SectionKind.EMBED, SectionKind.HEAD))
_input, _output, _in_shape, _out_shape = attrgetter("input"), attrgetter("output"), attrgetter("in_shape"), attrgetter("out_shape")
_section = attrgetter("section")
_kind = attrgetter("kind")
_level = attrgetter("level")
_diagnostics = attrgetter("diagnostics")
_number = attrgetter("index")
_program_index = attrgetter("section.index")


@dataclass(eq=False)
class _State:
    """What one analysis knows, kept for the next: per-chunk columns in chunk order (``texts`` … ``digests``), and
    what spans chunks in the form an edit updates in place. The next analysis splices the columns where chunks
    changed and, when an edit changed only layers' text (not their numbers), updates the rest at the edited layers
    alone."""

    texts: list[str]
    seps: list[str]
    lines: list[int]  # line ends in each chunk and its separator
    sizes: list[int]  # UTF-8 bytes of each chunk and its separator
    parses: list  # ChunkParse per chunk
    sections: list  # its section per chunk (None for text before the first heading)
    programs: list  # the checked program of a program section (under ``constants_key``), else None
    checks: list  # that check's diagnostics, chunk-relative
    digests: list  # a checked layer's digest, else None
    first: int  # 1 when the first chunk is text before any heading
    line0: list[int]  # the document line and byte each chunk starts at
    byte0: list[int]
    constants_key: tuple
    ordered: bool  # layers numbered 0, 1, 2… in order, one embed, one head: linked by the columns
    layer_at: list[int]  # the chunk of each layer section
    special: list[int]  # the chunks of the model, checkpoint, embed and head sections
    embed_at: int | None
    head_at: int | None
    titles: list[int]  # the chunks whose heading is a `# Title`
    doc_diags: list  # what the parser says about the whole document
    parse_blocks: dict  # chunk → its parse diagnostics, chunk-relative (``Block``; only chunks that have some)
    check_placed: dict  # chunk → its check diagnostics in document coordinates (ordered documents)
    odd: set  # positions k in the chain (embed, layers, head) where chain[k + 1] does not read chain[k]'s output
    layer_digests: list
    layer_indices: list
    groups: dict  # digest → the layers that have it, ascending
    relative_divergences: tuple


class IncrementalAnalysis:
    """An analysis whose sections and programs are chunk-relative; ``diagnostics``, ``divergences`` and ``kinds``
    are in document coordinates, equal to ``analyze(text)``'s. Immutable.

    ``runs`` are the diagnostics in their order as ``places.in_order`` gives them: a chunk's parse diagnostics stay
    relative to the chunk (the very tuple of the last analysis while its parse is), with the base to place them at;
    ``diagnostics`` places them all when first read."""

    def __init__(self, text_of, document: Document, programs: Programs, kinds: tuple[LayerKind, ...],
                 divergences: tuple[Divergence, ...], runs: tuple, has_errors: bool, storage: Storage,
                 state: _State, where: "Where"):
        self._text_of = text_of
        self._text: str | None = None
        self.document = document
        self.programs = programs
        self.kinds = kinds
        self.divergences = divergences
        self.runs = runs
        self.has_errors = has_errors
        self._diagnostics: tuple[Diagnostic, ...] | None = None
        self.storage = storage
        self._state = state
        self._where = where
        self._index: dict[int, int] | None = None
        self._program_at: dict[int, Program] | None = None

    @property
    def text(self) -> str:
        if self._text is None:
            self._text = self._text_of()
        return self._text

    @property
    def diagnostics(self) -> tuple[Diagnostic, ...]:
        if self._diagnostics is None:
            self._diagnostics = placed_runs(self.runs)
        return self._diagnostics

    @property
    def chunk_texts(self) -> tuple[str, ...]:
        """Per section (``document.sections``), its chunk's text."""
        return tuple(self._state.texts[self._state.first:])

    @property
    def bases(self) -> tuple[Base, ...]:
        """Per section, where its chunk starts in the document."""
        st = self._state
        return tuple(map(Base, st.line0[st.first:], st.byte0[st.first:]))

    @property
    def digests(self) -> dict[int, str]:
        """Layer index → shape digest, for every checked layer."""
        return {p.section.index: d for p, d in zip(self.programs.layers, self._state.layer_digests)}

    # -- where things are --
    def section_at(self, line: int) -> int | None:
        """The index (into ``document.sections``) of the section holding document line ``line``."""
        st = self._state
        i = bisect.bisect_right(st.line0, line, st.first) - 1 - st.first
        return i if i >= 0 else None

    def index_of(self, section: Section) -> int:
        return self._where.chunk(section) - self._state.first

    def base_of(self, section: Section) -> Base:
        return self._where.base(section)

    def to_document(self, section: Section, r: Range) -> Range:
        return self.base_of(section).range(r)

    def program_of(self, section: Section) -> Program | None:
        try:
            p = self._state.programs[self._where.chunk(section)]
        except KeyError:
            return None
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

    Caches: parsed chunks by text and checked programs by (text, constants), each keeping what the last two analyses
    used; the parse and the program of each shape the document has (a layer of a known shape is renamed, not parsed
    or checked); digests by shape; kind names by digest."""

    def __init__(self, storage: Storage = ALL_Q8):
        self.storage = storage
        self._parsed = _Generations()
        self._shared = _ShapeCache()
        self._checked = _Generations()
        self._by_shape: dict[tuple, _ShapeCache] = {}
        self._uses: dict[tuple, int] = {}  # how many layers of the current text have each shape (and frame)
        self._digests = _Generations()
        self._names = _Generations()
        self._parted = _Generations()  # where a layer parts from a representative, by the two programs
        self._placed = _Generations()  # each divergence's diagnostic, by the divergence and where its sections are
        self._blocks = _Generations()  # each chunk parse's diagnostics as a ``Block``, by the parse's tuple
        self._last: IncrementalAnalysis | None = None
        self._last_text: Text | None = None
        self.parsed = 0  # chunks parsed (a cache miss) — for tests and benchmarks
        self.digested = 0
        self.blocked = 0  # parse diagnostics made into blocks (each once per parse of its chunk)

    def _parse(self, text: str) -> ChunkParse:
        hit = self._parsed.get(text)
        if hit is None:
            hit = parse_chunk(text, shared=self._shared)
            self._parsed.put(text, hit)
            if hit.section is None or hit.section.shared_from is None:
                self.parsed += 1
        return hit

    def _window(self, text: Text) -> tuple[int, int, int]:
        """The chunks of ``text`` that differ from the last analysis's: ``(lo, hi, old_hi)`` — chunks ``lo:hi`` of
        ``text`` replace chunks ``lo:old_hi`` of the last text."""
        last = self._last._state
        n, m = len(text.texts), len(last.texts)
        known = text.untouched_since(self._last_text) if self._last_text is not None else None
        if known is not None:
            p, q = known
        else:
            p, q = _common(last.texts, text.texts)
            if last.seps != text.seps:
                ps, qs = _common(last.seps, text.seps)
                p, q = min(p, ps), min(q, qs)
        p = min(p, n, m)
        q = min(q, n - p, m - p)
        return p, n - q, m - q

    def unparsed(self, text: "Text") -> int:
        """How many characters of ``text`` the caches do not hold: what analysing it will read."""
        if self._last is None:
            return sum(map(len, text.texts))
        lo, hi, _ = self._window(text)
        return sum(len(t) for t in text.texts[lo:hi] if self._parsed.get(t) is None)

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
        """The analysis of ``text`` (a ``str``, or the editor's ``Text``, whose edits since the last analysis say
        which chunks changed). ``cut`` is ignored (kept for callers that cut the text themselves). A text over
        ``MAX_DOCUMENT_BYTES`` is refused as ``parse`` refuses it: one diagnostic, nothing lexed."""
        if isinstance(text, str):
            text = Text.of(clean(text))
        if text.chars * 4 > MAX_DOCUMENT_BYTES:  # four bytes a character at most: only then count them
            too_large = document_too_large(utf8_length(str(text)))
            if too_large is not None:
                self._last = self._last_text = None  # the next text is analysed whole
                return unanalysed(str(text), Diagnostic(Range(Pos(0, 0, 0), Pos(0, 0, 0)), Severity.ERROR, too_large,
                                                        "size"), self.storage)
        try:
            a = None
            if self._last is not None:
                lo, hi, old_hi = self._window(text)
                a = self._in_place(text, lo, hi, old_hi)
                if a is None:
                    a = self._analyze(text, lo, hi, old_hi)
            else:
                a = self._analyze(text, 0, len(text.texts), 0)
        except BaseException:
            # Half an analysis proves nothing about the next: it starts from the text alone (the caches stay: they
            # are keyed by value).
            self._last = self._last_text = None
            self._uses.clear()
            for shapes in (self._shared, *self._by_shape.values()):
                shapes.live.clear()
            raise
        finally:
            for cache in (self._parsed, self._shared, self._checked, self._digests, self._blocks,
                          *self._by_shape.values()):
                cache.turn()
        self._last, self._last_text = a, text
        # Edits from this text are counted from it now; what it was edited from is of no use (and would keep every
        # text of the session alive through the chain).
        text._analysed, text._since = True, None
        return a

    def _count(self, gone, came) -> None:
        """The shapes (and frames) of the layers an edit removed (``gone``) and added (``came``): a shape no layer has
        any more ages in the checked-program caches, a frame no layer has any more in the parse cache; one a layer
        has again is kept."""
        uses = self._uses
        checked = tuple(self._by_shape.values())
        for s in came:
            if s is not None and s.shape is not None and s.shape.key is not None:
                for k, caches in self._keys(s, checked):
                    uses[k] = uses.get(k, 0) + 1
                    if uses[k] == 1:
                        for c in caches:
                            c.revive(k[1])
        for s in gone:
            if s is not None and s.shape is not None and s.shape.key is not None:
                for k, caches in self._keys(s, checked):
                    uses[k] -= 1
                    if uses[k] == 0:
                        del uses[k]
                        for c in caches:
                            c.retire(k[1])

    def _keys(self, s: Section, checked: tuple) -> tuple:
        """The keys a layer is counted under, each with the caches it keeps alive: its shape (checked programs), its
        frame (a clean layer's parse) and its shape's broken layer (``shapes.broken_key``)."""
        return ((("shape", s.shape.key), checked), (("frame", s.shape.frame), (self._shared,)),
                (("broken", broken_key(s.shape)), (self._shared,)))

    def _digest(self, programs: Programs, program: Program) -> str:
        key = digest_key(programs, program, self.storage)
        d = self._digests.get(key) if key is not None else None
        if d is None:  # (a hit asks for the key once, not again inside ``digest_of``)
            d = digest_of(programs, program, self.storage, self._digests)
            self.digested += 1
        return d

    # ---- an edit that changed only layers' text: everything else is the last analysis's ----------------------

    def _in_place(self, text: Text, lo: int, hi: int, old_hi: int) -> IncrementalAnalysis | None:
        """The analysis of ``text`` when chunks ``lo:hi`` were layers and still are, with the same numbers, in a
        document whose layers are numbered in order: its sections, programs, links, kinds and diagnostics are the
        last analysis's but at those layers — the chain rechecked around them, the kinds regrouped for them, every
        diagnostic after them shifted by the lines they gained. ``None`` for any other edit."""
        last = self._last
        st = last._state
        if not st.ordered or hi - lo != old_hi - lo or len(text.texts) != len(st.texts):
            return None
        texts, seps, lines = text.texts, text.seps, text.lines
        new_parses = [self._parse(t) for t in texts[lo:hi]]
        for i, p in zip(range(lo, hi), new_parses):
            old, new = st.sections[i], p.section
            if old is None or new is None or old.kind is not SectionKind.LAYER or new.kind is not SectionKind.LAYER \
                    or new.index is None or new.index != old.index:
                return None
        self._count(st.sections[lo:hi], map(_section, new_parses))
        window = range(lo, hi)
        parses = st.parses[:lo] + new_parses + st.parses[hi:]
        sections_col = st.sections[:lo] + list(map(_section, new_parses)) + st.sections[hi:]
        new_sizes = [utf8_length(t) + len(s) for t, s in zip(texts[lo:hi], seps[lo:hi])]
        sizes = st.sizes[:lo] + new_sizes + st.sizes[hi:]
        shift = (sum(lines[lo:hi]) - sum(st.lines[lo:hi]), sum(new_sizes) - sum(st.sizes[lo:hi]))
        if shift == (0, 0) and hi - lo == 1:
            line0, byte0 = st.line0, st.byte0
        else:
            line0 = list(accumulate(lines, initial=0))[:-1]
            byte0 = list(accumulate(sizes, initial=0))[:-1]

        constants = last.programs.constants
        programs_col, checks_col = st.programs[:], st.checks[:]
        for i in window:
            programs_col[i], checks_col[i] = self._check(sections_col[i], texts[i], constants, st.constants_key)

        # The document: the same sections but these.
        by_kind = dict(last.document._by_kind)
        positions = [bisect.bisect_left(st.layer_at, i) for i in window]  # each edited layer's place among layers
        layer_sections = list(by_kind[SectionKind.LAYER])
        for i, k in zip(window, positions):
            layer_sections[k] = sections_col[i]
        by_kind[SectionKind.LAYER] = layer_sections
        document = Document(text.__str__, last.document.title, tuple(sections_col[st.first:]), (), by_kind)
        where = Where(sections_col, line0, byte0, st.layer_at, st.special)

        # Diagnostics of each chunk: the edited chunks' anew; a check's after them moved by the lines they gained (a
        # parse's stay relative to their chunk: ``Block``).
        parse_blocks, check_placed = dict(st.parse_blocks), dict(st.check_placed)
        for i in window:
            if parses[i].diagnostics:
                parse_blocks[i] = self._block(parses[i].diagnostics)
            else:
                parse_blocks.pop(i, None)
            if checks_col[i]:
                check_placed[i] = placed(checks_col[i], Base(line0[i], byte0[i]))
            else:
                check_placed.pop(i, None)
        doc_diags = st.doc_diags
        if shift != (0, 0):
            for i in [i for i in check_placed if i >= hi]:
                check_placed[i] = placed(checks_col[i], Base(line0[i], byte0[i]))
            if any(i >= hi for i in st.titles):
                doc_diags = _document_diagnostics(parses, sections_col, st.first, line0, byte0)[0]

        # Links: the chain rechecked where it passes the edited layers.
        layer_programs = list(last.programs.layers)
        for i, k in zip(window, positions):
            layer_programs[k] = programs_col[i]
        embed, head = last.programs.embed, last.programs.head
        chain_ = ([embed] if embed is not None else []) + layer_programs + ([head] if head is not None else [])
        off = 1 if embed is not None else 0
        near = {j for k in positions for j in (k + off - 1, k + off) if 0 <= j < len(chain_) - 1}
        odd = {j for j in st.odd if j not in near}
        odd.update(j for j in near if chain_link(chain_[j], chain_[j + 1], where.at) is not None)
        programs = Programs(document, embed, tuple(layer_programs), head, constants,
                            tuple(_links(document, chain_, odd, where, check_placed)))

        # Kinds: regrouped only for layers whose digest changed.
        layer_digests = st.layer_digests[:]
        digests_col = st.digests[:]
        groups = st.groups
        for i, k in zip(window, positions):
            d = digests_col[i] = self._digest(programs, programs_col[i])
            if d != layer_digests[k]:
                if groups is st.groups:
                    groups = dict(groups)
                number = layer_programs[k].section.index
                before = [l for l in groups[layer_digests[k]] if l != number]
                if before:
                    groups[layer_digests[k]] = before
                else:
                    del groups[layer_digests[k]]
                groups[d] = sorted([*groups.get(d, ()), number])
            layer_digests[k] = d
        kinds = last.kinds if groups is st.groups else self._kinds_of(programs, groups)

        state = _State(texts, seps, lines, sizes, parses, sections_col, programs_col, checks_col, digests_col,
                       st.first, line0, byte0, st.constants_key, True, st.layer_at, st.special, st.embed_at,
                       st.head_at, st.titles, doc_diags, parse_blocks, check_placed, odd, layer_digests,
                       st.layer_indices, groups, ())
        changed = {sections_col[i].index for i in window}
        return self._finish(text, document, programs, kinds, state, where, changed, recheck=False)

    # ---- any other text ------------------------------------------------------------------------------------

    def _analyze(self, text: Text, lo: int, hi: int, old_hi: int) -> IncrementalAnalysis:
        storage = self.storage
        last = self._last
        texts, seps, lines = text.texts, text.seps, text.lines
        n = len(texts)
        old = last._state if last is not None else None

        # Per chunk: its parse (cached by text) and size; the chunks outside the edit are the last analysis's.
        new_parses = [self._parse(t) for t in texts[lo:hi]]
        new_sizes = [utf8_length(t) + len(s) for t, s in zip(texts[lo:hi], seps[lo:hi])]
        if old is not None:
            parses = old.parses[:lo] + new_parses + old.parses[old_hi:]
            sizes = old.sizes[:lo] + new_sizes + old.sizes[old_hi:]
            self._count(old.sections[lo:old_hi], map(_section, new_parses))
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
        doc_diags, title, titles = _document_diagnostics(parses, sections_col, first, line0, byte0)
        document = Document(text.__str__, title, sections, (), by_kind)
        where = Where(sections_col, line0, byte0, layer_at, special)

        # Constants (and, under a checkpoint's storage, its entries): when they change, every program again.
        constants = document.constants
        constants_key = tuple(constants.items())
        recheck = old is None or constants_key != old.constants_key
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

        # What the parser says in each chunk, relative to it (only chunks that say something are read): the last
        # analysis's block of each chunk whose parse it still is.
        if old is not None:
            for b in old.parse_blocks.values():
                self._blocks.put(id(b.source), b)
        parse_blocks = {i: self._block(parses[i].diagnostics)
                        for i in compress(range(first, n), map(_diagnostics, islice(parses, first, None)))}

        # Links between programs: the usual document (layers numbered 0, 1, 2… in order, one embed, one head) is
        # answered by list comparisons at C speed; any other by the sentence-level link.
        indices = list(map(_number, map(sections_col.__getitem__, layer_at)))
        embeds = [i for i in special if sections_col[i].kind is SectionKind.EMBED]
        heads = [i for i in special if sections_col[i].kind is SectionKind.HEAD]
        ordered = indices == list(range(len(indices))) and len(embeds) <= 1 and len(heads) <= 1
        check_placed: dict = {}
        odd: set = set()
        if ordered:
            layer_programs = list(map(programs_col.__getitem__, layer_at))
            embed = programs_col[embeds[0]] if embeds else None
            head = programs_col[heads[0]] if heads else None
            checked_at = embeds + layer_at + heads
            for i in compress(checked_at, map(checks_col.__getitem__, checked_at)):
                check_placed[i] = placed(checks_col[i], Base(line0[i], byte0[i]))
            chain_ = ([embed] if embed is not None else []) + layer_programs + ([head] if head is not None else [])
            odd = set(compress(range(len(chain_) - 1), map(ne, map(_output, chain_[:-1]), map(_input, chain_[1:]))))
            odd.update(compress(range(len(chain_) - 1), map(ne, map(_out_shape, chain_[:-1]), map(_in_shape, chain_[1:]))))
            odd = {k for k in odd if chain_link(chain_[k], chain_[k + 1], where.at) is not None}
            programs = Programs(document, embed, tuple(layer_programs), head, constants,
                                tuple(_links(document, chain_, odd, where, check_placed)))
        else:
            def check(section: Section):
                i = where.chunk(section)
                return programs_col[i], placed(checks_col[i], Base(line0[i], byte0[i]))

            programs = link_programs(document, check, where.at)
            layer_programs = list(programs.layers)

        # Kinds: digests cached by shape; the kinds are the last analysis's unless a layer's digest changed.
        if ordered:
            layer_digests = list(map(digests_col.__getitem__, layer_at))
            for k in compress(range(len(layer_at)), map(is_, layer_digests, repeat(None))):
                layer_digests[k] = digests_col[layer_at[k]] = self._digest(programs, programs_col[layer_at[k]])
        else:
            layer_digests = [self._digest(programs, prog) for prog in layer_programs]
        layer_indices = list(map(_program_index, layer_programs))
        if old is not None and not recheck and layer_digests == old.layer_digests and layer_indices == old.layer_indices:
            kinds, groups = last.kinds, old.groups
        else:
            groups = {}
            for l, d in zip(layer_indices, layer_digests):
                groups.setdefault(d, []).append(l)
            kinds = self._kinds_of(programs, groups)

        state = _State(texts, seps, lines, sizes, parses, sections_col, programs_col, checks_col, digests_col, first,
                       line0, byte0, constants_key, ordered, layer_at, special, embeds[0] if embeds else None,
                       heads[0] if heads else None, titles, doc_diags, parse_blocks, check_placed, odd,
                       layer_digests, layer_indices, groups, ())
        changed = {s.index for s in sections_col[lo:hi] if s is not None and s.kind is SectionKind.LAYER}
        return self._finish(text, document, programs, kinds, state, where, changed, recheck)

    # ---- what both paths share ------------------------------------------------------------------------------

    def _kinds_of(self, programs: Programs, groups: dict) -> tuple[LayerKind, ...]:
        """The kinds of ``groups`` (digest → its layers, ascending), in the order of their first layer, each named
        after what it does (names cached by digest and constants), told apart by their first layer when a name
        does not."""
        ordered = sorted(groups.items(), key=lambda kv: kv[1][0])
        constants = tuple(programs.constants.items())
        names = []
        for digest, layers in ordered:
            name = self._names.get((digest, constants))
            if name is None:
                name = describe(programs.layer(layers[0]), programs.constants)
                self._names.put((digest, constants), name)
            names.append(name)
        self._names.turn()  # every kind's name was read: the names of kinds no layer has any more age
        return tuple(named_kinds([(digest, tuple(layers)) for digest, layers in ordered], names))

    def _finish(self, text: Text, document: Document, programs: Programs, kinds, state: _State, where: "Where",
                changed: set, recheck: bool) -> IncrementalAnalysis:
        """Divergences (the last analysis's unless a kind, or a layer one names, changed), and every diagnostic
        in document coordinates, in order.

        Divergences are found again from the kinds (``divergences``, linear in them), but where each layer parts
        from its representative is compared only for the layers the edit touched and the layers of a kind whose
        representative it touched (``_parted``, by the two programs), and each divergence's diagnostic is placed
        again only when it or its sections moved (``_placed``): a model whose every layer is its own kind — every
        layer a divergence — is compared once, not at every keystroke."""
        storage, last = self.storage, self._last
        if last is not None and kinds is last.kinds and not recheck and not any(
                d.layer in changed or d.representative in changed for d in last._state.relative_divergences):
            divs_rel = last._state.relative_divergences
        else:
            if recheck:  # another checkpoint or constants: a weight may be read otherwise
                self._parted = _Generations()
            divs_rel = tuple(divergences(programs, list(kinds), storage, self._parted)) if len(kinds) > 1 else ()
            self._parted.turn()
        state.relative_divergences = divs_rel
        divs: list[Divergence] = []
        div_diags: list[Diagnostic] = []
        kept, layer, chunk, line0, byte0 = self._placed, programs.layer, where.chunk, where.line0, where.byte0
        for d in divs_rel:
            rep = layer(d.representative).section
            i, r = chunk(layer(d.layer).section), chunk(rep)
            at = (line0[i], byte0[i], line0[r], byte0[r], rep.heading)
            hit = kept.get(id(d))  # by the divergence itself (``divergences`` keeps it while nothing it says moved)
            if hit is None or hit[0] is not d or hit[1] != at:
                lb, rb = Base(at[0], at[1]), Base(at[2], at[3])
                rel = hit[2] if hit is not None and hit[0] is d and hit[1][4] == at[4] else divergence_diagnostic(programs, d)
                hit = (d, at, rel, lb.diagnostic(rel, related=rb),
                       replace(d, range=lb.range(d.range), representative_range=rb.range(d.representative_range)))
            kept.put(id(d), hit)
            div_diags.append(hit[3])
            divs.append(hit[4])
        kept.turn()
        ckpt = checkpoint_diagnostics(programs, storage, lambda prog, r: where.base(prog.section).range(r))
        # In order: each chunk's parse diagnostics as its block (nothing placed, nothing sorted), the rest between
        # them; a block whose message names a line, or that reaches its chunk's end, is placed with the rest.
        blocks = sorted(state.parse_blocks.items())
        kept, moved = [], []
        for i, b in blocks:
            base = Base(line0[i], byte0[i])
            if b.movable and b.last[0] < state.sizes[i]:
                kept.append((base, b))
            else:
                moved.extend(placed(b.diagnostics, base))
        others = list(programs.diagnostics) + ckpt + div_diags
        rest = state.doc_diags + moved + others
        rest.sort(key=diagnostic_order)
        runs = in_order(kept, rest)
        if runs is None:  # a diagnostic of the rest inside a block: every one placed and sorted together
            rest = state.doc_diags + list(chain.from_iterable(
                placed(b.diagnostics, Base(line0[i], byte0[i])) for i, b in blocks)) + others
            rest.sort(key=diagnostic_order)
            runs = ((None, tuple(rest)),)
        has_errors = any(b.errors for _, b in kept) or any(d.severity is Severity.ERROR for d in rest)
        return IncrementalAnalysis(text.__str__, document, programs, kinds, tuple(divs), runs, has_errors, storage,
                                   state, where)

    def _block(self, diags: tuple[Diagnostic, ...]) -> Block:
        """A chunk parse's diagnostics as a ``Block``, made once per parse (cached by the tuple itself)."""
        hit = self._blocks.get(id(diags))
        if hit is None or hit.source is not diags:
            hit = Block.of(diags)
            self.blocked += len(diags)
        self._blocks.put(id(diags), hit)
        return hit


def unanalysed(text: str, why: Diagnostic, storage: Storage = ALL_Q8) -> IncrementalAnalysis:
    """The analysis of a text that was not analysed — too large to read, or one the analysis failed on: no sections,
    no programs, and ``why`` as its one diagnostic, so an editor still shows what happened."""
    doc = Document(text, None, (), (why,))
    state = _State([], [], [], [], [], [], [], [], [], 0, [], [], (), False, [], [], None, None, [], [why], {}, {},
                   set(), [], [], {}, ())
    return IncrementalAnalysis(lambda: text, doc, Programs(doc, None, (), None, {}), (), (), ((None, (why,)),),
                               why.severity is Severity.ERROR, storage, state, Where([], [], [], [], []))


def _document_diagnostics(parses, sections_col, first: int, line0, byte0):
    """What the parser says about the whole document — text before the first heading, a `# Title` heading that is
    not the first, no title — its title, and the chunks whose heading is a `# Title`."""
    diags: list[Diagnostic] = []
    if first:
        diags += placed(parses[0].diagnostics, Base(0, 0))
    title = None
    titles = list(compress(range(len(parses)), map(eq, map(_level, parses), repeat(1))))
    for i in titles:
        if title is None and i == first:
            title = sections_col[i].title
        else:
            diags.append(Diagnostic(Base(line0[i], byte0[i]).range(sections_col[i].heading), Severity.ERROR,
                                    "only the first heading is a `# Title`; sections are `## Model`, `## Layer N`, …", "syntax"))
    if title is None:
        diags.append(Diagnostic(Range(Pos(0, 0, 0), Pos(0, 0, 0)), Severity.ERROR, "the document has no `# Title` first line", "syntax"))
    return diags, title, titles


def _links(document: Document, chain_: list, odd: set, where: "Where", check_placed: dict) -> list[Diagnostic]:
    """The diagnostics ``link_programs`` gives a document whose layers are numbered in order: constants and single
    sections, each program's own check, no layers at all, and each input that is not the previous output."""
    out = section_links(document, where.at)
    out += chain.from_iterable(check_placed.values())
    if not document.layers and document.title is not None:
        out.append(Diagnostic(where.at(document.sections[0], document.sections[0].heading), Severity.ERROR,
                              "the model has no layers: add `## Layer 0`", "layers"))
    for k in sorted(odd):
        out.append(chain_link(chain_[k], chain_[k + 1], where.at))
    return out


# ---- the analysis as the whole-document analysis -------------------------------------------------------------------


def as_analysis(a: IncrementalAnalysis) -> Analysis:
    """The incremental analysis in ``Analysis``'s shape (sections still chunk-relative): for core functions that read
    programs, kinds and errors but place nothing by document position."""
    return Analysis(a.document, a.programs, a.kinds, a.divergences, a.diagnostics, a.storage)
