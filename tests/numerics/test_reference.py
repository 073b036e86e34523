"""The reference interpreter's step semantics, its weights and its checkpoint reading."""

import numpy as np
import pytest
from gguf import GGMLQuantizationType
from gguf.quants import dequantize, quantize

from streamed.analysis.whole import analyze
from streamed.numerics.reference import Batch, Reference
from streamed.numerics.weights import from_gguf, gguf_storage, seeded, seeded_array


def programs_of(text):
    a = analyze(text)
    assert not a.errors, a.errors
    return a.programs


def test_seeded_weights_are_a_function_of_the_seed_and_the_tensor_name(tiny_llama_text):
    p = programs_of(tiny_llama_text)
    a, b, c = seeded(p, 3), seeded(p, 3), seeded(p, 4)
    assert all(np.array_equal(a[n], b[n]) for n in a.dense)
    assert not np.array_equal(a["Wq0"], c["Wq0"])
    assert not np.array_equal(a["Wq0"], a["Wq1"])
    assert np.array_equal(seeded_array(3, "Wq0", (64, 64)), seeded_array(3, "Wq0", (64, 64)))


def test_a_seeded_q8_weight_is_its_stored_planes_read_back(tiny_llama_text):
    w = seeded(programs_of(tiny_llama_text), 1)
    assert set(w.planes) == {n for n in w.dense if n.startswith("W") and n != "Wout"} | {"Wout"}
    assert np.array_equal(w["Wq2"], w.planes["Wq2"].dense())
    assert "Emb" not in w.planes and "g0" not in w.planes


def test_hidden_states_stay_of_order_one_through_every_layer(tiny_llama_text):
    p = programs_of(tiny_llama_text)
    r = Reference(p, seeded(p, 0), 16)
    tok = 3
    for pos in range(8):
        s = r.step([tok], pos)
        tok = int(s.next[0])
        for h in s.hidden:
            rms = float(np.sqrt(np.mean(h * h)))
            assert 0.05 < rms < 20


def test_prefill_of_a_chunk_equals_decoding_its_tokens_one_by_one(tiny_llama_text):
    p = programs_of(tiny_llama_text)
    w = seeded(p, 2)
    tokens = [5, 17, 200, 3, 9, 1]
    chunk = Reference(p, w, 16)
    whole = chunk.step(tokens, 0)
    one = Reference(p, w, 16)
    for i, t in enumerate(tokens):
        s = one.step([t], i)
        for layer in range(4):
            np.testing.assert_allclose(s.hidden[layer][0], whole.hidden[layer][i], rtol=1e-5, atol=1e-5)
        assert int(s.next[0]) == int(whole.next[i])
    for name in chunk.states:
        np.testing.assert_allclose(one.states[name], chunk.states[name], rtol=1e-5, atol=1e-5)
    # and decoding continues from the prefill's state as from the one-by-one state
    a, b = chunk.step([7], 6), one.step([7], 6)
    np.testing.assert_allclose(a.logits, b.logits, rtol=1e-5, atol=1e-5)


def test_a_batch_is_each_sequence_run_on_its_own(tiny_llama_text):
    p = programs_of(tiny_llama_text)
    w = seeded(p, 2)
    batch = Batch(p, w, 16, 2)
    alone = [Reference(p, w, 16), Reference(p, w, 16)]
    out = batch.step([4, 9], [0, 0])
    assert np.array_equal(out[1].logits, alone[1].step([9], 0).logits)
    assert not np.array_equal(out[0].logits, out[1].logits)


def test_a_step_past_ctx_is_refused_with_the_positions_named(tiny_llama_text):
    p = programs_of(tiny_llama_text)
    r = Reference(p, seeded(p, 0), 4)
    with pytest.raises(Exception, match="do not fit ctx 4"):
        r.step([1, 2, 3], 2)


def test_a_gguf_checkpoint_binds_each_weight_in_product_orientation_q8_as_stored(tmp_path, tiny_llama_text, checkpoint_writer):
    p = programs_of(tiny_llama_text)
    floats = seeded(p, 5).dense

    def type_of(name, tensor):
        if name == "Emb":
            return "F16", True
        if name == "Wo2":
            return "F16", False
        return ("Q8_0" if name.startswith("W") else "F32"), False

    path = checkpoint_writer(tmp_path / "tiny.gguf", p, floats, type_of)
    storage = gguf_storage(path)
    a = analyze(tiny_llama_text, storage)
    assert [k.layers for k in a.kinds] == [(0, 1, 3), (2,)]
    w = from_gguf(path, a.programs)
    raw = quantize(np.ascontiguousarray(floats["Wq1"].T), GGMLQuantizationType.Q8_0)
    assert np.array_equal(w["Wq1"], dequantize(raw, GGMLQuantizationType.Q8_0).T)
    assert np.array_equal(w.planes["Wq1"].values, raw.reshape(64, 2, 34)[:, :, 2:].view(np.int8).reshape(64, 64).T)
    assert "Wo2" not in w.planes and "Wo1" in w.planes
    assert np.array_equal(w["Wo2"], floats["Wo2"].astype(np.float16).astype(np.float32))
    assert np.array_equal(w["Emb"], floats["Emb"].astype(np.float16).astype(np.float32))
    assert np.array_equal(w["g3"], floats["g3"])
    r = Reference(a.programs, w, 8)
    assert r.step([1], 0).logits.shape == (1, 256)


