"""Divergences: where a layer that should be one program with its siblings is not, and why — and silence where a
layer differs by design."""

from __future__ import annotations

import re

import hypothesis.strategies as st
from builders import document, line_of
from hypothesis import given, settings
from repo import example

from streamed.analysis.whole import analyze
from streamed.model.checkpoint import Storage


def _divs(text: str, storage=None):
    return list((analyze(text) if storage is None else analyze(text, storage)).divergences)


def test_a_correct_model_reports_no_divergence():
    assert _divs(document(6)) == []


def test_a_swapped_weight_names_both_layers_and_the_binding():
    text = document(6).replace("Let qr4 be rope of (xn4 times Wq4)", "Let qr4 be rope of (xn4 times Wk4)")
    (d,) = _divs(text)
    assert (d.layer, d.representative) == (4, 0)
    assert d.why == "layer 4 reads `Wk4` where layer 0 reads `Wq0`, which is layer 4's `Wq4`"
    assert d.range.start.line + 1 == line_of(text, "Let qr4 be rope")
    assert d.representative_range.start.line + 1 == line_of(text, "Let qr0 be rope")
    data = text.encode()
    assert data[d.range.start.offset:d.range.end.offset] == b"Wk4"
    assert data[d.representative_range.start.offset:d.representative_range.end.offset] == b"Wq0"


def test_a_changed_window_is_reported_as_the_words_that_differ():
    specs = [dict(window=1024)] * 5
    specs = [dict(s) for s in specs]
    specs[3] = dict(window=512)
    (d,) = _divs(document(specs))
    assert (d.layer, d.representative) == (3, 0)
    assert d.why == "layer 3 says `window 512` where layer 0 says `window 1024`"
    assert d.kind == "attention, window 1024" and d.own_kind == "attention, window 512"


def test_a_weight_stored_differently_is_reported_with_how_each_is_stored():
    text = document(5) + "\n## Checkpoint\nWv{l} is \"blk.{l}.attn_v.weight\".\n"
    types = {f"blk.{l}.attn_v.weight": "Q8_0" for l in range(5)}
    types["blk.2.attn_v.weight"] = "F16"
    (d,) = _divs(text, Storage(types=types, source="t.gguf"))
    assert d.layer == 2
    assert d.why.startswith("`Wv2` is stored F16 but `Wv0` is stored Q8_0")


def test_a_layer_kept_in_another_quantisation_is_reported_with_both_types():
    text = document(5) + "\n## Checkpoint\nWv{l} is \"blk.{l}.attn_v.weight\".\n"
    types = {f"blk.{l}.attn_v.weight": "Q4_K" for l in range(5)}
    types["blk.3.attn_v.weight"] = "Q6_K"
    (d,) = _divs(text, Storage(types=types, source="t.gguf"))
    assert d.layer == 3
    assert d.why == "`Wv3` is stored Q6_K but `Wv0` is stored Q4_K: layer 3 reads it as stored, Q6_K"


def test_a_longer_layer_names_its_extra_statement_and_where_it_is():
    text = document(5).replace("Return xo3.", "Let extra3 be xo3.\nReturn xo3.")
    (d,) = _divs(text)
    statement = 1 + len([ln for ln in text.split("## Layer 3")[1].split("Let extra3")[0].split("\n") if ln.strip()]) - 1
    assert d.layer == 3 and d.range.start.line + 1 == line_of(text, "Let extra3")
    assert d.why == f"layer 3 has an extra statement `Let extra3 be xo3.` after statement {statement}"
    assert d.representative_statement is None  # no statement of layer 0 is its counterpart: no quick fix rewrites it


def test_a_layer_that_differs_by_design_is_not_reported():
    # Gemma 3's pattern: five sliding-window layers then a global one — two kinds, no divergence.
    specs = [dict(window=512, base=10000) if (l + 1) % 6 else dict(base=1000000, table=2) for l in range(12)]
    a = analyze(document(specs))
    assert [k.name for k in a.kinds] == ["attention, window 512", "attention"]
    assert a.divergences == ()


