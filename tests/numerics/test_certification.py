"""The certification end to end: every small example document, every deployment it admits (and the refusal of
those it does not), bundle against reference; seeds 0–31 over the shipped examples; the default steps past every
window; the batched and prefill properties of the bundle itself; a GGUF checkpoint with Q8_0 and F16 weights; and a
deliberately wrong lowering that verify must catch, naming the layer and the tensor."""

from dataclasses import replace
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

from streamed.analysis.whole import analyze
from streamed.cli import main
from streamed.numerics.execute import Executor, plan_of
from streamed.spatial.deployment import Deployment
from streamed.spatial.streamed_model import LayerBinding, StreamedReject, lower_streamed
from streamed.numerics.verify import PREFILL_CHUNKS, References, label, run
from streamed.numerics.weights import concrete, declared_weights, from_gguf, gguf_storage, seeded

from repo import EXAMPLES
#: Documents of this suite's own: every option the examples leave out, and heads wide enough for 4 chips.
DOCUMENTS = Path(__file__).resolve().parent / "documents"
CTX = 20
STEPS = 8
#: Examples with more declared weight values than this are real-shaped: certified by hand, not in this suite.
SMALL = 4_000_000


def weight_count(analysis) -> int:
    """The declared weight values (0 when the document is too broken to say: it is then certified, and fails)."""
    try:
        return sum(int(np.prod(concrete(d.shape))) for d in declared_weights(analysis.programs).values())
    except Exception:
        return 0


def small_examples():
    """Every example and suite document whose weights are small — an example with errors included, so that it fails
    here rather than drop out of the certification unseen."""
    return [path for path in sorted(EXAMPLES.glob("*.lgm")) + sorted(DOCUMENTS.glob("*.lgm"))
            if weight_count(analyze(path.read_text())) <= SMALL]


DEPLOYMENTS = [
    Deployment("forward", CTX),
    Deployment("decode", CTX),
    Deployment("prefill", CTX, chunk=4),
    Deployment("batched", CTX, batch=3),
    Deployment("tp", CTX, tp=2),
    Deployment("tp", CTX, tp=4),
    Deployment("batched-tp", CTX, batch=2, tp=2),
    Deployment("batched-tp", CTX, batch=2, tp=4),
]


#: Where a document refuses a deployment, the refusal it gives: tensor parallel over more chips than its query heads
#: split into. Every other (document, deployment) pair is certified — four chips over two key/value heads included,
#: each head replicated on the two chips whose query heads read it.
REFUSED: dict[tuple[str, int], str] = {}


def lowered(analysis, dep: Deployment, storage=None):
    return lower_streamed(analysis, dep, storage=storage)


def refusal(path: Path, dep: Deployment) -> str | None:
    return REFUSED.get((path.stem, dep.chips)) if dep.chips > 1 else None


def plans_for(analysis, dep: Deployment, storage=None):
    plans = {"step": plan_of(lowered(analysis, dep, storage))}
    if dep.mode == "prefill":
        plans["prefill"] = plans["step"]
        plans["step"] = plan_of(lowered(analysis, Deployment("decode", dep.ctx), storage))
    return plans


def test_every_example_document_is_certified_unless_real_shaped():
    small = small_examples()
    assert (EXAMPLES / "tiny-llama.lgm") in small and (DOCUMENTS / "options.lgm") in small
    for path in EXAMPLES.glob("*.lgm"):
        if path not in small:
            assert weight_count(analyze(path.read_text())) > SMALL


#: The seeds every shipped example is certified for, in every deployment it admits, over a few steps each: enough
#: for a cache and a recurrent state to be read back, and for a tensor-parallel bound to meet 32 sets of weights
#: (a forward step is a whole sequence: one each).
SWEEP_SEEDS = range(32)
SWEEP_STEPS = 2
#: The deployments of the sweep: those of this suite, with one batch for batched and batched tensor parallel, so
#: that the two share the reference's steps.
SWEEP = [replace(d, batch=2) if d.mode == "batched" else d for d in DEPLOYMENTS]


