"""The pictures of a bundle hold what its manifest and programs say: each is checked against the bundle's own files,
read here as JSON and summed in the test, never against the pictures' code or a snapshot of SVG text."""

from __future__ import annotations

import json
import math
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from streamed.analysis.whole import analyze, layer_ranges
from streamed.spatial.bundle import read_bundle, write_bundle
from streamed.spatial.deployment import Deployment
from streamed.spatial.floorplan import WIDTH, floorplans, grid, layout, statement_colours, svg
from streamed.spatial.pictures import memory, memory_spec, pictures, roofline, roofline_spec, spills
from streamed.spatial.streamed_model import lower_streamed
from streamed.spatial.sweep import with_sweep

from repo import EXAMPLES, TINY_CHIP, example

SVG = "{http://www.w3.org/2000/svg}"


def _bundle(tmp: Path, name: str, deployment: Deployment, sweep: bool = False, target=None):
    analysis = analyze(example(name))
    model = lower_streamed(analysis, deployment, target=target)
    if sweep:
        model = with_sweep(model, analysis)
    out = tmp / f"{name}-{deployment.mode}.bundle"
    write_bundle(model, out, source=str(EXAMPLES / f"{name}.lgm"))
    return out, read_bundle(out), json.loads((out / "manifest.json").read_text())


@pytest.fixture(scope="module")
def qwen(tmp_path_factory):
    return _bundle(tmp_path_factory.mktemp("pictures"), "qwen3.8", Deployment("decode", ctx=4096), sweep=True)


@pytest.fixture(scope="module")
def spilling(tmp_path_factory):
    """Qwen3.8 serving 8 sequences: its states outgrow SRAM, and the later layers' spill to HBM."""
    return _bundle(tmp_path_factory.mktemp("pictures"), "qwen3.8", Deployment("batched", ctx=4096, batch=8))


# ---- the memory ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("which", ["qwen", "spilling"])
def test_the_memory_bars_hold_the_manifests_states_weights_and_reserve_per_tier(which, request):
    _, model, m = request.getfixturevalue(which)
    r = m["residency"]
    bars = {t["tier"]: t for t in memory(model)["tiers"]}
    for tier in ("sram", "hbm", "ddr"):
        by_group = {}
        for part in bars[tier]["parts"]:
            by_group[part["group"]] = by_group.get(part["group"], 0) + part["bytes"]
        assert by_group.get("states", 0) == r["states"].get(tier, 0), tier
        assert by_group.get("weights", 0) == r["weights"].get(tier, 0), tier
        assert by_group.get("tables", 0) == r["tables"].get(tier, 0), tier  # rotations' tables, off chip
        assert by_group.get("working set", 0) == (r["reserved_sram_bytes"] if tier == "sram" else 0), tier
        assert bars[tier]["capacity"] == r["capacity"][tier]
        assert bars[tier]["used"] + bars[tier]["free"] == r["capacity"][tier]


def test_each_kinds_states_in_a_tier_are_its_layers_there_times_its_states_bytes(spilling):
    _, model, m = spilling
    per_layer = {k["name"]: sum(s["bytes"] for s in k["states"]) for k in m["kinds"]}
    want: dict[tuple[str, str], int] = {}
    for row in m["layers"]:
        key = (row["tiers"]["states"], f"states: {row['kind']}")
        want[key] = want.get(key, 0) + per_layer[row["kind"]]
    got = {(t["tier"], p["part"]): p["bytes"] for t in memory(model)["tiers"] for p in t["parts"] if p["group"] == "states"}
    assert got == want
    assert any(tier == "hbm" for tier, _ in got)  # the case this fixture is for: a kind's later layers spilled


