"""The pictures of a bundle, computed from its data alone: the chip (``floorplan.py``), the memory and the roofline —
so the command line (``streamed show``), the editor's manifest view and a notebook draw the same.

Everything here reads a ``StreamedModel`` as ``bundle.read_bundle`` gives it (its manifest and programs; no
document) and is pure. The memory and the roofline are Vega-Lite specifications (plain JSON: data and encoding; the
editor renders them with vega-embed, the command line with vl-convert), the chip is plain SVG. Each also comes as
data (``memory``, ``roofline``) — what a test holds against the manifest, and what a notebook may plot its own way.

* **Memory** (``memory``): SRAM, HBM and DDR as bars of one chip's capacity (every chip of a tensor-parallel bundle
  holds its own slices alike), filled as the residency plan filled them: the working set SRAM reserves for the
  largest program (its tables, its activations and inputs, its weights when they stay on chip across its tiles),
  each kind's carried states, the embed's, each kind's and the head's weights — each part's bytes the manifest's own
  (the residency's per-layer figures times its layers), never recomputed from shapes — and what spills to a slower
  tier, with why: the plan fills SRAM, then HBM, then DDR, layer by layer, so a part is in a slower tier only when the
  faster one had no room left for it.
* **Roofline** (``roofline``): the target's roofs — peak BF16 FLOP/s and each off-chip tier's bandwidth times the
  arithmetic intensity — and the deployment's point: its step's FLOPs over the bytes it reads and writes in HBM and
  DDR, at the FLOP/s the estimate gives (its FLOPs over its step's seconds), labelled with its tokens per second and
  its bound; beside it the estimate's ``sweep`` (``sweep.py``), the same document lowered at other batch sizes (or
  prefill chunks) and contexts, as lines on the roofline and as tokens per second against each size.
"""

from __future__ import annotations

import math

from ..analysis.whole import layers_named
from .floorplan import Floorplan, floorplans, svg, wrap
from .passes.footprint import own_bytes, sram_footprint, weight_bytes
from .streamed_model import StreamedModel
from .units import size

VEGA_LITE = "https://vega.github.io/schema/vega-lite/v6.json"
TIER_NAMES = {"sram": "SRAM", "hbm": "HBM", "ddr": "DDR"}
OFF_CHIP = ("hbm", "ddr")
#: The roofs' colours, by their names' order (BF16 peak, DDR, HBM).
ROOF_COLOURS = ["#8c564b", "#b279a2", "#1f9e89"]
#: Colours of the memory's parts, by their role in the tier: weights blues, states oranges, the working set greens,
#: tables purple — within a role, hues and lightness far enough apart to tell the embed's, the head's and each kind's
#: apart — and free space a quiet grey, drawn faint (``FREE_OPACITY``), so what is held stands out.
PART_COLOURS = {"weights": ("#1f4e79", "#4f9bd9", "#17a3b8", "#9ab7d9", "#5a5fc4", "#0b2e4f"),
                "states": ("#c55a11", "#f2a541", "#a33b20", "#f4c7a1"),
                "working set": ("#2e6b1f", "#7cc35a", "#b6d99a"), "tables": ("#7030a0",), "free": ("#bfbfbf",)}
FREE_OPACITY = 0.25
#: The least share of its tier a held part is drawn at (its tooltip says its true share): a working set or tables of
#: a few MB beside gigabytes would otherwise be a line too thin to see or hover.
LEAST_SHARE = 0.02
#: The width pictures are drawn for when the caller names none (a file, a terminal's ``--svg``).
WIDTH = 860
#: The sweep's sizes, each its own colour on the roofline and in its own chart (batch and context told apart).
SIZE_COLOURS = {"batch": "#4e79a7", "ctx": "#59a14f", "chunk": "#b07aa1"}


def _fixed(model: StreamedModel) -> list[tuple[str, object]]:
    """The programs bound to no layer: the embed (when the bundle has one) and the head."""
    return ([("embed", model.embed)] if model.embed is not None else []) + [("head", model.head)]


