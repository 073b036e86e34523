"""The manifest a runtime loads without the document: every weight of every layer named by that layer's checkpoint
tensor (TP slices included), the embed's and the head's too, the document by name and hash, the step's programs in
order, every carried state with its shape, bytes and tier — and a table that stays small at 512 layers."""

import hashlib
import json

import jq
import pytest

from streamed.analysis.whole import analyze
from streamed.model.checkpoint import Storage, storage_said
from streamed.spatial.bundle import manifest, read_bundle, write_bundle
from streamed.spatial.deployment import Deployment
from streamed.spatial.streamed_model import lower_streamed
from streamed.spatial.synth import two_kind_document

from repo import EXAMPLES, example

DEPLOYMENTS = [Deployment("forward", ctx=16), Deployment("decode", ctx=64), Deployment("prefill", ctx=64, chunk=4),
               Deployment("batched", ctx=64, batch=2), Deployment("tp", ctx=64, tp=2),
               Deployment("batched-tp", ctx=64, batch=2, tp=2)]

#: Layer 17's Wq: the checkpoint tensor its row names, and every tensor a chip loads it as, each with that tensor.
LAYER_17_WQ = """
. as $m
| .layers[] | select(.layer == 17) as $row
| ($row.weights | index("Wq17")) as $i
| $m.kinds[] | select(.name == $row.kind)
| .weights[$i].reads[]
| {checkpoint: $row.checkpoint[$i], tensor, encoding, chip, slice}
"""


@pytest.fixture(scope="module")
def twenty():
    return analyze(two_kind_document(20))


@pytest.mark.parametrize("dep", DEPLOYMENTS, ids=lambda d: d.mode)
def test_jq_shows_layer_17s_wq_as_its_own_checkpoint_tensor_in_every_deployment_tp_slices_included(twenty, tmp_path,
                                                                                                     dep):
    path = write_bundle(lower_streamed(twenty, dep), tmp_path / "b", source="twenty.lgm")
    text = path.read_text()
    assert jq.compile('.layers[] | select(.layer == 17) | .checkpoint[.weights | index("Wq17")]').input_text(
        text).all() == ["blk.17.attn_q.weight"]
    reads = jq.compile(LAYER_17_WQ).input_text(text).all()
    assert reads and {r["checkpoint"] for r in reads} == {"blk.17.attn_q.weight"}
    assert {r["encoding"] for r in reads} == {"planes", "scales"}  # declared q8: the chip reads the Q8_0 blocks
    if dep.chips > 1:
        planes = sorted((r["chip"], tuple(r["slice"])) for r in reads if r["encoding"] == "planes")
        assert planes == [(0, (1, 0, 32)), (1, (1, 32, 64))]  # each chip its own heads' columns of layer 17's tensor
    else:
        assert all(r["chip"] is None and r["slice"] is None for r in reads)


def test_every_layer_row_names_every_weight_of_its_kind_by_that_layers_checkpoint_tensor(twenty):
    m = manifest(lower_streamed(twenty, Deployment("batched-tp", ctx=64, batch=2, tp=2)))
    kinds = {k["name"]: k for k in m["kinds"]}
    # no checkpoint read: the storage is assumed (a Q8_0 file, by default) and the manifest says so
    assert m["checkpoint"] == {"naming": "document", "file": None, "assumed": "Q8_0",
                               "storage": storage_said("Q8_0", None)}
    assert m["checkpoint"]["storage"].startswith("assumed: what llama.cpp's quantizer writes for a Q8_0 file")
    for row in m["layers"]:
        l = row["layer"]
        columns = kinds[row["kind"]]["weights"]
        assert len(row["weights"]) == len(row["checkpoint"]) == len(row["storage"]) == len(columns)
        assert all(name.endswith(str(l)) for name in row["weights"])
        assert all(tensor.startswith(f"blk.{l}.") for tensor in row["checkpoint"]), row["checkpoint"]
        assert row["storage"] == ["Q8_0" if w["name"].startswith("W") else "dense" for w in columns]
        assert len(row["states"]) == len(kinds[row["kind"]]["states"]) == 8  # K and V, 2 sequences, 2 chips
        assert all(s.startswith((f"Kc{l}_s", f"Vc{l}_s")) for s in row["states"])


