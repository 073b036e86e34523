"""GGUF checkpoints, written with the gguf package's own writer and Q8_0 quantisation: their storage, the spec their
metadata and tensors describe, and one clear error for every bad file."""

import re

import pytest

import ggufs
from streamed.analysis.whole import analyze
from streamed.model.author import author
from streamed.model.gguf import CheckpointError, read_gguf, read_storage
from streamed.model.spec import Attention, Dense, Experts, GatedDeltaNet, LatentAttention


def test_storage_says_how_each_tensor_is_stored(tmp_path):
    path = ggufs.llama_like(tmp_path / "m.gguf", types={"blk.1.attn_v.weight": "F16"})
    s = read_storage(path)
    assert s.types["blk.0.attn_q.weight"] == "Q8_0"
    assert s.types["blk.1.attn_v.weight"] == "F16"
    assert s.types["blk.0.attn_norm.weight"] == "F32"
    assert s.shapes["blk.0.ffn_down.weight"] == (128, 64)
    assert s.source == str(path)


def test_a_llama_gguf_round_trips_to_its_spec(tmp_path):
    c = read_gguf(ggufs.llama_like(tmp_path / "m.gguf", layers=3, d=64, heads=4, kv_heads=2, ffn=96))
    spec = c.spec
    assert (spec.architecture, spec.d, spec.vocab, len(spec.layers), spec.naming) == ("llama", 64, 256, 3, "gguf")
    m, f = spec.layers[0].mixer, spec.layers[0].ffn
    assert isinstance(m, Attention) and (m.heads, m.kv_heads, m.head_dim) == (4, 2, 16)
    assert isinstance(f, Dense) and f.width == 96
    assert not spec.tied
    text = author(spec)
    assert 'Wq{l} is "blk.{l}.attn_q.weight".' in text
    a = analyze(text, c.storage)
    assert not a.errors and [k.name for k in a.kinds] == ["attention"]


def test_a_gguf_without_an_output_tensor_ties_the_head_to_the_embedding(tmp_path):
    c = read_gguf(ggufs.llama_like(tmp_path / "m.gguf", skip=("output.weight",)))
    assert c.spec.tied
    assert re.search(r'^Wout +is "token_embd.weight"\.$', author(c.spec), re.M)


def _qwen3next(tmp_path, layers=4):
    d, nk, nv, dk, dv, k, heads, kv, hd, E, f = 64, 2, 4, 16, 16, 4, 2, 1, 32, 4, 32
    T = {"token_embd.weight": ((d, 128), "F32"), "output_norm.weight": ((d,), "F32"), "output.weight": ((d, 128), "Q8_0")}
    for l in range(layers):
        b = f"blk.{l}."
        T[b + "attn_norm.weight"] = ((d,), "F32")
        T[b + "post_attention_norm.weight"] = ((d,), "F32")
        if l % 4 == 3:
            T.update({b + "attn_q.weight": ((d, 2 * heads * hd), "Q8_0"), b + "attn_k.weight": ((d, kv * hd), "Q8_0"),
                      b + "attn_v.weight": ((d, kv * hd), "Q8_0"), b + "attn_output.weight": ((heads * hd, d), "Q8_0"),
                      b + "attn_q_norm.weight": ((hd,), "F32"), b + "attn_k_norm.weight": ((hd,), "F32")})
        else:
            T.update({b + "attn_qkv.weight": ((d, 2 * nk * dk + nv * dv), "Q8_0"), b + "attn_gate.weight": ((d, nv * dv), "Q8_0"),
                      b + "ssm_ba.weight": ((d, 2 * nv), "F32"), b + "ssm_conv1d.weight": ((k, 2 * nk * dk + nv * dv), "F32"),
                      b + "ssm_dt.bias": ((nv,), "F32"), b + "ssm_a": ((nv,), "F32"), b + "ssm_norm.weight": ((dv,), "F32"),
                      b + "ssm_out.weight": ((nv * dv, d), "Q8_0")})
        T.update({b + "ffn_gate_inp.weight": ((d, E), "F32"), b + "ffn_gate_exps.weight": ((d, f, E), "Q8_0"),
                  b + "ffn_up_exps.weight": ((d, f, E), "Q8_0"), b + "ffn_down_exps.weight": ((f, d, E), "Q8_0"),
                  b + "ffn_gate_shexp.weight": ((d, f), "Q8_0"), b + "ffn_up_shexp.weight": ((d, f), "Q8_0"),
                  b + "ffn_down_shexp.weight": ((f, d), "Q8_0"), b + "ffn_gate_inp_shexp.weight": ((d,), "F32")})
    kv_meta = {"{arch}.block_count": layers, "{arch}.embedding_length": d, "{arch}.attention.head_count": heads,
               "{arch}.attention.head_count_kv": kv, "{arch}.attention.key_length": hd,
               "{arch}.attention.value_length": hd, "{arch}.rope.dimension_count": 8, "{arch}.rope.freq_base": 1e7,
               "{arch}.attention.layer_norm_rms_epsilon": 1e-6, "{arch}.expert_count": E, "{arch}.expert_used_count": 2,
               "{arch}.ssm.conv_kernel": k, "{arch}.ssm.state_size": dk, "{arch}.ssm.group_count": nk,
               "{arch}.ssm.time_step_rank": nv, "{arch}.ssm.inner_size": nv * dv, "{arch}.full_attention_interval": 4}
    return ggufs.write(tmp_path / "next.gguf", "qwen3next", kv_meta, T)