def test_the_memory_spec_stacks_each_tiers_parts_to_its_whole_capacity(spilling):
    _, model, m = spilling
    rows = memory_spec(model)["data"]["values"]
    for tier, name in (("sram", "SRAM"), ("hbm", "HBM"), ("ddr", "DDR")):
        mine = [row for row in rows if row["tier"].startswith(name + " ")]
        assert mine[0]["start"] == 0 and math.isclose(mine[-1]["end"], 1.0)
        assert all(math.isclose(a["end"], b["start"]) for a, b in zip(mine, mine[1:]))
        used = sum(row["bytes"] for row in mine if row["part"] != "free")
        assert used == sum(m["residency"][k].get(tier, 0) for k in ("states", "weights", "tables")) + \
            (m["residency"]["reserved_sram_bytes"] if tier == "sram" else 0)


def test_what_spills_names_the_kind_its_layers_and_the_tier_it_went_to(spilling):
    _, model, m = spilling
    spilled = [g for g in m["residency"]["layers"] if g["states"] != "sram"]
    assert spilled
    said = spills(model)
    for g in spilled:
        sentence = next(s for s in said if s.startswith(f"{g['kind']}: the states of"))
        assert layer_ranges(g["layers"]) in sentence or f"{len(g['layers'])} layers from {g['layers'][0]}" in sentence
        assert "are in HBM" in sentence and "SRAM had no room left" in sentence


def test_a_bundle_whose_states_and_weights_fit_says_nothing_spills(qwen):
    _, model, m = qwen
    assert all(g["states"] == "sram" and g["weights"] == "hbm" for g in m["residency"]["layers"])
    assert spills(model) == ["nothing spills: every carried state fits SRAM and every weight HBM"]


# ---- the chip ------------------------------------------------------------------------------------------------------


def _cells(group: ET.Element, cell: float) -> int:
    return round(sum(float(r.get("width")) * float(r.get("height")) for r in group.iter(f"{SVG}rect")) / cell ** 2)


def _main(spec: dict) -> dict:
    """The roofline chart of a roofline specification (first of its concatenation, when it has one)."""
    return (spec.get("hconcat") or spec.get("vconcat") or [spec])[0]


@pytest.mark.parametrize("mode", ["decode", "tp"])
def test_every_ops_region_on_the_floorplan_covers_as_many_pcus_as_its_program_says(mode, tmp_path):
    folder, model, m = _bundle(tmp_path, "small-gemma3", Deployment(mode, ctx=256, tp=2))
    plans = {p.program: p for p in floorplans(model)}
    files = {k["name"]: k["program"] for k in m["kinds"]} | {"head": m["programs"]["head"], "embed": m["programs"]["embed"]}
    for name, file in files.items():
        program = json.loads((folder / file).read_text())
        chip0 = [op for op in program["ops"] if op.get("chip") in (None, 0)]
        plan = plans[name]
        regions = [r for r in plan.regions if r.unit == "pcu"]
        chip = 0 if program["tp"] > 1 else None
        assert [(r.op, r.start, r.stop) for r in regions] == [(i, a, b) for c, i, a, b in program["placement"]["pcus"]
                                                              if c == chip]
        assert [(r.tensor, r.start, r.stop) for r in plan.regions if r.unit == "pmu" and r.tensor] == \
            [(n, a, b) for c, n, a, b in program["placement"]["pmus"] if c == chip]
        assert [program["ops"][r.op]["pcus"] for r in regions] == [r.count for r in regions]
        assert sorted(op["pcus"] for op in chip0) == sorted(r.count for r in regions)
        # the drawing: each region's rectangles cover its units, no two regions share a unit
        drawn = ET.fromstring(svg(plan))
        groups = [g for g in drawn.iter(f"{SVG}g") if g.get("data-unit") == "pcu"]
        assert [_cells(g, layout(plan, WIDTH)[0]) for g in groups] == [r.count for r in regions]
        spans = sorted((r.start, r.stop) for r in regions)
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:])) and spans[-1][1] <= m["target_spec"]["pcus"]


