"""Every deployment on every example: each layer bound to its kind, names renamed right, TP slices exact."""

import re
from collections import Counter

import pytest

from streamed.analysis.whole import analyze
from streamed.analysis.kinds import stored_q8
from streamed.model.checkpoint import Storage
from streamed.spatial import lower as lower_module
from streamed.spatial.bundle import manifest
from streamed.spatial.synth import two_kind_document
from streamed.spatial.deployment import Deployment
from streamed.spatial.streamed_model import (
    StreamedReject,
    lower_batched_decode_streamed,
    lower_batched_tp_decode_streamed,
    lower_decode_streamed,
    lower_forward_streamed,
    lower_prefill_streamed,
    lower_streamed,
    lower_tp_decode_streamed,
    program_names,
)

from repo import example

DEPLOYMENTS = [
    Deployment("forward", ctx=16),
    Deployment("decode", ctx=256),
    Deployment("prefill", ctx=256, chunk=8),
    Deployment("batched", ctx=256, batch=3),
    Deployment("tp", ctx=256, tp=2),
    Deployment("batched-tp", ctx=256, batch=2, tp=2),
]
IDS = [d.mode for d in DEPLOYMENTS]


@pytest.mark.parametrize("deployment", DEPLOYMENTS, ids=IDS)
def test_every_layer_is_bound_to_its_kind_with_every_name_of_the_kind_exactly_once(analyses, deployment):
    for name, a in analyses.items():
        model = lower_streamed(a, deployment)
        assert [b.layer for b in model.layers] == list(range(len(a.programs.layers))), name
        assert [k.name for k in model.kinds] == [k.name for k in a.kinds]
        for b in model.layers:
            kind = model.kind(b.kind)
            assert b.layer in kind.layers
            names = program_names(kind.program)
            assert list(b.tensors) == names, f"{name} layer {b.layer}"
            # One tensor of the kind is one tensor of the layer: the binding is one-to-one.
            assert len(set(b.tensors.values())) == len(names), f"{name} layer {b.layer}"


@pytest.mark.parametrize("deployment", DEPLOYMENTS, ids=IDS)
def test_a_layer_binds_the_names_its_own_text_gives(analyses, deployment):
    """Every authored name of the kind maps to the name the layer's text binds at the same place."""
    for name, a in analyses.items():
        model = lower_streamed(a, deployment)
        for b in model.layers:
            layer = a.programs.layer(b.layer)
            rep = a.programs.layer(model.kind(b.kind).representative)
            own = {d.name for d in layer.decls.values()} | set(layer.shapes)
            for kind_name, layer_name in b.tensors.items():
                if kind_name in rep.shapes:
                    assert layer_name in own, f"{name}: {kind_name} → {layer_name} at layer {b.layer}"


def test_derived_and_per_sequence_names_carry_the_layer_index():
    a = analyze(two_kind_document(8))
    model = lower_streamed(a, Deployment("batched-tp", ctx=64, batch=2, tp=2))
    b = model.layers[7]  # a global layer; its kind's representative is layer 3
    assert model.kind(b.kind).representative == 3
    t = b.tensors
    assert t["bxo2"] == "bxo6"  # the stacked hidden-state input is named by position, as the seed names it
    assert t["Kc3_s1_c0"] == "Kc7_s1_c0"  # per sequence and per chip: the suffixes stay
    assert t["pos_s1"] == "pos_s1"  # a position is every layer's
    assert t["Rcos1"] == "Rcos1"  # a host table is every layer's
    derived = [n for n in t if n.startswith("h3__")]
    assert derived and all(t[n] == "h7__" + n[len("h3__"):] for n in derived)
    assert t["Wq3_c1__q8"] == "Wq7_c1__q8"


def test_lowering_lowers_one_program_per_kind_whatever_the_depth(monkeypatch):
    calls = []
    real = lower_module.lower_program

    def counting(program, *args, **kw):
        calls.append(program.label)
        return real(program, *args, **kw)

    monkeypatch.setattr("streamed.spatial.streamed_model.lower_program", counting)
    for depth in (4, 16, 48):
        calls.clear()
        a = analyze(two_kind_document(depth))
        model = lower_streamed(a, Deployment("decode", ctx=64))
        assert len(a.kinds) == 2
        assert sorted(calls) == sorted(["embed", "head"] + [f"layer {k.representative}" for k in a.kinds])
        assert len(model.layers) == depth


