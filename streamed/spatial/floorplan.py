"""The chip picture: one program of a bundle placed on the target — its PCUs and PMUs as two grids of the target's
counts, each region coloured by the statement it serves, its phases as a strip, its tiles and chips said.

What is drawn is the bundle's data, never a guess: each op's PCUs and each on-chip buffer's PMUs are the ranges
``place`` recorded (``SpatialProgram.placement``), the statement behind a region is the op's ``statement`` and its
text the one the manifest records for the program (``StreamedModel.statements``), and the PMUs the carried states
of every layer hold in SRAM are the residency plan's bytes over a PMU's. A tensor-parallel program is drawn as its
chip 0 (every chip runs its own slice of the same ops).

``floorplans(model)`` gives the data (``Floorplan``: what a test checks); ``svg(plan)`` draws one as plain SVG: no
script and no style element (a webview with a strict Content Security Policy shows it as it is), text in
``currentColor`` (it takes the page's colour when inlined, black in a file), each region a ``<g class="region">``
with its statement in a ``<title>`` (the hover) and ``data-line`` (the statement's line in the document, 1-based).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from xml.sax.saxutils import escape, quoteattr

from .ir import SpatialProgram
from .streamed_model import StreamedModel
from .units import size

#: Tableau's 20 colours, a statement each in order of first use; ops the lowering adds are grey.
PALETTE = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f",
           "#bab0ac", "#a0cbe8", "#ffbe7d", "#ff9d9a", "#86bcb6", "#8cd17d", "#f1ce63", "#d4a6c8", "#fabfd2",
           "#d7b5a6", "#79706e")
ADDED = "#8c8c8c"
INPUTS = "#c7c7c7"
WEIGHTS = "#1f4e79"
RESIDENT = "#6b6ecf"
FREE = "#d9d9d9"
CELL = 6


@dataclass(frozen=True)
class Region:
    """Units ``[start, stop)`` of one grid (``unit`` ``pcu`` or ``pmu``) and what they serve: an op (``op``, its
    index in the program) or a buffer (``tensor``), the statement behind it (``statement``, its ``text`` and
    document ``line``), its ``phase``, its legend ``group`` and ``colour``."""

    unit: str
    start: int
    stop: int
    group: str
    colour: str
    what: str
    op: int | None = None
    tensor: str | None = None
    phase: int | None = None
    statement: int | None = None
    text: str | None = None
    line: int | None = None

    @property
    def count(self) -> int:
        return self.stop - self.start


@dataclass(frozen=True)
class Floorplan:
    """One program on the target: its regions on each grid, its phases (each with the colour of the statement its
    first op serves), the legend's groups in order, and notes (tiles, chips)."""

    program: str
    title: str
    pcus: int
    pmus: int
    regions: tuple[Region, ...]
    phases: tuple[tuple[int, str, str], ...]  # (phase, colour, the ops it runs)
    legend: tuple[tuple[str, str, str], ...]  # (group, colour, what it says)
    notes: tuple[str, ...]

    def used(self, unit: str) -> int:
        return sum(r.count for r in self.regions if r.unit == unit)


def _line(text: str | None, most: int = 110) -> str:
    if not text:
        return ""
    return text if len(text) <= most else text[: most - 1] + "…"


