"""The bundle on disk: schema-valid, round-tripping, written atomically; and the `streamed lower` command."""

import json
import os
import subprocess
import sys

import jsonschema
import pytest

from streamed.spatial import bundle as bundle_module
from streamed.analysis.whole import analyze
from streamed.spatial.bundle import BundleError, manifest, read_bundle, schema, write_bundle
from streamed.cli import main
from streamed.spatial.synth import two_kind_document
from streamed.spatial.deployment import Deployment
from streamed.spatial.streamed_model import lower_streamed

from repo import EXAMPLES

DEPLOYMENTS = [Deployment("forward", ctx=16), Deployment("decode", ctx=128), Deployment("prefill", ctx=128, chunk=4),
               Deployment("batched", ctx=128, batch=2), Deployment("tp", ctx=128, tp=2),
               Deployment("batched-tp", ctx=128, batch=2, tp=2)]


@pytest.mark.parametrize("deployment", DEPLOYMENTS, ids=[d.mode for d in DEPLOYMENTS])
def test_manifest_and_program_files_validate_and_the_bundle_round_trips(analyses, tmp_path, deployment):
    for name, a in analyses.items():
        model = lower_streamed(a, deployment)
        out = tmp_path / f"{name}-{deployment.mode}"
        path = write_bundle(model, out, source=f"{name}.lgm")
        m = json.loads(path.read_text())
        jsonschema.validate(m, schema("manifest"))
        assert m["format"] == "streamed-bundle/2" and m["source"] == f"{name}.lgm"
        assert m["mode"] == deployment.mode and m["rows"] == deployment.rows
        files = [m["programs"]["head"]] + [k["program"] for k in m["kinds"]] + \
                ([m["programs"]["embed"]] if m["programs"]["embed"] else [])
        for f in files:
            jsonschema.validate(json.loads((out / f).read_text()), schema("program"))
        back = read_bundle(out)
        assert manifest(back, f"{name}.lgm") == m
        assert back.programs() == model.programs() and back.deployment == model.deployment


def test_the_manifest_says_which_kind_runs_at_each_layer(analyses):
    a = analyses["generated"]
    m = manifest(lower_streamed(a, Deployment("decode", ctx=64)))
    assert [l["kind"] for l in m["layers"]] == [a.kind_of(i).name for i in range(12)]
    assert [k["layers"] for k in m["kinds"]] == [list(k.layers) for k in a.kinds]
    assert m["estimate"]["tokens_per_second"] > 0


def test_a_failed_lowering_writes_no_directory_and_keeps_an_existing_one(tmp_path, capsys):
    doc = tmp_path / "m.lgm"
    doc.write_text(two_kind_document(4))
    out = tmp_path / "bundle"
    assert main(["lower", str(doc), "--mode", "tp", "--tp", "3", "-o", str(out)]) == 1
    assert not out.exists()
    assert capsys.readouterr().err.startswith("the bundle program does not lower: tensor parallel over 3 chips")
    assert main(["lower", str(doc), "-o", str(out), "--ctx", "64"]) == 0
    before = {p.name: p.read_bytes() for p in (out / "programs").iterdir()} | {"m": (out / "manifest.json").read_bytes()}
    assert main(["lower", str(doc), "--mode", "batched-tp", "--batch", "2", "--tp", "3", "-o", str(out)]) == 1
    assert main(["lower", str(doc), "--mode", "batched", "--batch", "0", "-o", str(out)]) == 2
    after = {p.name: p.read_bytes() for p in (out / "programs").iterdir()} | {"m": (out / "manifest.json").read_bytes()}
    assert before == after
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_a_write_that_fails_midway_leaves_the_old_bundle_and_no_temporary(tmp_path, monkeypatch, analyses):
    model = lower_streamed(analyses["tiny-llama"], Deployment("decode", ctx=64))
    out = tmp_path / "b"
    write_bundle(model, out)
    old = (out / "manifest.json").read_text()
    other = lower_streamed(analyses["tiny-llama"], Deployment("decode", ctx=128))

    def broken(*args, **kw):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(bundle_module, "manifest", broken)
    with pytest.raises(BundleError, match="No space left"):
        write_bundle(other, out)
    assert (out / "manifest.json").read_text() == old
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b"]


def test_a_directory_that_is_not_a_bundle_is_never_replaced(tmp_path, analyses):
    out = tmp_path / "notes"
    out.mkdir()
    (out / "mine.txt").write_text("keep me")
    with pytest.raises(BundleError, match="holds mine.txt, which no lowering wrote"):
        write_bundle(lower_streamed(analyses["tiny-llama"], Deployment("decode", ctx=64)), out)
    assert (out / "mine.txt").read_text() == "keep me"


