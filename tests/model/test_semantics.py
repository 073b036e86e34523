"""The semantic checks: every rule by name, each with the message a user reads."""

from __future__ import annotations

import re

from builders import document, line_of

from streamed.analysis.whole import analyze


def _messages(text: str) -> list[tuple[int, str]]:
    return [(d.range.start.line + 1, d.message) for d in analyze(text).errors]


def _edit(text: str, old: str, new: str, count: int = 1) -> str:
    assert old in text
    return text.replace(old, new, count)


def test_a_correct_document_has_no_diagnostic():
    assert analyze(document(3)).diagnostics == ()


def test_a_name_used_before_it_is_bound_is_reported():
    text = _edit(document(1), "Let qr0 be rope of (xn0 times Wq0)", "Let qr0 be rope of (xn0 times Wq0 plus a0)")
    msgs = _messages(text)
    assert msgs and msgs[0][1] == "`a0` is used before it is bound"


def test_a_name_never_bound_is_reported_with_the_nearest_name():
    text = _edit(document(1), "Let h0 be x plus a0 times Wo0.", "Let h0 be x plus a0 times Woo0.")
    (line, msg), *_ = _messages(text)
    assert msg == "`Woo0` is never bound in layer 0; did you mean `Wo0`?"
    assert line == line_of(text, "Let h0 be x plus")


def test_a_name_bound_twice_is_reported_at_its_second_binding():
    text = _edit(document(1), "Let Wk0 be a q8 weight of d by 32.", "Let Wk0 be a q8 weight of d by 32.\nLet Wk0 be a weight of d by 32.")
    (line, msg), = _messages(text)
    assert line == line_of(text, "Let Wk0", 1)
    assert re.fullmatch(r"`Wk0` is already bound at line \d+; every name is bound once", msg)


def test_set_on_something_that_is_not_a_declared_state_is_refused():
    text = _edit(document(1), "Set row pos of Vc0 to", "Set row pos of h0 to")
    msgs = [m for _, m in _messages(text)]
    assert "`Set` changes a declared state; `h0` is not one" in msgs


def test_shapes_that_do_not_agree_say_both_shapes():
    text = _edit(document(1), "Let Wo0 be a q8 weight of 64 by d.", "Let Wo0 be a q8 weight of 128 by d.")
    msgs = [m for _, m in _messages(text)]
    assert "`a0` is rows×64 but `Wo0` expects 128 rows" in msgs


def test_a_layer_whose_input_is_not_the_previous_layers_return_is_reported():
    text = _edit(document(3), "Let xo1 be an input of rows by d.", "Let xo7 be an input of rows by d.")
    text = text.replace("rmsnorm of xo1 with", "rmsnorm of xo7 with").replace("Let h2 be xo1 plus", "Let h2 be xo7 plus")
    msgs = [m for _, m in _messages(text)]
    assert "layer 2's input is `xo7` but layer 1 returns `xo1`" in msgs


def test_a_missing_layer_number_is_reported():
    text = _edit(document(3), "## Layer 1\n", "## Layer 5\n")
    msgs = [m for _, m in _messages(text)]
    assert "layers 1–4 are missing: layer 5 follows layer 0" in msgs


def test_an_out_of_order_layer_number_is_reported():
    text = _edit(document(3), "## Layer 2\n", "## Layer 1\n")
    msgs = [m for _, m in _messages(text)]
    assert any(m.startswith("layer 1 is written twice") for m in msgs)


def test_an_absurd_layer_number_is_refused_without_allocating_anything():
    text = _edit(document(1), "## Layer 0\n", "## Layer 99999999\n")
    msgs = [m for _, m in _messages(text)]
    assert any("layer 99999999" in m for m in msgs)


def test_an_unknown_constant_is_reported_with_the_nearest_constant():
    text = _edit(document(1), "Let Wq0 be a q8 weight of d by 64.", "Let Wq0 be a q8 weight of dd by 64.")
    msgs = [m for _, m in _messages(text)]
    assert "unknown constant `dd`; did you mean `d`?" in msgs


def test_a_program_that_never_returns_is_reported_at_its_heading():
    text = _edit(document(1), "Return xo0.\n", "")
    msgs = _messages(text)
    assert (line_of(text, "## Layer 0"), "layer 0 never returns: end it with `Return NAME.`") in msgs


def test_attention_heads_that_do_not_divide_are_reported():
    text = _edit(document(1), "heads 4 sharing 2", "heads 4 sharing 3")
    msgs = [m for _, m in _messages(text)]
    assert "4 query heads cannot share 3 key/value heads evenly" in msgs


def test_computed_shapes_keep_rows_and_ctx_symbolic():
    a = analyze(document(1))
    layer = a.programs.layers[0]
    assert layer.shapes["qr0"] == ("rows", 64)
    assert layer.shapes["Kc0"] == ("ctx", 32)
    assert layer.carried == ("Kc0", "Vc0")
    assert a.programs.head.shapes["next"] == ("rows",)


