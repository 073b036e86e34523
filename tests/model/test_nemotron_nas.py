"""Nemotron-NAS: how many programs a heterogeneous model really is.

Llama-3.1-Nemotron-51B and -Super-49B give every one of their 80 layers its own ``block_configs`` entry. Layers whose
entries are equal are one program up to names, so one kind; entries that differ are different programs. The kinds
expected here are computed from the published configs' ``block_configs`` alone (equal entries grouped), never from
``streamed``'s reading of them, and held against the kinds the analysis finds in the authored document.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import nas
from streamed.analysis.whole import analyze
from streamed.model.author import author
from streamed.model.hf import spec_from_config
from streamed.model.spec import SpecError

FIXTURES = Path(__file__).resolve().parent / "configs"


def config(name: str) -> dict:
    return json.loads((FIXTURES / f"{name}.json").read_text())


def groups(cfg: dict) -> set[tuple[int, ...]]:
    """The layers of each distinct ``block_configs`` entry."""
    return {layers for _, layers in nas.block_kinds(cfg)}


@pytest.fixture(scope="module")
def analysed():
    done = {}

    def get(name: str):
        if name not in done:
            text = author(spec_from_config(config(name)))
            done[name] = (text, analyze(text))
        return done[name]

    return get


@pytest.mark.parametrize("name, count", [("llama-3_1-nemotron-51b-instruct", 9), ("llama-3_3-nemotron-super-49b-v1", 8)])
def test_a_nemotron_model_s_layers_are_one_kind_per_distinct_block_config(analysed, name, count):
    want = groups(config(name))
    text, a = analysed(name)
    assert not a.errors, [d.message for d in a.errors][:3]
    got = {k.layers for k in a.kinds}
    assert got == want
    assert len(a.kinds) == len(want) == count
    assert [(k.name, k.layers) for k in a.kinds] == nas.block_kinds(config(name))
    assert sum(len(k.layers) for k in a.kinds) == 80


def test_nemotron_51b_s_kinds_hold_the_layers_its_block_configs_name(analysed):
    """The 51B's nine programs, each found by what its block says: the 43 layers of 8 key/value heads and a 5.25×
    block; attention replaced by one product at 11, 35, 38, 40–42 (a 2.625× block) and at 39 (5.25×); attention
    removed at 43, 46, 48, 51, 54, 55, 57, 58."""
    cfg = config("llama-3_1-nemotron-51b-instruct")
    _, a = analysed("llama-3_1-nemotron-51b-instruct")
    by_layer = {l: k for k in a.kinds for l in k.layers}
    blocks = cfg["block_configs"]
    removed = [i for i, b in enumerate(blocks) if b["attention"]["no_op"]]
    linear = [i for i, b in enumerate(blocks) if b["attention"]["replace_with_linear"]]
    assert removed == [43, 46, 48, 51, 54, 55, 57, 58]
    assert by_layer[43].layers == tuple(removed)
    assert {by_layer[i].layers for i in linear} == {(11, 35, 38, 40, 41, 42), (39,),
                                                    tuple(i for i in linear if blocks[i]["ffn"]["ffn_mult"] == 1.3125)}
    common = max(a.kinds, key=lambda k: len(k.layers))
    assert len(common.layers) == sum(1 for b in blocks if b["attention"]["n_heads_in_group"] == 8
                                     and b["ffn"]["ffn_mult"] == 5.25) == 43


def test_no_divergence_is_reported_for_layers_their_source_makes_different(analysed):
    """The author heads each layer whose block differs from the common one ``distinct — …`` (LANGUAGE §7): without
    those notes the analysis would take the 51B's other attention kinds for layers meant to be the common one."""
    for name in ("llama-3_1-nemotron-51b-instruct", "llama-3_3-nemotron-super-49b-v1"):
        text, a = analysed(name)
        assert not a.divergences
        distinct = [int(m) for m in re.findall(r"^## Layer (\d+): distinct", text, re.M)]
        common = max(a.kinds, key=lambda k: len(k.layers))
        assert distinct and not set(distinct) & set(common.layers)
    text, _ = analysed("llama-3_1-nemotron-51b-instruct")
    unmarked = analyze(re.sub(r"(?m)^(## Layer \d+): distinct — .*$", r"\1: attention", text))
    assert {d.layer for d in unmarked.divergences} >= {0, 1, 5, 7}


