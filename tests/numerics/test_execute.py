"""The executor's own ops — the ones that move data rather than compute a language operation — each against the
definition ir.py gives it, and weight reads as the tensor declares them."""

import numpy as np
import pytest

from streamed.numerics.execute import ExecuteError, run_op, run_program, weight_value
from streamed.numerics.q8 import quantize_weight
from streamed.spatial.ir import Op, SpatialProgram, Tensor
from streamed.numerics.weights import Weights

R = np.random.default_rng(0)


def op(kind, n_in=1, **attrs):
    return Op(kind, tuple(f"i{k}" for k in range(n_in)), ("y",), tuple(attrs.items()))


def test_write_rows_writes_the_rows_from_the_position_and_leaves_the_rest():
    s, v = np.zeros((6, 3), np.float32), R.standard_normal((2, 3)).astype(np.float32)
    (y,) = run_op(op("write_rows", 3), [s, np.int32(3), v])
    assert np.array_equal(y[3:5], v) and not y[:3].any() and not y[5:].any() and not s.any()


def test_row_and_column_moves_follow_their_definitions():
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    assert np.array_equal(run_op(op("take_rows", start=1, count=2), [x])[0], x[1:3])
    assert np.array_equal(run_op(op("take_cols", start=2, stop=5), [x])[0], x[:, 2:5])
    assert np.array_equal(run_op(op("stack_rows", 2), [x[:1], x[3:]])[0], x[[0, 3]])
    assert np.array_equal(run_op(op("allgather", 2), [x[:, :2], x[:, 2:]])[0], x)
    assert np.array_equal(run_op(op("allreduce", 3), [x, x, x])[0], 3 * x)


def test_scalar_forms_of_add_sub_mul_keep_their_side():
    x = np.array([[1.0, 2.0]], np.float32)
    assert run_op(op("sub", scalar=5.0, side="left"), [x])[0].tolist() == [[4.0, 3.0]]
    assert run_op(op("sub", scalar=5.0, side="right"), [x])[0].tolist() == [[-4.0, -3.0]]
    assert run_op(op("add", scalar=1.0), [x])[0].tolist() == [[2.0, 3.0]]
    assert run_op(op("mul", scalar=3.0), [x])[0].tolist() == [[3.0, 6.0]]


def test_matmul_q8_is_the_product_with_planes_times_block_scales():
    w = R.standard_normal((64, 8)).astype(np.float32)
    p = quantize_weight(w)
    x = R.standard_normal((2, 64)).astype(np.float32)
    (y,) = run_op(op("matmul_q8", 3), [x, p.values, p.scales])
    want = x.astype(np.float64) @ (p.values.astype(np.float64) * np.repeat(p.scales.astype(np.float64), 32, axis=0))
    np.testing.assert_allclose(y, want, rtol=1e-6)


def test_a_sliced_q8_weight_reads_whole_rows_of_scales_for_a_row_split():
    w = Weights({"W": quantize_weight(R.standard_normal((64, 8)))})
    t = Tensor("W_c1__scales", (1, 8), "f16", "weight", "hbm", 16, chip=1, of="W", part="scales", slice=(0, 32, 64))
    assert np.array_equal(weight_value(t, "W", w), w.planes["W"].scales[1:2])
    t = Tensor("W_c1__q8", (64, 4), "int8", "weight", "hbm", 256, chip=1, of="W", part="planes", slice=(1, 4, 8))
    assert np.array_equal(weight_value(t, "W", w), w.planes["W"].values[:, 4:8])


def test_planes_of_a_weight_not_stored_q8_are_refused_not_requantised():
    w = Weights({"W": np.ones((32, 2), np.float32)}, "checkpoint x.gguf")
    t = Tensor("W__q8", (32, 2), "int8", "weight", "hbm", 64, of="W", part="planes")
    with pytest.raises(KeyError, match="does not store it Q8_0"):
        weight_value(t, "W", w)