def test_a_qwen3next_gguf_reads_its_layers_from_their_tensors(tmp_path):
    c = read_gguf(_qwen3next(tmp_path))
    layers = c.spec.layers
    assert [type(l.mixer) for l in layers] == [GatedDeltaNet, GatedDeltaNet, GatedDeltaNet, Attention]
    assert layers[3].mixer.gated and layers[3].mixer.rotation.dims == 8
    e = layers[0].ffn
    assert isinstance(e, Experts) and (e.count, e.top_k, e.width, e.shared_width, e.shared_gate) == (4, 2, 32, 32, True)
    text = author(c.spec)
    assert 'gm{l}   is "blk.{l}.post_attention_norm.weight".' in text  # qwen3next lists no ffn_norm
    assert 'Wlb{l}  is "blk.{l}.ssm_ba.weight", columns 0 to 2 of every 4.' in text
    a = analyze(text, c.storage)
    assert not a.errors, [d.message for d in a.errors][:3]
    assert [k.name for k in a.kinds] == ["gated deltanet, experts", "attention, experts"]


def test_a_deepseek2_gguf_is_latent_attention(tmp_path):
    d, H, r, N, M, V, E, f = 64, 2, 32, 16, 8, 32, 4, 32
    T = {"token_embd.weight": ((d, 128), "F32"), "output_norm.weight": ((d,), "F32"), "output.weight": ((d, 128), "Q8_0")}
    for l in range(2):
        b = f"blk.{l}."
        T.update({b + "attn_norm.weight": ((d,), "F32"), b + "attn_q.weight": ((d, H * (N + M)), "Q8_0"),
                  b + "attn_kv_a_mqa.weight": ((d, r + M), "Q8_0"), b + "attn_kv_a_norm.weight": ((r,), "F32"),
                  b + "attn_k_b.weight": ((r, N, H), "Q8_0"), b + "attn_v_b.weight": ((V, r, H), "Q8_0"),
                  b + "attn_output.weight": ((H * V, d), "Q8_0"), b + "ffn_norm.weight": ((d,), "F32")})
        if l == 0:
            T.update({b + "ffn_gate.weight": ((d, 96), "Q8_0"), b + "ffn_up.weight": ((d, 96), "Q8_0"),
                      b + "ffn_down.weight": ((96, d), "Q8_0")})
        else:
            T.update({b + "ffn_gate_inp.weight": ((d, E), "F32"), b + "ffn_gate_exps.weight": ((d, f, E), "Q8_0"),
                      b + "ffn_up_exps.weight": ((d, f, E), "Q8_0"), b + "ffn_down_exps.weight": ((f, d, E), "Q8_0")})
    meta = {"{arch}.block_count": 2, "{arch}.embedding_length": d, "{arch}.attention.head_count": H,
            "{arch}.attention.kv_lora_rank": r, "{arch}.attention.key_length_mla": N + M,
            "{arch}.attention.value_length_mla": V, "{arch}.rope.dimension_count": M, "{arch}.expert_count": E,
            "{arch}.expert_used_count": 2, "{arch}.leading_dense_block_count": 1}
    c = read_gguf(ggufs.write(tmp_path / "ds.gguf", "deepseek2", meta, T))
    m = c.spec.layers[0].mixer
    assert isinstance(m, LatentAttention) and (m.nope_dim, m.rope_dim, m.v_dim, m.kv_b_packed) == (N, M, V, False)
    a = analyze(author(c.spec), c.storage)
    assert not a.errors, [d.message for d in a.errors][:3]
    assert [(k.name, k.layers) for k in a.kinds] == [("latent attention", (0,)), ("latent attention, experts", (1,))]