def test_the_pmus_of_a_floorplan_are_its_buffers_and_the_states_the_residency_keeps_in_sram(qwen):
    folder, model, m = qwen
    pmu_bytes = m["target_spec"]["sram_bytes"] // m["target_spec"]["pmus"]
    kind = m["kinds"][0]
    program = json.loads((folder / kind["program"]).read_text())
    used = {n for op in program["ops"] for n in (*op["inputs"], *op["outputs"])}
    buffers = sum(1 if t["role"] == "state" else math.ceil(t["bytes"] / pmu_bytes) for t in program["tensors"]
                  if t["tier"] == "sram" and t["role"] != "weight" and t["name"] in used)
    # what an op holds while it runs (a convolution's window, gated delta's state update: the certificate's
    # held_by_ops) is in the buffer of its first output, so in that op's PMUs too
    held = program["certificate"]["held_by_ops"]
    assert {h["kind"] for h in held} == {"short_convolution", "gated_delta"}
    buffers += sum(math.ceil(h["bytes"] / pmu_bytes) for h in held)
    plan = next(p for p in floorplans(model) if p.program == kind["name"])
    resident = sum(r.count for r in plan.regions if r.unit == "pmu" and r.op is None and r.tensor is None)
    assert plan.used("pmu") - resident == buffers == program["certificate"]["pmus"]
    (delta,) = [h for h in held if h["kind"] == "gated_delta"]
    out = program["ops"][delta["op"]]["outputs"][0]
    u = next(r for r in plan.regions if r.unit == "pmu" and r.tensor == out)
    size = next(t["bytes"] for t in program["tensors"] if t["name"] == out)
    assert u.count == math.ceil(size / pmu_bytes) + math.ceil(delta["bytes"] / pmu_bytes) > 1
    assert resident == math.ceil(m["residency"]["states"]["sram"] / pmu_bytes)


def test_a_regions_hover_is_the_statement_its_op_was_lifted_from_at_its_line_in_the_document(qwen):
    _, model, m = qwen
    lines = (EXAMPLES / "qwen3.8.lgm").read_text().splitlines()
    seen = 0
    for plan in floorplans(model):
        for r in plan.regions:
            if r.statement is None:
                continue
            source = " ".join(lines[r.line - 1].split("--")[0].split())
            assert r.text.startswith(source) or source.startswith(r.text), (r.line, r.text, source)
            seen += 1
    assert seen > 40
    # the representative's lines: the attention kind's statements are in its first layer's section
    rep = next(k["representative"] for k in m["kinds"] if k["name"] == "attention")
    heading = lines.index(next(l for l in lines if l.startswith(f"## Layer {rep}:"))) + 1
    assert all(heading < s["line"] < heading + 40 for s in m["statements"]["attention"])


def test_the_hover_and_the_line_are_in_the_svg_of_each_region(qwen):
    _, model, _ = qwen
    plan = next(p for p in floorplans(model) if p.program == "attention")
    drawn = ET.fromstring(svg(plan))
    attention = next(g for g in drawn.iter(f"{SVG}g") if g.findtext(f"{SVG}title", "").startswith("a3 · attention"))
    assert "Let a3 be attention of qr3 over Kc3 and Vc3 at pos" in attention.findtext(f"{SVG}title")
    region = next(r for r in plan.regions if r.what.startswith("a3 · attention"))
    assert attention.get("data-line") == str(region.line)


def test_regions_are_labelled_and_hovered_by_the_names_the_document_binds_never_lowered_ones(qwen):
    _, model, _ = qwen
    text = (EXAMPLES / "qwen3.8.lgm").read_text()
    bound = set(re.findall(r"^(?:Let (\w+) +be|Set row \w+ of (\w+) to)", text, re.M))
    bound = {a or b for a, b in bound}
    for plan in floorplans(model):
        drawn = ET.fromstring(svg(plan))
        labels = [t.text for g in drawn.iter(f"{SVG}g") if g.get("class") == "region" for t in g.iter(f"{SVG}text")]
        hovers = [g.findtext(f"{SVG}title") for g in drawn.iter(f"{SVG}g") if g.get("class") == "region"]
        assert set(labels) <= bound and (labels or plan.program in ("embed", "head"))
        assert not any("__" in h for h in hovers)  # the lowering's names (`f0__1`) are not the author's
        for r in plan.regions:
            if r.statement is not None:
                assert r.name in bound and r.group.startswith(f"{r.name} · line {r.line}")


