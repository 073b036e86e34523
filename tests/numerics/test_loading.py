"""A bundle as a runtime loads it: ``manifest.json``, its program files and the GGUF checkpoint — never the document.
Every layer's weights are bound by the checkpoint tensors the manifest names, and the bundle executor computes the
reference interpreter's logits (the reference reading the same GGUF through the document)."""

import json

import numpy as np
import pytest

from streamed.analysis.whole import analyze
from streamed.numerics.execute import Executor, plan_of
from streamed.numerics.reference import Reference
from streamed.numerics.verify import tp_rtol
from streamed.numerics.weights import WeightError, from_bundle, from_gguf, gguf_storage
from streamed.spatial.bundle import read_bundle, write_bundle
from streamed.spatial.deployment import Deployment
from streamed.spatial.streamed_model import lower_streamed

from repo import EXAMPLES

CTX = 16


@pytest.fixture
def written(tmp_path, mixed_checkpoint):
    """tiny-llama's document, its GGUF checkpoint of mixed types, and the document's analysis over it."""
    doc = tmp_path / "tiny.lgm"
    doc.write_bytes((EXAMPLES / "tiny-llama.lgm").read_bytes())
    ckpt = mixed_checkpoint(tmp_path / "tiny.gguf", analyze(doc.read_text()).programs, 9)
    storage = gguf_storage(ckpt)
    return doc, ckpt, storage, analyze(doc.read_text(), storage)


@pytest.mark.parametrize("dep", [Deployment("decode", CTX), Deployment("tp", CTX, tp=2)], ids=lambda d: d.mode)
def test_a_bundle_loads_from_its_manifest_and_the_gguf_alone_and_computes_the_references_logits(tmp_path, written,
                                                                                                 dep):
    doc, ckpt, storage, a = written
    write_bundle(lower_streamed(a, dep, storage=storage), tmp_path / "bundle", source=str(doc))
    reference_weights = from_gguf(ckpt, a.programs, storage)
    reference = Reference(a.programs, reference_weights, CTX)
    doc.unlink()  # what follows reads the bundle and the checkpoint only

    model = read_bundle(tmp_path / "bundle")
    weights = from_bundle(model, ckpt)
    manifest = json.loads((tmp_path / "bundle" / "manifest.json").read_text())
    named = {n for row in manifest["layers"] for n in row["weights"]}
    named |= {w["name"] for p in manifest["shared"].values() for w in p["weights"]}
    assert set(weights.dense) == named == set(reference_weights.dense)
    for name in named:  # each layer's own tensor, read as stored: the same numbers the document's bindings give
        assert np.array_equal(weights.dense[name], reference_weights.dense[name]), name
    assert set(weights.planes) == set(reference_weights.planes) and "Wo2" not in weights.planes

    executor, plan = Executor(weights), plan_of(model)
    token = 17
    for pos in range(6):
        got, want = executor.step(plan, [token], [pos]), reference.step([token], pos)
        if dep.chips == 1:
            assert np.array_equal(got.logits, want.logits)
        else:  # the chips' partial sums, reassociated, over four layers of their own outputs
            bound = 4 * tp_rtol(2) * float(np.max(np.abs(want.logits)))
            assert float(np.max(np.abs(got.logits - want.logits))) <= bound
        assert got.next.tolist() == want.next.tolist()
        token = int(want.next[0])


def test_a_checkpoint_without_the_tensor_the_manifest_names_is_refused_naming_both(tmp_path, written):
    doc, ckpt, storage, a = written
    write_bundle(lower_streamed(a, Deployment("decode", CTX), storage=storage), tmp_path / "bundle")
    path = tmp_path / "bundle" / "manifest.json"
    m = json.loads(path.read_text())
    row = m["layers"][3]
    row["checkpoint"][row["weights"].index("Wq3")] = "blk.3.attn_q.missing"
    path.write_text(json.dumps(m))
    with pytest.raises(WeightError, match='`Wq3`: the checkpoint has no tensor "blk.3.attn_q.missing"'):
        from_bundle(read_bundle(tmp_path / "bundle"), ckpt)


def test_a_square_embedding_loads_from_the_bundle_as_the_document_reads_it(tmp_path, mixed_checkpoint):
    """With vocabulary = width both orientations of the embedding fit its declared shape; like the document's
    bindings (§6), the bundle's loader binds a weight that is looked up in as stored — not transposed."""
    doc = tmp_path / "square.lgm"
    doc.write_text((EXAMPLES / "tiny-llama.lgm").read_text().replace("Let vocab be 256.", "Let vocab be 64."))
    ckpt = mixed_checkpoint(tmp_path / "square.gguf", analyze(doc.read_text()).programs, 3)
    storage = gguf_storage(ckpt)
    a = analyze(doc.read_text(), storage)
    write_bundle(lower_streamed(a, Deployment("decode", CTX), storage=storage), tmp_path / "bundle", source=str(doc))
    from_document = from_gguf(ckpt, a.programs, storage)
    loaded = from_bundle(read_bundle(tmp_path / "bundle"), ckpt)
    assert from_document.dense["Emb"].shape == (64, 64)
    assert not np.array_equal(from_document.dense["Emb"], from_document.dense["Emb"].T)
    assert np.array_equal(loaded.dense["Emb"], from_document.dense["Emb"])


def test_a_shared_expert_gate_stored_d_long_binds_its_d_by_1_declaration_from_the_document_and_the_bundle(tmp_path):
    """llama.cpp's loader takes a shared expert's gate stored ``[d]`` as well as ``[d, 1]`` (GGML's trailing ``ne`` of
    1): the author declares it ``d by 1``, the lowering binds it, and both loaders read that column."""
    import oracle
    from gguf import GGUFReader

    from streamed.model.author import author
    from streamed.model.gguf import read_gguf

    cfg = {"model_type": "qwen2_moe", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
           "num_key_value_heads": 2, "intermediate_size": 96, "vocab_size": 128, "num_experts": 4,
           "num_experts_per_tok": 2, "moe_intermediate_size": 32, "shared_expert_intermediate_size": 48}
    ckpt = oracle.write(tmp_path / "gate.gguf", cfg, squeeze=("ffn_gate_inp_shexp.weight",)).path
    stored = {t.name: t for t in GGUFReader(str(ckpt)).tensors}["blk.1.ffn_gate_inp_shexp.weight"]
    assert [int(n) for n in stored.shape] == [64]
    doc = tmp_path / "gate.lgm"
    doc.write_text(author(read_gguf(ckpt).spec))
    storage = gguf_storage(ckpt)
    a = analyze(doc.read_text(), storage)
    assert not a.errors
    write_bundle(lower_streamed(a, Deployment("decode", CTX), storage=storage), tmp_path / "bundle", source=str(doc))
    from_document = from_gguf(ckpt, a.programs, storage)
    loaded = from_bundle(read_bundle(tmp_path / "bundle"), ckpt)
    for weights in (from_document, loaded):
        assert weights.dense["Wsg1"].shape == (64, 1)
        assert np.array_equal(weights.dense["Wsg1"][:, 0], np.asarray(stored.data, dtype=np.float32))