# ---- bad files ----------------------------------------------------------------------------------------------------


def test_a_truncated_gguf_is_refused_naming_the_file(tmp_path):
    path = ggufs.llama_like(tmp_path / "m.gguf")
    data = path.read_bytes()
    for cut in (len(data) - 100, len(data) // 2, 40, 10):
        bad = tmp_path / f"cut{cut}.gguf"
        bad.write_bytes(data[:cut])
        with pytest.raises(CheckpointError) as e:
            read_storage(bad)
        assert str(bad) in str(e.value)


def test_a_file_that_is_not_gguf_is_refused(tmp_path):
    bad = tmp_path / "x.gguf"
    bad.write_bytes(b"PK\x03\x04" + b"\0" * 100)
    with pytest.raises(CheckpointError, match="not a GGUF file"):
        read_gguf(bad)
    with pytest.raises(CheckpointError, match="no such file"):
        read_storage(tmp_path / "missing.gguf")


def test_a_corrupt_header_is_refused(tmp_path):
    path = ggufs.llama_like(tmp_path / "m.gguf")
    data = bytearray(path.read_bytes())
    data[8:16] = (2**62).to_bytes(8, "little")  # an impossible tensor count
    path.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="corrupt"):
        read_storage(path)


def test_a_tensor_of_a_layer_the_metadata_does_not_have_is_refused(tmp_path):
    path = ggufs.llama_like(tmp_path / "m.gguf", layers=4, block_count=3)
    with pytest.raises(CheckpointError, match=r"blk\.3\..* belongs to layer 3.*block_count` is 3"):
        read_gguf(path)


def test_a_layer_missing_a_tensor_its_metadata_needs_is_refused(tmp_path):
    path = ggufs.llama_like(tmp_path / "m.gguf", skip=("blk.2.attn_k.weight",))
    with pytest.raises(CheckpointError, match=r"blk\.2\.attn_k\.weight is missing"):
        read_gguf(path)


def test_a_tensor_whose_shape_disagrees_with_the_metadata_is_refused(tmp_path):
    path = ggufs.llama_like(tmp_path / "m.gguf", extra_kv={"{arch}.attention.head_count_kv": 1})
    with pytest.raises(CheckpointError, match="attn_k.weight has 32 outputs"):
        read_gguf(path)


def test_an_unsupported_or_unnamed_architecture_is_refused(tmp_path):
    path = ggufs.write(tmp_path / "m.gguf", "bert", {"{arch}.block_count": 1}, {"token_embd.weight": ((8, 4), "F32")})
    with pytest.raises(CheckpointError, match="'bert' is not supported"):
        read_gguf(path)


