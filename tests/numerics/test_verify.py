"""The comparison itself: what passes, what fails, and that the first failure is the first in execution order."""

import numpy as np

from streamed.numerics.verify import RTOL, compare_step, measure


def test_a_tensor_within_the_fp32_tolerance_of_its_largest_magnitude_passes():
    want = np.array([[4.0, -2.0, 1e-9]], dtype=np.float32)
    got = want + np.float32(3e-5)  # 3e-5 / 4 < 1e-5, even where the element itself is ~0
    m = measure(0, "layer 0", "h0", got, want)
    assert m.ok and m.max_rel < RTOL and abs(m.max_abs - 3e-5) < 1e-6


def test_a_tensor_beyond_the_tolerance_fails_with_its_errors():
    want = np.array([[4.0, -2.0]], dtype=np.float32)
    got = want.copy()
    got[0, 1] += 1e-3
    m = measure(3, "layer 2", "f2", got, want)
    assert not m.ok and m.step == 3 and abs(m.max_rel - 2.5e-4) < 1e-6


def test_integer_tensors_must_be_equal_and_shapes_must_agree():
    assert measure(0, "head", "next", np.array([3, 4]), np.array([3, 4])).ok
    assert not measure(0, "head", "next", np.array([3, 5]), np.array([3, 4])).ok
    assert not measure(0, "layer 0", "q0", np.zeros((1, 4)), np.zeros((1, 8))).ok


def test_non_finite_values_pass_only_where_both_paths_agree_on_them():
    w = np.array([np.inf, 1.0], dtype=np.float32)
    assert measure(0, "p", "t", w.copy(), w).ok
    assert not measure(0, "p", "t", np.array([np.nan, 1.0], dtype=np.float32), w).ok


def test_the_first_failure_is_the_first_tensor_in_program_then_binding_order():
    want = {"layer 0": {"a0": np.ones(2), "b0": np.ones(2)}, "layer 1": {"a1": np.ones(2)}}
    got = {"layer 0": {"a0": np.ones(2), "b0": np.full(2, 2.0)}, "layer 1": {"a1": np.zeros(2)}}
    ms = compare_step(0, want, got)
    first = next(m for m in ms if not m.ok)
    assert (first.program, first.tensor) == ("layer 0", "b0")
    assert [m.tensor for m in ms] == ["a0", "b0", "a1"]


def test_a_prefill_head_holding_the_last_row_is_compared_with_the_reference_last_row():
    want = {"head": {"logits": np.array([[1.0, 2.0], [5.0, 6.0]], dtype=np.float32)}}
    got = {"head": {"logits": np.array([[5.0, 6.0]], dtype=np.float32)}}
    (m,) = compare_step(0, want, got)
    assert m.ok


def test_a_tensor_held_only_as_chip_parts_is_joined_along_its_split_axis_and_compared():
    whole = np.arange(12, dtype=np.float32).reshape(2, 6)
    got = {"layer 0": {"Kc0_c0": whole[:, :3], "Kc0_c1": whole[:, 3:] + 1}}
    (m,) = compare_step(0, {"layer 0": {"Kc0": whole}}, got)
    assert m.tensor == "Kc0" and not m.ok and m.max_abs == 1.0
