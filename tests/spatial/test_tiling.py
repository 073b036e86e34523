"""Tiling: a program whose footprint does not fit SRAM runs as tiles — of rows, of a batch's sequences, of the head's
vocabulary columns — each of which fits; certify proves they cover every row once; the estimate pays for them; a
program is refused only when its smallest tile does not fit, with the numbers."""

import re
from dataclasses import replace

import jsonschema
import pytest

from streamed.analysis.whole import analyze
from streamed.spatial.bundle import manifest, schema
from streamed.spatial.deployment import Deployment
from streamed.spatial.ir import Access, SpatialProgram
from streamed.spatial.lower import LoweringError
from streamed.spatial.passes.certify import certify
from streamed.spatial.passes.footprint import own_bytes, weight_bytes
from streamed.spatial.streamed_model import StreamedReject, lower_streamed
from streamed.spatial.synth import two_kind_document
from streamed.spatial.target import load_target, parse_target
from streamed.spatial.units import beside, size

from repo import TINY_CHIP, example

SN50 = 432 * 10**6


@pytest.fixture(scope="module")
def llama():
    return analyze(example("llama-3.1-8b"))


REAL = [Deployment("forward", ctx=2048), Deployment("forward", ctx=8192), Deployment("forward", ctx=32768),
        Deployment("prefill", ctx=131072, chunk=8192)]


@pytest.mark.parametrize("deployment", REAL, ids=lambda d: f"{d.mode}-{d.ctx}")
def test_llama_3_1_8b_lowers_on_the_sn50_with_its_tiles_in_the_summary_and_the_manifest(llama, deployment):
    # Refused before tiling: the head's 525 MB of logits at 2k, the layer's 1.7 GB of activations at 8k.
    model = lower_streamed(llama, deployment)
    tiled = {name: p for name, p in model.programs() if p.tiles}
    assert tiled
    m = manifest(model)
    jsonschema.validate(m, schema("manifest"))
    for name, p in tiled.items():
        assert p.certificate["tiles_cover_once"] and p.certificate["tiles"] == len(p.tiles)
        assert p.certificate["sram_bytes"] <= SN50 and p.certificate["pcus"] <= 2080
        entry = m["tiles"]["head"] if name == "head" else next(k["tiles"] for k in m["kinds"] if k["name"] == name)
        assert entry["tiles"] == len(p.tiles) == len(entry["order"]) == model.summary["tiles"][name]["tiles"]
        assert [tuple(t["rows"]) for t in entry["order"]] == [t.rows for t in p.tiles]


def test_the_estimate_charges_every_row_tile_the_weights_it_reads(llama):
    # Prefill at ctx 131072 in chunks of 8192: five tiles a layer, each reading the layer's weights again.
    model = lower_streamed(llama, Deployment("prefill", ctx=131072, chunk=8192))
    layer = model.kinds[0].program
    cost = model.estimate["programs"][model.kinds[0].name]
    row_tiles = len({t.rows for t in layer.tiles})
    assert row_tiles > 1 and not layer.weights_on_chip and cost["weight_reads"] == row_tiles
    assert cost["weight_bytes"] == row_tiles * weight_bytes(layer)
    # The same document at a chunk that fits whole reads each weight once a step.
    small = lower_streamed(llama, Deployment("prefill", ctx=131072, chunk=512))
    assert not small.kinds[0].program.tiles
    assert small.estimate["programs"][small.kinds[0].name]["weight_reads"] == 1
    assert small.estimate["programs"][small.kinds[0].name]["weight_bytes"] == weight_bytes(small.kinds[0].program)


def test_a_tiled_layers_weights_read_per_tile_are_exactly_what_the_estimate_moves_from_hbm():
    a = analyze(two_kind_document(4))
    whole = lower_streamed(a, Deployment("forward", ctx=16))
    tiled = lower_streamed(a, Deployment("forward", ctx=16), target=str(TINY_CHIP))
    for kind in tiled.kinds:
        p = kind.program
        assert p.tiles and not p.weights_on_chip
        reads = len({t.rows for t in p.tiles})
        # Beside the weights, HBM gives the rotations their positions' rows of the two tables: 16 positions × 8
        # columns × 2 bytes, for the queries' rotation and the keys'.
        tables = 2 * 2 * 16 * 8 * 2
        assert tiled.estimate["programs"][kind.name]["bytes"]["hbm"] == reads * weight_bytes(p) + tables
        assert whole.estimate["programs"][kind.name]["bytes"]["hbm"] == \
            weight_bytes(whole.kind(kind.name).program) + tables