def floorplan(name: str, program: SpatialProgram, model: StreamedModel) -> Floorplan:
    """``program`` (named ``name`` in ``model``) on its chip 0: a region per op on the PCUs and per buffer on the
    PMUs where ``place`` put them, each in the colour of the statement it serves (a buffer: its writer's), the PMUs
    the residency plan's states in SRAM fill at the end of the grid, the phases in order, the notes."""
    target = model.target
    sources = {s["index"]: s for s in (model.statements or {}).get(name, ())}
    colours: dict[int | None, str] = {}
    legend: dict[str, tuple[str, str]] = {}

    def group_of(statement: int | None) -> tuple[str, str]:
        if statement is None:
            return "added by the lowering", ADDED
        if statement not in colours:
            colours[statement] = PALETTE[len(colours) % len(PALETTE)]
        src = sources.get(statement)
        return (f"line {src['line']}" if src else f"statement {statement + 1}"), colours[statement]

    # A program from before ``place`` recorded where it puts each op and buffer has no regions to draw: said so.
    pcus, pmus = program.placement.on(0 if program.tp > 1 else None) if program.placement else ([], [])
    tensors = {t.name: t for t in program.tensors}
    writer = {}
    for i, op in program.schedule():
        for n in op.outputs:
            writer.setdefault(n, i)
    regions: list[Region] = []
    for i, start, stop in pcus:
        op = program.ops[i]
        group, colour = group_of(op.statement)
        src = sources.get(op.statement)
        legend.setdefault(group, (colour, src["text"] if src else "ops the lowering adds (collectives, copies)"))
        regions.append(Region("pcu", start, stop, group, colour, f"{op.kind} → {', '.join(op.outputs)}", op=i,
                              phase=op.phase, statement=op.statement, text=src["text"] if src else None,
                              line=src["line"] if src else None))
    for n, start, stop in pmus:
        t = tensors[n]
        w = writer.get(n)
        if t.role == "weight":  # kept on chip across a tiled program's tiles
            legend.setdefault("weights", (WEIGHTS, "weights kept on chip across the program's tiles"))
            regions.append(Region("pmu", start, stop, "weights", WEIGHTS, f"weight {n} ({size(t.bytes)})", tensor=n))
            continue
        if t.role in ("input", "table") or w is None:
            group = "tables" if t.role == "table" else "inputs"
            legend.setdefault(group, (INPUTS, "the step's inputs and the host's tables"))
            regions.append(Region("pmu", start, stop, group, INPUTS, f"{t.role} {n} ({size(t.bytes)})", tensor=n))
            continue
        op = program.ops[w]
        group, colour = group_of(op.statement)
        src = sources.get(op.statement)
        what = (f"state {n}: the buffer its rows stream through ({size(t.bytes)}, held in {t.tier.upper()})"
                if t.role == "state" else f"{t.role} {n} ({size(t.bytes)})")
        regions.append(Region("pmu", start, stop, group, colour, what, op=w, tensor=n, phase=op.phase,
                              statement=op.statement, text=src["text"] if src else None,
                              line=src["line"] if src else None))
    resident = model.residency.get("states", {}).get("sram", 0)
    if resident:
        used = pmus[-1][2] if pmus else 0
        count = min(math.ceil(resident / target.pmu_bytes), target.pmus - used)
        if count > 0:
            group = "carried states"
            legend[group] = (RESIDENT, f"every layer's carried states the residency plan keeps in SRAM "
                                       f"({size(resident)} per chip)")
            regions.append(Region("pmu", target.pmus - count, target.pmus, group, RESIDENT,
                                  f"carried states of every layer: {size(resident)} in SRAM"))
    phases: dict[int, list[Region]] = {}
    for r in regions:
        if r.unit == "pcu":
            phases.setdefault(r.phase, []).append(r)
    strip = tuple((p, rs[0].colour, "; ".join(r.what for r in rs)) for p, rs in sorted(phases.items()))
    notes = [] if program.placement else ["this program records no placement (lower the document again to see it)"]
    if program.tp > 1:
        notes.append(f"chip 0 of {program.tp}: every chip runs its own slice of the same ops")
    if program.tiles:
        rows = len({t.rows for t in program.tiles})
        cols = f" × {len(program.tiles) // rows} column tiles of {program.tile_cols}" if program.tile_cols else ""
        notes.append(f"runs {rows} row tile{'s' if rows != 1 else ''} of {program.tile_rows} rows{cols}; weights "
                     f"{'kept on chip across them' if program.weights_on_chip else 'read by every tile'}")
    ops = sum(1 for r in regions if r.unit == "pcu")
    title = f"{name} — {ops} op{'s' if ops != 1 else ''} in {len(strip)} phase{'s' if len(strip) != 1 else ''}"
    return Floorplan(name, title, target.pcus, target.pmus, tuple(regions), strip,
                     tuple((g, c, w) for g, (c, w) in legend.items()), tuple(notes))


