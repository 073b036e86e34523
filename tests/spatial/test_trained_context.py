"""A context past the one the model was trained at (the document's `trained`: a config's `max_position_embeddings`)
is said: a warning on the `## Model` heading — from the analysis, so `check` and the editor show the same —, a line of
`lower`'s output and the manifest's `past_trained`. Within it, nothing is said."""

import json

from streamed.analysis.whole import analyze
from streamed.cli import main
from streamed.lang.syntax import Severity
from streamed.model.author import author
from streamed.model.hf import spec_from_config
from streamed.spatial.deployment import Deployment
from streamed.spatial.diagnose import reject_diagnostics

from repo import config

WARNING = "ctx 8,192 is past the 4,096 positions the model was trained at (`trained`)"


def olmo_like():
    """small-olmo2's config at OLMo 2's trained context, 4096 (`max_position_embeddings`)."""
    return author(spec_from_config({**config("small-olmo2"), "max_position_embeddings": 4096}))


def test_the_author_writes_max_position_embeddings_as_the_trained_constant():
    assert "Let trained be 4096." in olmo_like()
    # ... or, without it, the rope scaling's original context
    cfg = {k: v for k, v in config("small-deepseek-v2").items() if k != "max_position_embeddings"}
    cfg["rope_scaling"] = {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 1024}
    assert "Let trained be 1024." in author(spec_from_config(cfg))


def test_a_context_past_trained_is_a_warning_on_the_model_heading_and_within_it_nothing():
    a = analyze(olmo_like())
    model = next(s for s in a.document.sections if s.kind.value == "model")
    past = [d for d in reject_diagnostics(a, Deployment("decode", 8192)) if d.code == "context"]
    assert [(d.severity, d.range) for d in past] == [(Severity.WARNING, model.heading)]
    assert past[0].message.startswith(WARNING)
    assert not [d for d in reject_diagnostics(a, Deployment("decode", 4096)) if d.code == "context"]


def test_lower_past_trained_prints_the_warning_and_the_manifest_records_it(tmp_path, capsys):
    doc = tmp_path / "olmo.lgm"
    doc.write_text(olmo_like())
    assert main(["lower", str(doc), "--ctx", "8192", "-o", str(tmp_path / "b"), "--no-sweep"]) == 0
    assert f"  context        warning: {WARNING}" in capsys.readouterr().out
    m = json.loads((tmp_path / "b" / "manifest.json").read_text())
    assert m["trained"] == 4096 and m["past_trained"].startswith(WARNING)
    assert main(["lower", str(doc), "--ctx", "4096", "-o", str(tmp_path / "c"), "--no-sweep"]) == 0
    assert "context" not in capsys.readouterr().out
    m = json.loads((tmp_path / "c" / "manifest.json").read_text())
    assert m["trained"] == 4096 and m["past_trained"] is None


def test_check_past_trained_warns_on_the_model_heading_and_exits_0(tmp_path, capsys):
    doc = tmp_path / "olmo.lgm"
    doc.write_text(olmo_like())
    line = olmo_like().splitlines().index("## Model") + 1
    assert main(["check", str(doc), "--ctx", "8192"]) == 0
    assert f"{doc}:{line}:1: warning: {WARNING}" in capsys.readouterr().out


def test_the_editor_s_incremental_analysis_places_the_warning_where_the_whole_analysis_does():
    from streamed.analysis.incremental import IncrementalAnalyzer
    from streamed.spatial.diagnose import reject_diagnostics_of

    text = olmo_like()
    mine = reject_diagnostics_of(IncrementalAnalyzer().analyze(text), Deployment("decode", 8192))
    whole = reject_diagnostics(analyze(text), Deployment("decode", 8192))
    assert list(mine) == whole and [d.code for d in whole] == ["context"]