@pytest.mark.parametrize("n", [6, 12, 24, 36])
def test_a_programs_statements_have_colours_no_two_alike(n):
    # CIE76 colour difference from sRGB (D65), written out here: 10 or more is two colours told apart at a glance.
    def lab(colour: str) -> tuple[float, float, float]:
        linear = [(c / 255 + 0.055) ** 2.4 / 1.055 ** 2.4 if c / 255 > 0.04045 else c / 255 / 12.92
                  for c in (int(colour[k:k + 2], 16) for k in (1, 3, 5))]
        r, g, b = linear
        x, y, z = ((0.4124 * r + 0.3576 * g + 0.1805 * b) / 0.95047, 0.2126 * r + 0.7152 * g + 0.0722 * b,
                   (0.0193 * r + 0.1192 * g + 0.9505 * b) / 1.08883)
        f = lambda t: t ** (1 / 3) if t > 0.008856 else 7.787 * t + 16 / 116  # noqa: E731
        return 116 * f(y) - 16, 500 * (f(x) - f(y)), 200 * (f(y) - f(z))

    colours = [lab(c) for c in statement_colours(n)]
    assert min(math.dist(a, b) for i, a in enumerate(colours) for b in colours[i + 1:]) >= 10


@pytest.mark.parametrize("width", [300, 640, 1200])
def test_the_chip_is_drawn_to_the_width_it_is_given_its_grids_filling_it_and_its_text_whole(qwen, width):
    _, model, _ = qwen
    plan = next(p for p in floorplans(model) if p.program == "gated deltanet")
    drawn = ET.fromstring(svg(plan, width=width))
    assert float(drawn.get("width")) == width
    rects = [r for r in drawn.iter(f"{SVG}rect")]
    assert max(float(r.get("x")) + float(r.get("width")) for r in rects) <= width
    # The grids fill the width: the rightmost grid reaches within a cell and the gap of its right edge.
    cell, grids = layout(plan, width)
    right = max(x + cols * cell for _, _, cols, _, x, _ in grids)
    assert right >= width - 8 - 24 - cell and cell >= 2
    # Every line of text fits (at most the legend's monospace width a character), and none is cut short.
    for t in drawn.iter(f"{SVG}text"):
        if t.get("text-anchor") != "middle":
            assert float(t.get("x")) + len(t.text or "") * 6.7 <= width + 1, t.text
        assert not (t.text or "").endswith("…")
    said = " ".join(t.text or "" for t in drawn.iter(f"{SVG}text"))
    for r in plan.regions:
        if r.text:
            assert " ".join(r.text.split()) in said  # each statement's text whole, over as many lines as it takes


def test_a_tiled_program_says_its_tiles_and_a_tensor_parallel_one_its_chip(tmp_path):
    _, tiled, _ = _bundle(tmp_path, "tiny-llama", Deployment("forward", ctx=16), target=str(TINY_CHIP))
    notes = [n for p in floorplans(tiled) for n in p.notes]
    assert any("row tiles of" in n or "row tile of" in n for n in notes)
    _, tp, _ = _bundle(tmp_path, "small-gemma3", Deployment("tp", ctx=256, tp=2))
    assert all(any(n.startswith("chip 0 of 2") for n in p.notes) for p in floorplans(tp) if p.program not in ("embed", "head"))


def test_a_grid_holds_every_unit_of_the_target():
    for n in (2080, 1040, 1000, 7, 1):
        cols, rows = grid(n)
        assert cols * rows >= n > cols * (rows - 1)


# ---- the roofline ------------------------------------------------------------------------------------------------


def test_the_rooflines_point_is_the_estimates_tokens_per_second_at_its_flops_and_bytes(qwen):
    _, model, m = qwen
    step = m["estimate"]["step"]
    layers = _main(roofline_spec(model))["layer"]
    here = [v for layer in layers if layer["mark"].get("color") == "#e15759" for v in layer["data"]["values"]][0]
    assert here["tokens_per_second"] == m["estimate"]["tokens_per_second"]
    assert math.isclose(here["flops_per_second"], step["flops"] / step["seconds"])
    assert math.isclose(here["intensity"], step["flops"] / (step["bytes"]["hbm"] + step["bytes"]["ddr"]))
    assert here["bound"] == m["estimate"]["bound"] and f"{m['estimate']['tokens_per_second']:.3g} tokens/s" in here["text"]