def test_a_documents_own_naming_is_kept_with_the_part_of_a_shared_tensor_each_weight_reads():
    a = analyze(example("small-qwen35"))
    m = manifest(lower_streamed(a, Deployment("tp", ctx=32, tp=2)))
    assert m["checkpoint"]["naming"] == "document"
    row = m["layers"][3]
    at = {n: (t, row.get("parts", {}).get(n)) for n, t in zip(row["weights"], row["checkpoint"])}
    assert at["Wq3"] == ("model.language_model.layers.3.self_attn.q_proj.weight", {"columns": [0, 32, 64]})
    assert at["Wk3"] == ("model.language_model.layers.3.self_attn.k_proj.weight", None)
    embed, head = m["shared"]["embed"]["weights"], m["shared"]["head"]["weights"]
    assert [(w["name"], w["checkpoint"]) for w in embed] == [("Emb", "model.language_model.embed_tokens.weight")]
    assert ("Wout", "lm_head.weight") in [(w["name"], w["checkpoint"]) for w in head]
    # norms and the router are weights of their layer like any other: replicated, read whole on every chip (the
    # router as it is stored: with no checkpoint read, as llama.cpp's quantizer writes a Q8_0 file — routers kept F32,
    # so read dense though the document declares it q8)
    router = next(w for w in m["kinds"][0]["weights"] if w["name"] == "Wr0")
    assert [(r["encoding"], r["chip"], r["slice"]) for r in router["reads"]] == [("dense", None, None)]
    assert m["layers"][0]["storage"][m["layers"][0]["weights"].index("Wr0")] == "F32"
    assert m["layers"][0]["checkpoint"][m["layers"][0]["weights"].index("Wr0")] == \
        "model.language_model.layers.0.mlp.gate.weight"


def test_a_document_that_binds_no_tensor_names_each_weight_by_its_declared_name():
    text = two_kind_document(3)
    text = text[:text.index("\n## Checkpoint")] + text[text.index("\n## Embed"):]
    m = manifest(lower_streamed(analyze(text), Deployment("decode", ctx=16)))
    assert m["checkpoint"] == {"naming": "declared", "file": None, "assumed": "Q8_0",
                               "storage": storage_said("Q8_0", None)}
    assert m["layers"][2]["checkpoint"] == m["layers"][2]["weights"]