def floorplans(model: StreamedModel) -> list[Floorplan]:
    """Every program of the bundle on the target, in the order a step runs them first."""
    return [floorplan(name, p, model) for name, p in model.programs()]


# ---- drawing ---------------------------------------------------------------------------------------------------


def grid(n: int) -> tuple[int, int]:
    """Columns and rows of a grid of ``n`` units, a little wider than tall: the divisor of ``n`` nearest 1.3 times as
    wide as tall when one is near, else a square-ish grid whose last row is short."""
    best = None
    for cols in range(max(1, math.isqrt(n)), 2 * math.isqrt(n) + 2):
        if n % cols == 0 and 1.0 <= cols / (n // cols) <= 1.8:
            score = abs(cols / (n // cols) - 1.3)
            if best is None or score < best[0]:
                best = (score, cols)
    cols = best[1] if best else math.ceil(math.sqrt(n * 1.3))
    return cols, math.ceil(n / cols)


def _rects(start: int, stop: int, cols: int) -> list[tuple[int, int, int, int]]:
    """Units ``[start, stop)`` of a row-major grid as at most three rectangles ``(col, row, width, height)``."""
    out = []
    r0, r1 = start // cols, (stop - 1) // cols
    if r0 == r1:
        return [(start % cols, r0, stop - start, 1)]
    out.append((start % cols, r0, cols - start % cols, 1))
    if r1 - r0 > 1:
        out.append((0, r0 + 1, cols, r1 - r0 - 1))
    out.append((0, r1, (stop - 1) % cols + 1, 1))
    return out


def program_op(r: Region) -> str:
    """The op kind a PCU region runs (the first word of what it says)."""
    return r.what.split(" ", 1)[0]


def _hover(r: Region) -> str:
    lines = [r.what]
    if r.unit == "pcu":
        lines[0] += f" · phase {r.phase} · {r.count:,} PCU{'s' if r.count != 1 else ''}"
    else:
        lines[0] += f" · {r.count:,} PMU{'s' if r.count != 1 else ''}"
    if r.text:
        lines.append(f"line {r.line}: {r.text}" if r.line else r.text)
    return "\n".join(lines)


def svg(plan: Floorplan, uid: str = "fp") -> str:
    """``plan`` as one SVG: the PCU grid and the PMU grid side by side, the phase strip under them, the legend."""
    out: list[str] = []
    font = 'font-family="system-ui, sans-serif" fill="currentColor"'
    pad, gap = 8, 28
    grids = []
    x = pad
    for unit, count in (("pcu", plan.pcus), ("pmu", plan.pmus)):
        cols, rows = grid(count)
        grids.append((unit, count, cols, rows, x))
        x += cols * CELL + gap
    width = max(x - gap + pad, 860)
    top = pad + 16 * (1 + len(plan.notes)) + 18
    body: list[str] = []
    height = top
    for unit, count, cols, rows, gx in grids:
        used = plan.used(unit)
        label = f"{unit.upper()}s: {used:,} of {count:,} used"
        body.append(f'<text x="{gx}" y="{top - 6}" font-size="11" {font}>{escape(label)}</text>')
        body.append(f'<rect x="{gx}" y="{top}" width="{cols * CELL}" height="{rows * CELL}" fill="{FREE}" '
                    f'fill-opacity="0.5"/>')
        for r in (r for r in plan.regions if r.unit == unit):
            attrs = f' data-line="{r.line}"' if r.line else ""
            if r.statement is not None:
                attrs += f' data-statement="{r.statement}"'
            body.append(f'<g class="region" data-unit="{unit}"{attrs}><title>{escape(_hover(r))}</title>')
            for c, row, w, h in _rects(r.start, r.stop, cols):
                body.append(f'<rect x="{gx + c * CELL}" y="{top + row * CELL}" width="{w * CELL}" '
                            f'height="{h * CELL}" fill="{r.colour}"/>')
            big = _rects(r.start, r.stop, cols)
            full = max(big, key=lambda b: b[2] * b[3])
            if r.unit == "pcu" and full[2] * full[3] >= 60 and full[3] >= 2:
                cx, cy = gx + (full[0] + full[2] / 2) * CELL, top + (full[1] + full[3] / 2) * CELL + 4
                tag = f"p{r.phase} {program_op(r)}" if full[2] * CELL >= 90 else f"p{r.phase}"
                body.append(f'<text x="{cx:.0f}" y="{cy:.0f}" font-size="10" text-anchor="middle" '
                            f'font-family="system-ui, sans-serif" fill="#fff">{escape(tag)}</text>')
            body.append("</g>")
        body.append(f'<rect x="{gx}" y="{top}" width="{cols * CELL}" height="{rows * CELL}" '
                    f'fill="url(#{uid}-units)" pointer-events="none"/>')  # the unit lines: hover goes through
        height = max(height, top + rows * CELL)
    # The phase strip: one box per phase, in the colour of the statement it serves.
    y = height + 22
    body.append(f'<text x="{pad}" y="{y - 6}" font-size="11" {font}>phases (run in order; a phase\'s ops run at '
                f'once)</text>')
    n = max(len(plan.phases), 1)
    w = min(16.0, (width - 2 * pad) / n)
    for k, (phase, colour, what) in enumerate(plan.phases):
        body.append(f'<rect class="phase" x="{pad + k * w:.2f}" y="{y}" width="{max(w - 1, 0.5):.2f}" height="12" '
                    f'fill="{colour}"><title>{escape(f"phase {phase}: {what}")}</title></rect>')
    step = max(1, math.ceil(n / max(1, (width - 2 * pad) // 28)))
    for k, (phase, _, _) in enumerate(plan.phases):
        if k % step == 0:
            body.append(f'<text x="{pad + k * w:.2f}" y="{y + 24}" font-size="9" {font}>{phase}</text>')
    y += 44
    for group, colour, what in plan.legend:
        pcus = sum(r.count for r in plan.regions if r.group == group and r.unit == "pcu")
        pmus = sum(r.count for r in plan.regions if r.group == group and r.unit == "pmu")
        counts = ", ".join(f"{v:,} {u}{'s' if v != 1 else ''}" for v, u in ((pcus, "PCU"), (pmus, "PMU")) if v)
        body.append(f'<rect x="{pad}" y="{y - 9}" width="10" height="10" fill="{colour}"/>')
        body.append(f'<text x="{pad + 16}" y="{y}" font-size="11" {font}>{escape(group)}</text>')
        body.append(f'<text x="{pad + 200}" y="{y}" font-size="11" text-anchor="end" {font}>{escape(counts)}</text>')
        body.append(f'<text x="{pad + 212}" y="{y}" font-size="11" font-family="ui-monospace, monospace" '
                    f'fill="currentColor">{escape(_line(what, int((width - pad - 212) / 6.7)))}</text>')
        y += 15
    height = y + pad
    head = [f'<text x="{pad}" y="{pad + 12}" font-size="13" font-weight="600" {font}>{escape(plan.title)}</text>']
    for k, note in enumerate(plan.notes):
        head.append(f'<text x="{pad}" y="{pad + 28 + 16 * k}" font-size="11" {font}>{escape(note)}</text>')
    out.append(f'<svg xmlns="http://www.w3.org/2000/svg" class="floorplan" width="{width:.0f}" height="{height:.0f}" '
               f'viewBox="0 0 {width:.0f} {height:.0f}" role="img" aria-label={quoteattr(plan.title)}>')
    out.append(f'<defs><pattern id="{uid}-units" width="{CELL}" height="{CELL}" patternUnits="userSpaceOnUse">'
               f'<path d="M {CELL} 0 L 0 0 0 {CELL}" fill="none" stroke="#ffffff" stroke-opacity="0.55" '
               f'stroke-width="0.6"/></pattern></defs>')
    out += head + body
    out.append("</svg>")
    return "\n".join(out)