def test_the_roofs_are_the_targets_peak_and_bandwidths(qwen):
    _, model, m = qwen
    t = m["target_spec"]
    roofs = _main(roofline_spec(model))["layer"][0]["data"]["values"]
    for row in roofs:
        if row["roof"].startswith("HBM"):
            assert math.isclose(row["flops_per_second"], min(t["peak_bf16"], t["hbm_bandwidth"] * row["intensity"]))
        elif row["roof"].startswith("DDR"):
            assert math.isclose(row["flops_per_second"], min(t["peak_bf16"], t["ddr_bandwidth"] * row["intensity"]))
        else:
            assert row["flops_per_second"] == t["peak_bf16"]


def test_a_swept_point_is_the_document_lowered_at_that_batch_or_context(qwen):
    _, model, m = qwen
    analysis = analyze(example("qwen3.8"))
    by = {(p["size"], p["value"]): p for p in roofline(model)["sweep"]}
    for size, value, there in (("batch", 4, Deployment("batched", ctx=4096, batch=4)),
                               ("ctx", 16384, Deployment("decode", ctx=16384))):
        assert by[(size, value)]["tokens_per_second"] == lower_streamed(analysis, there).estimate["tokens_per_second"]
    own = [p for p in roofline(model)["sweep"] if (p["size"], p["value"]) in (("batch", 1), ("ctx", 4096))]
    assert [p["tokens_per_second"] for p in own] == [m["estimate"]["tokens_per_second"]] * 2


def test_a_size_that_does_not_lower_is_a_point_that_says_why(tmp_path):
    # A chip whose HBM and DDR hold small-gemma3's weights and its caches at ctx 256 but not at eight times that (its
    # ten windowed layers' caches are rings of their 512 positions there: LANGUAGE §8).
    chip = tmp_path / "small.toml"
    chip.write_text(TINY_CHIP.read_text().replace("sram_mb = 0.01", "sram_mb = 1").replace("hbm_gb = 64", "hbm_gb = 0.002")
                    .replace("ddr_gb = 2048", "ddr_gb = 0.001").replace('name = "tiny"', 'name = "small"'))
    analysis = analyze(example("small-gemma3"))
    model = with_sweep(lower_streamed(analysis, Deployment("decode", ctx=256), target=str(chip)), analysis)
    refused = [p for p in roofline(model)["sweep"] if "refused" in p]
    assert refused and all("does not lower" in p["refused"] or "refused" in p["refused"] for p in refused)
    assert any(p["size"] == "ctx" and p["value"] > 256 for p in refused)
    assert all(p["size"] != "ctx" or p["value"] > 256 for p in refused)
    title = roofline_spec(model)["title"]["subtitle"]
    assert any(line.startswith("ctx 2k:") for line in title)


def test_the_pictures_of_a_bundle_come_from_the_bundle_alone(qwen, tmp_path):
    folder, model, _ = qwen
    moved = tmp_path / "elsewhere.bundle"
    import shutil

    shutil.copytree(folder, moved)  # no document beside it
    drawn = pictures(read_bundle(moved))
    assert [c["program"] for c in drawn["chip"]] == ["embed", "gated deltanet", "attention", "head"]
    assert drawn == pictures(model)


def test_a_tiled_program_keeping_its_weights_on_chip_draws_them_on_its_pmus(tmp_path):
    # Llama 3.1 8B over 8k positions: its layer runs in row tiles with its weights kept in SRAM across them.
    folder, model, m = _bundle(tmp_path, "llama-3.1-8b", Deployment("forward", ctx=8192))
    kind = m["kinds"][0]
    program = json.loads((folder / kind["program"]).read_text())
    assert program["weights_on_chip"]
    pmu_bytes = m["target_spec"]["sram_bytes"] // m["target_spec"]["pmus"]
    weights = {t["name"]: math.ceil(t["bytes"] / pmu_bytes) for t in program["tensors"] if t["role"] == "weight"}
    plan = next(p for p in floorplans(model) if p.program == kind["name"])
    drawn = {r.tensor: r.count for r in plan.regions if r.group == "weights"}
    assert drawn == weights
    assert any("kept on chip across them" in n for n in plan.notes)