def test_a_key_llama_cpp_does_not_read_for_the_architecture_changes_nothing_and_is_said_once(tmp_path):
    plain = read_gguf(ggufs.llama_like(tmp_path / "a.gguf")).spec
    keyed = read_gguf(ggufs.llama_like(tmp_path / "b.gguf", extra_kv={"{arch}.attention.sliding_window": 16,
                                                                       "{arch}.expert_weights_norm": True})).spec
    assert keyed.layers == plain.layers and all(l.mixer.window is None for l in keyed.layers)
    text = author(keyed)
    said = [line for line in text.splitlines() if "llama.cpp ignores" in line]
    assert said == ["-- llama.cpp ignores these metadata keys of a llama model, and so does this document: "
                    "`llama.attention.sliding_window` (16), `llama.expert_weights_norm` (True)."]
    assert text.index(said[0]) < text.index("## Model")  # in the header, before any section


def test_a_key_llama_cpp_reads_but_the_language_cannot_say_is_refused_naming_it(tmp_path):
    import oracle
    from repo import config

    cfg = config("small-deepseek-v2")
    path = oracle.write(tmp_path / "g.gguf", cfg, kv={"{arch}.attention.temperature_scale": 0.1}).path
    with pytest.raises(CheckpointError, match=r"metadata `deepseek2.attention.temperature_scale` is 0.1: llama.cpp "
                                              r"tunes the queries' temperature by position for a deepseek2 model, which "
                                              r"the language does not express"):
        read_gguf(path)


def test_a_gemma3_gguf_with_a_final_soft_cap_caps_its_logits_and_one_without_does_not(tmp_path):
    import oracle
    from repo import config

    cfg = config("small-gemma3")
    capped = read_gguf(oracle.write(tmp_path / "c.gguf", cfg, kv={"{arch}.final_logit_softcapping": 30.0}).path)
    plain = read_gguf(oracle.write(tmp_path / "p.gguf", cfg).path)
    assert (capped.spec.final_softcap, plain.spec.final_softcap) == (30.0, None)
    assert "Let capped be soft cap of logits at 30." in author(capped.spec).replace("  ", " ")


def lets(text: str) -> dict[str, str]:
    """A document's ``Let NAME be WHAT.`` statements, comments dropped: name → what where it is first bound (a later
    layer declares its input, the name its predecessor returned)."""
    found = (re.match(r"Let (\S+) +be (.*)\.$", line.split("--")[0].strip()) for line in text.splitlines())
    out: dict[str, str] = {}
    for m in filter(None, found):
        out.setdefault(m.group(1), m.group(2))
    return out


@pytest.mark.parametrize("arch, d, width", [("gemma3", 128, 32), ("gemma2", 640, 128)])
def test_a_gemma_gguf_s_document_states_llama_cpp_s_float32_scales_where_its_graph_applies_them(tmp_path, arch, d,
                                                                                                 width):
    """llama.cpp's Gemma graphs multiply the embedding by ``sqrtf(n_embd)`` and the rotated queries by
    ``1.0f/sqrtf(head width)``, then attend at a scale of 1: the document states each float32 to its last bit (the
    nearest float32 to √128 and to 1/√32 is not the 7-digit decimal's) and where llama.cpp applies it."""
    import numpy as np

    import oracle
    from repo import config

    name = "small-gemma3" if arch == "gemma3" else "small-gemma2"
    cfg = {**config(name), "hidden_size": d, "head_dim": width, "query_pre_attn_scalar": width}
    said = lets(author(read_gguf(oracle.write(tmp_path / "g.gguf", cfg).path).spec))
    assert np.float32(float(said["escale"])) == np.sqrt(np.float32(d))
    query, by = re.fullmatch(r"(\w+) scaled by ([\d.]+)", said["qs0"]).groups()
    assert query == ("qr0" if "qr0" in said else "qn0")
    assert np.float32(float(by)) == np.float32(1) / np.sqrt(np.float32(width))
    assert re.fullmatch(r"attention of qs0 over Kc0 and Vc0 at pos, .*, scale 1(, soft cap \d+)?", said["a0"])


