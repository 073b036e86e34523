"""GGUFs of Granite, Mistral 3, Cohere 2 and Nemotron-NAS (``deci``) as llama.cpp 0c1e57098's loader reads them: what
each layer is, from the per-layer metadata and the tensors; what the file must hold; one line for a file that does
not describe the model llama.cpp would run. (``tests/oracle`` holds the logits of each against llama.cpp itself.)"""

from __future__ import annotations

import json

import pytest

import oracle
from repo import CONFIGS
from streamed.model.gguf import CheckpointError, read_gguf
from streamed.model.spec import Attention, Dense, Linear


def cfg(name: str, **fields) -> dict:
    c = json.loads((CONFIGS / f"{name}.json").read_text())
    (c.get("text_config") or c).update(fields)
    return c


def test_a_deci_gguf_reads_each_layer_s_blocks_from_its_per_layer_head_counts_and_widths(tmp_path):
    spec = read_gguf(oracle.write(tmp_path / "d.gguf", cfg("small-nemotron-nas")).path).spec
    mixers = [m if not isinstance(m, Attention) else m.kv_heads for m in (l.mixer for l in spec.layers)]
    assert mixers == [2, 2, 4, Linear(), None, 2, None, 4]  # 4 heads over n_heads_in_group 2, 2, 1, …, 1
    widths = [l.ffn.width if isinstance(l.ffn, Dense) else l.ffn for l in spec.layers]
    assert widths == [512, 512, 256, 256, 256, 512, None, 512]  # ffn_mult 7, 2.625, 1.3125 of 64, up to 256
    assert all(l.pre_norm for l in spec.layers)


def test_a_deci_layer_with_attention_but_no_feed_forward_block_keeps_its_attention_and_says_llama_cpp_skips_it(
        tmp_path):
    c = cfg("small-nemotron-nas")
    c["block_configs"][2]["ffn"] = {"ffn_mult": None, "no_op": True, "replace_with_linear": False}
    spec = read_gguf(oracle.write(tmp_path / "d.gguf", c).path).spec
    assert isinstance(spec.layers[2].mixer, Attention) and spec.layers[2].ffn is None
    said = [n for n in spec.notes if "skips layer 2 whole" in n]
    assert len(said) == 1 and "transformers' decoder layer) adds it, and so does this document" in said[0]


def test_a_deci_layer_said_to_have_one_product_in_place_of_attention_without_its_tensor_is_refused(tmp_path):
    # Layer 6 has no block at all; its metadata made to say 4 heads and no key/value head: attn_output it lacks.
    w = oracle.write(tmp_path / "d.gguf", cfg("small-nemotron-nas"),
                     kv={"{arch}.attention.head_count": [4, 4, 4, 4, 0, 4, 4, 4],
                         "{arch}.attention.head_count_kv": [2, 2, 4, 0, 0, 2, 0, 4]})
    with pytest.raises(CheckpointError, match=r"tensor blk\.6\.attn_output\.weight is missing, but the metadata says "
                                              r"layer 6 has one product in place of attention"):
        read_gguf(w.path)


def test_a_deci_width_the_metadata_and_the_tensor_disagree_on_is_refused_naming_both(tmp_path):
    w = oracle.write(tmp_path / "d.gguf", cfg("small-nemotron-nas"),
                     kv={"{arch}.feed_forward_length": [512, 512, 256, 256, 256, 512, 0, 256]})  # layer 7: 512
    with pytest.raises(CheckpointError, match=r"blk\.7\.ffn_gate\.weight has 512 outputs, but `deci\.feed_forward_length` "
                                              r"says layer 7's block is 256 wide"):
        read_gguf(w.path)


def test_a_granite_gguf_needs_its_logit_scale_and_refuses_one_of_0(tmp_path):
    with pytest.raises(CheckpointError, match=r"metadata `granite\.logit_scale` is missing; a granite GGUF needs it"):
        read_gguf(oracle.write(tmp_path / "a.gguf", cfg("small-granite"), kv={"{arch}.logit_scale": None}).path)
    with pytest.raises(CheckpointError, match=r"`granite\.logit_scale` is 0; Granite divides its logits by it"):
        read_gguf(oracle.write(tmp_path / "b.gguf", cfg("small-granite"), kv={"{arch}.logit_scale": 0.0}).path)


def test_a_granite_gguf_reads_its_multipliers_where_they_are_not_0(tmp_path):
    spec = read_gguf(oracle.write(tmp_path / "g.gguf", cfg("small-granite")).path).spec
    assert (spec.embed_scale, spec.logit_scale) == (12.0, 1 / 8)
    assert [l.residual_scale for l in spec.layers] == pytest.approx([0.22] * 4)
    assert {l.mixer.scale for l in spec.layers} == {0.5}
    spec = read_gguf(oracle.write(tmp_path / "z.gguf", cfg("small-granite"),
                                  kv={"{arch}.residual_scale": 0.0, "{arch}.embedding_scale": 0.0,
                                      "{arch}.attention.scale": 0.0}).path).spec
    assert (spec.embed_scale, {l.residual_scale for l in spec.layers}, {l.mixer.scale for l in spec.layers}) == \
        (None, {None}, {None})


def test_granite_vision_s_deepstack_is_refused_and_a_mapping_that_adds_nothing_is_read(tmp_path):
    inert = oracle.write(tmp_path / "a.gguf", cfg("small-granite"), kv={"{arch}.deepstack_mapping": [-1, -1, -1, -1]})
    read_gguf(inert.path)
    stacked = oracle.write(tmp_path / "b.gguf", cfg("small-granite"), kv={"{arch}.deepstack_mapping": [-1, 1, -1, -1]})
    with pytest.raises(CheckpointError, match=r"`granite\.deepstack_mapping` is a list of 4: llama\.cpp adds vision "
                                              r"projections"):
        read_gguf(stacked.path)


def test_a_cohere2_gguf_ties_its_head_norms_once_for_both_blocks_and_rotates_only_its_sliding_layers(tmp_path):
    spec = read_gguf(oracle.write(tmp_path / "c.gguf", cfg("small-cohere2")).path).spec
    assert spec.tied and spec.logit_scale == 0.25 and spec.final_norm.layer
    assert all(l.parallel and l.norm.layer and not l.norm.bias for l in spec.layers)
    assert [l.mixer.window for l in spec.layers] == [8, 8, 8, None] * 2
    assert [l.mixer.rotation is not None and l.mixer.rotation.interleaved for l in spec.layers] == [True] * 3 + [False] + \
        [True] * 3 + [False]


def test_a_mistral3_gguf_is_read_as_a_llama_that_rotates_adjacent_pairs(tmp_path):
    spec = read_gguf(oracle.write(tmp_path / "m.gguf", cfg("small-mistral3")).path).spec
    assert spec.architecture == "mistral3" and not spec.tied
    assert all(l.mixer.rotation.interleaved and l.mixer.rotation.base == 1e9 for l in spec.layers)