def test_a_dense_first_layer_among_expert_layers_is_not_reported():
    specs = [dict(mixer="latent")] + [dict(mixer="latent", ffn="experts")] * 5
    a = analyze(document(specs))
    assert [k.name for k in a.kinds] == ["latent attention", "latent attention, experts"]
    assert a.divergences == ()


def test_a_layer_marked_distinct_is_not_reported():
    text = document(6).replace("Let qr4 be rope of (xn4 times Wq4)", "Let qr4 be rope of (xn4 times Wk4)")
    text = text.replace("## Layer 4\n", "## Layer 4: distinct — reads its key projection on purpose\n")
    a = analyze(text)
    assert a.divergences == ()
    assert len(a.kinds) == 2


def test_every_divergence_is_a_warning_pointing_at_both_layers():
    text = document(6).replace("heads 4 sharing 2.\nLet h5", "heads 4 sharing 1.\nLet h5")
    a = analyze(text)
    (w,) = [d for d in a.diagnostics if d.code == "divergence"]
    assert w.severity.value == "warning"
    assert "layer 5" in w.message and "layer 0" in w.message
    assert w.related[0].range.start.line + 1 == line_of(text, "heads 4 sharing 2")


def test_a_checkpoint_the_document_does_not_describe_is_a_warning_not_silence():
    text = document(3) + "\n## Checkpoint\nWq{l} is \"model.layers.{l}.self_attn.q_proj.weight\".\n"
    storage = Storage(types={f"blk.{l}.attn_q.weight": "Q8_0" for l in range(3)}, source="model.gguf")
    a = analyze(text, storage)
    warnings = [d.message for d in a.diagnostics if d.code == "checkpoint"]
    assert '`Wq0` is bound to "model.layers.0.self_attn.q_proj.weight", which model.gguf does not have (and 2 more like it)' in warnings
    assert any(m.startswith("no `## Checkpoint` entry binds `Wk0`") for m in warnings)


# ---- the wording of the reasons, on a real model's layers (Llama 3.1 8B as the author writes it) ---------------------

LLAMA = example("llama-3.1-8b")


def _edited(layer: int, old: str, new: str, text: str = LLAMA) -> str:
    """``text`` with ``old`` replaced by ``new`` once, inside ``## Layer N`` only."""
    a = text.index(f"## Layer {layer}:")
    b = text.index("## ", a + 5)
    assert old in text[a:b]
    return text[:a] + text[a:b].replace(old, new, 1) + text[b:]


def _why(text: str) -> str:
    (d,) = _divs(text)
    return d.why


def test_a_changed_number_is_quoted_whole_with_the_words_that_say_what_it_is():
    text = _edited(5, "epsilon 1e-5.\nLet qp5", "epsilon 1e-6.\nLet qp5")
    (d,) = _divs(text)
    assert d.why == "layer 5 says `epsilon 1e-6` where layer 0 says `epsilon 1e-5`"
    data = text.encode()
    assert data[d.range.start.offset:d.range.end.offset] == b"epsilon 1e-6"
    assert data[d.representative_range.start.offset:d.representative_range.end.offset] == b"epsilon 1e-5"


def test_numbers_written_with_more_digits_are_quoted_as_written():
    text = _edited(5, "epsilon 1e-5.\nLet qp5", "epsilon 0.000001.\nLet qp5").replace("epsilon 1e-5", "epsilon 0.00001")
    assert _why(text) == "layer 5 says `epsilon 0.000001` where layer 0 says `epsilon 0.00001`"


def test_an_inserted_statement_is_named_by_its_text():
    text = _edited(9, "Let fo9   be f9 times Wd9.\n", "Let fo9   be f9 times Wd9.\nLet z9 be silu of h9.\n")
    assert _why(text) == "layer 9 has an extra statement `Let z9 be silu of h9.` after statement 28"


def test_a_missing_statement_is_named_in_the_layers_own_names():
    text = _edited(3, "Let o3    be a3 times Wo3.\n", "").replace("Let h3    be xo2 plus o3.", "Let h3    be xo2 plus a3.")
    assert _why(text) == "layer 3 lacks the statement `Let o3 be a3 times Wo3.` that layer 0 has after statement 23"


