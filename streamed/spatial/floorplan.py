"""The chip picture: one program of a bundle placed on the target — its PCUs and PMUs as two grids of the target's
counts, each region coloured by the statement it serves, its phases as a strip, its tiles and chips said.

What is drawn is the bundle's data, never a guess: each op's PCUs and each on-chip buffer's PMUs are the ranges
``place`` recorded (``SpatialProgram.placement``), the statement behind a region is the op's ``statement`` and its
text the one the manifest records for the program (``StreamedModel.statements``), and the PMUs the carried states
of every layer hold in SRAM are the residency plan's bytes over a PMU's. A tensor-parallel program is drawn as its
chip 0 (every chip runs its own slice of the same ops).

``floorplans(model)`` gives the data (``Floorplan``: what a test checks); ``svg(plan, width=…)`` draws one as plain
SVG for the width of the panel it is shown in — the grids fill it, side by side or stacked, and every line of text is
wrapped to it, so nothing is drawn past it — with no script and no style element (a webview with a strict Content
Security Policy shows it as it is), text in ``currentColor`` (it takes the page's colour when inlined, black in a file), each region a ``<g class="region">``
labelled by the name its statement binds, with its statement and line in a ``<title>`` (the hover) and ``data-line``
(the statement's line in the document, 1-based). Each statement has a colour of its own (``statement_colours``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from xml.sax.saxutils import escape, quoteattr

from .ir import SpatialProgram
from .passes.cost import traffic
from .passes.shapes import flops_of
from .streamed_model import StreamedModel
from .units import size

ADDED = "#8c8c8c"
INPUTS = "#c7c7c7"
TABLES = "#a8876a"
WEIGHTS = "#1f4e79"
RESIDENT = "#6b6ecf"
FREE = "#d9d9d9"
#: The width a picture is drawn for when the caller names none (a page, a file), and the narrowest it is laid out
#: for: below ``SIDE_BY_SIDE`` the two grids are stacked, each the whole width.
WIDTH = 860
NARROWEST = 240
SIDE_BY_SIDE = 560
#: A grid unit's side in pixels: at most (a wide panel does not make cells huge), at least (a narrow one keeps them
#: visible); between, what fills the width.
CELL_MOST, CELL_LEAST = 14, 2
#: The width of a character of the 11 px monospace legend (a line of text wraps where it would pass the width).
CHAR = 6.7


def statement_colours(n: int) -> list[str]:
    """``n`` colours for a program's statements (in order of first use), no two alike: three lightness bands taken
    in turn, so neighbours in order differ in lightness, and in each band hues spaced evenly round the circle (a
    stride coprime with their count visits each once), the bands' hues offset from one another. (A palette of pairs —
    Tableau's 20 — gives statements ten apart nearly one colour.)"""
    import colorsys

    m = max(1, math.ceil(n / 3))
    stride = next((s for s in range(max(1, round(m * 0.382)), m + 1) if math.gcd(s, m) == 1), 1)
    out = []
    for k in range(n):
        band, j = k % 3, k // 3
        hue = ((j * stride) % m) / m + band / (3 * m)
        r, g, b = colorsys.hls_to_rgb(hue % 1.0, (0.45, 0.68, 0.28)[band], 0.68)
        out.append(f"#{round(r * 255):02x}{round(g * 255):02x}{round(b * 255):02x}")
    return out


def bound_name(text: str | None) -> str | None:
    """The name a statement binds or sets, as its author wrote it (``Let f0 be …`` → ``f0``; ``Set row pos of Kc0
    to …`` → ``Kc0``): what a region is labelled by, never a lowered tensor's internal name (``f0__1``)."""
    words = (text or "").split()
    if len(words) >= 2 and words[0] == "Let":
        return words[1]
    if words[:1] == ["Set"]:
        return words[words.index("of") + 1] if "of" in words[:5] and words.index("of") + 1 < len(words) else words[1]
    return None


@dataclass(frozen=True)
class Region:
    """Units ``[start, stop)`` of one grid (``unit`` ``pcu`` or ``pmu``) and what they serve: an op (``op``, its
    index in the program) or a buffer (``tensor``), the statement behind it (``statement``, its ``text`` and
    document ``line``, the ``name`` it binds), its ``phase``, its legend ``group`` and ``colour``; ``what`` says it
    in the author's names (the op's kind, a buffer's role and bytes), never a lowered tensor's internal name."""

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
    name: str | None = None  # the statement's bound name (``bound_name``)

    @property
    def count(self) -> int:
        return self.stop - self.start


