"""Rejects in the editor and `streamed check`: each kind's refusal on its statement; progress and cancellation."""

import pytest

from streamed.analysis.whole import analyze
from streamed.lang.syntax import Severity
from streamed.spatial.diagnose import reject_diagnostics
from streamed.spatial.synth import two_kind_document
from streamed.spatial.deployment import Deployment
from streamed.spatial.streamed_model import Cancelled, StreamedReject, lower_streamed


def not_a_cache(layers: int, only: set[int] | None = None) -> str:
    """Attention over freshly computed keys and values — fine for a forward step, refused for decode."""
    text = two_kind_document(layers)
    for l in range(layers):
        if only is None or l in only:
            text = text.replace(f"Let a{l} be attention of qp{l} over Kc{l} and Vc{l}",
                                f"Let k{l} be xn{l} times Wk{l}.\nLet v{l} be xn{l} times Wv{l}.\n"
                                f"Let a{l} be attention of qp{l} over k{l} and v{l}")
    return text


def test_each_kinds_reject_is_an_error_on_its_representatives_statement_with_every_member_related():
    a = analyze(not_a_cache(8))
    found = reject_diagnostics(a)
    assert len(found) == len(a.kinds) == 2
    for d, kind in zip(found, a.kinds):
        rep = a.programs.layer(kind.representative)
        stmt = next(s for s in rep.statements if getattr(getattr(s, "name", None), "text", None) == f"a{kind.representative}")
        assert d.severity is Severity.ERROR and d.code == "reject"
        assert d.range == stmt.range
        assert d.message.startswith(f"the layer {kind.representative} ({kind.name}) program does not lower:")
        assert [r.range for r in d.related] == [a.programs.layer(l).section.heading for l in kind.layers]
        assert d.data["layers"] == list(kind.layers)


def test_a_kind_that_lowers_has_no_reject_and_a_forward_deployment_accepts_computed_keys():
    a = analyze(not_a_cache(8, only={3, 7}))  # only the global kind reads computed keys
    found = reject_diagnostics(a)
    assert [d.data["program"] for d in found] == ["layer 3 (attention)"]
    assert reject_diagnostics(a, Deployment("forward", ctx=16)) == []


def test_a_document_with_errors_gets_no_reject_diagnostics():
    a = analyze(not_a_cache(4).replace("Let hn1 be rmsnorm of h1", "Let hn1 be rmsnorm of hh1"))
    assert a.errors and reject_diagnostics(a) == []


def test_reject_diagnostics_share_the_callers_cache_with_the_lowering(monkeypatch):
    from streamed.spatial import lower as lower_module

    calls = []
    real = lower_module.lower_program
    monkeypatch.setattr("streamed.spatial.streamed_model.lower_program", lambda p, *a, **k: calls.append(p.label) or real(p, *a, **k))
    cache: dict = {}
    a = analyze(not_a_cache(8))
    first = reject_diagnostics(a, cache=cache)
    lowered = len(calls)
    assert reject_diagnostics(analyze(not_a_cache(8)), cache=cache) == first
    good = analyze(two_kind_document(8))
    reject_diagnostics(good, Deployment("decode", ctx=64), cache=cache)
    lowered = len(calls)
    lower_streamed(good, Deployment("decode", ctx=64), cache=cache)
    assert len(calls) == lowered  # everything the check lowered, the bundle reuses


def test_a_cached_reject_names_the_binder_of_the_renamed_representative():
    cache: dict = {}
    reject_diagnostics(analyze(not_a_cache(8)), cache=cache)
    renamed = analyze(not_a_cache(8).replace("a0", "att0"))
    (d, _) = reject_diagnostics(renamed, cache=cache)
    assert d.data["binder"] == "att0" and "`k0`" in d.message


def test_progress_is_reported_per_program_and_cancellation_stops_between_programs():
    a = analyze(two_kind_document(8))
    seen = []
    lower_streamed(a, Deployment("decode", ctx=64), progress=lambda m, done, total: seen.append((m, done, total)))
    assert [m for m, _, _ in seen[:-1]] == ["embed", "layer 0 (attention, window 8)", "layer 3 (attention)", "head"]
    assert [d for _, d, _ in seen] == [0, 1, 2, 3, 4] and {t for _, _, t in seen} == {4}
    calls = []

    def cancelled():
        calls.append(1)
        return len(calls) > 2

    with pytest.raises(Cancelled):
        lower_streamed(a, Deployment("decode", ctx=64), cancelled=cancelled)
    assert len(calls) == 3


def _line_of(text: str, statement: str) -> int:
    return text[:text.index(statement)].count("\n") + 1


SMALL_CHIP = """name = "small"
pcus = 2080
pmus = 2080
sram_mb = 432
hbm_gb = 2
ddr_gb = 0.5
hbm_tb_s = 1.8
ddr_tb_s = 0.2
sram_tb_s = 100
link_gb_s = 400
peak_bf16_tflops = 1600
"""