def test_a_changed_operation_is_named_by_both_operations():
    assert _why(_edited(7, "Let f7    be silu of", "Let f7    be gelu of")) == "layer 7 uses `gelu` where layer 0 uses `silu`"


def test_operands_in_another_order_are_named_by_both_lists():
    text = _edited(15, "Let h15   be xo14 plus o15.", "Let h15   be o15 plus xo14.")
    assert _why(text) == "layer 15's `plus` takes `o15, xo14` where layer 0's takes `x, o0`: the same operands in another order"


# ---- one mistake, one diagnostic ----------------------------------------------------------------------------------

import pytest  # noqa: E402

from streamed.analysis.incremental import IncrementalAnalyzer  # noqa: E402

TYPOS = {
    "an operation's word": ("Let h3 be xo2 plus a3 times Wo3.", "Let h3 be xo2 plus a3 timse Wo3."),
    "`be`": ("Let h3 be xo2 plus a3 times Wo3.", "Let h3 bee xo2 plus a3 times Wo3."),
    "`Let`": ("Let h3 be xo2 plus a3 times Wo3.", "Lte h3 be xo2 plus a3 times Wo3."),
    "an operation": ("Let xn3 be rmsnorm of xo2 with g3.", "Let xn3 be rmsnrom of xo2 with g3."),
    "a weight's role": ("Let Wq3 be a q8 weight of d by 64.", "Let Wq3 be a q8 wieght of d by 64."),
    "a state's role": ("Let Kc3 be a state of ctx by 32.", "Let Kc3 be a stat of ctx by 32."),
    "the position's role": ("Let pos be a position.\nLet g3", "Let pos be a positon.\nLet g3"),
    "the input's role": ("Let xo2 be an input of rows by d.\nLet pos", "Let xo2 be an inptu of rows by d.\nLet pos"),
    "`Return`": ("Return xo3.", "Retrun xo3."),
    "a full stop": ("Let h3 be xo2 plus a3 times Wo3.", "Let h3 be xo2 plus a3 times Wo3"),
}


@pytest.mark.parametrize("where", list(TYPOS))
def test_a_line_that_does_not_parse_is_one_diagnostic_with_no_unbound_name_or_divergence_derived_from_it(where):
    good, bad = TYPOS[where]
    text = document(6)
    assert text.count(good) == 1
    typo = text.replace(good, bad)
    a = analyze(typo)
    (only,) = a.diagnostics
    at = line_of(typo, bad.split("\n")[0])
    # (a missing full stop is found where the next statement begins)
    assert only.code == "syntax" and only.range.start.line + 1 in (at, at + 1), only.message
    assert a.divergences == ()
    # The editor's analysis says the same, and the fix leaves nothing behind.
    inc = IncrementalAnalyzer()
    assert [d.message for d in inc.analyze(typo).diagnostics] == [d.message for d in a.diagnostics]
    assert inc.analyze(text).diagnostics == ()


def test_a_real_divergence_before_a_line_that_does_not_parse_is_still_reported():
    text = document(6).replace("Let xn3 be rmsnorm of xo2 with g3.", "Let xn3 be rmsnorm of xo2 with g3, epsilon 1e-5.")
    text = text.replace("Let h3 be xo2 plus a3 times Wo3.", "Let h3 be xo2 plus a3 timse Wo3.")
    a = analyze(text)
    (d,) = a.divergences
    assert (d.layer, d.representative) == (3, 0) and "epsilon" in d.why
    assert sorted(x.code for x in a.diagnostics) == ["divergence", "syntax"]


def test_a_kind_told_apart_by_its_first_layer_is_named_in_parentheses_once():
    text = document(6).replace("Let xn2 be rmsnorm of xo1 with g2.", "Let xn2 be rmsnorm of xo1 with g2, epsilon 1e-5.")
    a = analyze(text)
    assert [k.name for k in a.kinds] == ["attention (layer 0)", "attention (layer 2)"]
    (diag,) = [d for d in a.diagnostics if d.code == "divergence"]
    assert diag.message.startswith("layer 2 is not one program with layer 0 (attention): ")
    assert "((" not in diag.message and "))" not in diag.message


