"""Layer kinds, renaming and rebind, exactly as LANGUAGE §7 and the seed define them."""

from __future__ import annotations

import hypothesis.strategies as st
from builders import document, layer
from hypothesis import given, settings

from streamed.analysis.whole import analyze
from streamed.analysis.kinds import binders, rebind, rebind_via, renaming, shape_digest, stacked_layer_input, tokens
from streamed.model.checkpoint import Storage


def _kinds(text: str, storage=None):
    a = analyze(text) if storage is None else analyze(text, storage)
    return [(k.name, list(k.layers)) for k in a.kinds]


def _layer_text(text: str, l: int) -> list[str]:
    a = analyze(text)
    return [t.text for t in a.programs.layer(l).tokens]


def test_two_layers_differing_only_in_names_are_one_kind():
    assert _kinds(document(4)) == [("attention", [0, 1, 2, 3])]


def test_binders_are_the_words_after_let():
    assert binders(tokens("Let a be b plus c. Let d be a.")) == {"a", "d"}


def test_a_different_number_splits_them():
    text = document(4).replace("Let Wq2 be a q8 weight of d by 64.", "Let Wq2 be a q8 weight of d by 65.")
    assert [layers for _, layers in _kinds(text)] == [[0, 1, 3], [2]]


def test_a_different_operation_splits_them():
    text = document(3).replace("Let f1 be silu of", "Let f1 be gelu of")
    assert [layers for _, layers in _kinds(text)] == [[0, 2], [1]]


def test_a_weight_stored_differently_splits_them():
    text = document(3) + "\n## Checkpoint\nWq{l} is \"blk.{l}.attn_q.weight\".\n"
    types = {f"blk.{l}.attn_q.weight": "Q8_0" for l in range(3)}
    types["blk.1.attn_q.weight"] = "F16"
    storage = Storage(types=types, source="test")
    assert [layers for _, layers in _kinds(text, storage)] == [[0, 2], [1]]


def test_a_q4_k_m_mix_splits_the_layers_whose_weight_is_kept_q6_k_from_those_kept_q4_k():
    text = document(4) + "\n## Checkpoint\nWv{l} is \"blk.{l}.attn_v.weight\".\n"
    types = {f"blk.{l}.attn_v.weight": "Q4_K" for l in range(4)}
    types["blk.0.attn_v.weight"] = types["blk.3.attn_v.weight"] = "Q6_K"  # llama.cpp's Q4_K_M keeps some Q6_K
    assert [layers for _, layers in _kinds(text, Storage(types=types, source="test"))] == [[0, 3], [1, 2]]


def test_a_weight_kept_bf16_is_its_own_kind_beside_the_same_weight_read_as_f16():
    text = document(3) + "\n## Checkpoint\nWq{l} is \"blk.{l}.attn_q.weight\".\n"
    types = {f"blk.{l}.attn_q.weight": "F16" for l in range(3)}
    types["blk.2.attn_q.weight"] = "BF16"
    assert [layers for _, layers in _kinds(text, Storage(types=types, source="test"))] == [[0, 1], [2]]


def test_a_weight_declared_q8_but_read_dense_everywhere_keeps_one_kind():
    text = document(3) + "\n## Checkpoint\nWq{l} is \"blk.{l}.attn_q.weight\".\n"
    storage = Storage(types={f"blk.{l}.attn_q.weight": "F16" for l in range(3)}, source="test")
    assert [layers for _, layers in _kinds(text, storage)] == [[0, 1, 2]]


def test_an_inconsistent_renaming_splits_them():
    # Layer 1 reads its key projection where its siblings read the query projection.
    text = document(3).replace("Let qr1 be rope of (xn1 times Wq1)", "Let qr1 be rope of (xn1 times Wk1)")
    assert [layers for _, layers in _kinds(text)] == [[0, 2], [1]]
    assert renaming(_layer_text(text, 0), _layer_text(text, 1)) is None


def test_kinds_are_in_order_of_their_first_layer():
    specs = [dict(window=512), dict(), dict(window=512), dict(), dict(window=512)]
    assert _kinds(document(specs)) == [("attention, window 512", [0, 2, 4]), ("attention", [1, 3])]


