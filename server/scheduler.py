"""When documents are analysed: edits debounced behind a generation counter, results swapped in as immutable snapshots.

Every edit bumps its document's generation and (re)starts a debounce timer; when the timer fires, the text of that
generation is analysed off the event loop, and the result is kept only if no edit came meanwhile — a burst of
keystrokes is one analysis, and a stale result is dropped, never locked out. Handlers read the current snapshot;
``fresh`` lets a request wait (briefly) for the snapshot of the text it was sent against.

Invariant: a published snapshot's ``version`` is the client's version of exactly the text it describes.
"""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import MutableMapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable

from streamed.analysis.incremental import IncrementalAnalysis, IncrementalAnalyzer, unanalysed
from streamed.analysis.text import Text, clean
from streamed.lang.lexer import Pos, Range
from streamed.analysis.whole import diagnostic_order, paced_collector
from streamed.lang.syntax import Diagnostic, Severity
from streamed.model.checkpoint import ALL_Q8, Storage

log = logging.getLogger(__name__)

#: An analysis that parses at most this many characters (a few sections: a keystroke's) runs on the event loop — no
#: thread hop, which on a busy machine costs more than the analysis; anything larger runs on the analysis thread,
#: so requests are answered while it runs.
INLINE_CHARS = 24_000


@dataclass(frozen=True)
class Snapshot:
    """One document's text at one version and everything the core says about it. Never mutated."""

    uri: str
    version: int | None
    generation: int
    analysis: IncrementalAnalysis
    rejects: tuple[Diagnostic, ...] = ()  # each kind's lowering reject, document coordinates

    @property
    def text(self) -> str:
        return self.analysis.text

    @property
    def diagnostics(self) -> list[Diagnostic]:
        if not self.rejects:
            return list(self.analysis.diagnostics)
        out = [*self.analysis.diagnostics, *self.rejects]
        out.sort(key=diagnostic_order)
        return out

    @property
    def runs(self) -> tuple:
        """``diagnostics`` as the analysis's runs (``IncrementalAnalysis.runs``: a chunk's parse diagnostics kept
        relative to it, with the base to place them at), for a writer that places them itself."""
        return self.analysis.runs if not self.rejects else ((None, tuple(self.diagnostics)),)


@dataclass
class _Doc:
    text: Text  # the editor's text as its chunks: an edit replaces the few it touches
    version: int | None
    generation: int = 0
    snapshot: Snapshot | None = None
    timer: asyncio.Task | None = None
    running: int | None = None  # the generation being analysed (or queued for the analysis thread)
    sleeping: bool = False  # ``timer`` is still in its debounce
    waiters: list = field(default_factory=list)  # (generation, future)
    analyzer: IncrementalAnalyzer | None = None  # this document's caches
    busy: int = 0  # analyses of this document on the analysis thread (its analyzer is theirs meanwhile)


def failure(e: BaseException) -> str:
    """An unexpected exception as one line: its type, its message, and where it was raised (the innermost frame),
    enough to find the bug without a traceback on stderr."""
    import traceback

    frames = traceback.extract_tb(e.__traceback__)
    where = f" (at {frames[-1].filename.rsplit('/', 1)[-1]}:{frames[-1].lineno})" if frames else ""
    message = " ".join(str(e).split())
    return f"{type(e).__name__}{': ' + message[:200] if message else ''}{where}"


class Lowered(MutableMapping):
    """Lowered kind programs (and what the reject check remembers), by digest, cut, target and constants: what the
    last two rounds of analyses used — a round being one analysis per open document — so memory follows the kinds
    the open documents have, however long the session, and undoing an edit still finds its kind lowered."""

    def __init__(self):
        self.current: dict = {}
        self.previous: dict = {}

    def __getitem__(self, key):
        try:
            return self.current[key]
        except KeyError:
            value = self.current[key] = self.previous[key]
            return value

    def __setitem__(self, key, value) -> None:
        self.current[key] = value

    def __delitem__(self, key) -> None:
        found = self.current.pop(key, None) is not None
        if self.previous.pop(key, None) is None and not found:
            raise KeyError(key)

    def __contains__(self, key) -> bool:
        return key in self.current or key in self.previous

    def __iter__(self):
        return iter(self.current.keys() | self.previous.keys())

    def __len__(self) -> int:
        return len(self.current.keys() | self.previous.keys())

    def turn(self) -> None:
        self.previous, self.current = self.current, {}