@lru_cache(maxsize=None)
def shared_plans(path: Path, dep: Deployment):
    """Each (document, deployment) lowered once for every seed — the lowering does not depend on the weights."""
    a = analyze(path.read_text())
    return a, plans_for(a, dep)


@pytest.mark.parametrize("path", [p for p in small_examples() if p.parent == EXAMPLES], ids=lambda p: p.stem)
def test_every_shipped_example_is_certified_for_seeds_0_to_31_in_every_deployment_it_admits(path):
    admitted = [d for d in SWEEP if refusal(path, d) is None]
    assert len(admitted) >= 6
    a = analyze(path.read_text())
    for seed in SWEEP_SEEDS:
        weights = seeded(a.programs, seed)
        references = References(a.programs, weights)
        for dep in admitted:
            _, plans = shared_plans(path, dep)
            steps = 1 if dep.mode == "forward" else SWEEP_STEPS
            report = run(a.programs, weights, dep, plans, steps, seed=seed, references=references)
            assert report.ok and report.steps == steps, \
                f"seed {seed}, {label(dep)}: {report.error or report.first_failure.describe()}"


def test_four_way_tensor_parallelism_is_certified_on_a_document_that_admits_it():
    a = analyze((DOCUMENTS / "wide-heads.lgm").read_text())
    for dep in (Deployment("tp", CTX, tp=4), Deployment("batched-tp", CTX, batch=2, tp=4)):
        report = run(a.programs, seeded(a.programs, 2), dep, plans_for(a, dep), STEPS)
        assert report.ok and report.steps == STEPS, report.error or report.first_failure.describe()


@pytest.mark.parametrize("dep", DEPLOYMENTS, ids=label)
@pytest.mark.parametrize("path", small_examples(), ids=lambda p: p.stem)
def test_the_bundle_computes_what_the_document_computes_or_the_deployment_is_refused_saying_why(path, dep):
    a = analyze(path.read_text())
    assert not a.errors, a.errors[0].message
    why = refusal(path, dep)
    if why is not None:
        with pytest.raises(StreamedReject) as e:
            plans_for(a, dep)
        assert e.value.program == "bundle" and e.value.why.endswith(why), e.value.why
        assert e.value.why.startswith(f"tensor parallel over {dep.chips} chips: layer 0 ")
        return
    plans = plans_for(a, dep)
    report = run(a.programs, seeded(a.programs, 11), dep, plans, STEPS)
    assert report.error is None, report.error
    assert report.first_failure is None, report.first_failure.describe()
    assert report.steps == STEPS
    layers = {m.program for m in report.measures if m.tensor == "hidden state"}
    assert layers == {p.label for p in a.programs.layers}


def tiny():
    return analyze((EXAMPLES / "tiny-llama.lgm").read_text())


def test_a_batched_bundle_step_equals_the_decode_bundle_run_once_per_sequence():
    a = tiny()
    w = seeded(a.programs, 3)
    batched = plan_of(lowered(a, Deployment("batched", CTX, batch=3)))
    decode = plan_of(lowered(a, Deployment("decode", CTX)))
    together = Executor(w)
    alone = [Executor(w) for _ in range(3)]
    tokens, positions = np.array([7, 100, 31]), [0, 2, 5]
    for _ in range(4):
        got = together.step(batched, tokens, positions)
        each = [e.step(decode, [tok], [p]) for e, tok, p in zip(alone, tokens, positions)]
        np.testing.assert_array_equal(got.logits, np.concatenate([x.logits for x in each]))
        for b in range(3):
            for name, value in alone[b].session.states.items():
                np.testing.assert_array_equal(together.session.states[f"{name}_s{b}"], value)
        tokens = got.next
        positions = [p + 1 for p in positions]