def test_an_unchanged_kind_is_served_from_the_cache_and_a_renamed_representative_gets_its_own_names(monkeypatch):
    calls = []
    real = lower_module.lower_program
    monkeypatch.setattr("streamed.spatial.streamed_model.lower_program",
                        lambda p, *a, **k: calls.append(p.label) or real(p, *a, **k))
    text = two_kind_document(8)
    cache: dict = {}
    first = lower_streamed(analyze(text), Deployment("decode", ctx=64), cache=cache)
    assert len(calls) == 4
    calls.clear()
    renamed = text.replace("hn0", "post0")  # a rename inside the representative of the first kind
    second = lower_streamed(analyze(renamed), Deployment("decode", ctx=64), cache=cache)
    assert calls == []
    program = second.kinds[0].program
    assert program.has("post0") and not program.has("hn0")
    assert second.layers[1].tensors["post0"] == "hn1"
    assert len(first.kinds[0].program.ops) == len(program.ops)


@pytest.mark.parametrize("fn,args", [
    (lower_forward_streamed, (16,)), (lower_decode_streamed, (64,)), (lower_prefill_streamed, (64, 4)),
    (lower_batched_decode_streamed, (64, 2)), (lower_tp_decode_streamed, (64, 2)),
    (lower_batched_tp_decode_streamed, (64, 2, 2)),
], ids=lambda x: getattr(x, "__name__", ""))
def test_each_named_deployment_binds_rows_and_ctx(analyses, fn, args):
    model = fn(analyses["tiny-llama"], *args)
    d = model.deployment
    for k in model.kinds:
        assert k.program.rows == d.rows and k.program.ctx == d.ctx
        assert k.program.tp == d.chips
        assert k.program.certificate is not None


def test_forward_has_no_embed_and_carries_no_state(analyses):
    model = lower_streamed(analyses["tiny-llama"], Deployment("forward", ctx=16))
    assert model.embed is None
    assert all(k.carried == () for k in model.kinds)
    assert model.kinds[0].program.tensor("x").shape == (16, 64)


def test_prefill_head_reads_the_last_row(analyses):
    model = lower_streamed(analyses["tiny-llama"], Deployment("prefill", ctx=64, chunk=8))
    first = model.head.ops[0]
    assert first.kind == "take_rows" and first.attr("start") == 7 and first.attr("count") == 1
    assert model.head.tensor("next").shape == (1,)
    assert model.kinds[0].carried == ("Kc0", "Vc0")


def test_batched_states_and_positions_are_per_sequence(analyses):
    model = lower_streamed(analyses["tiny-llama"], Deployment("batched", ctx=64, batch=3))
    p = model.kinds[0].program
    assert set(p.carried) == {f"{s}_s{b}" for s in ("Kc0", "Vc0") for b in range(3)}
    assert all(p.has(f"pos_s{b}") for b in range(3)) and not p.has("pos") and not p.has("Kc0")
    for op in p.ops:
        if op.kind == "attention":
            b = op.inputs[1].rsplit("_s", 1)[1]
            assert op.inputs[3] == f"pos_s{b}" and op.inputs[2] == f"Vc0_s{b}"
    assert model.embed.tensor("toks").shape == (3,)  # the seed's name for a batch's token ids


@pytest.mark.parametrize("mode", ["tp", "batched-tp"])
def test_tp_slices_of_every_split_weight_cover_it_exactly_once(analyses, mode):
    for name, a in analyses.items():
        model = lower_streamed(a, Deployment(mode, ctx=64, batch=2, tp=2))
        by_layer = {p.section.index: p for p in a.programs.layers}
        for k in model.kinds:
            decls = by_layer[k.representative].decls
            covered: dict[tuple[str, str], Counter] = {}
            for s in k.tp["slices"]:
                key = (s["of"], s["encoding"])
                covered.setdefault(key, Counter())
                for i in range(s["start"], s["stop"]):
                    covered[key][(s["axis"], i)] += 1
                assert s["chip"] in (0, 1)
            for (of, _), count in covered.items():
                (axis,) = {ax for ax, _ in count}
                assert sorted(i for _, i in count) == list(range(decls[of].shape[axis])), f"{name}: {of}"
                assert set(count.values()) == {1}, f"{name}: {of} covered twice"