class Scheduler:
    def __init__(self, on_snapshot: Callable[[Snapshot, object], None], storage: Storage = ALL_Q8,
                 debounce_ms: int = 150, prepare: Callable[[Snapshot], object] = lambda snap: None):
        self.on_snapshot = on_snapshot
        #: Runs on the analysis thread with each new snapshot (the server serialises its diagnostics there, so a
        #: document with thousands of them does not hold up the event loop); its result goes to ``on_snapshot``.
        self.prepare = prepare
        self.debounce_ms = debounce_ms
        self.storage = storage
        self.docs: dict[str, _Doc] = {}
        self.analyses = 0
        self.deployment = None  # a ``streamed.spatial.deployment.Deployment`` once settings say which
        self.target = None
        #: Lowered kinds by digest (and cut, target, constants): an edit that renames inside a layer lowers nothing.
        self.lowered = Lowered()
        self._round = 0  # analyses since the lowered cache last aged
        # What the server has made by now — modules, classes, the LSP type tables — lives as long as the process:
        # moved out of the collector's sight once, a full collection walks only what documents make. (Once, not per
        # analysis: what an analysis makes is collected as any object is.)
        gc.collect()
        gc.freeze()
        # One worker: analyses never overlap (an analyzer's caches are not shared between threads).
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="analysis")

    # ---- text ----
    def open(self, uri: str, text: str, version: int | None) -> None:
        self.docs[uri] = doc = _Doc(Text.of(clean(text)), version, analyzer=IncrementalAnalyzer(self.storage))
        self._edited(uri, doc, 0)

    def change(self, uri: str, version: int | None, changes) -> None:
        """Apply LSP content changes (objects with ``text`` and optionally ``range``) in order."""
        doc = self.docs.get(uri)
        if doc is None:
            return
        text = doc.text
        for c in changes:
            r = getattr(c, "range", None)
            if r is None:
                text = text.edit(None, None, c.text)
            else:
                text = text.edit((r.start.line, r.start.character), (r.end.line, r.end.character), c.text)
        doc.text, doc.version = text, version
        self._edited(uri, doc, self.debounce_ms / 1000)

    def close(self, uri: str) -> None:
        doc = self.docs.pop(uri, None)
        if doc is not None and doc.timer is not None:
            doc.timer.cancel()
        for _, fut in (doc.waiters if doc else []):
            if not fut.done():
                fut.set_result(None)

    def set_storage(self, storage: Storage) -> None:
        """A new checkpoint: every open document is analysed again under it."""
        self.storage = storage
        for doc in self.docs.values():
            doc.analyzer = IncrementalAnalyzer(storage)
        self.reanalyze_all()

    def reanalyze_all(self) -> None:
        """New settings: every open document again (a new generation, so results under the old ones are dropped)."""
        for uri, doc in self.docs.items():
            self._edited(uri, doc, 0)

    # ---- reading ----
    def snapshot(self, uri: str) -> Snapshot | None:
        doc = self.docs.get(uri)
        return doc.snapshot if doc else None

    async def fresh(self, uri: str, timeout: float = 0.4) -> Snapshot | None:
        """The snapshot of the document's current text, analysing it now rather than after the debounce; the latest
        snapshot there is if that takes longer than ``timeout`` (a request is answered, however large the text)."""
        doc = self.docs.get(uri)
        if doc is None:
            return None
        if doc.snapshot is not None and doc.snapshot.generation == doc.generation:
            return doc.snapshot
        gen = doc.generation
        if doc.running != gen and (doc.sleeping or doc.timer is None or doc.timer.done()):
            self._start(uri, doc, 0)  # skip the rest of the debounce: someone is waiting for this text
        fut = asyncio.get_running_loop().create_future()
        doc.waiters.append((gen, fut))
        try:
            await asyncio.wait_for(asyncio.shield(fut), timeout)
        except asyncio.TimeoutError:
            pass
        return doc.snapshot

    # ---- the machinery ----
    def _analyze(self, analyzer: IncrementalAnalyzer, text: Text, uri: str, version, gen: int):
        """Runs on the analysis thread (or inline, when small): the incremental analysis, then each kind's lowering
        reject (cached by digest) — a document with errors is not lowered: its errors are its diagnostics — then
        ``prepare``."""
        with paced_collector():
            analysis = analyzer.analyze(text)
            rejects: tuple = ()
            if self.deployment is not None and not analysis.has_errors:
                # Imported here, not at the top: the lowering loads with the first analysis, not the server's start.
                from streamed.spatial.diagnose import reject_diagnostics_of

                try:
                    rejects = reject_diagnostics_of(analysis, self.deployment, self.target, self.lowered)
                except Exception as e:  # the analysis stands; the lowering's check says it failed, on the first line
                    log.error("lowering check of %s failed: %s", uri, failure(e))
                    rejects = (Diagnostic(Range(Pos(0, 0, 0), Pos(0, 0, 0)), Severity.ERROR,
                                          f"the lowering of this document could not be checked: {failure(e)}", "internal"),)
            self._round += 1
            if self._round >= max(1, len(self.docs)):
                self._round = 0
                self.lowered.turn()
            snap = Snapshot(uri, version, gen, analysis, rejects)
            return snap, self.prepare(snap)

    def _edited(self, uri: str, doc: _Doc, delay: float) -> None:
        """The text (or what it is analysed under) changed: a new generation, analysed after ``delay``."""
        doc.generation += 1
        self._start(uri, doc, delay)

    def _start(self, uri: str, doc: _Doc, delay: float) -> None:
        """(Re)start the timer of the current generation. A timer still in its debounce is replaced; one whose
        analysis is under way is left to finish (its result is dropped if stale)."""
        if doc.timer is not None and not doc.timer.done() and doc.sleeping:
            doc.timer.cancel()
        doc.sleeping = delay > 0
        doc.timer = asyncio.get_event_loop().create_task(self._run(uri, doc, doc.generation, delay))

    async def _run(self, uri: str, doc: _Doc, gen: int, delay: float) -> None:
        if delay > 0:
            await asyncio.sleep(delay)
        if doc.timer is asyncio.current_task():
            doc.sleeping = False
        if gen != doc.generation or self.docs.get(uri) is not doc:
            return  # a newer edit owns the next analysis
        text, version, analyzer = doc.text, doc.version, doc.analyzer
        doc.running = gen
        try:
            if doc.busy == 0 and analyzer.unparsed(text) <= INLINE_CHARS:
                snap, payload = self._analyze(analyzer, text, uri, version, gen)
            else:
                doc.busy += 1
                try:
                    snap, payload = await asyncio.get_running_loop().run_in_executor(
                        self._pool, self._analyze, analyzer, text, uri, version, gen)
                finally:
                    doc.busy -= 1
        except Exception as e:  # the core is total; if it is not, the document still shows why, and the log one line
            why = failure(e)
            log.error("analysis of %s (version %s) failed: %s", uri, version, why)
            snap = Snapshot(uri, version, gen, unanalysed(str(text), Diagnostic(
                Range(Pos(0, 0, 0), Pos(0, 0, 0)), Severity.ERROR, f"this document could not be analysed: {why}",
                "internal"), self.storage))
            payload = self.prepare(snap)
        finally:
            if doc.running == gen:
                doc.running = None
        self.analyses += 1
        if analyzer is not doc.analyzer or self.docs.get(uri) is not doc:
            return
        if gen != doc.generation:
            # Stale: dropped. If nobody scheduled the newer text yet (its timer was left running), do so.
            if doc.timer is None or doc.timer.done():
                self._start(uri, doc, 0)
            return
        doc.snapshot = snap
        for g, fut in list(doc.waiters):
            if g <= gen and not fut.done():
                fut.set_result(snap)
        doc.waiters = [(g, f) for g, f in doc.waiters if not f.done()]
        self.on_snapshot(snap, payload)