# ---- which kind each kind was meant to be, among many kinds ---------------------------------------------------------


def _meant_pairwise(kinds, close):
    """The definition, kind against kind: of the kinds larger than K (more layers, or as many and earlier) whose name
    is K's up to ``(layer N)`` — or, for K of one or two layers, that have three or more, K's name with numbers
    erased, and are close to K — the first with the most layers."""
    strip = lambda name: re.sub(r" \(layer \d+\)$", "", name)  # noqa: E731
    erase = lambda name: re.sub(r"\d+", "#", strip(name))  # noqa: E731
    out = []
    for i, k in enumerate(kinds):
        best = None
        for j, t in enumerate(kinds):
            if t is k or not (len(t.layers) > len(k.layers) or (len(t.layers) == len(k.layers) and j < i)):
                continue
            if strip(t.name) == strip(k.name) or (len(k.layers) <= 2 and len(t.layers) >= 3
                                                  and erase(k.name) == erase(t.name) and close(k, t)):
                if best is None or len(t.layers) > len(best.layers):
                    best = t
        out.append(best)
    return out


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.lists(st.tuples(st.sampled_from(["attention", "attention, window 512", "attention, window 1024",
                                           "gated deltanet", "feed-forward"]), st.integers(1, 5)), min_size=1, max_size=14),
       st.sets(st.tuples(st.integers(0, 13), st.integers(0, 13))))
def test_each_kind_is_meant_to_be_the_first_larger_kind_of_its_name_however_many_kinds(spec, near):
    from streamed.analysis.kinds import meant, named_kinds

    groups, first = [], 0
    for _, size in spec:
        groups.append((f"digest{first}", tuple(range(first, first + size))))
        first += size
    kinds = named_kinds(groups, [name for name, _ in spec])
    index = {k.name: i for i, k in enumerate(kinds)}
    close = lambda k, t: (index[k.name], index[t.name]) in near  # noqa: E731
    assert meant(kinds, close) == _meant_pairwise(kinds, close)


def test_a_model_whose_every_layer_is_its_own_kind_has_each_layer_diverge_from_the_first():
    from streamed.spatial.synth import NAS_BLOCKS, nas_document

    text = document([dict(eps=f"{l + 1}e-6") for l in range(40)])
    a = analyze(text)
    assert len(a.kinds) == 40 and [(d.layer, d.representative) for d in a.divergences] == [(l, 0) for l in range(1, 40)]
    assert a.divergences[6].why == "layer 7 says `epsilon 8e-6` where layer 0 says `epsilon 1e-6`"
    # Nemotron-NAS's way: every layer its own attention block and FFN width.
    nas = analyze(nas_document(48, blocks=[(NAS_BLOCKS[l % 16][0], 32 * (4 + l)) for l in range(48)]))
    assert len(nas.kinds) == 48 and not nas.errors
    assert {k.name.split(" (")[0] for k in nas.kinds} == {"attention", "feed-forward"}


# ---- a layer that differs only in numbers: read off the numbers, the same answer as the general comparison ----------


def _both_ways(text: str, monkeypatch) -> tuple[list, list, list[bool]]:
    """The divergences of ``text`` as ``analyze`` gives them, as the general comparison alone (``difflib``, statement
    by statement, then token by token) gives them, and for each divergence whether the numbers-only reading answered
    it."""
    from streamed.analysis import kinds as K
    from streamed.lang.parser import parse
    from streamed.model.links import programs_of

    read_off = K._framed_difference
    fast = _divs(text)
    programs = programs_of(parse(text))
    taken = [read_off(programs, programs.layer(d.layer), programs.layer(d.representative), K.ALL_Q8,
                      K._Side(programs.layer(d.representative), {})) is not None for d in fast]
    monkeypatch.setattr(K, "_framed_difference", lambda *args: None)
    return fast, _divs(text), taken


