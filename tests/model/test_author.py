"""The author writes layers of equal spec as one program up to names, names them as the language asks, and binds
every declared weight."""

import re

import pytest

from repo import EXAMPLES, config
from streamed.analysis.whole import analyze
from streamed.analysis.kinds import renaming
from streamed.model.author import author, number
from streamed.model.checkpoint import bind
from streamed.model.hf import spec_from_config

REAL = ["llama-3.1-8b", "gemma-3-27b", "qwen3.8", "qwen3-next-80b-a3b", "deepseek-v2-lite", "llama-4-scout", "gpt-oss-20b"]
SMALL = ["tiny-llama", "small-gemma3", "small-qwen35", "small-deepseek-v2", "small-gemma2", "small-phi3", "small-starcoder2",
         "small-olmo2", "small-internlm2"]


@pytest.fixture(scope="module")
def analyses():
    return {n: analyze(author(spec_from_config(config(n), name=n))) for n in REAL + SMALL}


@pytest.mark.parametrize("name", REAL + SMALL)
def test_layers_of_equal_spec_are_one_program_up_to_names(analyses, name):
    a = analyses[name]
    spec = spec_from_config(config(name))
    by_layer = {p.section.index: p for p in a.programs.layers}
    firsts: dict = {}
    for l, layer in enumerate(spec.layers):
        first = firsts.setdefault(layer, l)
        r = renaming(by_layer[first].tokens, by_layer[l].tokens)
        assert r is not None, f"layer {l} is not layer {first} renamed"
    # …and layers of different spec are different kinds.
    assert len(a.kinds) == len(firsts)


@pytest.mark.parametrize("name", REAL + SMALL)
def test_an_authored_document_checks_clean_and_binds_every_declared_weight(analyses, name):
    a = analyses[name]
    assert not a.errors, [d.message for d in a.errors][:3]
    entries = a.document.checkpoint
    for p in a.programs.all():
        for w in p.weights():
            assert bind(entries, w.name) is not None, f"{w.name} is not bound"


@pytest.mark.parametrize("name", REAL + SMALL)
def test_per_layer_names_carry_the_layer_index_after_a_stem_that_ends_in_no_digit(analyses, name):
    a = analyses[name]
    for p in a.programs.layers:
        l = p.section.index
        for binder in p.shapes:
            if re.fullmatch(r"(Rcos|Rsin)\d+|pos", binder) or binder == ("x" if l == 0 else f"xo{l - 1}"):
                continue
            assert binder.endswith(str(l)) and not binder[: -len(str(l))][-1].isdigit(), binder
        assert p.output == f"xo{l}"


def test_the_embed_reads_a_token_and_the_head_returns_the_next_token(analyses):
    a = analyses["small-gemma3"]
    assert a.programs.embed.output == "x"
    assert a.programs.embed.decls["tok"].role == "token"
    head = a.programs.head
    assert head.input == "xo11"
    assert "index of the largest of logits" in a.document.text


def test_tied_embeddings_bind_the_output_projection_to_the_embedding(analyses):
    doc = analyses["small-gemma3"].document
    assert bind(doc.checkpoint, "Wout").tensor == bind(doc.checkpoint, "Emb").tensor


def test_projections_routers_and_expert_banks_are_declared_q8_and_norms_and_kernels_are_not(analyses):
    a = analyses["small-qwen35"]
    decls = {**a.programs.layers[0].decls, **a.programs.layers[3].decls}
    for name in ("Wlq0", "Wlo0", "Wr0", "Eg0", "Eu0", "Ed0", "Wgs0", "Wsg0", "Wq3", "Wqg3", "Wo3"):
        assert decls[name].q8, name
    for name in ("g0", "gm0", "Cq0", "dtb0", "Alog0", "gn0", "gq3"):
        assert not decls[name].q8, name


def test_rotation_tables_are_shared_and_indexed_by_width_and_base(analyses):
    text = analyses["gemma-3-27b"].document.text
    assert len(set(re.findall(r"Let (Rcos\d+) +be a table of ctx by 64, cosines of base (\d+)", text))) == 2


def test_authoring_is_deterministic():
    spec = spec_from_config(config("qwen3-next-80b-a3b"))
    assert author(spec) == author(spec)


def test_the_committed_examples_are_what_the_author_writes_today():
    for name in REAL + SMALL[1:]:
        spec = spec_from_config(config(name), where=f"examples/configs/{name}.json", name=name)
        assert (EXAMPLES / f"{name}.lgm").read_text() == author(spec), name


def test_the_authored_tiny_llama_has_the_hand_written_one_s_kinds(analyses):
    hand = analyze((EXAMPLES / "tiny-llama.lgm").read_text())
    authored = analyses["tiny-llama"]
    assert [(k.name, k.layers) for k in hand.kinds] == [(k.name, k.layers) for k in authored.kinds]


@pytest.mark.parametrize("v, text", [(64, "64"), (1e-6, "1e-6"), (9.999999747378752e-06, "1e-5"), (0.0771516749, "0.07715167"),
                                     (1e6, "1000000"), (-1.0, "-1")])
def test_numbers_are_written_as_the_language_reads_them(v, text):
    assert number(v) == text