def test_operands_of_options_sharing_their_leading_word_are_told_apart_by_what_follows():
    from streamed.lang.parser import parse
    from streamed.numerics.reference import operands

    def call(sentence):
        doc = parse(f"# T\n## Model\nLet n be 4.\n## Layer 0\n{sentence}\n")
        return doc.layers[0].statements[0].value

    a, n = operands(call("Let o0 be gated delta of q0, k0 and v0 with state S0, decay a0 and beta b0, heads 4 sharing 2."))
    assert (n["heads:H"].text, n["heads:G"].text) == ("4", "2")
    a, n = operands(call("Let o0 be gated delta of q0, k0 and v0 with state S0, decay a0 and beta b0, heads n."))
    assert n["heads:H"].text == "n" and "heads:G" not in n
    a, n = operands(call("Let e0 be experts of x with router R0, top 2, using G0, U0 and D0, router bias B1, selection bias B2."))
    assert (a["router bias:RB"].text, a["selection bias:B"].text) == ("B1", "B2")


def test_a_run_s_memory_beyond_its_caches_does_not_grow_with_depth():
    """``run`` wants the logits alone: each layer's values are let go when the layer ends (``keep=False``), so beyond
    the caches it carries (every layer's keys and values, which grow with depth as they must) a prefill holds at its
    peak one layer's values, whatever the depth — where keeping them all grows with it (7× here)."""
    import tracemalloc

    from repo import TINY, deep
    from streamed.numerics.run import reference_logits

    tokens = [int(t) for t in np.random.default_rng(2).integers(0, 64, 48)]

    def beyond_caches(layers: int) -> int:
        p = programs_of(deep(TINY, layers))
        w = seeded(p, 0)
        caches = sum(s.nbytes for s in Reference(p, w, len(tokens), rows=len(tokens)).states.values())
        tracemalloc.start()
        try:
            reference_logits(p, w, tokens, prefill=len(tokens))
            return tracemalloc.get_traced_memory()[1] - caches
        finally:
            tracemalloc.stop()

    beyond_caches(2)  # what the first run loads (kernels, tables) is not the run's to hold
    two, sixteen = beyond_caches(2), beyond_caches(16)
    assert sixteen < 1.25 * two, (two, sixteen)


def test_a_run_that_keeps_nothing_writes_a_decode_step_s_cache_rows_where_the_cache_is():
    """A decode step's ``Set`` writes one row of each cache: in a run that keeps none of a step's values
    (``keep=False``, what ``streamed run`` does) it writes it in the cache itself — one array from step to step, not
    a copy of the whole cache a step (a cost growing with the context) — and computes the logits of a run that keeps
    every value."""
    from repo import TINY
    from streamed.numerics.run import steps

    p = programs_of(TINY)
    w = seeded(p, 0)
    tokens = [int(t) for t in np.random.default_rng(4).integers(0, 256, 12)]
    kept, bare = Reference(p, w, len(tokens), rows=8), Reference(p, w, len(tokens), rows=8)
    for pos, toks in steps(tokens, 8):
        caches = {n: bare.states[n] for n in ("Kc0", "Vc3")}
        want, got = kept.step(toks, pos).logits, bare.step(toks, pos, keep=False).logits
        assert np.array_equal(got, want), pos
        assert all(bare.states[n] is a for n, a in caches.items()), pos
        assert np.array_equal(bare.states["Kc0"], kept.states["Kc0"])


def test_a_value_bound_to_a_cache_before_its_set_is_the_cache_s_old_rows_in_a_run_that_keeps_nothing():
    """A value bound to a cache before a ``Set`` keeps the cache's old rows after it, in a run that keeps nothing as
    in one that keeps everything: there the ``Set`` writes a copy (here attention reads the values before this step's
    row was written — other logits than reading the cache after it)."""
    from repo import TINY
    from streamed.numerics.run import reference_logits, steps

    before = TINY.replace("Set row pos of Vc0 to xn0 times Wv0.\nLet a0 be attention of q0 over Kc0 and Vc0 at pos",
                          "Let old be Vc0.\nSet row pos of Vc0 to xn0 times Wv0.\nLet a0 be attention of q0 over Kc0 and "
                          "old at pos")
    assert before != TINY
    tokens = [int(t) for t in np.random.default_rng(5).integers(0, 256, 10)]
    p = programs_of(before)
    w = seeded(p, 0)
    bare = reference_logits(p, w, tokens, prefill=6).logits
    kept = Reference(p, w, len(tokens), rows=6)
    want = np.concatenate([np.atleast_2d(kept.step(toks, pos).logits) for pos, toks in steps(tokens, 6)])
    assert np.array_equal(bare, want)
    after = reference_logits(programs_of(TINY), seeded(programs_of(TINY), 0), tokens, prefill=6).logits
    assert not np.array_equal(bare, after)
