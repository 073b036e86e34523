"""A windowed (or chunked) cache is a ring of ``min(ctx, W + rows − 1)`` rows (LANGUAGE §8): written at
``pos mod L`` and read back there, it gives attention what a plain cache of every position gives it — held here
against a plain full-length cache the test keeps itself, bit for bit, over steps that wrap the ring many times; the
rule is tight (one row fewer loses a position a step reads); and ``verify`` certifies rings past their wrap-around
in every deployment."""

from __future__ import annotations

import numpy as np
import pytest

from streamed.analysis.whole import analyze
from streamed.numerics import kernels as nx
from streamed.numerics.execute import plan_of
from streamed.numerics.reference import Reference
from streamed.numerics.verify import covering, run
from streamed.numerics.weights import seeded
from streamed.spatial.deployment import Deployment
from streamed.spatial.streamed_model import lower_streamed
from builders import document

HEADS, GROUPS, WIDTH = 4, 2, 8  # 4 query heads sharing 2 KV heads of 8


def _steps(ctx: int, rows: int) -> list[tuple[int, int]]:
    """A sequence as a prefill of ``rows``-row chunks would write it: (position, rows) until ctx."""
    out, pos = [], 0
    while pos < ctx:
        out.append((pos, min(rows, ctx - pos)))
        pos += rows
    return out


def _attend_both(ctx: int, rows: int, window: int | None, chunk: int | None, length: int, seed: int = 0):
    """Every step's attention over a plain cache of ``ctx`` rows (written at each position, read whole) and over a
    ring of ``length`` rows (``ring_write``/``ring_read``), on the same random keys, values and queries."""
    rng = np.random.default_rng(seed)
    plain_k = np.zeros((ctx, GROUPS * WIDTH), np.float32)
    plain_v = np.zeros_like(plain_k)
    ring_k = np.zeros((length, GROUPS * WIDTH), np.float32)
    ring_v = np.zeros_like(ring_k)
    reach = min(window or np.inf, chunk or np.inf)
    for pos, n in _steps(ctx, rows):
        k, v = (rng.standard_normal((n, GROUPS * WIDTH)).astype(np.float32) for _ in range(2))
        q = rng.standard_normal((n, HEADS * WIDTH)).astype(np.float32)
        plain_k[pos:pos + n], plain_v[pos:pos + n] = k, v
        ring_k, ring_v = nx.ring_write(ring_k, pos, k, ctx), nx.ring_write(ring_v, pos, v, ctx)
        want = nx.attention(q, plain_k, plain_v, pos, HEADS, GROUPS, window, chunk)
        got = nx.attention(q, nx.ring_read(ring_k, pos, n, ctx, reach), nx.ring_read(ring_v, pos, n, ctx, reach),
                           pos, HEADS, GROUPS, window, chunk)
        yield pos, n, want, got


@pytest.mark.parametrize("window, chunk, rows", [(5, None, 1), (5, None, 3), (7, None, 4), (None, 6, 1),
                                                 (None, 6, 4), (4, 6, 2)])
def test_a_ring_of_window_plus_rows_minus_one_gives_attention_what_a_plain_cache_gives_it_bit_for_bit(window, chunk,
                                                                                                    rows):
    ctx = 61  # the ring (at most 10 rows) wraps at least six times
    length = min(ctx, min(window or ctx, chunk or ctx) + rows - 1)
    steps = 0
    for pos, n, want, got in _attend_both(ctx, rows, window, chunk, length):
        assert np.array_equal(got, want), f"position {pos}, {n} rows"
        steps += 1
    assert steps * rows >= 6 * length


def test_a_ring_one_row_shorter_loses_a_position_its_first_row_reads():
    # Window 5, steps of 3 rows: the rule says 7 rows. With 6, writing the step's third row overwrites the position
    # its first row reads 4 back — what the plain cache still holds. The test reads the short ring itself.
    ctx, window, rows, short = 30, 5, 3, 6
    rng = np.random.default_rng(1)
    plain = np.zeros((ctx, GROUPS * WIDTH), np.float32)
    ring = np.zeros((short, GROUPS * WIDTH), np.float32)
    differs = False
    for pos, n in _steps(ctx, rows):
        kv = rng.standard_normal((n, GROUPS * WIDTH)).astype(np.float32)
        plain[pos:pos + n] = kv
        ring[(pos + np.arange(n)) % short] = kv
        frame = np.zeros_like(plain)
        held = np.arange(max(0, pos + n - short), pos + n)
        frame[held] = ring[held % short]
        q = rng.standard_normal((n, HEADS * WIDTH)).astype(np.float32)
        differs |= not np.array_equal(nx.attention(q, frame, frame, pos, HEADS, GROUPS, window),
                                      nx.attention(q, plain, plain, pos, HEADS, GROUPS, window))
    assert differs
    with pytest.raises(ValueError, match="a ring of 6 rows cannot hold the 7 positions 3 rows read 5 back"):
        nx.ring_read(ring, 9, rows, ctx, window)