def test_a_misspelling_carries_its_nearest_spelling_for_a_quick_fix():
    text = document(1)
    text = _edit(text, "Let hn0 be rmsnorm of h0 with gm0.", "Let hn0 be rmsnrm of h0 with gm0.")
    text = _edit(text, "heads 4 sharing 2.", "heads 4 sharing 2, windw 8.")
    text = _edit(text, "Let Wq0 be a q8 weight of d by 64.", "Let Wq0 be a q8 weight of dd by 64.")
    text = _edit(text, "Let h0 be x plus a0 times Wo0.", "Let h0 be x plus a0 times Woo0.")
    fixes = {d.data["replacement"] for d in analyze(text).diagnostics if d.data and "replacement" in d.data}
    assert {"rmsnorm", "window", "d", "Wo0"} <= fixes


PLAIN_COS = "Let Rcos1 be a table of ctx by 8, cosines of base 10000."


def test_a_table_s_fill_carries_its_rotation_scaling_to_the_host():
    from streamed.analysis.whole import analyze as whole

    text = _edit(document(1), PLAIN_COS, "Let Rcos1 be a table of ctx by 8, cosines of base 10000, yarn scaling by 8 "
                                         "from 64 with fast 32 and slow 1, unrounded ramp, attention factor 1.2.")
    a = whole(text)
    assert not a.errors
    fill = a.programs.layers[0].decls["Rcos1"].fill
    assert fill == ("cosines", 10000.0, (("scaling", "yarn"), ("factor", 8.0), ("context", 64.0), ("fast", 32.0),
                                         ("slow", 1.0), ("unrounded", True), ("attention", 1.2)))


def test_a_table_with_two_scalings_is_refused_once():
    text = _edit(document(1), PLAIN_COS, "Let Rcos1 be a table of ctx by 8, cosines of base 10000, linear scaling by 2, "
                                         "yarn scaling by 8 from 64 with fast 32 and slow 1.")
    assert [m for _, m in _messages(text)] == [
        "a table has one rotation scaling, not both `linear scaling by` and `yarn scaling by`"]


def test_an_unrounded_ramp_without_yarn_is_refused():
    text = _edit(document(1), PLAIN_COS, "Let Rcos1 be a table of ctx by 8, cosines of base 10000, linear scaling by 2, "
                                         "unrounded ramp.")
    assert [m for _, m in _messages(text)] == ["only a `yarn scaling` has a ramp to leave unrounded"]


def test_a_word_that_is_no_fill_option_names_the_options():
    text = _edit(document(1), PLAIN_COS, "Let Rcos1 be a table of ctx by 8, cosines of base 10000, cubic scaling by 2.")
    (_, msg), *_ = _messages(text)
    assert msg.startswith("`cubic` is not an option of `cosines` (its options: `linear scaling by`, `llama3 scaling by`")


def test_a_longrope_fill_carries_both_lists_of_factors_and_needs_one_per_column():
    from streamed.analysis.whole import analyze as whole

    longrope = ("Let Rcos1 be a table of ctx by 8, cosines of base 10000, longrope scaling from 16 with short factors "
                "{short} and long factors 2 2 3 3 5 5 8 8, attention factor 1.2.")
    text = _edit(document(1), PLAIN_COS, longrope.format(short="1 1 1.05 1.1 1.2 1.4 1.7 2"))
    a = whole(text)
    assert not a.errors
    assert a.programs.layers[0].decls["Rcos1"].fill == (
        "cosines", 10000.0, (("scaling", "longrope"), ("context", 16.0), ("short", (1.0, 1.0, 1.05, 1.1, 1.2, 1.4, 1.7, 2.0)),
                             ("long", (2.0, 2.0, 3.0, 3.0, 5.0, 5.0, 8.0, 8.0)), ("attention", 1.2)))
    short = _messages(_edit(document(1), PLAIN_COS, longrope.format(short="1 1 1.05 1.1 1.2 1.4 1.7")))
    assert [m for _, m in short] == ["longrope scaling has 7 short factors but 8 long ones"]
    both = longrope.format(short="1 1 1.05 1.1 1.2 1.4").replace("long factors 2 2 3 3 5 5 8 8", "long factors 2 2 3 3 5 5")
    assert [m for _, m in _messages(_edit(document(1), PLAIN_COS, both))] == [
        "longrope scaling gives 6 factors for a table 8 wide (one per column)"]


def test_a_part_of_a_product_must_lie_within_its_columns_and_groups():
    text = _edit(document(1), "Let qr0 be rope of (xn0 times Wq0)", "Let qr0 be rope of (columns 0 to 64 of (xn0 times Wq0))")
    assert not analyze(text).errors
    for part, why in (("columns 0 to 65", "columns 0 to 65 are not a part of 64 columns (0 ≤ A < B ≤ 64)"),
                      ("columns 0 to 4 of (xn0 times Wq0), of every 24", "not whole groups of 24 columns")):
        bad = text.replace("columns 0 to 64 of (xn0 times Wq0)", part if "every" in part else f"{part} of (xn0 times Wq0)")
        msgs = [m for _, m in _messages(bad)]
        assert any(why in m for m in msgs), msgs


def test_a_soft_cap_is_positive():
    text = _edit(document(1), "heads 4 sharing 2.", "heads 4 sharing 2, soft cap 0.")
    assert [m for _, m in _messages(text)] == ["a soft cap is positive, not 0"]
    assert not analyze(_edit(document(1), "heads 4 sharing 2.", "heads 4 sharing 2, soft cap 50.")).errors