def test_lower_prints_a_summary_of_kinds_layers_residency_and_estimate(tmp_path, capsys):
    out = tmp_path / "b"
    doc = EXAMPLES / "tiny-llama.lgm"
    assert main(["lower", str(doc), "--mode", "batched-tp", "--batch", "2", "--tp", "2", "--ctx", "256",
                 "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert "kinds lowered  1 (attention: layers 0-3)" in text
    assert "layers bound   4" in text and "residency" in text and "tokens/s" in text
    assert (out / "manifest.json").exists()


@pytest.mark.parametrize("argv,message", [
    (["--mode", "prefill"], "needs --chunk N"),
    (["--target", "nowhere.toml"], "nowhere.toml: no such target file"),
    (["--target", "sn99"], "unknown target `sn99`"),
])
def test_lower_refuses_bad_input_with_status_2(tmp_path, capsys, argv, message):
    assert main(["lower", str(EXAMPLES / "tiny-llama.lgm"), "-o", str(tmp_path / "b"), *argv]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "b").exists()


def test_check_reports_a_kinds_reject_at_the_statement_that_caused_it(tmp_path):
    text = two_kind_document(4)
    for l in range(4):
        text = text.replace(f"Let a{l} be attention of qp{l} over Kc{l} and Vc{l}",
                            f"Let k{l} be xn{l} times Wk{l}.\nLet v{l} be xn{l} times Wv{l}.\n"
                            f"Let a{l} be attention of qp{l} over k{l} and v{l}")
    doc = tmp_path / "m.lgm"
    doc.write_text(text)
    a = analyze(text)
    stmt = next(s for s in a.programs.layer(0).statements if getattr(s, "name", None) and s.name.text == "a0")
    r = subprocess.run([sys.executable, "-m", "streamed", "check", str(doc)], capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(EXAMPLES.parent)})
    assert r.returncode == 1
    hits = [l for l in r.stdout.splitlines() if "does not lower" in l]
    assert len(hits) == 2  # one per kind: the windowed and the global attention
    assert hits[0].startswith(f"{doc}:{stmt.range.start.line + 1}:")
    assert "not a state" in hits[0]


def _ggufs():
    import ggufs

    return ggufs


def test_lower_reads_q8_folding_from_the_checkpoint(tmp_path, capsys):
    """A checkpoint storing one layer's query projection F16: that layer is its own kind, read dense."""
    ckpt = _ggufs().llama_like(tmp_path / "m.gguf", types={"blk.2.attn_q.weight": "F16"})
    out = tmp_path / "b"
    assert main(["lower", str(EXAMPLES / "tiny-llama.lgm"), "--checkpoint", str(ckpt), "--ctx", "64",
                 "-o", str(out)]) == 0
    m = read_bundle(out)
    assert [k.layers for k in m.kinds] == [(0, 1, 3), (2,)]
    lone = m.kinds[1].program
    assert [o.inputs[1] for o in lone.ops if o.kind == "matmul"] == ["Wq2"]
    assert all(o.kind == "matmul_q8" for o in m.kinds[0].program.ops if o.kind.startswith("matmul"))
    assert "kinds lowered  2" in capsys.readouterr().out


def test_a_bundle_read_back_summarises_its_kinds_and_estimate(tmp_path, analyses):
    a = analyses["generated"]
    write_bundle(lower_streamed(a, Deployment("decode", ctx=64)), tmp_path / "b")
    s = read_bundle(tmp_path / "b").summary
    assert s["mode"] == "decode" and s["layers"] == 12
    assert [(k["name"], k["layers"]) for k in s["kinds"]] == [(k.name, len(k.layers)) for k in a.kinds]
    assert s["tokens_per_second"] > 0 and sum(s["states"].values()) > 0


def test_a_bundle_an_older_streamed_wrote_is_refused_naming_its_format_and_replaced_by_a_new_one(tmp_path, analyses):
    out = tmp_path / "b"
    model = lower_streamed(analyses["tiny-llama"], Deployment("decode", ctx=64))
    write_bundle(model, out)
    m = json.loads((out / "manifest.json").read_text())
    (out / "manifest.json").write_text(json.dumps({**m, "format": "streamed-bundle/1"}))
    with pytest.raises(BundleError, match="a streamed-bundle/1 bundle, written by an older streamed; lower the "
                                          "document again"):
        read_bundle(out)
    write_bundle(model, out)  # still a bundle directory: replaced, not refused as someone else's files
    assert json.loads((out / "manifest.json").read_text())["format"] == "streamed-bundle/2"