def test_a_layer_differing_only_in_numbers_is_answered_as_the_general_comparison_answers(monkeypatch):
    cases = {
        "two numerals of one number": _edited(5, "epsilon 1e-5.\nLet qp5", "epsilon 2e-6.\nLet qp5"),
        "a number late in a statement": _edited(5, "heads 32 sharing 8.", "heads 32 sharing 4."),
        "numbers in two statements": _edited(5, "Rsin1, heads 32.", "Rsin1, heads 16.").replace(
            "with gm5, epsilon 1e-5.", "with gm5, epsilon 3e-5."),
        "the last statement's number": _edited(9, "with gm9, epsilon 1e-5.", "with gm9, epsilon 1e-4."),
    }
    for label, text in cases.items():
        fast, general, taken = _both_ways(text, monkeypatch)
        monkeypatch.undo()
        assert fast == general and len(fast) == 1, label
        assert taken == [True], label  # read off the numbers, no difflib
    fast, _, _ = _both_ways(cases["two numerals of one number"], monkeypatch)
    assert fast[0].why == "layer 5 says `epsilon 2e-6` where layer 0 says `epsilon 1e-5`"
    monkeypatch.undo()
    fast, _, _ = _both_ways(cases["numbers in two statements"], monkeypatch)
    assert fast[0].why == "layer 5 says `heads 16` where layer 0 says `heads 32`"  # the first of the two, in order


def test_a_number_or_a_sentence_the_other_layer_also_has_is_answered_as_the_general_comparison_answers(monkeypatch):
    # `heads 8 sharing 8`: the new 8 is a token layer 0's sentence has too; layer 0's first norm is also its second
    # norm's sentence, which layer 5 keeps: difflib could align either elsewhere.
    for text in (_edited(5, "heads 32 sharing 8.", "heads 8 sharing 8."),
                 _edited(5, "epsilon 1e-5.\nLet qp5", "epsilon 1e-6.\nLet qp5")):
        fast, general, taken = _both_ways(text, monkeypatch)
        monkeypatch.undo()
        assert fast == general and len(fast) == 1 and taken == [True]


def test_a_layer_whose_name_differs_too_takes_the_general_comparison(monkeypatch):
    text = _edited(5, "epsilon 1e-5.\nLet qp5", "epsilon 2e-6.\nLet qp5").replace("Let f5    be silu of", "Let f5    be gelu of")
    fast, general, taken = _both_ways(text, monkeypatch)
    assert fast == general and taken == [False]
    assert fast[0].why == "layer 5 says `epsilon 2e-6` where layer 0 says `epsilon 1e-5`"  # the first difference


def test_layers_each_of_their_own_numbers_are_answered_as_the_general_comparison_answers(monkeypatch):
    from streamed.spatial.synth import NAS_BLOCKS, nas_document

    for text in (document([dict(eps=f"{l + 1}e-6") for l in range(24)]),
                 nas_document(32, blocks=[(NAS_BLOCKS[l % 16][0], 32 * (4 + l)) for l in range(32)])):
        fast, general, taken = _both_ways(text, monkeypatch)
        monkeypatch.undo()
        assert fast == general and len(fast) >= 23 and any(taken)


@settings(max_examples=400, deadline=None, derandomize=True)
@given(st.lists(st.sampled_from("ABC"), min_size=1, max_size=12), st.data())
def test_sequences_whose_differences_are_foreign_to_each_other_part_where_difflib_says(a, data):
    """``_unique_differences`` against difflib itself: when no differing value is held by the other sequence, the
    first change difflib finds is a ``replace`` at the first differing position — and the check refuses the rest."""
    import difflib

    from streamed.analysis.kinds import _unique_differences

    differ = sorted(data.draw(st.sets(st.integers(0, len(a) - 1), min_size=1)))
    b = list(a)
    for k in differ:
        b[k] = data.draw(st.sampled_from("ABCXY"))
    differ = [k for k in differ if a[k] != b[k]]
    if not differ:
        return
    first = next(op for op in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes() if op[0] != "equal")
    if _unique_differences(a, b, differ):
        assert first[:2] == ("replace", differ[0]) and first[3] == differ[0]
    else:
        assert any(a[k] in b or b[k] in a for k in differ)