def test_a_cohere2_gguf_s_layer_adds_its_feed_forward_block_to_the_residual_before_its_attention(tmp_path):
    """llama.cpp's Cohere 2 graph adds a layer's outputs as ``(ffn + x) + attention``; float32 sums in another order
    differ in last bits, which a Q8_0 product's activations carry on."""
    import oracle
    from repo import config

    said = lets(author(read_gguf(oracle.write(tmp_path / "c.gguf", config("small-cohere2")).path).spec))
    assert (said["h0"], said["xo0"]) == ("x plus fo0", "h0 plus o0")


def test_experts_in_an_architecture_llama_cpp_reads_without_experts_are_refused(tmp_path):
    import numpy as np

    d, ff, n = 64, 32, 4
    rng = np.random.default_rng(0)
    kv = {"{arch}.block_count": 1, "{arch}.embedding_length": d, "{arch}.attention.head_count": 4,
          "{arch}.attention.head_count_kv": 2, "{arch}.expert_count": n, "{arch}.expert_used_count": 2,
          "{arch}.context_length": 64}
    w = ggufs.writer(tmp_path / "q.gguf", "qwen2", kv)  # llama.cpp's qwen2 model loads no experts
    for name, ne in {"token_embd.weight": (d, 128), "output_norm.weight": (d,), "blk.0.attn_norm.weight": (d,),
                     "blk.0.attn_q.weight": (d, d), "blk.0.attn_k.weight": (d, 32), "blk.0.attn_v.weight": (d, 32),
                     "blk.0.attn_output.weight": (d, d), "blk.0.ffn_norm.weight": (d,),
                     "blk.0.ffn_gate_inp.weight": (d, n), "blk.0.ffn_gate_exps.weight": (d, ff, n),
                     "blk.0.ffn_up_exps.weight": (d, ff, n), "blk.0.ffn_down_exps.weight": (ff, d, n)}.items():
        w.add_tensor(name, rng.standard_normal(tuple(reversed(ne))).astype(np.float32))
    ggufs.finish(w)
    with pytest.raises(CheckpointError, match=r"blk.0.ffn_gate_exps.weight holds experts, but llama.cpp's qwen2 model "
                                              r"has none"):
        read_gguf(tmp_path / "q.gguf")


def test_a_phi3_gguf_s_window_is_read_as_llama_cpp_disables_it_and_said(tmp_path):
    import oracle
    from repo import config

    spec = read_gguf(oracle.write(tmp_path / "p.gguf", {**config("small-phi3"), "sliding_window": 8}).path).spec
    assert {l.mixer.window for l in spec.layers} == {None}
    assert any("sliding window (8) and disables it" in n for n in spec.notes)
    m = spec.layers[0].mixer
    assert m.fused == "qkv" and spec.layers[0].ffn.fused and m.rotation.scaling.kind == "longrope"


def test_starcoder2_and_olmo2_ggufs_read_their_norms_and_blocks_from_the_tensors_they_hold(tmp_path):
    import oracle
    from repo import config

    sc = read_gguf(oracle.write(tmp_path / "s.gguf", config("small-starcoder2")).path).spec
    assert sc.final_norm.layer and sc.final_norm.bias and sc.layers[0].norm == sc.final_norm
    assert not sc.layers[0].ffn.gated and sc.layers[0].ffn.bias and sc.layers[0].ffn.activation == "gelu"
    ol = read_gguf(oracle.write(tmp_path / "o.gguf", config("small-olmo2")).path).spec
    assert not ol.layers[0].pre_norm and ol.layers[0].sandwich and ol.layers[0].mixer.qk_norm_whole
