"""A part of a model the language does not write, which changes nothing within some positions, is bounded in the open:
the document's `modelled` constant says how many positions it computes as the model does, and a deployment or a run
past them is refused in one line — never answered as if it were the model. Llama 4's NoPE layers multiply their
queries by a temperature that is exactly 1 before position `floor_scale − 1` (transformers' `Llama4TextAttention`:
`log1p(floor((p + 1)/floor_scale))·attn_scale + 1`; llama.cpp's `llm_graph_input_attn_temp`, floor 8192, scale 0.1,
offset 1), so a document without it is the model for `floor_scale − 1` positions."""

import json

import pytest

from streamed.analysis.whole import analyze
from streamed.cli import main
from streamed.lang.syntax import Severity
from streamed.model.author import author
from streamed.model.hf import spec_from_config
from streamed.spatial.deployment import Deployment
from streamed.spatial.diagnose import reject_diagnostics

from repo import config

FLOOR = 16  # positions 0 … 14 have the temperature 1: floor((p + 1)/16) = 0


def temperature(p: int, floor: int = FLOOR, scale: float = 0.1) -> float:
    """transformers' Llama 4 query temperature at position p, as its attention computes it (in float64 here)."""
    import math

    return math.log1p(math.floor((p + 1) / floor)) * scale + 1


def small_llama4(**fields) -> str:
    """A 4-layer Llama 4 (the 4th layer NoPE) at width 64, its temperature floor at 16."""
    c = config("llama-4-scout")
    c = {**c, "text_config": {**c["text_config"], "hidden_size": 64, "head_dim": 16, "num_attention_heads": 4,
                              "num_key_value_heads": 2, "intermediate_size": 32, "intermediate_size_mlp": 64,
                              "num_hidden_layers": 4, "num_local_experts": 4, "vocab_size": 256,
                              "floor_scale": FLOOR, **fields}} if "text_config" in c else {**c, **fields}
    return author(spec_from_config(c))


def test_the_modelled_positions_are_exactly_those_at_which_the_temperature_is_one():
    doc = small_llama4()
    modelled = FLOOR - 1
    assert f"Let modelled be {modelled}." in doc
    assert all(temperature(p) == 1.0 for p in range(modelled)) and temperature(modelled) > 1.0
    # the NoPE layer says so where its attention is written; the rotating layers have no temperature
    nope = [line for line in doc.splitlines() if "query temperature" in line and line.startswith("Let a")]
    assert [line.split()[1] for line in nope] == ["a3"]


@pytest.mark.parametrize("fields", [{"attn_temperature_tuning": False}, {"attn_scale": 0.0},
                                    {"no_rope_layers": [1, 1, 1, 1]}])
def test_a_llama4_without_a_query_temperature_has_no_modelled_bound(fields):
    assert "modelled" not in small_llama4(**fields)


def test_a_context_past_modelled_is_an_error_on_the_model_heading_and_within_it_nothing():
    a = analyze(small_llama4())
    model = next(s for s in a.document.sections if s.kind.value == "model")
    past = [d for d in reject_diagnostics(a, Deployment("decode", FLOOR)) if d.code == "context"]
    assert [(d.severity, d.range) for d in past] == [(Severity.ERROR, model.heading)]
    assert past[0].message.startswith(f"ctx {FLOOR} is past the {FLOOR - 1} positions the document computes as the "
                                      f"model does (`modelled`")
    assert not [d for d in reject_diagnostics(a, Deployment("decode", FLOOR - 1)) if d.code == "context"]


def test_lower_past_modelled_is_refused_in_one_line_and_writes_nothing(tmp_path, capsys):
    doc = tmp_path / "llama4.lgm"
    doc.write_text(small_llama4())
    assert main(["lower", str(doc), "--ctx", str(FLOOR), "-o", str(tmp_path / "b"), "--no-sweep"]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"use at most {FLOOR - 1}" in err
    assert not (tmp_path / "b").exists()
    assert main(["lower", str(doc), "--ctx", str(FLOOR - 1), "-o", str(tmp_path / "c"), "--no-sweep"]) == 0
    assert json.loads((tmp_path / "c" / "manifest.json").read_text())["ctx"] == FLOOR - 1


def test_run_over_more_tokens_than_modelled_is_refused_before_anything_is_computed(tmp_path, capsys):
    doc = tmp_path / "llama4.lgm"
    doc.write_text(small_llama4())
    tokens = ",".join(str(t) for t in range(FLOOR))
    assert main(["run", str(doc), "--tokens", tokens, "--json"]) == 2  # a request the document cannot answer
    err = capsys.readouterr().err
    assert f"--tokens: {FLOOR} tokens are past the {FLOOR - 1} positions" in err and "Traceback" not in err
    assert main(["run", str(doc), "--tokens", tokens.rsplit(",", 1)[0], "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["logits"]) == FLOOR - 1


def test_the_library_s_lowering_refuses_a_ctx_past_modelled_before_lowering_anything():
    from streamed.spatial.streamed_model import StreamedReject, lower_streamed

    a = analyze(small_llama4())
    with pytest.raises(StreamedReject, match=f"ctx {FLOOR} is past the {FLOOR - 1} positions"):
        lower_streamed(a, Deployment("decode", FLOOR))
    assert lower_streamed(a, Deployment("decode", FLOOR - 1)).deployment.ctx == FLOOR - 1
