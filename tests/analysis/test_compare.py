"""A diverging layer beside its representative, its names renamed into the representative's: the lines that differ
are the lines where the two programs differ, and no others."""

from __future__ import annotations

import re

from builders import document

from streamed.analysis.repair import compare_with_representative
from streamed.analysis.whole import analyze


def _compare(text: str, layer: int, rep: int = 0):
    programs = analyze(text).programs
    return compare_with_representative(programs.layer(layer), programs.layer(rep))


def _section(text: str, layer: int) -> str:
    return text.split(f"## Layer {layer}\n", 1)[1].split("\n\n", 1)[0]


def _replaced(lines: list[str], old: str, new: str) -> list[str]:
    assert sum(old in l for l in lines) == 1
    return [l.replace(old, new) for l in lines]


def test_a_layer_of_the_kind_reads_as_its_representative_word_for_word():
    text = document(4)
    c = _compare(text, 3)
    assert (c.layer, c.representative) == (3, 0)
    assert c.layer_text == c.representative_text
    assert c.representative_text.splitlines() == _section(text, 0).splitlines()


def test_a_changed_epsilon_is_the_one_line_that_differs():
    text = document(5).replace("Let xn3 be rmsnorm of xo2 with g3.", "Let xn3 be rmsnorm of xo2 with g3, epsilon 0.001.")
    c = _compare(text, 3)
    rep = c.representative_text.splitlines()
    assert c.layer_text.splitlines() == _replaced(rep, "with g0.", "with g0, epsilon 0.001.")


def test_a_swapped_weight_shows_the_representatives_names_on_both_sides():
    text = document(5).replace("Let qr4 be rope of (xn4 times Wq4)", "Let qr4 be rope of (xn4 times Wk4)")
    c = _compare(text, 4)
    rep = c.representative_text.splitlines()
    assert c.layer_text.splitlines() == _replaced(rep, "(xn0 times Wq0) at pos", "(xn0 times Wk0) at pos")


def test_names_without_the_layer_suffix_are_renamed_past_an_inserted_statement():
    """The layer binds names of its own spelling (no trailing layer index for ``rebind`` to move) and has one more
    statement in the middle: every name is still read as the representative's, before and after the insertion."""
    text = document(5)
    own = _section(text, 2)
    spelled = re.sub(r"\b([A-Za-z]+)2\b", r"\1_own", own)
    extra = "Let hs_own be h_own scaled by 0.5.\n"
    spelled = spelled.replace("Let gm_own be", extra + "Let gm_own be")
    c = _compare(text.replace(own, spelled), 2)
    rep = c.representative_text.splitlines()
    at = next(i for i, l in enumerate(rep) if l.startswith("Let gm0 be"))
    assert c.layer_text.splitlines() == rep[:at] + ["Let hs_own be h0 scaled by 0.5."] + rep[at:]


def test_comments_blank_lines_and_the_padding_that_aligns_be_are_not_differences():
    text = document(4)
    own = _section(text, 1)
    aligned = "-- written by hand\n" + re.sub(r"^Let (\w+) be", lambda m: f"Let {m.group(1):<6} be", own, flags=re.M)
    aligned = aligned.replace("Let xn1    be", "\nLet xn1    be") + "  -- the last statement"
    c = _compare(text.replace(own, aligned), 1)
    assert "  " not in c.layer_text and c.layer_text == c.representative_text


def test_a_statement_written_over_two_lines_stays_two_lines_and_touching_words_stay_touching():
    text = document(4).replace("Let f2 be silu of (hn2 times Wg2) multiplied", "Let f2 be silu of (hn2 times Wg2)\n  multiplied")
    c = _compare(text, 2)
    rep = c.representative_text.splitlines()
    i = next(i for i, l in enumerate(rep) if l.startswith("Let f0 be"))
    head, tail = rep[i].split(" multiplied")
    assert c.layer_text.splitlines() == rep[:i] + [head, "multiplied" + tail] + rep[i + 1:]
    assert "(hn0 times Wg0)" in head
