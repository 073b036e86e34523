"""A user's target file is checked where it is read: every size positive, finite and within its stated limit, so a
bad figure is one message naming the key — never a division by zero, an overflow or a NaN in a manifest later."""

import math
from importlib import resources

import pytest

from streamed.cli import main
from streamed.lang.limits import MAX_TARGET_BYTES, MAX_UNITS
from streamed.spatial.target import TargetError, parse_target

from repo import EXAMPLES

#: The shipped SN50 target, as a user copies it to edit their own.
SN50 = resources.files("streamed.spatial").joinpath("targets", "sn50.toml").read_text("utf-8")


def edited(key: str, value: str) -> str:
    """The SN50 target with ``key`` set to ``value``."""
    lines = [l for l in SN50.splitlines() if not l.startswith(f"{key} ")]
    return "\n".join(lines + [f"{key} = {value}"]) + "\n"


@pytest.mark.parametrize("key,value,message", [
    ("hbm_tb_s", "nan", "`hbm_tb_s` must be a finite number, not nan"),
    ("hbm_tb_s", "inf", "`hbm_tb_s` must be a finite number, not inf"),
    ("peak_bf16_tflops", "-inf", "`peak_bf16_tflops` must be a finite number, not -inf"),
    ("hbm_gb", "1e300", f"`hbm_gb` is 1e+300, past the limit of {MAX_TARGET_BYTES // 10**9:,}"),
    ("sram_tb_s", "1e30", "`sram_tb_s` is 1e+30, past the limit of 1,000,000"),
    ("pcus", "10000000000", f"`pcus` is 10,000,000,000, past the limit of {MAX_UNITS:,}"),
    ("sram_mb", "0.000001", "`sram_mb` 1e-06 over 2,080 PMUs leaves each less than a byte"),
    ("ddr_gb", "1e-10", "`ddr_gb` 1e-10 is less than one byte"),
    ("link_gb_s", "0", "`link_gb_s` is 0; it must be positive"),
    ("pmus", "1.5", "`pmus` must be a whole number, not 1.5"),
])
def test_a_target_figure_that_is_not_a_positive_finite_size_within_its_limit_names_the_key(key, value, message):
    with pytest.raises(TargetError) as e:
        parse_target(edited(key, value), "mine.toml")
    assert str(e.value).startswith(f"mine.toml: {message}")


def test_a_target_nested_past_what_toml_reads_is_one_message():
    deep = 'name = "x"\na = ' + "[" * 50_000 + "1" + "]" * 50_000 + "\n"
    with pytest.raises(TargetError, match="mine.toml: not a target: nested too deep"):
        parse_target(deep, "mine.toml")


@pytest.mark.parametrize("key,value", [("sram_mb", "0.000001"), ("hbm_gb", "1e300"), ("hbm_tb_s", "nan")])
@pytest.mark.parametrize("command", ["check", "lower"])
def test_check_and_lower_refuse_such_a_target_with_one_line_and_exit_2(tmp_path, capsys, command, key, value):
    """The reproductions: a tiny SRAM was a ZeroDivisionError in the lowering, 1e300 GB an OverflowError, and a NaN
    bandwidth was written into manifest.json as a bare NaN."""
    target = tmp_path / "mine.toml"
    target.write_text(edited(key, value))
    out = ["-o", str(tmp_path / "b")] if command == "lower" else []
    assert main([command, str(EXAMPLES / "tiny-llama.lgm"), "--target", str(target), *out]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"streamed: {target}: `{key}`") and err.count("\n") == 1 and "Traceback" not in err
    assert not (tmp_path / "b").exists()


def test_the_shipped_targets_stay_within_the_limits():
    from streamed.spatial.target import load_target

    for name in ("sn50", "sn40l"):
        t = load_target(name)
        assert all(math.isfinite(v) and v > 0 for v in (t.sram_bandwidth, t.hbm_bandwidth, t.peak_bf16, t.peak_fp8))
        assert t.pmu_bytes >= 1