@dataclass(frozen=True)
class Floorplan:
    """One program on the target: its regions on each grid, its phases (each with the colour of the statement its
    first op serves and its share of the step's estimated seconds, ``phase_seconds``), the legend's groups in order,
    and notes (tiles, chips). ``seconds``: the program's step as the estimate gives it."""

    program: str
    title: str
    pcus: int
    pmus: int
    regions: tuple[Region, ...]
    phases: tuple[tuple[int, str, str, float | None], ...]  # (phase, colour, the ops it runs, its seconds)
    legend: tuple[tuple[str, str, str], ...]  # (group, colour, what it says)
    notes: tuple[str, ...]
    seconds: float | None = None

    def used(self, unit: str) -> int:
        return sum(r.count for r in self.regions if r.unit == unit)


def floorplan(name: str, program: SpatialProgram, model: StreamedModel) -> Floorplan:
    """``program`` (named ``name`` in ``model``) on its chip 0: a region per op on the PCUs and per buffer on the
    PMUs where ``place`` put them, each in the colour of the statement it serves (a buffer: its writer's), the PMUs
    the residency plan's states in SRAM fill at the end of the grid, the phases in order, the notes."""
    target = model.target
    sources = {s["index"]: s for s in (model.statements or {}).get(name, ())}
    palette = statement_colours(len({op.statement for op in program.ops if op.statement is not None}))
    colours: dict[int | None, str] = {}
    legend: dict[str, tuple[str, str]] = {}

    def group_of(statement: int | None) -> tuple[str, str]:
        if statement is None:
            return "added by the lowering", ADDED
        if statement not in colours:
            colours[statement] = palette[len(colours) % len(palette)]
        src = sources.get(statement)
        bound = bound_name(src["text"]) if src else None
        where = f"line {src['line']}" if src else f"statement {statement + 1}"
        return (f"{bound} · {where}" if bound else where), colours[statement]

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
        bound = bound_name(src["text"]) if src else None
        what = f"{bound} · {op.kind}" if bound else f"{op.kind} (added by the lowering)"
        regions.append(Region("pcu", start, stop, group, colour, what, op=i, phase=op.phase, statement=op.statement,
                              text=src["text"] if src else None, line=src["line"] if src else None, name=bound))
    for n, start, stop in pmus:
        t = tensors[n]
        w = writer.get(n)
        if t.role == "weight":  # kept on chip across a tiled program's tiles
            legend.setdefault("weights", (WEIGHTS, "weights kept on chip across the program's tiles"))
            regions.append(Region("pmu", start, stop, "weights", WEIGHTS, f"weight {n} ({size(t.bytes)})", tensor=n))
            continue
        if t.role in ("input", "table") or w is None:
            group, colour = ("tables", TABLES) if t.role == "table" else ("inputs", INPUTS)
            legend.setdefault(group, (colour, "the host's tables (rotations)" if t.role == "table" else
                                      "the step's inputs"))
            regions.append(Region("pmu", start, stop, group, colour, f"{t.role} {n} ({size(t.bytes)})", tensor=n))
            continue
        op = program.ops[w]
        group, colour = group_of(op.statement)
        src = sources.get(op.statement)
        bound = bound_name(src["text"]) if src else None
        what = (f"state {n}: the buffer its rows stream through ({size(t.bytes)}, held in {t.tier.upper()})"
                if t.role == "state" else f"{bound or op.kind}'s buffer ({size(t.bytes)})")
        regions.append(Region("pmu", start, stop, group, colour, what, op=w, tensor=n, phase=op.phase,
                              statement=op.statement, text=src["text"] if src else None,
                              line=src["line"] if src else None, name=bound))
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
    seconds = (model.estimate or {}).get("programs", {}).get(name, {}).get("seconds")
    times = phase_seconds(program, seconds, target) if seconds else {}
    strip = tuple((p, rs[0].colour, "; ".join(r.what for r in rs), times.get(p)) for p, rs in sorted(phases.items()))
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
                     tuple((g, c, w) for g, (c, w) in legend.items()), tuple(notes), seconds)


def phase_seconds(program: SpatialProgram, seconds: float, target) -> dict[int, float]:
    """The program's step time (``seconds``, the estimate's) divided among its phases by what bounds the step: when
    its FLOPs at the target's peak take longer than its bytes at each tier's bandwidth, each phase's share of the FLOPs;
    else each phase's share of that memory time — the estimate's own roofline (``residency.seconds``), op by op on
    chip 0, so the phases' times add up to the program's."""
    tensors = {t.name: t for t in program.tensors}
    memory: dict[int, float] = {}
    flops: dict[int, float] = {}
    for op in program.ops:
        if op.chip not in (None, 0):
            continue
        memory[op.phase] = memory.get(op.phase, 0.0) + sum(
            b / target.bandwidth(tier) for tier, b in traffic(op, tensors).items())
        flops[op.phase] = flops.get(op.phase, 0.0) + flops_of(op, lambda n: tensors[n].shape)
    by = flops if sum(flops.values()) / target.peak_bf16 > sum(memory.values()) else memory
    total = sum(by.values())
    return {p: seconds * v / total for p, v in by.items()} if total else {}