def memory(model: StreamedModel) -> dict:
    """Each tier of one chip: its capacity and its parts in the order the plan placed them (``group`` ``working
    set``, ``states`` or ``weights``; ``part`` the legend's name; ``bytes``; ``detail`` what and where from), then its
    ``free`` bytes; and ``spills``, one sentence for each kind whose states or weights the plan put past the fastest
    tier they may live in, with why."""
    r = model.residency
    capacity = r["capacity"]
    tiers = {t: [] for t in ("sram", "hbm", "ddr")}
    reserved = r["reserved_sram_bytes"]
    if reserved:
        name, p = max(model.programs(), key=lambda np: own_bytes(np[1]))
        use = sram_footprint(p)
        on_chip = weight_bytes(p) if p.weights_on_chip else 0
        parts = [("tables", use["tables"]), ("weights kept on chip", on_chip),
                 ("activations and inputs", reserved - use["tables"] - on_chip)]
        for what, n in parts:
            if n > 0:
                tiers["sram"].append({"group": "working set", "part": f"working set: {what}", "bytes": n,
                                      "detail": f"reserved for the {name} program, the largest one on chip"})
    groups = r.get("layers", [])

    def kinds(what: str, tier: str) -> list[dict]:
        """Each residency group's ``states`` or ``weights`` in ``tier``: its per-layer bytes times its layers."""
        each = f"{what[:-1]}_bytes_per_layer"
        return [{"group": what, "part": f"{what}: {g['kind']}", "bytes": g[each] * len(g["layers"]),
                 "detail": f"{size(g[each])} × {len(g['layers'])} ({layers_named(g['layers'])})"}
                for g in groups if g[what] == tier and g.get(each)]

    for tier in ("sram", "hbm", "ddr"):
        tiers[tier] += kinds("states", tier)
    for tier in OFF_CHIP:
        if r.get("tables", {}).get(tier):  # the rotations' tables, one copy a chip for every program (residency)
            tiers[tier].append({"group": "tables", "part": "tables: rotations", "bytes": r["tables"][tier],
                                "detail": "read a row per position, by every program that rotates"})
        for name, p in _fixed(model):
            wt = next((t.tier for t in p.tensors if t.role == "weight"), None)
            if wt == tier and weight_bytes(p):
                tiers[tier].append({"group": "weights", "part": f"weights: {name}", "bytes": weight_bytes(p),
                                    "detail": f"the {name} program's"})
        tiers[tier] += kinds("weights", tier)
    out = []
    for tier, parts in tiers.items():
        merged: dict[str, dict] = {}
        for part in parts:  # a kind whose layers sit in one tier in two groups is one part
            m = merged.setdefault(part["part"], {**part, "bytes": 0, "details": []})
            m["bytes"] += part["bytes"]
            m["details"].append(part["detail"])
        parts = [{**{k: v for k, v in m.items() if k != "details"}, "detail": "; ".join(m["details"])}
                 for m in merged.values()]
        used = sum(p["bytes"] for p in parts)
        out.append({"tier": tier, "capacity": capacity[tier], "used": used, "parts": parts,
                    "free": max(capacity[tier] - used, 0)})
    return {"chips": model.deployment.chips, "tiers": out, "spills": spills(model)}


def spills(model: StreamedModel) -> list[str]:
    """What the plan put in a slower tier than it could have, and why: states past SRAM, weights past HBM."""
    r = model.residency
    target = r["capacity"]
    out = []
    states_in, weights_in = r["states"], r["weights"]
    for g in r.get("layers", []):
        if g["states"] != "sram" and g.get("state_bytes_per_layer"):
            before = "SRAM" if g["states"] == "hbm" else "SRAM and HBM"
            out.append(f"{g['kind']}: the states of {layers_named(g['layers'])} "
                       f"({size(g['state_bytes_per_layer'])} each) are in {TIER_NAMES[g['states']]} — {before} had "
                       f"no room left for them (SRAM holds {size(states_in.get('sram', 0))} of states beside "
                       f"{size(r['reserved_sram_bytes'])} reserved, of {size(target['sram'])})")
        if g["weights"] == "ddr" and g.get("weight_bytes_per_layer"):
            out.append(f"{g['kind']}: the weights of {layers_named(g['layers'])} "
                       f"({size(g['weight_bytes_per_layer'])} each) are in DDR — HBM had no room left for them "
                       f"({size(weights_in.get('hbm', 0))} of weights and {size(states_in.get('hbm', 0))} of "
                       f"states, of {size(target['hbm'])})")
    for name, p in _fixed(model):
        if any(t.role == "weight" and t.tier == "ddr" for t in p.tensors):
            out.append(f"{name}: its weights ({size(weight_bytes(p))}) are in DDR — HBM had no room left for them")
    if not out:
        out.append("nothing spills: every carried state fits SRAM and every weight HBM")
    return out