def test_prefill_of_a_chunk_then_decode_equals_decoding_the_same_tokens_one_by_one():
    a = tiny()
    w = seeded(a.programs, 4)
    prefill = plan_of(lowered(a, Deployment("prefill", CTX, chunk=5)))
    decode = plan_of(lowered(a, Deployment("decode", CTX)))
    chunk = [9, 8, 200, 4, 51]
    bulk, single = Executor(w), Executor(w)
    first = bulk.step(prefill, chunk, [0])
    for i, tok in enumerate(chunk):
        last = single.step(decode, [tok], [i])
    np.testing.assert_allclose(first.logits, last.logits, rtol=1e-5, atol=1e-6)
    assert first.next.tolist() == last.next.tolist()
    for name in single.session.states:
        np.testing.assert_allclose(bulk.session.states[name], single.session.states[name], rtol=1e-5, atol=1e-6)
    tok = int(last.next[0])
    for pos in range(5, 9):
        a1, b1 = bulk.step(decode, [tok], [pos]), single.step(decode, [tok], [pos])
        np.testing.assert_allclose(a1.logits, b1.logits, rtol=1e-5, atol=1e-6)
        tok = int(b1.next[0])


def rebound(model, layer: int, tensors: dict):
    """The test double: ``model`` with layer ``layer`` bound through ``tensors`` instead of its own binding."""
    layers = tuple(LayerBinding(b.layer, b.kind, tensors) if b.layer == layer else b for b in model.layers)
    return replace(model, layers=layers)


def test_a_swapped_binding_is_caught_with_its_layer_and_tensor_named():
    a = tiny()
    model = lowered(a, Deployment("decode", CTX))
    kind = model.kind(model.layers[2].kind).program
    assert {t.of for t in kind.tensors if t.part == "planes"} >= {"Wg0", "Wu0"}
    # The test double: layer 2's binding sends the kind's gate projection to layer 2's up projection and back.
    tensors = dict(model.layers[2].tensors)
    assert (tensors["Wg0"], tensors["Wu0"]) == ("Wg2", "Wu2")
    tensors["Wg0"], tensors["Wu0"] = tensors["Wu0"], tensors["Wg0"]
    wrong = rebound(model, 2, tensors)
    report = run(a.programs, seeded(a.programs, 5), Deployment("decode", CTX), {"step": plan_of(wrong)}, STEPS)
    bad = report.first_failure
    assert bad is not None and bad.program == "layer 2"
    assert bad.step == 0
    # the first tensor that differs is the first computed from the swapped planes, and everything before it agreed
    assert bad.tensor in a.programs.layer(2).shapes
    assert all(m.ok for m in report.measures[: report.measures.index(bad)])


@pytest.mark.parametrize("dep", [Deployment("decode", CTX), Deployment("prefill", CTX, chunk=3),
                                 Deployment("tp", CTX, tp=2), Deployment("batched", CTX, batch=2)],
                         ids=label)
def test_a_gguf_checkpoint_of_q8_0_and_f16_weights_is_certified_end_to_end(tmp_path, mixed_checkpoint, dep):
    path = mixed_checkpoint(tmp_path / "tiny-mixed.gguf", tiny().programs, 6)
    storage = gguf_storage(path)
    a = analyze((EXAMPLES / "tiny-llama.lgm").read_text(), storage)
    assert [k.layers for k in a.kinds] == [(0, 1, 3), (2,)]  # the F16 layer is its own kind
    model = lowered(a, dep, storage)
    f16_kind = next(k for k in model.kinds if k.layers == (2,)).program
    reads: dict[str, set] = {}
    for t in f16_kind.tensors:
        if t.role == "weight":
            reads.setdefault(t.of or t.name, set()).add(t.part)
    assert reads["Wo2"] == {None}  # the F16 weight is read dense
    assert reads["Wq2"] == {"planes", "scales"}  # its Q8_0 siblings fold on chip
    w = from_gguf(path, a.programs, storage)
    report = run(a.programs, w, dep, plans_for(a, dep, storage), STEPS)
    assert report.error is None, report.error
    assert report.ok, report.first_failure.describe()


def test_verify_on_the_command_line_prints_every_layer_and_exits_0_when_they_agree(capsys):
    assert main(["verify", str(EXAMPLES / "tiny-llama.lgm"), "--mode", "decode", "--ctx", "16", "--steps", "3"]) == 0
    out = capsys.readouterr().out
    for l in range(4):
        assert f"layer {l}" in out
    assert "logits" in out and "agree" in out