def duration(seconds: float) -> str:
    """``12.4 µs``, ``1.05 ms``, ``3.2 ns``: three figures in the unit that reads best."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


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


def _hover(r: Region) -> str:
    """What a region's hover says: what it is in the author's names and its units, then its statement at its line."""
    lines = [r.what]
    if r.unit == "pcu":
        lines[0] += f" · phase {r.phase} · {r.count:,} PCU{'s' if r.count != 1 else ''}"
    else:
        lines[0] += f" · {r.count:,} PMU{'s' if r.count != 1 else ''}"
    if r.text:
        lines.append(f"line {r.line}: {r.text}" if r.line else r.text)
    return "\n".join(lines)


def wrap(text: str, chars: int) -> list[str]:
    """``text`` in lines of at most ``chars`` characters, broken between words (a word longer than a line is cut
    into pieces): a picture's text is shown whole, never ended with "…"."""
    chars = max(chars, 8)
    out: list[str] = []
    line = ""
    for word in text.split():
        while len(word) > chars:
            if line:
                out.append(line)
                line = ""
            out.append(word[:chars])
            word = word[chars:]
        if line and len(line) + 1 + len(word) > chars:
            out.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    if line or not out:
        out.append(line)
    return out


def layout(plan: Floorplan, width: float) -> tuple[float, list[tuple[str, int, int, int, float, float]]]:
    """The cell size and where each grid goes for a picture ``width`` pixels wide: ``(cell, [(unit, count, cols,
    rows, x, y offset)])``. Side by side when the width holds both grids at a readable cell, else stacked, each the
    whole width — either way the grids fill the width (up to ``CELL_MOST``)."""
    pad, gap = 8, 24
    shapes = [(unit, count, *grid(count)) for unit, count in (("pcu", plan.pcus), ("pmu", plan.pmus))]
    inner = width - 2 * pad
    side = (inner - gap) / sum(cols for _, _, cols, _ in shapes)
    if width >= SIDE_BY_SIDE and side >= 3:
        cell = max(CELL_LEAST, min(CELL_MOST, side))
        out, x = [], pad
        for unit, count, cols, rows in shapes:
            out.append((unit, count, cols, rows, x, 0.0))
            x += cols * cell + gap
        return cell, out
    cell = max(CELL_LEAST, min(CELL_MOST, inner / max(cols for _, _, cols, _ in shapes)))
    out, y = [], 0.0
    for unit, count, cols, rows in shapes:
        out.append((unit, count, cols, rows, pad, y))
        y += rows * cell + 30
    return cell, out