def memory_spec(model: StreamedModel, width: float | None = None) -> dict:
    """The memory as a Vega-Lite specification ``width`` pixels wide (``WIDTH`` when not given), its legend wrapped
    to it: one bar per tier, its parts stacked as shares of its capacity — each held part at least ``LEAST_SHARE``
    wide, taken from the free space — coloured by role (``PART_COLOURS``). What spills is not in it: the spill
    sentences come beside it (``spills``), said once."""
    m = memory(model)
    width = max(float(width or WIDTH), 240)
    rows, domain, colours, used = [], [], [], {}
    for tier in m["tiers"]:
        label = f"{TIER_NAMES[tier['tier']]} · {size(tier['used'])} of {size(tier['capacity'])}"
        at = 0.0
        parts = [*tier["parts"], {"group": "free", "part": "free", "bytes": tier["free"], "detail": ""}]
        shares = [p["bytes"] / tier["capacity"] if tier["capacity"] else 0.0 for p in parts]
        drawn = [max(x, LEAST_SHARE) if p["group"] != "free" and p["bytes"] else x for p, x in zip(parts, shares)]
        over = sum(drawn[:-1]) - 1.0
        if over > 0:  # a full tier: the widening is taken from its largest part, not past the capacity
            largest = max(range(len(drawn) - 1), key=drawn.__getitem__)
            drawn[largest] -= over
        drawn[-1] = max(0.0, 1.0 - sum(drawn[:-1])) if tier["capacity"] else 0.0
        for part, share, wide in zip(parts, shares, drawn):
            rows.append({"tier": label, "part": part["part"], "group": part["group"], "bytes": part["bytes"],
                         "size": size(part["bytes"]), "detail": part["detail"], "start": at, "end": at + wide,
                         "share": share})
            at += wide
            if part["part"] not in domain:
                domain.append(part["part"])
                used[part["group"]] = used.get(part["group"], 0) + 1
                palette = PART_COLOURS[part["group"]]
                colours.append(palette[(used[part["group"]] - 1) % len(palette)])
    order = [TIER_NAMES[t["tier"]] for t in m["tiers"]]
    per = "per chip" if m["chips"] == 1 else f"per chip (each of {m['chips']} chips holds its own slices)"
    labels = min(170, width * 0.3)  # the tiers' names, beside the bars
    columns = max(1, int(width // 250))
    return {
        "$schema": VEGA_LITE,
        "title": {"text": f"Memory {per}", "anchor": "start", "limit": width - 10},
        "data": {"values": rows},
        "width": max(120, width - labels - 40),
        "height": {"step": 34},
        "mark": {"type": "bar", "height": 22, "tooltip": True},
        "encoding": {
            "y": {"field": "tier", "type": "nominal", "title": None,
                  "sort": [r["tier"] for r in rows if r["part"] == "free"], "axis": {"labelLimit": labels}},
            "x": {"field": "start", "type": "quantitative", "scale": {"domain": [0, 1]},
                  "axis": {"format": "%", "title": "share of the tier's capacity"}},
            "x2": {"field": "end"},
            "color": {"field": "part", "type": "nominal", "scale": {"domain": domain, "range": colours},
                      "legend": {"title": None, "orient": "bottom", "columns": columns,
                                 "labelLimit": width / columns - 40}},
            "opacity": {"condition": {"test": "datum.group === 'free'", "value": FREE_OPACITY}, "value": 1},
            "tooltip": [{"field": "part", "title": "what"}, {"field": "size", "title": "bytes"},
                        {"field": "share", "format": ".1%", "title": "of the tier"},
                        {"field": "detail", "title": "from"}],
        },
        "usermeta": {"tiers": order},
    }


# ---- the roofline -----------------------------------------------------------------------------------------------


def _intensity(flops: float, moved: dict) -> float | None:
    off = sum(moved.get(t, 0) for t in OFF_CHIP)
    return flops / off if off and flops else None


def roofline(model: StreamedModel) -> dict:
    """The target's roofs, the deployment's point and the sweep's points: each point's ``intensity`` (FLOPs per byte
    moved in HBM and DDR), ``flops_per_second`` (its FLOPs over its step's seconds), ``tokens_per_second`` and
    ``bound``; a swept point that did not lower keeps its sizes and ``refused``."""
    t, e = model.target, model.estimate
    step = e["step"]
    point = {"label": "this bundle", "tokens_per_second": e["tokens_per_second"], "bound": e["bound"],
             "intensity": _intensity(step["flops"], step["bytes"]),
             "flops_per_second": step["flops"] / step["seconds"] if step["seconds"] else None,
             **model.deployment.to_json()}
    swept = []
    for axis, points in (e.get("sweep") or {}).items():
        for p in points:
            entry = {**p, "size": axis, "value": p[axis]}
            if "refused" not in p:
                entry["intensity"] = _intensity(p["flops"], p["bytes"])
                entry["flops_per_second"] = p["flops"] / p["seconds"] if p["seconds"] else None
            swept.append(entry)
    roofs = {"compute": t.peak_bf16, **{tier: t.bandwidth(tier) for tier in OFF_CHIP}}
    return {"target": t.name, "roofs": roofs, "ridge": {tier: t.peak_bf16 / t.bandwidth(tier) for tier in OFF_CHIP},
            "point": point, "sweep": swept}


def _decades(lo: float, hi: float) -> list[float]:
    """The powers of ten from ``lo`` to ``hi``: a log axis's ticks and grid, one a decade."""
    k = math.ceil(math.log10(lo))
    out = []
    while 10.0 ** k <= hi:
        out.append(10.0 ** k)
        k += 1
    return out


def _rate(x: float) -> str:
    for unit, scale in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if x >= scale:
            return f"{x / scale:.3g} {unit}"
    return f"{x:.3g} "


def _short(axis: str, value: int) -> str:
    if axis == "ctx":
        return f"ctx {value // 1024}k" if value >= 1024 and value % 1024 == 0 else f"ctx {value}"
    return f"{axis} {value}"


def roofline_spec(model: StreamedModel, width: float | None = None) -> dict:
    """The roofline as a Vega-Lite specification ``width`` pixels wide (``WIDTH`` when not given): the roofs and the
    points on log-log axes, and tokens per second against each swept size — beside it where the width holds both,
    under it where it does not. The bundle's own point is a ring over the swept points it may coincide with (a
    decode's contexts move it little), and each swept size has its colour (``SIZE_COLOURS``)."""
    width = max(float(width or WIDTH), 240)
    side = width >= 760  # the charts by size beside the roofline, else under it
    main_width = width - 400 if side else width - 100  # the axes and the charts by size take the rest
    r = roofline(model)
    t = model.target
    pts = [p for p in [r["point"], *r["sweep"]] if p.get("intensity") and p.get("flops_per_second")]
    xs = [p["intensity"] for p in pts] + list(r["ridge"].values())
    lo, hi = min(xs) / 4, max(xs) * 4
    roofs = []
    for tier in OFF_CHIP:
        bw, ridge = t.bandwidth(tier), r["ridge"][tier]
        name = f"{TIER_NAMES[tier]} {_rate(bw)}B/s"
        for x in sorted({lo, min(max(ridge, lo), hi), hi}):
            roofs.append({"roof": name, "intensity": x, "flops_per_second": min(t.peak_bf16, bw * x)})
    roofs += [{"roof": f"BF16 peak {_rate(t.peak_bf16)}FLOP/s", "intensity": x, "flops_per_second": t.peak_bf16}
              for x in (lo, hi)]
    p = r["point"]
    label = f"{p['tokens_per_second']:.3g} tokens/s · {p['bound']}-bound" if p["tokens_per_second"] else p["bound"]
    here = [{**p, "text": label}] if p.get("intensity") else []
    swept = [{**s, "text": _short(s["size"], s["value"]),
              "tokens": f"{s['tokens_per_second']:.4g} tokens/s" if s.get("tokens_per_second") else ""}
             for s in r["sweep"] if s.get("intensity") and s.get("flops_per_second")]
    # Each line is labelled at its far end, the largest size (its other points, and the bundle's own, have tooltips).
    ends = {(axis, max(x["value"] for x in swept if x["size"] == axis)) for axis in {s["size"] for s in swept}}
    for s in swept:
        s["end"] = (s["size"], s["value"]) in ends
    ys = [p["flops_per_second"] for p in pts] + [row["flops_per_second"] for row in roofs]
    bottom, top = min(ys) / 2, t.peak_bf16 * 3
    x = {"field": "intensity", "type": "quantitative", "scale": {"type": "log", "domain": [lo, hi]},
         "axis": {"title": "FLOPs per byte moved in HBM and DDR", "format": "~s", "values": _decades(lo, hi)}}
    y = {"field": "flops_per_second", "type": "quantitative", "scale": {"type": "log", "domain": [bottom, top]},
         "axis": {"title": "FLOP/s (the estimate)", "format": "~s", "values": _decades(bottom, top)}}
    tooltip = [{"field": "text", "title": "point"},
               {"field": "tokens_per_second", "format": ".4g", "title": "tokens/s"},
               {"field": "bound"}, {"field": "intensity", "format": ".3g", "title": "FLOPs/byte"},
               {"field": "flops_per_second", "format": ".3s", "title": "FLOP/s"}]
    layers = [
        {"data": {"values": roofs}, "mark": {"type": "line", "strokeDash": [4, 3], "clip": True},
         "encoding": {"x": x, "y": y, "color": {"field": "roof", "type": "nominal", "title": "roofs",
                                                # mid-tones: read on a light page and a dark editor alike
                                                "scale": {"domain": sorted({r["roof"] for r in roofs}),
                                                          "range": ROOF_COLOURS},
                                                "legend": {"orient": "bottom", "labelLimit": main_width,
                                                           "columns": 1 if main_width < 420 else 3}}}},
    ]
    sizes_scale = {"domain": [a for a in SIZE_COLOURS if any(s["size"] == a for s in swept)],
                   "range": [c for a, c in SIZE_COLOURS.items() if any(s["size"] == a for s in swept)]}
    if swept:
        layers += [
            {"data": {"values": swept}, "mark": {"type": "line", "point": True, "tooltip": True},
             "encoding": {"x": x, "y": y, "detail": {"field": "size"}, "order": {"field": "value"},
                          "shape": {"field": "size", "type": "nominal", "title": "moving", "legend": None},
                          "color": {"field": "size", "type": "nominal", "title": "moving", "scale": sizes_scale,
                                    "legend": {"orient": "bottom"}},
                          "strokeOpacity": {"value": 0.7}, "tooltip": tooltip}},
            *({"data": {"values": [s for s in swept if s["end"] and s["size"] == axis]},
               "mark": {"type": "text", "dx": 7 if k == 0 else -7, "dy": -7, "align": "left" if k == 0 else "right",
                        "fontSize": 10, "color": SIZE_COLOURS.get(axis, "#8c8c8c")},
               "encoding": {"x": x, "y": y, "text": {"field": "text"}}}
              for k, axis in enumerate(dict.fromkeys(s["size"] for s in swept))),
        ]
    layers += [
        {"data": {"values": here}, "mark": {"type": "point", "filled": False, "size": 320, "strokeWidth": 3,
                                             "color": "#e15759", "tooltip": True},
         "encoding": {"x": x, "y": y, "tooltip": tooltip}},
        {"data": {"values": here}, "mark": {"type": "text", "dx": 10, "dy": 12, "align": "left", "fontSize": 12,
                                             "fontWeight": "bold", "color": "#e15759"},
         "encoding": {"x": x, "y": y, "text": {"field": "text"}}},
    ]
    # The roofs and the swept sizes are coloured by scales of their own, each with its legend under the chart.
    chart = {"width": main_width, "height": 300 if side else min(300, max(180, main_width * 0.7)), "layer": layers,
             "resolve": {"scale": {"color": "independent"}}}
    d = model.deployment
    sizes = ", ".join(f"{k} {v}" for k, v in (("batch", d.batch if d.batched else 0), ("chunk", d.chunk),
                                               ("tp", d.chips if d.chips > 1 else 0)) if v)
    chars = int((width - 20) / 6.2)
    said = [label + f" ({p['tokens_per_second'] and _rate(p['flops_per_second'] or 0)}FLOP/s at "
                    f"{(p['intensity'] or 0):.3g} FLOPs per byte)"] + \
           [f"{_short(s['size'], s['value'])}: {s['refused']}" for s in r["sweep"] if "refused" in s]
    title = {"text": wrap(f"Roofline — {d.mode}, ctx {d.ctx}{', ' + sizes if sizes else ''} on {t.name.upper()}",
                          int((width - 20) / 8)),
             "subtitle": [line for sentence in said for line in wrap(sentence, chars)], "anchor": "start"}
    if not swept:
        return {"$schema": VEGA_LITE, "title": title, **chart}
    moves = []
    for axis in dict.fromkeys(s["size"] for s in swept):
        values = [s for s in swept if s["size"] == axis]
        moves.append({
            "width": 200 if side else main_width, "height": 120, "title": f"tokens/s by {axis}",
            "layer": [
                {"data": {"values": values}, "mark": {"type": "line", "tooltip": True,
                                                      "color": SIZE_COLOURS.get(axis, "#4e79a7"),
                                                      "point": {"color": SIZE_COLOURS.get(axis, "#4e79a7")}},
                 "encoding": {"x": {"field": "value", "type": "quantitative", "scale": {"type": "log", "base": 2},
                                    "axis": {"title": axis, "values": [s["value"] for s in values],
                                             "labelExpr": "datum.value >= 1024 ? datum.value / 1024 + 'k' : "
                                                          "datum.value"}},
                              "y": {"field": "tokens_per_second", "type": "quantitative",
                                    "axis": {"title": "tokens/s", "labelExpr": "format(datum.value, '~s')"}},
                              "tooltip": [{"field": "text"}, {"field": "tokens"}, {"field": "bound"}]}},
                {"data": {"values": [{"value": p[axis], "tokens_per_second": p["tokens_per_second"]}]},
                 "mark": {"type": "point", "filled": True, "size": 90, "color": "#e15759"},
                 "encoding": {"x": {"field": "value", "type": "quantitative"},
                              "y": {"field": "tokens_per_second", "type": "quantitative"}}},
            ],
        })
    return {"$schema": VEGA_LITE, "title": title, **({"hconcat": [chart, {"vconcat": moves}]} if side else
                                                      {"vconcat": [chart, *moves]}),
            "resolve": {"scale": {"color": "independent", "shape": "independent"}}}


# ---- all three ---------------------------------------------------------------------------------------------------


def pictures(model: StreamedModel, width: float | None = None) -> dict:
    """The three pictures as the editor and the command line take them, each drawn ``width`` pixels wide (the panel
    they are shown in; ``WIDTH`` when not given): ``chip`` (one SVG per program, with its program name and title),
    ``memory`` and ``roofline`` (their Vega-Lite specifications, with the memory's spill sentences and the roofline's
    point)."""
    plans = floorplans(model)
    return {
        "chip": [{"program": plan.program, "title": plan.title, "svg": svg(plan, f"fp{i}", width)}
                 for i, plan in enumerate(plans)],
        "memory": {"spec": memory_spec(model, width), "spills": spills(model)},
        "roofline": {"spec": roofline_spec(model, width), "point": roofline(model)["point"]},
    }


def describe(model: StreamedModel, plans: list[Floorplan] | None = None) -> list[str]:
    """The pictures in words, a line each, for a terminal."""
    lines = []
    t = model.target
    for plan in plans if plans is not None else floorplans(model):
        lines.append(f"chip      {plan.title}: {plan.used('pcu'):,} of {t.pcus:,} PCUs, {plan.used('pmu'):,} of "
                     f"{t.pmus:,} PMUs" + "".join(f"; {n}" for n in plan.notes))
    for tier in memory(model)["tiers"]:
        parts = ", ".join(f"{p['part']} {size(p['bytes'])}" for p in tier["parts"]) or "empty"
        lines.append(f"memory    {TIER_NAMES[tier['tier']]} {size(tier['used'])} of {size(tier['capacity'])}: {parts}")
    for s in spills(model):
        lines.append(f"          {s}")
    r = roofline(model)
    p = r["point"]
    if p["tokens_per_second"]:
        lines.append(f"roofline  {p['tokens_per_second']:.4g} tokens/s, {p['bound']}-bound, at "
                     f"{(p['intensity'] or 0):.3g} FLOPs per byte of HBM and DDR ({_rate(p['flops_per_second'] or 0)}"
                     f"FLOP/s of {_rate(t.peak_bf16)}FLOP/s)")
    for axis in dict.fromkeys(s["size"] for s in r["sweep"]):
        pts = [s for s in r["sweep"] if s["size"] == axis]
        seen = ", ".join(f"{s['value']}: " + (f"{s['tokens_per_second']:.4g}" if "refused" not in s else "refused")
                         for s in pts)
        lines.append(f"          tokens/s by {axis}: {seen}")
    return lines