def test_set_row_writes_position_p_to_row_p_mod_the_ring_and_refuses_positions_past_ctx():
    ring = np.zeros((4, 2), np.float32)
    for p in range(10):
        ring = nx.ring_write(ring, p, np.full((1, 2), p, np.float32), 16)
    # Positions 6…9 are the last four written: position p at row p mod 4.
    assert ring[:, 0].tolist() == [8, 9, 6, 7]
    with pytest.raises(ValueError, match="past the context's 16"):
        nx.ring_write(ring, 15, np.zeros((2, 2), np.float32), 16)


WINDOWED = document([dict(window=4), dict(window=4), dict(chunks=6), dict()])


@pytest.fixture(scope="module")
def windowed():
    a = analyze(WINDOWED)
    assert not a.errors
    return a, seeded(a.programs, 0)


def test_the_reference_holds_a_windowed_layer_s_cache_as_its_ring_and_a_global_layer_s_whole(windowed):
    a, w = windowed
    r = Reference(a.programs, w, 32)
    # Decode (steps of one row): window 4 → 4 rows; chunks of 6 → 6 rows; the global layer's cache all 32.
    assert {n: r.states[n].shape[0] for n in ("Kc0", "Vc1", "Kc2", "Vc3")} == {"Kc0": 4, "Vc1": 4, "Kc2": 6, "Vc3": 32}
    # Steps of 5 rows (a prefill's chunk): 4 + 5 − 1 and 6 + 5 − 1.
    r5 = Reference(a.programs, w, 32, rows=5)
    assert (r5.states["Kc0"].shape[0], r5.states["Kc2"].shape[0]) == (8, 10)


@pytest.mark.parametrize("dep", [Deployment("decode", ctx=32), Deployment("prefill", ctx=32, chunk=3),
                                 Deployment("batched", ctx=32, batch=2), Deployment("tp", ctx=32, tp=2),
                                 Deployment("batched-tp", ctx=32, batch=2, tp=2)], ids=lambda d: d.mode)
def test_verify_certifies_rings_that_wrap_several_times_bit_for_bit(windowed, dep):
    a, w = windowed
    model = lower_streamed(a, dep)
    ring = 4 + (dep.chunk or 1) - 1  # window 4, the step's rows
    (kc0,) = [t for t in model.kinds[0].program.tensors if t.name in ("Kc0", "Kc0_s0", "Kc0_c0", "Kc0_s0_c0")]
    assert kc0.shape[0] == ring
    plans = {"step": plan_of(model)}
    if dep.mode == "prefill":  # three chunks of 3, then decode over the same rings
        plans["prefill"] = plans["step"]
        plans["step"] = plan_of(lower_streamed(a, Deployment("decode", ctx=32, chunk=3)))
    report = run(a.programs, w, dep, plans, steps=30)
    assert report.ok, report.error or report.first_failure.describe()
    assert report.steps >= 26 and report.steps >= 4 * ring  # 32 positions through a ring of at most 6: 5 wraps
    # the ring whole, each sequence's, or each chip's share (measured on its own chip)
    ring_measures = [m for m in report.measures if m.tensor == "Kc0" or m.tensor.startswith(("Kc0_s", "Kc0_c"))]
    assert ring_measures and all(m.bound == 0 and m.shape[0] == ring for m in ring_measures)


def test_verify_s_default_steps_decode_past_the_wrap_around(windowed):
    a, w = windowed
    dep = Deployment("decode", ctx=8)
    steps, ctx = covering(a.programs, dep)
    assert steps > 6 and ctx > 6  # past the window-4 ring and the chunk-6 ring
    dep = Deployment("decode", ctx=ctx)
    report = run(a.programs, w, dep, {"step": plan_of(lower_streamed(a, dep))})
    assert report.ok and report.steps == steps


def test_a_run_s_memory_counts_a_windowed_cache_as_its_ring_and_one_frame_of_the_context(windowed):
    from streamed.numerics.footprint import of_run

    a, _ = windowed
    plain = analyze(WINDOWED.replace(", window 4", "").replace(", chunks of 6", ""))
    assert not plain.errors
    ringed, whole = (of_run(x.programs, None, rows=1, ctx=1024, positions=1) for x in (a, plain))
    # float32 keys and values of 32 columns: rings of 4, 4 and 6 positions (windows 4, 4, chunks of 6) where the
    # plain document holds 1024 each; and, while a windowed attention runs, the frame of 1024 positions it reads a
    # ring's keys and values into.
    assert whole.states - ringed.states == 4 * 32 * 2 * ((1024 - 4) * 2 + (1024 - 6))
    assert ringed.activations - whole.activations == 2 * 1024 * 32 * 4
