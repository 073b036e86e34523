"""Tiled bundles computed tile by tile as ir.py's Tiles section says, certified against the reference interpreter in
every deployment where tiles are needed — on a 10 KB test chip (small-qwen35, whose recurrent state alone is 16 KB,
on a 28 KB one), so the small documents need them at test sizes.

Bit for bit, as every bundle outside tensor parallelism: a tile's products (attention's too, accumulated in float64
as ``matmul``'s), norms, recurrences and experts compute each row as the whole program does, and column tiles of the
head give the same logits and the same arg-max (ties to the lowest index)."""

from pathlib import Path

import numpy as np
import pytest

from streamed.analysis.whole import analyze
from streamed.numerics.execute import Executor, plan_of
from streamed.numerics.q8 import quantize_weight
from streamed.numerics.verify import label, run
from streamed.numerics.weights import seeded
from streamed.spatial.deployment import Deployment
from streamed.spatial.streamed_model import lower_streamed
from streamed.spatial.synth import two_kind_document
from streamed.spatial.target import parse_target

from repo import EXAMPLES, TINY_CHIP

DOCUMENTS = Path(__file__).resolve().parent / "documents"
SMALL = ["tiny-llama", "small-qwen35", "small-deepseek-v2", "small-gemma3"]
TILED = [Deployment("forward", 16), Deployment("prefill", 32, chunk=8), Deployment("batched", 16, batch=4),
         Deployment("batched-tp", 16, batch=6, tp=2)]
STEPS = 4
# small-qwen35's gated delta holds its state (4 heads of 32 × 32 in float32, 16.4 KB) whole while it runs, more than the
# 10 KB chip: on the test chip at 28 KB over 2,000 PMUs its programs still need tiles in every deployment above (both
# kinds in batched), and fit in them.
QWEN_CHIP = parse_target(TINY_CHIP.read_text().replace("sram_mb = 0.01", "sram_mb = 0.028")
                         .replace("pmus = 1000", "pmus = 2000"), "qwen-chip.toml")
CHIPS = {"small-qwen35": QWEN_CHIP}


def plans(a, dep: Deployment, target=str(TINY_CHIP)):
    model = lower_streamed(a, dep, target=target)
    out = {"step": plan_of(model)}
    if dep.mode == "prefill":  # the prefill's state continues in the decode bundle of the same context
        out["prefill"] = out["step"]
        out["step"] = plan_of(lower_streamed(a, Deployment("decode", dep.ctx), target=target))
    return model, out


@pytest.mark.parametrize("dep", TILED, ids=label)
@pytest.mark.parametrize("name", SMALL + ["options", "wide-heads"])
def test_a_tiled_bundle_computes_what_the_document_computes(name, dep):
    path = EXAMPLES / f"{name}.lgm" if (EXAMPLES / f"{name}.lgm").exists() else DOCUMENTS / f"{name}.lgm"
    a = analyze(path.read_text())
    model, p = plans(a, dep, CHIPS.get(name, str(TINY_CHIP)))
    tiled = [n for n, program in model.programs() if program.tiles]
    assert tiled, f"nothing of {name} needs tiles on the test chip in {label(dep)}"
    report = run(a.programs, seeded(a.programs, 5), dep, p, STEPS)
    assert report.error is None, report.error
    assert report.first_failure is None, report.first_failure.describe()
    assert report.steps == STEPS
    # The tiles' intermediates were assembled and compared, not only each layer's output.
    compared = {m.tensor for m in report.measures if m.program == "layer 0"}
    assert len(compared) > 3


def test_column_tiles_of_the_head_give_the_same_logits_and_next_token_bit_for_bit():
    a = analyze(two_kind_document(4, vocab=8192))
    w = seeded(a.programs, 9)
    tiled = plan_of(lower_streamed(a, Deployment("decode", 16), target=str(TINY_CHIP)))
    whole = plan_of(lower_streamed(a, Deployment("decode", 16)))
    assert tiled.head.program.tiles and not whole.head.program.tiles
    one, two = Executor(w), Executor(w)
    tok = [17]
    for pos in range(6):
        x, y = one.step(tiled, tok, [pos]), two.step(whole, tok, [pos])
        np.testing.assert_array_equal(x.values["head"]["logits"], y.values["head"]["logits"])
        assert x.next.tolist() == y.next.tolist()
        tok = y.next.tolist()
    report = run(a.programs, w, Deployment("decode", 16), {"step": tiled}, STEPS)
    assert report.ok, report.error or report.first_failure.describe()


def test_the_running_arg_max_keeps_the_lowest_index_of_equal_maxima_in_different_column_tiles():
    a = analyze(two_kind_document(4, vocab=8192))
    model = lower_streamed(a, Deployment("decode", 16), target=str(TINY_CHIP))
    width = model.head.tile_cols
    w = seeded(a.programs, 9)
    # Columns 3 and width + 3 (in the first and second column tiles) the same, and larger than every other.
    out = w.dense["Wout"].copy()
    out[:, 3] = out[:, width + 3] = 10 * np.abs(out).max() * np.sign(out[:, 0] + 1e-9)
    w.values["Wout"] = quantize_weight(out)  # read as stored Q8_0, as the checkpoint would store it
    step = Executor(w).step(plan_of(model), [5], [0])
    logits = step.values["head"]["logits"][0]
    assert logits[3] == logits[width + 3] == logits.max()
    assert step.next.tolist() == [3]


def test_a_batched_bundle_tiled_by_sequences_equals_it_untiled_bit_for_bit():
    a = analyze((EXAMPLES / "small-qwen35.lgm").read_text())
    w = seeded(a.programs, 3)
    tiled = plan_of(lower_streamed(a, Deployment("batched", 16, batch=4), target=QWEN_CHIP))
    whole = plan_of(lower_streamed(a, Deployment("batched", 16, batch=4)))
    assert all(b.program.tiles for b in tiled.layers) and not any(b.program.tiles for b in whole.layers)
    one, two = Executor(w), Executor(w)
    tokens, positions = np.array([7, 100, 31, 2]), [0, 2, 5, 1]
    for _ in range(4):
        x, y = one.step(tiled, tokens, positions), two.step(whole, tokens, positions)
        for h, g in zip(x.hidden, y.hidden):
            np.testing.assert_array_equal(h, g)
        for name, value in two.session.states.items():
            np.testing.assert_array_equal(one.session.states[name], value)
        tokens, positions = y.next, [p + 1 for p in positions]


def test_tensor_parallel_chips_that_read_an_off_block_q8_slice_dense_compute_what_the_document_computes():
    # 4 heads of 16 over 4 chips: the output projection's row slices are 16 rows, half a Q8_0 block: read dense.
    a = analyze(two_kind_document(4, heads=4, kv=4, hd=16, ffn=256))
    dep = Deployment("tp", 16, tp=4)
    model = lower_streamed(a, dep)
    assert model.kinds[0].tp["read_dense"]
    report = run(a.programs, seeded(a.programs, 6), dep, {"step": plan_of(model)}, STEPS)
    assert report.ok, report.error or report.first_failure.describe()
