"""The incremental analysis equals the whole-document analysis; edits re-parse only the sections they touch; the
LSP edit rule is total; repairs and rejects are placed in document coordinates."""

import glob
import random
import re
from dataclasses import replace
from pathlib import Path

import pytest

from streamed.analysis.whole import analyze
from streamed.analysis.incremental import IncrementalAnalyzer
from streamed.analysis.text import apply_change, chunks, offset_at
from streamed.spatial.diagnose import reject_diagnostics, reject_diagnostics_of

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
        stores = 0  # programs lowered into the cache (what else the check remembers is not a lowering)

        def __setitem__(self, k, v):
            Counting.stores += k[0] in ("kind", "program")
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

    from streamed.spatial.target import load_target

    # A chip of 5 PCUs: every program has more ops than that, each refused on the statement with the most FLOPs.
    few = replace(load_target("sn50"), pcus=5)
    whole = reject_diagnostics(analyze(TINY), Deployment("decode", 4096), few, {})
    mine = reject_diagnostics_of(IncrementalAnalyzer().analyze(TINY), Deployment("decode", 4096), few, {})
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


# ---- heterogeneous documents: every layer its own kind ---------------------------------------------------------------


def _own_epsilons(n: int) -> str:
    """tiny-llama at ``n`` layers, layer l's first epsilon written ``{l + 1}e-6``: every layer its own kind."""
    text = deep(TINY, n)
    for l in range(n):
        text = re.sub(rf"(Let xn{l} be rmsnorm of \w+ with g{l}, epsilon )[0-9.e-]*[0-9]", rf"\g<1>{l + 1}e-6", text, count=1)
    return text


def test_random_edits_of_a_model_whose_every_layer_is_its_own_kind_keep_the_analysis_equal_to_the_whole_one():
    from streamed.spatial.synth import NAS_BLOCKS, nas_document

    rng = random.Random(23)
    pieces = ["", "7", "1", "0", "e", "-", ".", "x", "Let q9 be xo1.", "\n", "--", " ", "2e-6", "\n## Layer 5\n"]
    for text in (_own_epsilons(24), nas_document(24, blocks=[(NAS_BLOCKS[l % 16][0], 32 * (4 + l)) for l in range(24)])):
        analyzer = IncrementalAnalyzer()
        first = analyzer.analyze(text)
        assert len(first.kinds) == 24 and not first.errors
        for _ in range(40):
            if rng.random() < 0.6:  # a digit of a number changed: the layer leaves its kind, or joins another
                spots = [m.start() for m in re.finditer(r"(?<=epsilon )\d|(?<=by )\d", text)]
                a = rng.choice(spots)
                text = text[:a] + rng.choice("0123456789") + text[a + 1:]
            else:
                a, b = sorted(rng.randrange(len(text) + 1) for _ in range(2))
                text = text[:a] + rng.choice(pieces) + text[b if rng.random() < 0.3 else a:]
            same(text, analyzer)


def test_an_edit_in_a_model_whose_every_layer_is_its_own_kind_compares_only_the_layer_it_touched(monkeypatch):
    import streamed.analysis.kinds as kinds_module

    compared = []
    first_difference = kinds_module.first_difference
    monkeypatch.setattr(kinds_module, "first_difference",
                        lambda programs, layer, rep, *rest: compared.append(layer.section.index) or
                        first_difference(programs, layer, rep, *rest))
    text = _own_epsilons(32)
    analyzer = IncrementalAnalyzer()
    first = analyzer.analyze(text)
    assert len(first.kinds) == 32 and len(first.divergences) == 31 and sorted(compared) == list(range(1, 32))
    for old, new in (("Let hn17 be", "Let  hn17 be"), ("epsilon 18e-6", "epsilon 18e-5"), ("hn17", "norm17")):
        compared.clear()
        text = text.replace(old, new)
        a = analyzer.analyze(text)
        assert compared == [17], (old, compared)
        assert a.divergences == analyze(text).divergences


def test_an_edit_that_joins_a_layer_to_another_kind_lowers_only_the_kinds_it_changed(monkeypatch):
    import streamed.spatial.streamed_model as model

    from streamed.spatial.deployment import Deployment

    lowered = []
    lower_program = model.lower_program
    monkeypatch.setattr(model, "lower_program", lambda program, *rest: lowered.append(program.section.index) or
                        lower_program(program, *rest))
    text = _own_epsilons(32)
    analyzer, cache, decode = IncrementalAnalyzer(), {}, Deployment("decode", 4096)
    reject_diagnostics_of(analyzer.analyze(text), decode, None, cache)
    assert len(lowered) == 32 + 2  # every kind, the embed and the head
    lowered.clear()
    # Layer 20 takes layer 9's epsilon: it joins layer 9's kind (lowered before: renamed, not lowered again), and
    # layer 19, whose output is no longer a kind's input, is the only kind whose program's shared names moved.
    joined = text.replace("epsilon 21e-6", "epsilon 10e-6")
    a = analyzer.analyze(joined)
    assert a.kind_of(20).layers == (9, 20)
    rejects = reject_diagnostics_of(a, decode, None, cache)
    assert lowered == [19] and list(rejects) == reject_diagnostics(analyze(joined), decode, None, {})


def test_a_checkpoint_binding_edited_under_a_checkpoints_storage_checks_the_lowering_again():
    from streamed.model.checkpoint import Storage
    from streamed.spatial.deployment import Deployment
    from streamed.spatial.synth import two_kind_document

    # The head's weight is declared q8 and d = 48 is no whole number of Q8_0 blocks: stored Q8_0 it cannot lower,
    # stored F16 it is read dense and lowers. Which the checkpoint stores depends on the binding alone.
    text = two_kind_document(4, d=48, q8=False).replace("Let Wout be a weight", "Let Wout be a q8 weight")
    types = {f"blk.{l}.{t}.weight": "F32" for l in range(4) for t in ("attn_norm", "attn_q", "attn_k", "attn_v",
                                                                       "attn_output", "ffn_norm", "ffn_gate", "ffn_up",
                                                                       "ffn_down")}
    storage = Storage(types={**types, "token_embd.weight": "F32", "output_norm.weight": "F32",
                             "output.weight": "Q8_0", "output.f16": "F16"}, source="model.gguf")
    analyzer, cache, decode = IncrementalAnalyzer(storage), {}, Deployment("decode", 4096)
    for binding in ('"output.weight"', '"output.f16"', '"output.weight"'):
        text = re.sub(r'Wout is "[^"]*"', f"Wout is {binding}", text)
        mine = reject_diagnostics_of(analyzer.analyze(text), decode, None, cache)
        whole = reject_diagnostics(analyze(text, storage), decode, None, {})
        assert list(mine) == whole
        assert any("Wout" in d.message for d in whole) == (binding == '"output.weight"')