def test_lowered_with_a_gguf_the_manifest_names_the_file_and_each_tensors_stored_type():
    types = {"blk.2.attn_output.weight": "F16", "blk.2.attn_q.weight": "Q8_0", "blk.1.attn_q.weight": "Q4_K",
             "blk.0.attn_q.weight": "IQ2_XXS"}
    storage = Storage(types, "/data/ckpt/tiny.gguf", {t: (256, 64) for t in types})
    a = analyze(example("tiny-llama"), storage)
    m = manifest(lower_streamed(a, Deployment("decode", ctx=16), storage=storage))
    # the file's own bytes of the tensors the bundle reads, by type: values over the block times bytes per block
    # (a type with no size here — IQ2_XXS, which nothing reads — is not counted)
    stored = {"F16": 256 * 64 * 2, "Q8_0": 256 * 64 // 32 * 34, "Q4_K": 256 * 64 // 256 * 144}
    # read, not assumed: the storage sentence names the file
    assert m["checkpoint"] == {"naming": "gguf", "file": "tiny.gguf", "stored": stored, "assumed": None,
                               "storage": "read from tiny.gguf"}
    row = m["layers"][2]
    stored = dict(zip(row["weights"], row["storage"]))
    assert (stored["Wo2"], stored["Wq2"], stored["Wk2"]) == ("F16", "Q8_0", "missing")
    assert dict(zip(m["layers"][1]["weights"], m["layers"][1]["storage"]))["Wq1"] == "Q4_K"
    # layer 1's weight kept Q4_K makes it its own kind, which says the chip reads it dense, and why
    (kind,) = [k for k in m["kinds"] if 1 in k["layers"]]
    assert kind["layers"] == [1]
    assert [(d["of"], d["why"].split(":")[0]) for d in kind["read_dense"]] == [("Wq1", "stored Q4_K")]


def test_a_bundle_read_back_keeps_the_stored_bytes_its_manifest_counted(tmp_path):
    types = {f"blk.{l}.attn_q.weight": "Q4_K" for l in range(4)} | {"blk.1.attn_q.weight": "Q6_K"}
    storage = Storage(types, "/data/tiny.gguf", {t: (64, 64) for t in types})
    a = analyze(example("tiny-llama"), storage)
    path = write_bundle(lower_streamed(a, Deployment("decode", ctx=16), storage=storage), tmp_path / "b")
    m = json.loads(path.read_text())
    assert m["checkpoint"]["stored"] == {"Q4_K": 3 * 64 * 64 // 256 * 144, "Q6_K": 64 * 64 // 256 * 210}
    assert manifest(read_bundle(path.parent))["checkpoint"] == m["checkpoint"]


def test_the_document_is_recorded_by_name_and_sha256_never_by_its_path(tmp_path):
    doc = tmp_path / "deep" / "folder" / "tiny.lgm"
    doc.parent.mkdir(parents=True)
    doc.write_bytes((EXAMPLES / "tiny-llama.lgm").read_bytes())
    path = write_bundle(lower_streamed(analyze(doc.read_bytes()), Deployment("decode", ctx=16)), tmp_path / "b",
                        source=str(doc))
    m = json.loads(path.read_text())
    assert m["source"] == "tiny.lgm" and str(tmp_path) not in path.read_text()
    assert m["document"] == {"name": "tiny.lgm", "sha256": hashlib.sha256(doc.read_bytes()).hexdigest()}


def test_the_step_lists_the_programs_it_runs_in_order():
    a = analyze(example("small-gemma3"))  # global attention at layers 5 and 11, the sliding kind elsewhere
    m = manifest(lower_streamed(a, Deployment("decode", ctx=16)))
    files = {k["name"]: k["program"] for k in m["kinds"]}
    kinds = [a.kind_of(l).name for l in range(12)]
    assert m["step"] == ["programs/embed.json"] + [files[k] for k in kinds] + ["programs/head.json"]
    assert m["step"][1 + 5] == m["step"][1 + 11] != m["step"][1 + 4]
    forward = manifest(lower_streamed(a, Deployment("forward", ctx=16)))
    assert forward["step"][0] == files[kinds[0]]  # no embed: the first hidden state is an input


def test_every_carried_state_has_its_shape_bytes_and_the_tier_residency_gives_its_layer():
    a = analyze(example("small-qwen35"))
    model = lower_streamed(a, Deployment("batched", ctx=32, batch=2))
    m = manifest(model)
    attention = next(k for k in m["kinds"] if k["representative"] == 3)
    kc = next(s for s in attention["states"] if s["name"] == "Kc3_s1")
    assert kc["shape"] == [32, 64] and kc["bytes"] == 32 * 64 * 2 and kc["dtype"] == "bf16"
    tiers = {l: g["states"] for g in m["residency"]["layers"] for l in g["layers"]}
    for row in m["layers"]:
        assert row["tiers"]["states"] == tiers[row["layer"]]
    assert m["layers"][7]["states"][attention["states"].index(kc)] == "Kc7_s1"
    tables = {t["name"]: t["fill"] for t in attention["tables"]}
    assert tables and all(fill[0] in ("cosines", "sines") for fill in tables.values())


@pytest.mark.parametrize("dep", [Deployment("decode", ctx=64), Deployment("batched-tp", ctx=64, batch=4, tp=2)],
                         ids=lambda d: d.mode)
def test_the_per_layer_part_is_a_table_of_one_short_row_per_layer(dep):
    sizes = {}
    for n in (128, 512):
        m = manifest(lower_streamed(analyze(two_kind_document(n)), dep))
        sizes[n] = len(json.dumps(m, separators=(",", ":")))
    per_layer = (sizes[512] - sizes[128]) / 384
    # one row: the layer's 9 weight names, their 9 checkpoint tensors and storage, its states, its tiers
    assert per_layer < 1024, per_layer  # the name maps it replaces took 1.2 KB a layer in decode, 5 KB here


def test_the_extensions_manifest_fixture_is_a_manifest_this_writer_writes():
    """The manifest view's unit tests render ``vscode-extension/test/fixtures/manifest-streamed-bundle-2.json``: it must
    stay what `streamed lower` writes (the current format, valid against the shipped schema), or the view is tested
    against a manifest no user has."""
    import jsonschema

    from repo import ROOT
    from streamed.spatial.bundle import FORMAT, schema

    fixture = json.loads((ROOT / "vscode-extension" / "test" / "fixtures" / "manifest-streamed-bundle-2.json").read_text())
    assert fixture["format"] == FORMAT
    jsonschema.validate(fixture, schema("manifest"))