def test_tp_runs_two_allreduces_per_attention_layer_and_shares_a_phase_across_chips(analyses):
    model = lower_streamed(analyses["tiny-llama"], Deployment("tp", ctx=64, tp=2))
    p = model.kinds[0].program
    assert model.kinds[0].tp["allreduces"] == 2
    phases: dict[int, set] = {}
    for op in p.ops:
        if op.chip is not None and op.kind != "take_cols":
            phases.setdefault((op.phase, op.kind), set()).add(op.chip)
    assert all(chips == {0, 1} for chips in phases.values())
    assert all(t.chip in (0, 1) for t in p.tensors if t.name.endswith(("_c0", "_c1")))


# ---- rejects -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("deployment,why", [
    (Deployment("decode", ctx=0), "empty KV cache"),
    (Deployment("forward", ctx=0), "empty sequence"),
    (Deployment("batched", ctx=64, batch=0), "serving no sequence"),
    (Deployment("batched-tp", ctx=64, batch=0, tp=2), "serving no sequence"),
    (Deployment("prefill", ctx=64, chunk=0), "a prefill chunk of 0 tokens in a context of 64"),
    (Deployment("prefill", ctx=64, chunk=65), "a prefill chunk of 65 tokens in a context of 64"),
    (Deployment("tp", ctx=64, tp=3), "query heads of attention (4) do not split over 3 chips"),
    (Deployment("tp", ctx=64, tp=0), "tensor parallel over 0 chips"),
], ids=lambda x: getattr(x, "mode", ""))
def test_a_bundle_that_cannot_exist_is_refused_as_the_bundle(analyses, deployment, why):
    with pytest.raises(StreamedReject) as e:
        lower_streamed(analyses["tiny-llama"], deployment)
    assert e.value.program == "bundle"
    assert why in e.value.why
    assert str(e.value) == f"the bundle program does not lower: {e.value.why}"


def test_kv_heads_that_neither_split_over_the_chips_nor_divide_them_are_refused():
    a = analyze(two_kind_document(4, heads=12, kv=6))
    with pytest.raises(StreamedReject) as e:
        lower_streamed(a, Deployment("tp", ctx=64, tp=4))
    assert e.value.program == "bundle"
    assert e.value.why.endswith("the key/value heads of attention (6) neither split over 4 chips nor divide them")


def test_a_q8_row_slice_off_a_block_boundary_is_read_dense_and_the_manifest_says_which_chips_and_why():
    # 4 heads of 16 over 4 chips: the output projection's rows split as 16 per chip — half a Q8_0 block. The seed's
    # Storage rule: such a slice is read dense; the column slices and whole-block row slices stay Q8_0.
    text = two_kind_document(4, heads=4, kv=4, hd=16, ffn=256)
    model = lower_streamed(analyze(text), Deployment("tp", ctx=64, tp=4))
    kind = model.kinds[0]
    dense = kind.tp["read_dense"]
    assert [(d["of"], d["chips"]) for d in dense] == [("Wo0", [0, 1, 2, 3])]
    assert "64 input features split over 4 chips as rows of 16, which cut its Q8_0 blocks of 32" in dense[0]["why"]
    m = manifest(model)  # each layer's own tensor, which its chips dequantise
    for row in m["layers"]:
        at = row["weights"].index(f"Wo{row['layer']}")
        assert (row["checkpoint"][at], row["storage"][at]) == (f"blk.{row['layer']}.attn_output.weight", "Q8_0")
    p = kind.program
    for op in p.ops:
        if op.kind.startswith("matmul") and p.tensor(op.inputs[1]).of == "Wo0":
            assert op.kind == "matmul" and p.tensor(op.inputs[1]).part is None
    assert {p.tensor(o.inputs[1]).of for o in p.ops if o.kind == "matmul_q8"} >= {"Wq0", "Wk0", "Wv0", "Wd0"}
    assert {s["encoding"] for s in kind.tp["slices"] if s["of"] == "Wo0"} == {"dense"}