def test_a_program_reading_a_tensor_nothing_wrote_is_refused_naming_the_op():
    p = SpatialProgram("layer 0", 1, 4, (Tensor("x", (1, 2), "bf16", "input", "sram", 4),
                                          Tensor("y", (1, 2), "bf16", "output", "sram", 4)),
                       (Op("add", ("x", "ghost"), ("y",)),))
    with pytest.raises(ExecuteError, match="op 0 .add.: reads `ghost`"):
        run_program(p, {"x": np.ones((1, 2), np.float32)})


def test_an_op_reading_a_tensor_another_chip_holds_is_refused():
    t = lambda name, role, chip=None: Tensor(name, (1, 2), "bf16", role, "sram", 4, chip=chip)  # noqa: E731
    tensors = (t("x", "input"), t("a_c0", "intermediate", 0), t("a_c1", "intermediate", 1), t("y", "output"))
    ok = (Op("copy", ("x",), ("a_c0",), chip=0), Op("copy", ("x",), ("a_c1",), chip=1),
          Op("allreduce", ("a_c0", "a_c1"), ("y",)))
    env = run_program(SpatialProgram("layer 0", 1, 4, tensors, ok, tp=2), {"x": np.ones((1, 2), np.float32)})
    assert env["y"].tolist() == [[2.0, 2.0]]
    cross = (Op("copy", ("x",), ("a_c0",), chip=0), Op("copy", ("a_c0",), ("a_c1",), chip=1),
             Op("allreduce", ("a_c0", "a_c1"), ("y",)))
    with pytest.raises(ExecuteError, match="runs on chip 1 but `a_c0` lives on chip 0"):
        run_program(SpatialProgram("layer 0", 1, 4, tensors, cross, tp=2), {"x": np.ones((1, 2), np.float32)})


def test_a_table_is_filled_by_the_rule_the_bundle_gives_it_not_taken_from_the_host():
    from streamed.numerics.execute import Bound, Session, run_bound
    from streamed.numerics.kernels import rotary_table

    def program(base):
        tensors = (Tensor("R", (6, 4), "bf16", "table", "sram", 48, fill=("cosines", base)),
                   Tensor("y", (6, 4), "bf16", "output", "sram", 48))
        return SpatialProgram("layer 0", 1, 6, tensors, (Op("copy", ("R",), ("y",)),))

    w = Weights({})
    for base in (10000.0, 20000.0):
        env = run_bound(Bound(program(base), {}, "layer 0"), w, {}, Session())
        assert np.array_equal(env["y"], rotary_table("cosines", base, 6, 4))
    unfilled = SpatialProgram("layer 0", 1, 6, (Tensor("R", (6, 4), "bf16", "table", "sram", 48),
                                                Tensor("y", (6, 4), "bf16", "output", "sram", 48)),
                              (Op("copy", ("R",), ("y",)),))
    with pytest.raises(ExecuteError, match="gives table `R` no fill rule"):
        run_bound(Bound(unfilled, {}, "layer 0"), w, {}, Session())


def test_ops_run_by_phase_and_an_op_scheduled_before_what_it_reads_is_refused():
    t = lambda name, role: Tensor(name, (1, 2), "bf16", role, "sram", 4)  # noqa: E731
    tensors = (t("x", "input"), t("a", "intermediate"), t("y", "output"))
    # Listed reader first, but phased after the writer: it runs second.
    listed_late = (Op("scale", ("a",), ("y",), (("factor", 3.0),), phase=1), Op("scale", ("x",), ("a",), (("factor", 2.0),), phase=0))
    env = run_program(SpatialProgram("layer 0", 1, 4, tensors, listed_late), {"x": np.ones((1, 2), np.float32)})
    assert env["y"].tolist() == [[6.0, 6.0]]
    # Listed writer first, but phased after the reader: the reader runs with nothing to read.
    phased_early = (Op("scale", ("x",), ("a",), (("factor", 2.0),), phase=1), Op("scale", ("a",), ("y",), (("factor", 3.0),), phase=0))
    with pytest.raises(ExecuteError, match="op 1 .scale.: reads `a` before any op writes it"):
        run_program(SpatialProgram("layer 0", 1, 4, tensors, phased_early), {"x": np.ones((1, 2), np.float32)})
