"""The comparison itself: what passes, what fails, and that the first failure is the first in execution order; the
tolerance of a tensor-parallel step and the tensors it applies to."""

import numpy as np

from streamed.numerics.verify import (
    UNIT_ROUNDOFF, chip_part, compare_step, covering, measure, reach, reassociated, tp_rtol,
)
from streamed.spatial.deployment import Deployment
from streamed.spatial.ir import Op, SpatialProgram, Tensor


def test_outside_tensor_parallel_one_ulp_is_a_difference():
    want = np.array([[4.0, -2.0, 1e-9]], dtype=np.float32)
    got = want.copy()
    got[0, 2] = np.nextafter(got[0, 2], np.float32(1))
    m = measure(0, "layer 0", "h0", got, want)
    assert not m.ok and m.bound == 0 and 0 < m.max_abs < 1e-15
    assert measure(0, "layer 0", "h0", want.copy(), want).ok


def test_a_reassociated_tensor_passes_within_its_bound_relative_to_its_largest_magnitude_and_fails_beyond():
    want = np.array([[4.0, -2.0, 1e-9]], dtype=np.float32)
    rtol = tp_rtol(2)
    assert rtol == 16 * 3 * UNIT_ROUNDOFF
    near = want + np.float32(0.9 * rtol * 4.0)  # even where the element itself is ~0: the terms were of size 4
    m = measure(0, "layer 0", "h0", near, want, rtol)
    assert m.ok and abs(m.bound - rtol * 4.0) < 1e-12
    far = want.copy()
    far[0, 1] += np.float32(2 * rtol * 4.0)
    assert not measure(0, "layer 0", "h0", far, want, rtol).ok


def test_a_tensor_beyond_the_tolerance_fails_with_its_errors():
    want = np.array([[4.0, -2.0]], dtype=np.float32)
    got = want.copy()
    got[0, 1] += 1e-3
    m = measure(3, "layer 2", "f2", got, want, tp_rtol(4))
    assert not m.ok and m.step == 3 and abs(m.max_rel - 2.5e-4) < 1e-6
    assert "beyond its bound" in m.describe()


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


def test_a_chip_part_cut_from_the_whole_is_what_assembling_the_parts_joins():
    whole = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    parts = [chip_part(whole, (2, 3, 2), c) for c in range(2)]
    assert np.array_equal(np.concatenate(parts, axis=2), whole)
    assert np.array_equal(chip_part(whole, (1, 3, 4), 1), whole[1:])


def test_only_what_an_all_reduce_flows_into_may_differ_in_a_tensor_parallel_program():
    t = lambda name, role, chip=None: Tensor(name, (1, 2), "bf16", role, "sram", 4, chip=chip)  # noqa: E731
    tensors = (t("x", "input"), t("a_c0", "intermediate", 0), t("a_c1", "intermediate", 1), t("s", "intermediate"),
               t("n", "intermediate"), t("y", "output"))
    ops = (Op("copy", ("x",), ("n",), phase=0), Op("copy", ("x",), ("a_c0",), chip=0, phase=0),
           Op("copy", ("x",), ("a_c1",), chip=1, phase=0), Op("allreduce", ("a_c0", "a_c1"), ("s",), phase=1),
           Op("add", ("s", "n"), ("y",), phase=2))
    assert reassociated(SpatialProgram("layer 0", 1, 4, tensors, ops, tp=2)) == {"s", "y"}


def test_default_steps_decode_past_every_window_and_prefill_three_chunks():
    from streamed.analysis.whole import analyze

    from repo import EXAMPLES

    gemma = analyze((EXAMPLES / "small-gemma3.lgm").read_text()).programs
    assert reach(gemma) == 512
    steps, ctx = covering(gemma, Deployment("decode", 32))
    assert steps > 512 and ctx >= steps
    steps, ctx = covering(gemma, Deployment("prefill", 32, chunk=4))
    assert 3 * 4 + (steps - 3) > 512 and ctx >= 3 * 4 + steps - 3
    tiny = analyze((EXAMPLES / "tiny-llama.lgm").read_text()).programs
    assert reach(tiny) == 0 and covering(tiny, Deployment("decode", 32)) == (8, 8)