def test_deepseek_v2_lite_lowers_over_four_chips_naming_the_weights_its_chips_read_dense():
    a = analyze(example("deepseek-v2-lite"))
    model = lower_streamed(a, Deployment("tp", ctx=4096, tp=4))
    dense = {d["of"]: d for k in model.kinds for d in k.tp["read_dense"]}
    assert "Wd0" in dense and dense["Wd0"]["chips"] == [0, 1, 2, 3]
    row = manifest(model)["layers"][0]
    assert row["checkpoint"][row["weights"].index("Wd0")] == "model.layers.0.mlp.down_proj.weight"
    assert "10944 input features split over 4 chips as rows of 2736" in dense["Wd0"]["why"]


def test_an_ffn_not_divisible_by_the_chips_is_refused_naming_the_weight():
    a = analyze(two_kind_document(4, ffn=99, q8=False))
    with pytest.raises(StreamedReject) as e:
        lower_streamed(a, Deployment("tp", ctx=64, tp=2))
    assert e.value.program == "bundle"
    assert "`Wg0` (99) do not split over 2 chips" in e.value.why


def test_a_document_with_errors_is_refused_naming_its_first_error():
    text = two_kind_document(4).replace("Let hn2 be rmsnorm of h2", "Let hn2 be rmsnorm of hh2")
    with pytest.raises(StreamedReject) as e:
        lower_streamed(analyze(text), Deployment("decode", ctx=64))
    assert e.value.program == "layer 2"
    assert "`hh2`" in e.value.why and e.value.why.startswith("line ")


def test_a_decode_attention_over_rows_that_are_not_a_cache_is_refused_at_its_statement():
    text = two_kind_document(4)
    for l in range(4):
        text = text.replace(f"Let a{l} be attention of qp{l} over Kc{l} and Vc{l}",
                            f"Let k{l} be xn{l} times Wk{l}.\nLet v{l} be xn{l} times Wv{l}.\n"
                            f"Let a{l} be attention of qp{l} over k{l} and v{l}")
    a = analyze(text)
    assert not a.errors
    with pytest.raises(StreamedReject) as e:
        lower_streamed(a, Deployment("decode", ctx=64))
    assert e.value.program.startswith("layer 0")
    assert e.value.binder == "a0" and e.value.statement is not None
    assert "not a state" in e.value.why
    stmt = a.programs.layer(0).statements[e.value.statement]
    assert stmt.name.text == "a0"
    # The same program is a forward step's: its keys are the sequence's own rows.
    assert lower_streamed(a, Deployment("forward", ctx=16)).kinds


def test_kv_caches_larger_than_sram_stream_from_hbm_and_only_what_fits_nowhere_is_refused(tmp_path):
    # Eight KV heads of 128 at ctx 200,000: each (global) layer's two caches are 819 MB, more than the SN50's 432 MB
    # of SRAM.
    a = analyze(two_kind_document(4, kv=8, heads=8, hd=128, d=256, every=1))
    model = lower_streamed(a, Deployment("decode", ctx=200_000))
    assert model.residency["states"]["sram"] == 0 and model.residency["states"]["hbm"] == 4 * 2 * 200_000 * 1024 * 2
    assert {t.tier for k in model.kinds for t in k.program.tensors if t.role == "state"} == {"hbm"}
    # A chip with 2 GB of HBM and 0.5 GB of DDR holds two layers' caches: the third is refused on its declaration.
    small = tmp_path / "small.toml"
    small.write_text('name = "small"\npcus = 2080\npmus = 2080\nsram_mb = 432\nhbm_gb = 2\nddr_gb = 0.5\n'
                     'hbm_tb_s = 1.8\nddr_tb_s = 0.2\nsram_tb_s = 100\nlink_gb_s = 400\npeak_bf16_tflops = 1600\n')
    with pytest.raises(StreamedReject) as e:
        lower_streamed(a, Deployment("decode", ctx=200_000), target=str(small))
    assert e.value.program == "bundle" and e.value.layer == 2 and e.value.binder == "Kc2"
    # The binding limit first, in units: 4 layers × 819 MB of caches against what 2 GB + 0.5 GB hold beside the weights.
    assert e.value.why.startswith("the KV caches need 3.28 GB per chip; beside ")
    # 432 MB of SRAM + 2 GB + 0.5 GB, less 5.08 MB of weights and 51.2 MB of rotation tables (2 × 200,000 × 64 × 2 B).
    assert "beside 5.08 MB of weights and 51.2 MB of tables the SMALL holds 2.88 GB" in e.value.why
    assert "the states of layer 2 do not fit (layers 0-2 carry 2.46 GB)" in e.value.why
    assert a.programs.layer(2).statements[e.value.statement].name.text == "Kc2"