def test_check_puts_kv_caches_that_fit_no_memory_on_the_declaration_of_the_first_layer_that_does_not_fit(
        tmp_path, capsys):
    from streamed.cli import main

    # Eight KV heads of 128 at ctx 200,000: 819 MB of caches a (global) layer, streamed from HBM on an SN50 — but a
    # chip with 2 GB of HBM and 0.5 GB of DDR holds two layers' caches beside the weights, not three.
    text = two_kind_document(4, kv=8, heads=8, hd=128, d=256, every=1)
    doc = tmp_path / "big.lgm"
    doc.write_text(text)
    (tmp_path / "small.toml").write_text(SMALL_CHIP)
    assert main(["check", str(doc), "--ctx", "200000"]) == 0
    assert capsys.readouterr().out == f"{doc}: no problems\n"  # clean on an SN50: nothing but that said
    assert main(["check", str(doc), "--ctx", "200000", "--target", str(tmp_path / "small.toml")]) == 1
    (line,) = capsys.readouterr().out.splitlines()
    assert line.startswith(f"{doc}:{_line_of(text, 'Let Kc2 be a state')}:1: error: the bundle program does not lower: "
                           f"the KV caches need 3.28 GB per chip")
    assert "the states of layer 2 do not fit" in line


def test_check_takes_the_deployment_of_lower_and_says_a_tp_width_refuses_the_bundle(tmp_path, capsys):
    from streamed.cli import main

    text = two_kind_document(4)
    doc = tmp_path / "m.lgm"
    doc.write_text(text)
    assert main(["check", str(doc), "--mode", "tp", "--tp", "2"]) == 0
    assert main(["check", str(doc), "--mode", "tp", "--tp", "3"]) == 1
    out = capsys.readouterr().out
    assert f"{doc}:{_line_of(text, 'Let a0 be attention')}:1: error: the bundle program does not lower: tensor parallel over 3 chips" in out
    assert main(["check", str(doc), "--mode", "prefill", "--ctx", "8", "--chunk", "16"]) == 2
    assert "--chunk 16 is longer than --ctx 8" in capsys.readouterr().err


def test_a_batched_steps_caches_are_summed_under_the_authored_name(tmp_path):
    (tmp_path / "small.toml").write_text(SMALL_CHIP)
    a = analyze(two_kind_document(4, kv=8, heads=8, hd=128, d=256, every=1))
    with pytest.raises(StreamedReject) as e:
        lower_streamed(a, Deployment("batched", ctx=8192, batch=64), target=str(tmp_path / "small.toml"))
    # 64 sequences × 8192 positions × 1024 values × 2 bytes × K and V: 2.15 GB for layer 0 alone, 8.59 GB for four.
    assert e.value.layer == 0 and e.value.binder in ("Kc0", "Vc0")
    assert e.value.why.startswith("the KV caches need 8.59 GB per chip")
    assert "(layer 0 carries 2.15 GB)" in e.value.why
    assert a.programs.layer(0).statements[e.value.statement].name.text == e.value.binder


def test_a_program_whose_own_activations_exceed_sram_is_tiled_and_refused_only_when_one_row_does_not_fit():
    a = analyze(two_kind_document(4, d=256, ffn=8192))
    model = lower_streamed(a, Deployment("forward", ctx=16384))  # 16384 rows of 8192-wide activations: tiled
    assert all(p.tiles and p.certificate["sram_bytes"] <= p.certificate["sram_available"] for p in
               (k.program for k in model.kinds))
    # One row of a 200-million-wide feed-forward needs more than the SN50's SRAM: refused, on the statement.
    wide = analyze(two_kind_document(4, d=256, ffn=200_000_000, q8=False))
    with pytest.raises(StreamedReject) as e:
        lower_streamed(wide, Deployment("forward", ctx=16))
    assert e.value.why.startswith("needs 1.6 GB of SRAM even in tiles of one row")
    assert "the largest `f0` of 1.6 GB" in e.value.why and e.value.why.endswith("; the SN50 has 432 MB")
    stmt = wide.programs.layer(0).statements[e.value.statement]
    assert stmt.name.text == e.value.binder == "f0"


def two_failing_statements(layers: int) -> str:
    """Every layer attends over keys and values it computed itself, and each global layer (3, 7, …) does it twice: a
    decode step refuses one statement of the windowed kind and two of the global kind."""
    text = not_a_cache(layers)
    for l in range(3, layers, 4):
        text = text.replace(f"Let h{l} be xo{l - 1} plus a{l} times Wo{l}.",
                            f"Let b{l} be attention of qp{l} over k{l} and v{l} at pos, heads 4 sharing 2.\n"
                            f"Let h{l} be xo{l - 1} plus (a{l} plus b{l}) times Wo{l}.")
    return text