def test_the_memory_draws_free_space_faint_a_small_part_visible_and_says_what_spills_only_beside_it(qwen):
    _, model, m = qwen
    spec = memory_spec(model, width=640)
    rows = spec["data"]["values"]
    assert spec["encoding"]["opacity"]["condition"]["test"] == "datum.group === 'free'"
    assert spec["encoding"]["opacity"]["condition"]["value"] < spec["encoding"]["opacity"]["value"]
    # The working set is a few MB of SRAM's hundreds: drawn at least 2% wide, its tooltip's share the true one.
    work = [r for r in rows if r["group"] == "working set"]
    assert work and all(r["end"] - r["start"] >= 0.02 - 1e-12 for r in work)
    assert all(math.isclose(r["share"], r["bytes"] / m["residency"]["capacity"]["sram"]) for r in work)
    assert not any(s in json.dumps(spec) for s in spills(model))  # the spill sentences come beside it, once
    assert spec["width"] + spec["encoding"]["y"]["axis"]["labelLimit"] + 40 <= 640


@pytest.mark.parametrize("width", [640, 1200])
def test_the_roofline_fits_its_width_its_own_point_a_ring_over_batch_and_context_told_apart(qwen, width):
    _, model, _ = qwen
    spec = roofline_spec(model, width=width)
    concat = spec.get("hconcat") or spec["vconcat"]
    main = concat[0]
    if "hconcat" in spec:
        assert main["width"] + 80 + max(c["width"] for c in concat[1]["vconcat"]) + 100 <= width
    else:
        assert all(c["width"] + 100 <= width for c in concat)
    layers = main["layer"]
    ring = next(layer for layer in layers if layer["mark"].get("color") == "#e15759" and layer["mark"]["type"] == "point")
    assert ring["mark"]["filled"] is False and layers.index(ring) > next(
        k for k, layer in enumerate(layers) if layer["mark"]["type"] == "line" and "size" in layer["encoding"].get("color", {}).get("field", ""))
    swept = next(layer for layer in layers if layer["encoding"].get("color", {}).get("field") == "size")
    scale = swept["encoding"]["color"]["scale"]
    assert set(scale["domain"]) == {"batch", "ctx"} and len(set(scale["range"])) == 2


def test_the_phase_strip_divides_the_programs_estimated_step_among_its_phases(qwen):
    folder, model, m = qwen
    plan = next(p for p in floorplans(model) if p.program == "gated deltanet")
    times = [t for *_, t in plan.phases]
    assert math.isclose(sum(times), m["estimate"]["programs"]["gated deltanet"]["seconds"], rel_tol=1e-9)
    # A decode step is memory-bound: its longest phases are those whose ops read the largest weights.
    program = json.loads((folder / next(k["program"] for k in m["kinds"] if k["name"] == "gated deltanet")).read_text())
    weights = {t["name"]: t["bytes"] for t in program["tensors"] if t["role"] == "weight"}
    heaviest = max(weights, key=weights.get)
    longest = max(plan.phases, key=lambda p: p[3])[0]
    assert any(heaviest in op["inputs"] and op["phase"] == longest for op in program["ops"])
    drawn = ET.fromstring(svg(plan, width=640))
    boxes = [r for r in drawn.iter(f"{SVG}rect") if r.get("class") == "phase"]
    assert [b.findtext(f"{SVG}title").split(":")[0] for b in boxes] == [f"phase {p[0]}" for p in plan.phases]
    assert all("µs" in b.findtext(f"{SVG}title") or "ns" in b.findtext(f"{SVG}title") for b in boxes)
    widest = max(boxes, key=lambda b: float(b.get("width")))
    assert widest.findtext(f"{SVG}title").startswith(f"phase {longest}:")