def test_each_tile_fits_the_target_where_the_whole_program_does_not():
    target = load_target(str(TINY_CHIP))
    a = analyze(two_kind_document(4))
    whole = lower_streamed(a, Deployment("forward", ctx=16))
    tiled = lower_streamed(a, Deployment("forward", ctx=16), target=target)
    for (name, p), (_, q) in zip(tiled.programs(), whole.programs()):
        assert p.tiles, name
        assert own_bytes(q) > target.sram_bytes >= own_bytes(p) == p.certificate["sram_bytes"]
        assert [t.rows for t in p.tiles][0][0] == 0 and p.tiles[-1].rows[1] == p.rows == 16


def tiled_layer() -> SpatialProgram:
    model = lower_streamed(analyze(two_kind_document(4)), Deployment("forward", ctx=16), target=str(TINY_CHIP))
    p = model.kinds[0].program
    assert len(p.tiles) >= 3
    return p


@pytest.mark.parametrize("broken,why", [
    (lambda ts: ts[:1] + ts[2:], "cover rows .* never"),
    (lambda ts: ts[:2] + ts[1:], "cover rows .* twice"),
    (lambda ts: ts[:-1], "cover rows 0 to \\d+ of 16"),
    (lambda ts: ts[:-1] + (replace(ts[-1], rows=(ts[-1].rows[0], 17)),), "cover rows 0 to 16 of 16|larger than"),
])
def test_certify_refuses_tiles_that_skip_repeat_or_overrun_rows(broken, why):
    p = tiled_layer()
    target = load_target(str(TINY_CHIP))
    assert certify(p, target).certificate["tiles_cover_once"]
    with pytest.raises(LoweringError, match=why):
        certify(replace(p, tiles=broken(p.tiles)), target)


def _overlapping(ts, by: int):
    """The tiles with the second one starting ``by`` rows inside the first (and its rows moved with it)."""
    r0, r1 = ts[1].rows
    return ts[:1] + (replace(ts[1], rows=(r0 - by, r1 - by)),) + ts[2:]


@pytest.mark.parametrize("broken,rows", [
    (lambda ts: _overlapping(ts, 1), "{first_end} to {first_end}"),  # one row computed twice, one never
    (lambda ts: _overlapping(ts, 2), "{first_end_2} to {first_end}"),
    (lambda ts: ts[:2] + ts[:1] + ts[2:], "0 to {second_end}"),  # a whole earlier tile again, not beside itself
])
def test_certify_refuses_tiles_that_overlap_in_part(broken, rows):
    """Issue 21: weakening the coverage check to let tiles overlap was caught by nothing — the tests fed repeats (a
    tile twice in a row, refused by another branch), a skipped tile and an overrun, never a tile starting inside the
    one before it. Rows covered twice compute a cache row twice and the output's rows twice."""
    p = tiled_layer()
    target = load_target(str(TINY_CHIP))
    first_end, second_end = p.tiles[0].rows[1], p.tiles[1].rows[1]
    twice = rows.format(first_end=first_end - 1, first_end_2=first_end - 2, second_end=second_end - 1)
    with pytest.raises(LoweringError, match=f"its tiles cover rows {twice} twice"):
        certify(replace(p, tiles=broken(p.tiles)), target)


def test_a_tile_of_rows_attends_causally_over_the_cache_rows_the_tiles_before_it_wrote():
    model = lower_streamed(analyze(two_kind_document(4)), Deployment("forward", ctx=16), target=str(TINY_CHIP))
    windowed, full = model.kinds[0].program, model.kinds[1].program  # window 8, then global attention
    for p, window in ((windowed, 8), (full, None)):
        for t in p.tiles:
            r0, r1 = t.rows
            reads = {a.tensor: a for a in t.reads}
            key = next(n for n in reads if n.startswith("Kc"))
            first = r0 - window + 1 if window else None
            assert reads[key] == Access(key, 0, first, r1, True)  # position-relative: [P + first, P + r1)
            assert Access(key, 0, r0, r1, True) in t.writes
            assert Access(p.output, 0, r0, r1) in t.writes and Access("x" if "x" in reads else p.inputs[0].name, 0,
                                                                           r0, r1) in t.reads


def test_a_batched_program_is_tiled_by_whole_sequences_and_holds_every_sequences_state():
    a = analyze(example("tiny-llama"))
    model = lower_streamed(a, Deployment("batched", ctx=16, batch=4), target=str(TINY_CHIP))
    p = model.kinds[0].program
    assert p.tiles and all(t.rows[1] - t.rows[0] == p.tile_rows < 4 for t in p.tiles)
    assert set(p.carried) == {f"{s}_s{b}" for s in ("Kc0", "Vc0") for b in range(4)}
    assert all(p.has(f"pos_s{b}") for b in range(4))
    # The ops name the tile's own sequences; each tile's accesses name the program's.
    assert {op.inputs[3] for op in p.ops if op.kind == "attention"} == {f"pos_s{b}" for b in range(p.tile_rows)}
    second = p.tiles[1]
    b = second.rows[0]
    assert Access(f"Kc0_s{b}", 0, 0, 1, True) in second.writes and Access(f"pos_s{b}") in second.reads


