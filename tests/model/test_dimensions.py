"""A dimension is a whole number from 1 to ``MAX_DIMENSION``, whether written in a shape or named by a constant of
``## Model``: a zero or negative width once passed `check`, lowered to a manifest of negative bytes and an absurd
estimate, and made `verify` die in numpy."""

import re

import pytest

from repo import TINY
from streamed.analysis.whole import analyze
from streamed.cli import main
from streamed.lang.limits import MAX_DIMENSION


def with_d(value: str) -> str:
    return re.sub(r"Let d be \d+\.", f"Let d be {value}.", TINY, count=1)


@pytest.mark.parametrize("value", ["-64", "0", "99999999999999999999"])
def test_a_constant_that_is_no_width_is_an_error_where_it_is_used_as_one(value):
    a = analyze(with_d(value))
    errors = [d for d in a.errors if d.message.startswith("`d` is ")]
    assert errors, [d.message for d in a.errors]
    assert all(f"it is used as a dimension: a whole number from 1 to {MAX_DIMENSION:,}" in d.message for d in errors)
    # One per program that reads `d` as a width, at its first use there: not one per use.
    assert len(errors) == len({(d.range.start.line) for d in errors}) <= len(a.programs.all())


def test_a_constant_that_is_a_width_only_when_used_as_a_scalar_is_no_error():
    text = with_d("64").replace("## Checkpoint", "Let negative be -1.\n\n## Checkpoint", 1)
    assert not analyze(text).errors


def test_a_zero_written_in_a_shape_is_an_error():
    a = analyze(TINY.replace("an input of rows by d", "an input of rows by 0", 1))
    assert any(d.message == f"a dimension is a whole number from 1 to {MAX_DIMENSION:,}, not 0" for d in a.errors)


@pytest.mark.parametrize("value", ["-64", "0"])
def test_check_lower_and_verify_refuse_a_document_with_a_negative_or_zero_width(tmp_path, capsys, value):
    doc = tmp_path / "m.lgm"
    doc.write_text(with_d(value))
    assert main(["check", str(doc)]) == 1
    assert main(["lower", str(doc), "--ctx", "64", "-o", str(tmp_path / "b")]) == 1
    assert main(["verify", str(doc), "--steps", "1"]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and "nothing was lowered" in err and "nothing was verified" in err
    assert not (tmp_path / "b").exists()


def test_verify_counts_the_weights_of_enormous_widths_exactly(tmp_path, capsys):
    """Three widths of 2²⁴ make one tensor of 2⁷² values: counted in numpy's int64 the total wrapped round to a
    figure a million times too small."""
    from repo import example

    text = example("small-qwen35")
    for old, new in (("Let d be 128.", "Let d be 16777216."), ("Let eff be 64.", "Let eff be 16777216."),
                     ("8 by d by eff", "16777216 by d by eff"), ("8 by eff by d", "16777216 by eff by d"),
                     ("weight of d by 8.", "weight of d by 16777216.")):
        text = text.replace(old, new)
    doc = tmp_path / "m.lgm"
    doc.write_text(text)
    assert main(["verify", str(doc), "--steps", "1"]) == 2
    err = capsys.readouterr().err
    count = int(re.search(r"\(([\d,]+) values\)", err).group(1).replace(",", ""))
    assert count >= 16777216**3