def test_q8_fold_follows_the_checkpoint_storage():
    text = two_kind_document(4)
    a = analyze(text)
    model = lower_streamed(a, Deployment("decode", ctx=64))
    ops = model.kinds[0].program.ops
    assert {o.kind for o in ops if o.kind.startswith("matmul")} == {"matmul_q8"}
    # A checkpoint that stores the query projections F16 and everything else Q8_0: Wq is read dense.
    types = {f"blk.{l}.{t}.weight": "Q8_0" for l in range(4)
             for t in ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down")}
    types.update({f"blk.{l}.attn_q.weight": "F16" for l in range(4)})
    types["output.weight"] = "Q8_0"
    storage = Storage(types=types, source="test")
    a2 = analyze(text, storage)
    m2 = lower_streamed(a2, Deployment("decode", ctx=64), storage=storage)
    p = m2.kinds[0].program
    dense = [o for o in p.ops if o.kind == "matmul"]
    assert [o.inputs[1] for o in dense] == ["Wq0"]
    assert p.tensor("Wk0__q8").dtype == "int8" and p.tensor("Wk0__scales").shape == (2, 32)
    assert stored_q8(a2.programs, a2.programs.layer(0), storage) == {"Wk0", "Wv0", "Wo0", "Wg0", "Wu0", "Wd0"}


def test_tables_shared_by_kinds_must_agree():
    text = two_kind_document(4)
    text = text.replace("## Layer 3\n", "## Layer 3\n", 1)
    head, sep, tail = text.partition("## Layer 3\n")
    tail = tail.replace("cosines of base 10000", "cosines of base 500000", 1)
    a = analyze(head + sep + tail)
    with pytest.raises(StreamedReject) as e:
        lower_streamed(a, Deployment("decode", ctx=64))
    assert "`Rcos1`" in e.value.why and "declare it alike" in e.value.why


def test_tp_states_are_split_by_heads_and_the_chips_parts_make_the_whole(analyses):
    for name, a in analyses.items():
        model = lower_streamed(a, Deployment("tp", ctx=64, tp=2))
        for k in model.kinds:
            rep = a.programs.layer(k.representative)
            # A windowed kind's caches are rings of its window's positions (a decode step writes one row).
            window = re.search(r"(?:window|chunks of) (\d+)", k.name)
            positions = min(64, int(window.group(1))) if window else 64
            for state in rep.carried:
                full = tuple(positions if d == "ctx" else 1 if d == "rows" else d for d in rep.decls[state].shape)
                parts = [k.program.tensor(n) for n in k.carried if n != state and n.rsplit("_c", 1)[0] == state]
                if not parts:  # a state the chips keep whole
                    assert k.program.tensor(state).chip is None
                    continue
                assert sorted(t.chip for t in parts) == [0, 1], f"{name}: {state}"
                (axis,) = [i for i, (x, y) in enumerate(zip(parts[0].shape, full)) if x != y]
                assert sum(t.shape[axis] for t in parts) == full[axis], f"{name}: {state}"


def test_a_tp_reject_names_the_statement_and_binder_that_cannot_split():
    a = analyze(two_kind_document(4, ffn=99, q8=False))
    with pytest.raises(StreamedReject) as e:
        lower_streamed(a, Deployment("tp", ctx=64, tp=2))
    assert e.value.binder == "f0" and e.value.layer == 0
    assert a.programs.layer(0).statements[e.value.statement].name.text == "f0"


def test_the_64_layer_qwen38_example_lowers_two_programs_for_its_two_kinds(monkeypatch):
    from repo import EXAMPLES

    path = EXAMPLES / "qwen3.8.lgm"
    if not path.exists():
        pytest.skip("examples/qwen3.8.lgm is not in this checkout")
    calls = []
    real = lower_module.lower_program
    monkeypatch.setattr("streamed.spatial.streamed_model.lower_program", lambda p, *a, **k: calls.append(p.label) or real(p, *a, **k))
    a = analyze(path.read_text("utf-8"))
    model = lower_streamed(a, Deployment("decode", ctx=4096))
    assert len(model.layers) == 64 and len(model.kinds) == 2
    assert sorted(calls) == sorted(["embed", "head"] + [f"layer {k.representative}" for k in model.kinds])
    assert sum(len(k.layers) for k in model.kinds) == 64


def identities(model) -> list:
    return [model.embed_identity, model.head_identity] + [k.identity for k in model.kinds] + \
        [b.identity for b in model.layers]


def test_every_program_and_layer_binding_carries_the_identity_of_its_own_text_and_cut(tmp_path):
    text = two_kind_document(8)
    model = lower_streamed(analyze(text), Deployment("decode", ctx=64))
    assert identities(model) == identities(lower_streamed(analyze(text), Deployment("decode", ctx=64)))
    assert len({b.identity["digest"] for b in model.layers}) == 8  # every layer's own text
    for k in model.kinds:  # a kind is what its representative is
        assert k.identity == model.layers[k.representative].identity
    assert model.layers[5].identity["program"] == "layer 5" and model.head_identity["program"] == "head"
    # A name changed in layer 5: layer 5 is another text of the same kind; nothing else changes.
    renamed = lower_streamed(analyze(text.replace("hn5", "hx5")), Deployment("decode", ctx=64))
    assert [k.name for k in renamed.kinds] == [k.name for k in model.kinds]
    changed = [l for l, (a, b) in enumerate(zip(model.layers, renamed.layers)) if a.identity != b.identity]
    assert changed == [5]
    # Another cut of the same text is another program.
    longer = lower_streamed(analyze(text), Deployment("decode", ctx=128))
    assert all(a["digest"] != b["digest"] for a, b in zip(identities(model), identities(longer)))
    # The manifest carries them, and a bundle read back has them.
    from streamed.spatial.bundle import read_bundle, write_bundle

    m = manifest(model)
    assert m["identities"] == {"embed": model.embed_identity, "head": model.head_identity}
    assert [b["identity"] for b in m["layers"]] == [b.identity for b in model.layers]
    write_bundle(model, tmp_path / "b")
    assert identities(read_bundle(tmp_path / "b")) == identities(model)


@pytest.mark.parametrize("mode", ["prefill", "batched", "batched-tp"])
def test_a_stacked_deployment_names_its_hidden_states_and_token_ids_as_the_seed_does(mode):
    model = lower_streamed(analyze(two_kind_document(8)), Deployment(mode, ctx=64, chunk=4, batch=2, tp=2))
    assert [t.name for t in model.embed.inputs] == ["toks"] and model.embed.output == "X"
    for b in model.layers:
        program = model.kind(b.kind).program
        hidden = next(t.name for t in program.inputs if t.shape != ())
        assert b.tensors[hidden] == ("X" if b.layer == 0 else f"bxo{b.layer - 1}")
        assert b.tensors[program.output] == f"bxo{b.layer}"
    assert [t.name for t in model.head.inputs] == ["bxo7"]


@pytest.mark.parametrize("mode", ["decode", "tp", "forward"])
def test_an_unstacked_deployment_keeps_the_authored_names(mode):
    model = lower_streamed(analyze(two_kind_document(8)), Deployment(mode, ctx=64, tp=2))
    if model.embed is not None:
        assert [t.name for t in model.embed.inputs] == ["tok"] and model.embed.output == "x"
    assert model.layers[5].tensors[model.kind(model.layers[5].kind).program.output] == "xo5"
    assert [t.name for t in model.head.inputs] == ["xo7"]