@pytest.mark.parametrize("mode", ["decode", "prefill", "batched", "tp"])
def test_verify_by_default_prefills_three_chunks_and_decodes_past_every_window_the_document_declares(capsys, mode):
    doc = DOCUMENTS / "options.lgm"  # a window of 5 and chunks of 4
    assert main(["verify", str(doc), "--mode", mode]) == 0
    head = capsys.readouterr().out.splitlines()[0]
    assert "— past the widest window or chunk (5)" in head
    if mode == "prefill":
        assert f"({PREFILL_CHUNKS} prefill chunks of 4, then " in head


def test_verify_of_small_qwen35_over_two_chips_passes_the_seeds_where_errors_compounded(capsys):
    for seed in ("10", "14"):
        assert main(["verify", str(EXAMPLES / "small-qwen35.lgm"), "--mode", "tp", "--tp", "2", "--seed", seed]) == 0
        out = capsys.readouterr().out
        assert "each layer fed the reference's input and state" in out and "bound" in out


def test_verify_refuses_a_missing_checkpoint_and_a_bad_size_with_exit_2(tmp_path, capsys):
    doc = str(EXAMPLES / "tiny-llama.lgm")
    assert main(["verify", doc, "--checkpoint", str(tmp_path / "none.gguf")]) == 2
    assert "none.gguf: no such file" in capsys.readouterr().err
    assert main(["verify", doc, "--ctx", "0"]) == 2
    assert "--ctx 0" in capsys.readouterr().err
    (tmp_path / "junk.gguf").write_bytes(b"not a gguf file at all")
    assert main(["verify", doc, "--checkpoint", str(tmp_path / "junk.gguf")]) == 2
    assert "junk.gguf: not a GGUF file" in capsys.readouterr().err


def test_verify_refuses_a_real_shaped_document_it_cannot_hold_in_memory_naming_the_bytes(capsys):
    # Llama 3.1 8B's program with seeded weights: its q8 projections alone are 7 billion values, 34 bytes per 32.
    assert main(["verify", str(EXAMPLES / "llama-3.1-8b.lgm"), "--memory", "4G"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "Traceback" not in err
    needed = float(err.split("verify needs ")[1].split(" GB")[0])
    assert 7.0 * 34 / 32 < needed < 20, err
    assert "and has 4 GB (--memory 4G)" in err


def test_a_written_bundle_is_certified_from_disk_and_a_tampered_manifest_is_caught(tmp_path, capsys):
    import json

    from streamed.spatial.bundle import write_bundle

    doc = str(EXAMPLES / "tiny-llama.lgm")
    out = tmp_path / "bundle"
    write_bundle(lowered(tiny(), Deployment("tp", CTX, tp=2)), out)
    assert main(["verify", doc, "--bundle", str(out), "--steps", "3"]) == 0
    assert "tp (ctx 20, tp 2)" in capsys.readouterr().out
    manifest = json.loads((out / "manifest.json").read_text())
    row = next(b for b in manifest["layers"] if b["layer"] == 3)["weights"]
    g, u = row.index("Wg3"), row.index("Wu3")
    row[g], row[u] = row[u], row[g]
    (out / "manifest.json").write_text(json.dumps(manifest))
    # Refused before anything runs: layer 3's gate now names the up projection's checkpoint tensor, which is not
    # what the document binds.
    assert main(["verify", doc, "--bundle", str(out), "--steps", "3"]) == 2
    err = capsys.readouterr().err
    assert "is not a bundle of" in err and "layer 3's `Wu3` reads checkpoint tensor" in err
    assert main(["verify", doc, "--bundle", str(tmp_path / "nothing")]) == 2
    assert "manifest.json: no such file" in capsys.readouterr().err


def test_verify_says_every_tensor_agrees_bit_for_bit_rather_than_naming_a_worst_input(capsys):
    assert main(["verify", str(EXAMPLES / "tiny-llama.lgm"), "--steps", "2"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "every tensor compared is equal in both runs, bit for bit" in out
    assert not any(l.startswith("worst of every tensor") for l in out)
    assert all(l == l.rstrip() for l in out)
