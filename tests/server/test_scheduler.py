"""The scheduler on its own: a burst of edits is one analysis, a result for text that changed meanwhile is dropped,
and a request waiting for the current text gets exactly its snapshot."""

import asyncio
import time
from types import SimpleNamespace

import pytest

import streamed_lsp.scheduler as scheduler_module
from streamed.analysis.incremental import IncrementalAnalyzer
from streamed_lsp.scheduler import Scheduler

from lsphelp import TINY


def change(text: str):
    """A whole-text content change, as a client sends it."""
    return [SimpleNamespace(text=text, range=None)]


class Slow(IncrementalAnalyzer):
    """An analyzer that takes a while, so edits can arrive while it runs."""

    def analyze(self, text, cut=None):
        time.sleep(0.15)
        return super().analyze(text, cut)


@pytest.fixture
def published():
    return []


def make(published, debounce_ms=0) -> Scheduler:
    return Scheduler(lambda snap, payload: published.append(snap), debounce_ms=debounce_ms)


async def test_a_result_for_text_that_changed_meanwhile_is_dropped(published, monkeypatch):
    monkeypatch.setattr(scheduler_module, "INLINE_CHARS", -1)  # every analysis on the analysis thread
    s = make(published)
    s.open("file:///a.lgm", TINY, 1)
    s.docs["file:///a.lgm"].analyzer = Slow()
    s.change("file:///a.lgm", 2, change(TINY + "\n-- two"))
    await asyncio.sleep(0.02)  # version 2's analysis is under way
    s.change("file:///a.lgm", 3, change(TINY + "\n-- three"))
    snap = await s.fresh("file:///a.lgm", timeout=5)
    await asyncio.sleep(0.4)
    assert snap.version == 3 and snap.text.endswith("-- three")
    assert [p.version for p in published] == [3]


async def test_a_burst_of_edits_within_the_debounce_is_one_analysis(published):
    s = make(published, debounce_ms=100)
    s.open("file:///b.lgm", TINY, 1)
    await asyncio.sleep(0.05)
    for v in range(2, 12):
        s.change("file:///b.lgm", v, change(TINY + "-" * v))
    await asyncio.sleep(0.3)
    assert [p.version for p in published] == [1, 11]


async def test_a_request_skips_the_rest_of_the_debounce(published):
    s = make(published, debounce_ms=2000)
    s.open("file:///c.lgm", TINY, 1)
    await s.fresh("file:///c.lgm")
    s.change("file:///c.lgm", 2, change(TINY.replace("Let d be 64.", "Let d be 65.")))
    t = time.perf_counter()
    snap = await s.fresh("file:///c.lgm", timeout=5)
    assert snap.version == 2 and time.perf_counter() - t < 1.0
