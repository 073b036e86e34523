"""The incremental analysis equals the whole-document analysis; edits re-parse only the sections they touch; the
LSP edit rule is total; repairs and rejects are placed in document coordinates."""

import glob
import random
from pathlib import Path

import pytest

from streamed.analysis.whole import analyze
from streamed.analysis.incremental import IncrementalAnalyzer
from streamed.analysis.text import apply_change, chunks, offset_at
from streamed.spatial.diagnose import reject_diagnostics_of

from repo import DIVERGENT, ROOT, SIX, TINY, deep

EXAMPLES = sorted(glob.glob(str(ROOT / "examples" / "*.lgm")))


def same(text: str, analyzer: IncrementalAnalyzer | None = None) -> None:
    a = analyze(text)
    b = (analyzer or IncrementalAnalyzer()).analyze(text)
    assert b.diagnostics == a.diagnostics
    assert b.kinds == a.kinds
    assert b.divergences == a.divergences


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: Path(p).stem)
def test_the_incremental_analysis_of_every_example_equals_the_whole_analysis(path):
    same(Path(path).read_text())


def test_documents_with_errors_in_every_section_kind_analyse_alike():
    broken = (DIVERGENT.replace("Let vocab be 256.", "Let vocab be 256.\nLet vocab be 3.")
              .replace("## Layer 3", "## Layer 3\nLet xn3 be 5.\nLet xn3 be 6.", 1)
              .replace("Let h5 be", "Let h5 bee")
              .replace("## Head", "stray words\n## Layer 9\n## Head\n# Second title"))
    same("text before\n" + broken)
    same("")
    same("# Only a title")
    same(TINY.replace("## Embed", "## Embed\n## Embed"))


def test_random_edits_keep_the_incremental_analysis_equal_to_the_whole_one():
    rng = random.Random(7)
    analyzer = IncrementalAnalyzer()
    text = SIX
    pieces = ["", "x", ".", "Let q9 be xo1.", "\n## Layer 2\n", "\n", "0.5", "(", "--", "é", "😀", " times ", "# "]
    for _ in range(60):
        a, b = sorted(rng.randrange(len(text) + 1) for _ in range(2))
        text = text[:a] + rng.choice(pieces) + text[b if rng.random() < 0.5 else a:]
        same(text, analyzer)


def test_an_edit_inside_one_layer_parses_and_digests_only_that_layer():
    text = deep(TINY, 32)
    analyzer = IncrementalAnalyzer()
    analyzer.analyze(text)
    parsed, digested = analyzer.parsed, analyzer.digested
    edited = text.replace("Let hn17 be", "Let  hn17 be")
    analyzer.analyze(edited)
    assert analyzer.parsed - parsed == 1
    assert analyzer.digested - digested == 1


def test_an_edit_that_renames_within_a_layer_lowers_nothing_again():
    from streamed.spatial.deployment import Deployment

    class Counting(dict):
        stores = 0

        def __setitem__(self, k, v):
            Counting.stores += 1
            super().__setitem__(k, v)

    text = TINY.replace("Let d be 64.", "Let d be 48.")  # one kind that does not lower
    analyzer, cache = IncrementalAnalyzer(), Counting()
    first = reject_diagnostics_of(analyzer.analyze(text), Deployment("decode", 4096), None, cache)
    lowered = Counting.stores
    renamed = text.replace("hn2", "norm2")
    again = reject_diagnostics_of(analyzer.analyze(renamed), Deployment("decode", 4096), None, cache)
    assert lowered > 0 and Counting.stores == lowered
    assert [d.message for d in again] == [d.message for d in first]


def test_rejects_land_on_the_representatives_statement_in_document_coordinates():
    from streamed.spatial.diagnose import reject_diagnostics
    from streamed.spatial.deployment import Deployment

    text = TINY.replace("Let d be 64.", "Let d be 48.")
    whole = reject_diagnostics(analyze(text), Deployment("decode", 4096), None, {})
    mine = reject_diagnostics_of(IncrementalAnalyzer().analyze(text), Deployment("decode", 4096), None, {})
    assert list(mine) == whole and whole


def test_chunks_cut_before_each_heading_and_keep_byte_offsets():
    text = "# T\nx é\n## Model\nLet d be 1.\n  ## Layer 0 -- indented heading\n-- ## not a heading\n"
    cs = chunks(text)
    assert [c.line for c in cs] == [0, 2, 4]
    data = text.encode()
    for c in cs:
        assert data[c.offset:].decode().startswith(c.text)


@pytest.mark.parametrize("line, character, expected", [
    (0, 0, 0), (0, 99, 3), (1, 1, 5), (1, 2, 5), (1, 3, 6), (9, 0, 7), (-1, 5, 0), (0, -3, 0),
])
def test_editor_positions_are_clamped_and_never_split_a_surrogate_pair(line, character, expected):
    assert offset_at("abc\na😀b", line, character) == expected


def test_apply_change_replaces_lone_surrogates_and_reads_reversed_ranges_in_order():
    assert apply_change("hello", (0, 3), (0, 1), "\ud800") == "h\ufffdlo"
    assert apply_change("hello", None, None, "new") == "new"
    assert apply_change("a\nb", (5, 0), (7, 0), "!") == "a\nb!"