def test_a_program_with_two_failing_statements_shows_both_as_diagnostics():
    text = two_failing_statements(8)
    a = analyze(text)
    assert not a.errors and [k.layers for k in a.kinds] == [(0, 1, 2, 4, 5, 6), (3, 7)]
    found = reject_diagnostics(a)
    assert [(d.data["program"], d.data["binder"]) for d in found] == [
        ("layer 0 (attention, window 8)", "a0"), ("layer 3 (attention)", "a3"), ("layer 3 (attention)", "b3")]
    rep = a.programs.layer(3)
    for d, binder in zip(found[1:], ("a3", "b3")):
        stmt = next(s for s in rep.statements if getattr(getattr(s, "name", None), "text", None) == binder)
        assert d.range == stmt.range and "attention reads its keys from `k3`, which is not a state" in d.message
        assert d.data["layers"] == [3, 7] and "(and so does the other layer of `attention`)" in d.message
    # The statement that reads what both refused statements bind is not refused a third time.
    assert not any(d.data["binder"] == "h3" for d in found)


def test_lower_prints_every_reject_of_every_program_each_at_its_line(tmp_path, capsys):
    from streamed.cli import main

    text = two_failing_statements(8)
    doc = tmp_path / "m.lgm"
    doc.write_text(text)
    assert main(["lower", str(doc), "-o", str(tmp_path / "b")]) == 1
    err = capsys.readouterr().err.splitlines()
    refused = [l.split(":")[0] for l in err if "does not lower" in l]
    assert refused == ["the layer 0 (attention, window 8) program does not lower"] + \
                      ["the layer 3 (attention) program does not lower"] * 2
    at = [l.strip() for l in err if l.startswith("  at ")]
    lines = [_line_of(text, f"Let {b} be attention") for b in ("a0", "a3", "b3")]
    assert [a.split(" (")[0] for a in at] == [f"at {doc}:{n}:1" for n in lines]
    assert [a.split(", ")[-1] for a in at] == ["`a0`)", "`a3`)", "`b3`)"]
    assert not (tmp_path / "b").exists()


PMU_CHIP = SMALL_CHIP.replace("pmus = 2080", "pmus = 12").replace("pcus = 2080", "pcus = 8").replace(
    "hbm_gb = 2", "hbm_gb = 64")


def test_pmu_and_pcu_rejects_land_on_the_statement_that_takes_most_of_them(tmp_path):
    (tmp_path / "few.toml").write_text(PMU_CHIP)
    a = analyze(two_kind_document(4))
    found = [d for d in reject_diagnostics(a, Deployment("decode", ctx=64), str(tmp_path / "few.toml"))
             if d.data["program"] == "layer 3 (attention)"]
    pcus = next(d for d in found if "needs 18 PCUs, one for each of its ops; the SMALL has 8" in d.message)
    pmus = next(d for d in found if "PMUs for its on-chip buffers (each PMU holds 36 MB); the SMALL has 12" in d.message)
    rep = a.programs.layer(3)
    statements = {s.range: s for s in rep.statements}
    for d in (pcus, pmus):
        assert d.range != rep.section.heading and d.range in statements
    assert statements[pcus.range].name.text == pcus.data["binder"] == "f3"  # two products, a silu, a product


@pytest.mark.parametrize("tp", [3, 8])
def test_a_refused_tp_width_says_the_widths_that_lower(tp):
    # tiny-llama: 4 query heads over 2 KV heads. Of the widths told against (2, 4, 8, 16), the query heads split over
    # 2 and 4 (and the KV heads split over 2 and divide 4); not over 8 or 16.
    from repo import TINY

    found = reject_diagnostics(analyze(TINY), Deployment("tp", 4096, tp=tp))
    assert found and all(d.message.endswith("; tp 2 or 4 lower") and d.data["lowers"] == "tp 2 or 4 lower" for d in found)
    assert found[0].data["why"].startswith(f"tensor parallel over {tp} chips: layer 0 (attention): the query heads")
    for width in (2, 4):
        assert reject_diagnostics(analyze(TINY), Deployment("tp", 4096, tp=width)) == []


def test_kv_caches_that_do_not_fit_say_the_largest_smaller_context_that_does(tmp_path):
    # Four layers of 8 KV heads of 128: 819 MB of caches a layer at ctx 200,000 — three do not fit the small chip's
    # 2 GB of HBM and 0.5 GB of DDR beside the weights; at 100,000 (410 MB a layer) all four do.
    (tmp_path / "small.toml").write_text(SMALL_CHIP)
    a = analyze(two_kind_document(4, kv=8, heads=8, hd=128, d=256, every=1))
    (d,) = reject_diagnostics(a, Deployment("decode", 200_000), str(tmp_path / "small.toml"))
    assert d.message.endswith("; ctx 100000 lowers") and d.data["lowers"] == "ctx 100000 lowers"
    assert reject_diagnostics(a, Deployment("decode", 100_000), str(tmp_path / "small.toml")) == []


def test_a_statement_no_size_changes_says_no_values_that_lower():
    found = reject_diagnostics(analyze(not_a_cache(8)))
    assert found and all("lowers" not in d.data and not d.message.endswith("lower") for d in found)