def test_each_layer_s_feed_forward_width_is_its_ffn_mult_s_rounded_up_to_256(analysed):
    """``int(2 · ffn_mult · hidden / 3)`` rounded up to a multiple of 256, as the remote code sizes each block (Super-49B's
    0.5 gives 2730, so 2816; its 3.28125 exactly 17920)."""
    cfg = config("llama-3_3-nemotron-super-49b-v1")
    text, _ = analysed("llama-3_3-nemotron-super-49b-v1")
    for i, b in enumerate(cfg["block_configs"]):
        want = -(-int(2 * b["ffn"]["ffn_mult"] * cfg["hidden_size"] / 3) // 256) * 256
        assert re.search(rf"^Let Wg{i} +be a q8 weight of d by {want}\.$", text, re.M), (i, want)


def test_a_removed_block_is_written_by_its_absence(analysed):
    text, a = analysed("llama-3_1-nemotron-51b-instruct")
    layer43 = text.split("## Layer 43:")[1].split("## Layer 44:")[0]
    assert "Let pos" not in layer43 and "attention of" not in layer43 and "Kc43" not in layer43
    assert "Let xo43 be xo42 plus fo43." in layer43
    layer11 = text.split("## Layer 11:")[1].split("## Layer 12:")[0]
    assert "Let o11    be xn11 times Wlin11." in layer11 and "state" not in layer11


def test_a_layer_without_attention_is_another_kind_than_one_with_it_and_a_layer_without_blocks_is_identity():
    att = {"n_heads_in_group": 2}
    cfg = {"model_type": "nemotron-nas", "hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 4,
           "vocab_size": 128, "block_configs": [{"attention": att, "ffn": {"ffn_mult": 1.0}},
                                                {"attention": {"no_op": True}, "ffn": {"ffn_mult": 1.0}},
                                                {"attention": {"no_op": True}, "ffn": {"no_op": True}},
                                                {"attention": att, "ffn": {"ffn_mult": 1.0}}]}
    a = analyze(author(spec_from_config(cfg)))
    assert [(k.name, k.layers) for k in a.kinds] == [("attention", (0, 3)), ("feed-forward", (1,)), ("identity", (2,))]
    assert not a.errors


def test_nemotron_51b_lowers_one_program_per_kind(tmp_path, analysed):
    from streamed.cli import main

    text, a = analysed("llama-3_1-nemotron-51b-instruct")
    doc = tmp_path / "n51.lgm"
    doc.write_text(text)
    assert main(["lower", str(doc), "--mode", "decode", "--ctx", "4096", "-o", str(tmp_path / "n51.bundle")]) == 0
    manifest = json.loads((tmp_path / "n51.bundle" / "manifest.json").read_text())
    programs = sorted(p.name for p in (tmp_path / "n51.bundle" / "programs").iterdir())
    assert programs == sorted(["embed.json", "head.json", *(f"layer-{k.representative}.json" for k in a.kinds)])
    assert len(manifest["layers"]) == 80


@pytest.mark.parametrize("block, said", [
    ({"attention": {"n_heads_in_group": 3}, "ffn": {"ffn_mult": 1.0}},
     "`block_configs[1].attention.n_heads_in_group` is 3, which does not divide `num_attention_heads` (4)"),
    ({"attention": {"no_op": True, "replace_with_linear": True}, "ffn": {"ffn_mult": 1.0}},
     "`block_configs[1].attention` is both `no_op` and `replace_with_linear`"),
    ({"attention": {"n_heads_in_group": 2, "window_length": 128}, "ffn": {"ffn_mult": 1.0}},
     "`block_configs[1].attention.window_length` is 128: the language does not express it"),
    ({"attention": {"n_heads_in_group": 2}, "ffn": {}}, "`block_configs[1].ffn.ffn_mult` must be a positive number, not null"),
    ({"attention": {"n_heads_in_group": 2}, "ffn": {"ffn_mult": -1.0}}, "`block_configs[1].ffn.ffn_mult` must be a positive number"),
    ({"attention": {"n_heads_in_group": 2}, "ffn": {"ffn_mult": 1.0, "sparsify": ["x"]}},
     "`block_configs[1].ffn.sparsify` is [\"x\"]: the language does not express it"),
])
def test_a_block_the_language_cannot_say_or_that_contradicts_itself_is_refused_naming_its_field(block, said):
    cfg = {"model_type": "nemotron-nas", "hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 2,
           "vocab_size": 128, "block_configs": [{"attention": {"n_heads_in_group": 2}, "ffn": {"ffn_mult": 1.0}}, block]}
    with pytest.raises(SpecError) as e:
        spec_from_config(cfg)
    assert said in str(e.value) and "\n" not in str(e.value)


def test_block_configs_of_another_length_than_the_layers_is_refused():
    cfg = {**config("llama-3_1-nemotron-51b-instruct"), "num_hidden_layers": 79}
    with pytest.raises(SpecError, match="`block_configs` lists 80 blocks but `num_hidden_layers` is 79"):
        spec_from_config(cfg)
