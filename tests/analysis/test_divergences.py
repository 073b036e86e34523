"""Divergences: where a layer that should be one program with its siblings is not, and why — and silence where a
layer differs by design."""

from __future__ import annotations

from builders import document, line_of

from streamed.analysis.whole import analyze
from streamed.model.checkpoint import Storage


def _divs(text: str, storage=None):
    return list((analyze(text) if storage is None else analyze(text, storage)).divergences)


def test_a_correct_model_reports_no_divergence():
    assert _divs(document(6)) == []


def test_a_swapped_weight_names_both_layers_and_the_binding():
    text = document(6).replace("Let qr4 be rope of (xn4 times Wq4)", "Let qr4 be rope of (xn4 times Wk4)")
    (d,) = _divs(text)
    assert (d.layer, d.representative) == (4, 0)
    assert d.why == "layer 4 reads `Wk4` where layer 0 reads `Wq0` at the same place: `Wq…` is bound as `Wq4` elsewhere in layer 4"
    assert d.range.start.line + 1 == line_of(text, "Let qr4 be rope")
    assert d.representative_range.start.line + 1 == line_of(text, "Let qr0 be rope")
    data = text.encode()
    assert data[d.range.start.offset:d.range.end.offset] == b"Wk4"
    assert data[d.representative_range.start.offset:d.representative_range.end.offset] == b"Wq0"


def test_a_changed_window_is_reported_as_the_words_that_differ():
    specs = [dict(window=1024)] * 5
    specs = [dict(s) for s in specs]
    specs[3] = dict(window=512)
    (d,) = _divs(document(specs))
    assert (d.layer, d.representative) == (3, 0)
    assert d.why == "layer 3 says `window 512` where layer 0 says `window 1024`"
    assert d.kind == "attention, window 1024" and d.own_kind == "attention, window 512"


def test_a_weight_stored_differently_is_reported_with_how_each_is_stored():
    text = document(5) + "\n## Checkpoint\nWv{l} is \"blk.{l}.attn_v.weight\".\n"
    types = {f"blk.{l}.attn_v.weight": "Q8_0" for l in range(5)}
    types["blk.2.attn_v.weight"] = "F16"
    (d,) = _divs(text, Storage(types=types, source="t.gguf"))
    assert d.layer == 2
    assert d.why.startswith("`Wv2` is stored F16 but `Wv0` is stored Q8_0")


def test_a_longer_layer_says_how_many_tokens_and_after_which_statement():
    text = document(5).replace("Return xo3.", "Let extra3 be xo3.\nReturn xo3.")
    (d,) = _divs(text)
    statement = 1 + len([ln for ln in text.split("## Layer 3")[1].split("Let extra3")[0].split("\n") if ln.strip()]) - 1
    assert d.layer == 3 and d.range.start.line + 1 == line_of(text, "Let extra3")
    assert d.why == f"layer 3 has 5 more tokens after statement {statement}, which layer 0 does not have"


def test_a_layer_that_differs_by_design_is_not_reported():
    # Gemma 3's pattern: five sliding-window layers then a global one — two kinds, no divergence.
    specs = [dict(window=512, base=10000) if (l + 1) % 6 else dict(base=1000000, table=2) for l in range(12)]
    a = analyze(document(specs))
    assert [k.name for k in a.kinds] == ["attention, window 512", "attention"]
    assert a.divergences == ()


def test_a_dense_first_layer_among_expert_layers_is_not_reported():
    specs = [dict(mixer="latent")] + [dict(mixer="latent", ffn="experts")] * 5
    a = analyze(document(specs))
    assert [k.name for k in a.kinds] == ["latent attention", "latent attention, experts"]
    assert a.divergences == ()


def test_a_layer_marked_distinct_is_not_reported():
    text = document(6).replace("Let qr4 be rope of (xn4 times Wq4)", "Let qr4 be rope of (xn4 times Wk4)")
    text = text.replace("## Layer 4\n", "## Layer 4: distinct — reads its key projection on purpose\n")
    a = analyze(text)
    assert a.divergences == ()
    assert len(a.kinds) == 2


def test_every_divergence_is_a_warning_pointing_at_both_layers():
    text = document(6).replace("heads 4 sharing 2.\nLet h5", "heads 4 sharing 1.\nLet h5")
    a = analyze(text)
    (w,) = [d for d in a.diagnostics if d.code == "divergence"]
    assert w.severity.value == "warning"
    assert "layer 5" in w.message and "layer 0" in w.message
    assert w.related[0].range.start.line + 1 == line_of(text, "heads 4 sharing 2")


def test_a_checkpoint_the_document_does_not_describe_is_a_warning_not_silence():
    text = document(3) + "\n## Checkpoint\nWq{l} is \"model.layers.{l}.self_attn.q_proj.weight\".\n"
    storage = Storage(types={f"blk.{l}.attn_q.weight": "Q8_0" for l in range(3)}, source="model.gguf")
    a = analyze(text, storage)
    warnings = [d.message for d in a.diagnostics if d.code == "checkpoint"]
    assert '`Wq0` is bound to "model.layers.0.self_attn.q_proj.weight", which model.gguf does not have (and 2 more like it)' in warnings
    assert any(m.startswith("no `## Checkpoint` entry binds `Wk0`") for m in warnings)
