"""`verify --mode tp` certifies replicated key/value heads like any other: each chip's copy of a KV head (its cache,
its projection's columns) is measured against its part of the reference's, on every chip that holds it — so a copy
that reads the wrong head is caught on its chip. Gated delta's key heads likewise, in blocks or in turn."""

import re
from dataclasses import replace

import pytest

from streamed.analysis.whole import analyze
from streamed.cli import main
from streamed.numerics.execute import plan_of
from streamed.numerics.verify import run
from streamed.numerics.weights import seeded
from streamed.spatial.deployment import Deployment
from streamed.spatial.streamed_model import lower_streamed

from repo import EXAMPLES, example

CTX = 20


def certify(a, dep, model=None, steps=4, seed=3):
    model = model or lower_streamed(a, dep)
    return run(a.programs, seeded(a.programs, seed), dep, {"step": plan_of(model)}, steps)


def test_verify_over_four_chips_of_a_model_with_two_kv_heads_agrees_on_the_command_line(capsys):
    assert main(["verify", str(EXAMPLES / "tiny-llama.lgm"), "--mode", "tp", "--tp", "4"]) == 0
    assert "bundle and reference agree" in capsys.readouterr().out


@pytest.mark.parametrize("dep", [Deployment("tp", CTX, tp=4), Deployment("batched-tp", CTX, batch=2, tp=4)],
                         ids=lambda d: d.mode)
def test_every_chip_s_copy_of_a_kv_head_is_measured_against_the_reference(dep):
    a = analyze(example("tiny-llama"))
    report = certify(a, dep)
    assert report.ok, report.error or report.first_failure.describe()
    caches = {m.tensor for m in report.measures if m.program == "layer 2" and m.tensor.startswith(("Kc2", "Vc2"))}
    per_sequence = [f"_s{b}" for b in range(dep.batch)] if dep.batched else [""]
    assert caches == {f"{n}{s}_c{c}" for n in ("Kc2", "Vc2") for s in per_sequence for c in range(4)}


def test_a_chip_whose_copy_reads_the_other_kv_head_is_caught_on_that_chip():
    a = analyze(example("tiny-llama"))
    dep = Deployment("tp", CTX, tp=4)
    model = lower_streamed(a, dep)
    kind = model.kinds[0]
    # chip 1 shares KV head 0 with chip 0; plant the columns of head 1 in its copy of the key projection
    p = kind.program
    wrong = tuple(replace(t, slice=(1, 16, 32)) if t.of == "Wk0" and t.chip == 1 else t for t in p.tensors)
    assert wrong != p.tensors
    model = replace(model, kinds=(replace(kind, program=replace(p, tensors=wrong)),))
    report = certify(a, dep, model)
    bad = report.first_failure
    assert bad is not None and bad.program == "layer 0" and bad.tensor.endswith("_c1"), bad


@pytest.mark.parametrize("tp", [2, 4])
def test_value_heads_that_read_their_key_heads_in_turn_hold_the_key_heads_they_read(tp):
    """llama.cpp's Qwen3.5 order: value head h reads key head h mod G. Over 4 chips each chip's one value head
    reads key head c mod 2, so chips 0 and 2 hold key head 0, chips 1 and 3 key head 1; over 2 chips each holds
    both."""
    text = re.sub(r"(gated delta [^\n]*heads \d+ sharing \d+)\.", r"\1, in turn.", example("small-qwen35"))
    a = analyze(text)
    assert "in turn" in text and not a.errors
    dep = Deployment("tp", CTX, tp=tp)
    model = lower_streamed(a, dep)
    kind = next(k for k in model.kinds if k.name.startswith("gated"))
    shares = {r["of"]: [s["chips"] for s in r["shares"]] for r in kind.tp["replicas"]}
    assert shares["Wlk0"] == ([[0, 2], [1, 3]] if tp == 4 else [[0, 1]])
    report = certify(a, dep, model)
    assert report.ok, report.error or report.first_failure.describe()


def test_a_windowed_layers_ring_copied_on_every_chip_agrees_with_the_reference_past_its_wrap_around():
    """Rings and replicas together: one key/value head over 4 chips, layers with a window of 8 carry on every chip a
    ring copy of it; 14 steps at ctx 20 write past the ring's end and wrap around, and each chip's ring is measured
    against the reference's cache on its own chip."""
    from streamed.spatial.synth import two_kind_document

    a = analyze(two_kind_document(4, heads=4, kv=1, hd=16, window=8))
    dep = Deployment("tp", CTX, tp=4)
    model = lower_streamed(a, dep)
    windowed = next(k for k in model.kinds if "window" in k.name)
    rings = {t.name: t.shape for t in windowed.program.tensors if t.of == f"Kc{windowed.representative}"}
    assert rings == {f"Kc{windowed.representative}_c{c}": (8, 16) for c in range(4)}  # a ring of the window a chip
    report = certify(a, dep, model, steps=14)
    assert report.ok, report.error or report.first_failure.describe()
    measured = {m.tensor for m in report.measures if m.program == f"layer {windowed.representative}"}
    assert {f"{n}{windowed.representative}_c{c}" for n in ("Kc", "Vc") for c in range(4)} <= measured