def test_kinds_are_named_after_what_they_do():
    cases = {
        "attention": dict(),
        "attention, window 512": dict(window=512),
        "attention, chunks of 8192": dict(chunks=8192),
        "gated deltanet": dict(mixer="deltanet"),
        "latent attention": dict(mixer="latent"),
        "latent attention, experts": dict(mixer="latent", ffn="experts"),
        "gated deltanet, experts": dict(mixer="deltanet", ffn="experts"),
    }
    for name, spec in cases.items():
        assert _kinds(document(2, **spec)) == [(name, [0, 1])], name


def test_kinds_a_name_does_not_tell_apart_are_told_apart_by_their_first_layer():
    text = document(4).replace("Let Wd3 be a q8 weight of ffn by d.", "Let Wd3 be a weight of ffn by d.")
    assert _kinds(text) == [("attention (layer 0)", [0, 1, 2]), ("attention (layer 3)", [3])]


def test_renaming_maps_binders_one_to_one_and_round_trips():
    text = document(3)
    a, b = _layer_text(text, 0), _layer_text(text, 2)
    forward = renaming(a, b)
    back = renaming(b, a)
    assert forward["Wq0"] == "Wq2" and forward["x"] == "xo1" and forward["Rcos1"] == "Rcos1"
    assert len(set(forward.values())) == len(forward)
    assert {v: k for k, v in forward.items()} == back
    assert [forward.get(t, t) for t in a] == b


def test_a_shared_digest_is_exactly_a_renaming():
    text = document([dict(), dict(), dict(window=4)])
    progs = [_layer_text(text, l) for l in range(3)]
    for x in progs:
        for y in progs:
            assert (shape_digest(x) == shape_digest(y)) == (renaming(x, y) is not None)


@settings(max_examples=60, deadline=None)
@given(st.permutations([f"n{i}" for i in range(6)]))
def test_any_consistent_renaming_of_binders_is_found_and_inverts(perm):
    names = [f"n{i}" for i in range(6)]
    program = " ".join(f"Let {n} be {names[i - 1] if i else 'x'} plus {n} times W." for i, n in enumerate(names))
    mapping = dict(zip(names, perm))
    renamed = " ".join(mapping.get(t, t) for t in tokens(program))
    forward = renaming(program, renamed)
    assert forward is not None and all(forward[n] == mapping[n] for n in names)
    assert renaming(renamed, program) == {v: k for k, v in forward.items()}
    assert shape_digest(program) == shape_digest(renamed)


def test_storage_marks_the_digest_but_not_the_renaming():
    text = "Let W0 be a q8 weight of 4 by 4. Let y0 be x times W0."
    assert shape_digest(text, {"W0"}) != shape_digest(text, set())
    assert renaming(text, text) is not None


def test_rebind_names_the_input_by_position():
    assert rebind("x", 0, 5) == "xo4"
    assert rebind("xo2", 3, 7) == "xo6"


def test_rebind_keeps_host_tables_shared():
    assert rebind("Rcos1", 1, 9) == "Rcos1"
    assert rebind("Ones128", 3, 4) == "Ones128"


def test_rebind_moves_the_index_before_the_first_underscore():
    assert rebind("Wq3", 3, 17) == "Wq17"
    assert rebind("xn0__xsq", 0, 5) == "xn5__xsq"
    assert rebind("x2n3", 3, 4) == "x2n4"
    assert rebind_via("Kc3_s1", 3, 7, stacked_layer_input) == "Kc7_s1"
    assert rebind_via("X", 0, 2, stacked_layer_input) == "bxo1"


def test_rebind_leaves_names_that_carry_no_layer_index():
    assert rebind("gf", 2, 3) == "gf"
    assert rebind("W13", 3, 4) == "W13"  # a stem ending in a digit carries no index


def test_the_kinds_of_a_128_layer_model_are_computed_in_one_pass():
    specs = [dict(mixer="deltanet", ffn="experts") if l % 4 != 3 else dict(ffn="experts") for l in range(128)]
    kinds = _kinds(document(specs))
    assert kinds == [("gated deltanet, experts", [l for l in range(128) if l % 4 != 3]),
                     ("attention, experts", list(range(3, 128, 4)))]


def test_a_single_layer_builder_is_one_program_with_any_other_index():
    assert renaming(tokens(layer(3).split("\n", 2)[2]), tokens(layer(9).split("\n", 2)[2])) is not None