def svg(plan: Floorplan, uid: str = "fp", width: float | None = None) -> str:
    """``plan`` as one SVG ``width`` pixels wide (``WIDTH`` when not given; at least ``NARROWEST``): the PCU grid and
    the PMU grid (``layout``), the phase strip under them, the legend — every line of text wrapped to the width, so
    nothing is drawn past it."""
    width = max(float(width or WIDTH), NARROWEST)
    out: list[str] = []
    font = 'font-family="system-ui, sans-serif" fill="currentColor"'
    pad = 8
    chars = int((width - 2 * pad) / CHAR)
    head: list[str] = []
    y = pad
    for k, line in enumerate(wrap(plan.title, int((width - 2 * pad) / 7.8))):
        y += 16
        head.append(f'<text x="{pad}" y="{y}" font-size="13" font-weight="600" {font}>{escape(line)}</text>')
    for note in plan.notes:
        for line in wrap(note, chars):
            y += 15
            head.append(f'<text x="{pad}" y="{y}" font-size="11" {font}>{escape(line)}</text>')
    top = y + 26
    cell, grids = layout(plan, width)
    body: list[str] = []
    height = top
    for unit, count, cols, rows, gx, dy in grids:
        gy = top + dy
        used = plan.used(unit)
        label = f"{unit.upper()}s: {used:,} of {count:,} used"
        body.append(f'<text x="{gx}" y="{gy - 6}" font-size="11" {font}>{escape(label)}</text>')
        body.append(f'<rect x="{gx}" y="{gy}" width="{cols * cell}" height="{rows * cell}" fill="{FREE}" '
                    f'fill-opacity="0.5"/>')
        for r in (r for r in plan.regions if r.unit == unit):
            attrs = f' data-line="{r.line}"' if r.line else ""
            if r.statement is not None:
                attrs += f' data-statement="{r.statement}"'
            body.append(f'<g class="region" data-unit="{unit}"{attrs}><title>{escape(_hover(r))}</title>')
            rects = _rects(r.start, r.stop, cols)
            for c, row, w, h in rects:
                body.append(f'<rect x="{gx + c * cell}" y="{gy + row * cell}" width="{w * cell}" '
                            f'height="{h * cell}" fill="{r.colour}"/>')
            full = max(rects, key=lambda b: b[2] * b[3])
            tag = r.name if r.unit == "pcu" else None
            if tag and full[3] * cell >= 14 and full[2] * cell >= 7 * len(tag) + 6:
                cx, cy = gx + (full[0] + full[2] / 2) * cell, gy + (full[1] + full[3] / 2) * cell + 4
                body.append(f'<text x="{cx:.0f}" y="{cy:.0f}" font-size="11" text-anchor="middle" '
                            f'font-family="system-ui, sans-serif" fill="#fff">{escape(tag)}</text>')
            body.append("</g>")
        body.append(f'<rect x="{gx}" y="{gy}" width="{cols * cell}" height="{rows * cell}" '
                    f'fill="url(#{uid}-units)" pointer-events="none"/>')  # the unit lines: hover goes through
        height = max(height, gy + rows * cell)
    # The phase strip: one box per phase, in the colour of the statement it serves, across the width — as wide as its
    # share of the step's time when the estimate gives one (at least a few pixels), each box's time under it where
    # it has room, every time in its hover.
    y = height + 22
    timed = plan.seconds is not None and all(t is not None for *_, t in plan.phases) and plan.phases
    head_line = ("phases, run in order (a phase's ops at once), each as long as its share of the step's "
                 f"{duration(plan.seconds)}" if timed else "phases (run in order; a phase's ops run at once)")
    for line in wrap(head_line, chars):
        body.append(f'<text x="{pad}" y="{y - 6}" font-size="11" {font}>{escape(line)}</text>')
        y += 14
    y -= 14
    inner = width - 2 * pad
    n = max(len(plan.phases), 1)
    least = min(4.0, inner / n)
    if timed:
        spare = inner - least * n
        total = sum(t for *_, t in plan.phases) or 1.0
        widths = [least + spare * t / total for *_, t in plan.phases]
    else:
        widths = [min(40.0, inner / n)] * len(plan.phases)
    x = float(pad)
    for (phase, colour, what, t), w in zip(plan.phases, widths):
        said = f"phase {phase}: {what}" + (f" · ≈ {duration(t)}" if t is not None else "")
        body.append(f'<rect class="phase" x="{x:.2f}" y="{y}" width="{max(w - 1, 0.5):.2f}" height="12" '
                    f'fill="{colour}"><title>{escape(said)}</title></rect>')
        label = duration(t) if timed else str(phase)
        if w >= 5.5 * len(label) + 4:
            body.append(f'<text x="{x:.2f}" y="{y + 24}" font-size="9" {font}>{escape(label)}</text>')
        x += w
    y += 46
    # The legend: a statement's group (its bound name and line) and units, then its text, wrapped — never cut.
    for group, colour, what in plan.legend:
        pcus = sum(r.count for r in plan.regions if r.group == group and r.unit == "pcu")
        pmus = sum(r.count for r in plan.regions if r.group == group and r.unit == "pmu")
        counts = ", ".join(f"{v:,} {u}{'s' if v != 1 else ''}" for v, u in ((pcus, "PCU"), (pmus, "PMU")) if v)
        body.append(f'<rect x="{pad}" y="{y - 9}" width="10" height="10" fill="{colour}"/>')
        for line in wrap(f"{group} — {counts}" if counts else group, chars - 3):
            body.append(f'<text x="{pad + 16}" y="{y}" font-size="11" {font}>{escape(line)}</text>')
            y += 14
        for line in wrap(what, chars - 3):
            body.append(f'<text x="{pad + 16}" y="{y}" font-size="11" font-family="ui-monospace, monospace" '
                        f'fill="currentColor" fill-opacity="0.85">{escape(line)}</text>')
            y += 14
        y += 5
    height = y + pad
    out.append(f'<svg xmlns="http://www.w3.org/2000/svg" class="floorplan" width="{width:.0f}" height="{height:.0f}" '
               f'viewBox="0 0 {width:.0f} {height:.0f}" role="img" aria-label={quoteattr(plan.title)}>')
    out.append(f'<defs><pattern id="{uid}-units" width="{cell}" height="{cell}" patternUnits="userSpaceOnUse">'
               f'<path d="M {cell} 0 L 0 0 0 {cell}" fill="none" stroke="#ffffff" stroke-opacity="0.55" '
               f'stroke-width="0.6"/></pattern></defs>')
    out += head + body
    out.append("</svg>")
    return "\n".join(out)