def test_the_head_is_tiled_by_vocabulary_columns_when_one_row_of_its_logits_does_not_fit():
    # 8192 logits of 2 bytes are 16 KB: more than the 10 KB chip, even for a decode step's one row.
    a = analyze(two_kind_document(4, vocab=8192))
    model = lower_streamed(a, Deployment("decode", ctx=16), target=str(TINY_CHIP))
    head = model.head
    assert head.cols == 8192 and head.tile_cols < 8192 and len(head.tiles) == -(-8192 // head.tile_cols)
    assert [t.cols for t in head.tiles][0][0] == 0 and head.tiles[-1].cols[1] == 8192
    assert [op.kind for op in head.ops][-1] == "running_argmax"
    assert all(any(r.axis == 1 and r.start == t.cols[0] and r.stop == t.cols[1] for r in t.reads) for t in head.tiles)
    assert model.summary["tiles"]["head"]["of_cols"] == 8192


def test_a_program_whose_rows_cannot_be_tiled_is_refused_for_the_limit_it_exceeds_at_the_statement_that_blocks():
    # Forward attention over keys computed from the step's own rows: a tile of rows would not see the earlier rows'.
    text = two_kind_document(4).replace("Let a0 be attention of qp0 over Kc0 and Vc0",
                                        "Let k0 be xn0 times Wk0.\nLet v0 be xn0 times Wv0.\n"
                                        "Let a0 be attention of qp0 over k0 and v0")
    a = analyze(text)
    with pytest.raises(StreamedReject) as e:
        lower_streamed(a, Deployment("forward", ctx=16), target=str(TINY_CHIP))
    layer0 = [r for r in e.value.every if r.program.startswith("layer 0")]
    assert layer0 and all("its rows cannot be tiled: its attention reads `k0`, computed from the step's own rows"
                          in r.why for r in layer0)
    assert re.search(r"needs [\d.]+ KB of SRAM \(.*\); the TINY has 10 KB, and its rows cannot be tiled", layer0[0].why)


def test_sizes_read_in_sensible_units_and_a_boundary_tells_the_two_numbers_apart():
    assert size(2.06e12) == "2.06 TB" and size(432e6) == "432 MB" and size(207_692) == "208 KB" and size(12) == "12 B"
    assert beside(1.2e6, 1e6) == ("1.2 MB", "1 MB")
    assert beside(1_000_400, 1_000_000) == ("1.0004 MB", "1 MB")
    assert beside(1.6e9, 432e6) == ("1.6 GB", "432 MB")


def test_a_program_just_over_a_1_mb_chip_says_how_much_over(tmp_path):
    # A layer that cannot be tiled (attention over its own rows), a little larger than 1 MB at ctx 160.
    text = two_kind_document(4, d=256, ffn=512).replace(
        "Let a3 be attention of qp3 over Kc3 and Vc3",
        "Let k3 be xn3 times Wk3.\nLet v3 be xn3 times Wv3.\nLet a3 be attention of qp3 over k3 and v3")
    chip = parse_target(open(TINY_CHIP).read().replace("sram_mb = 0.01", "sram_mb = 1"), "mine.toml")
    with pytest.raises(StreamedReject) as e:
        lower_streamed(analyze(text), Deployment("forward", ctx=160), target=chip)
    why = next(r.why for r in e.value.every if r.program.startswith("layer 3"))
    assert re.match(r"needs 1\.\d+ MB of SRAM \(.*\); the TINY has 1 MB", why), why


def test_lower_prints_each_tiled_programs_tiles_and_what_they_cost(tmp_path, capsys):
    from streamed.cli import main

    doc = tmp_path / "m.lgm"
    doc.write_text(two_kind_document(4, vocab=8192))
    assert main(["lower", str(doc), "--mode", "forward", "--ctx", "16", "--target", str(TINY_CHIP),
                 "-o", str(tmp_path / "b")]) == 0
    (line,) = [l for l in capsys.readouterr().out.splitlines() if l.startswith("  tiles")]
    assert re.match(r"  tiles +attention, window 8: \d+ tiles of \d+ rows, weights read \d+ times a step; "
                    r"attention: \d+ tiles of \d+ rows, weights read \d+ times a step; "
                    r"head: \d+ × \d+ tiles \(\d+ rows × \d+ of 8192 columns\), weights read (once|\d+ times a step)$",
                    line), line
