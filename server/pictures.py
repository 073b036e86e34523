"""``streamed.pictures``: a bundle's pictures — the chip, the memory and the roofline — as the core draws them
(``streamed.spatial.pictures``), for the editor's manifest view: the chip as SVG (one per program), the memory and
the roofline as Vega-Lite specifications the view renders, with the memory's spill sentences.

Argument: ``{"bundle"}`` (a bundle folder or its manifest) or ``{"uri"}`` (the document's default bundle), read only
inside the workspace folders, as ``streamed.openManifest`` reads (``commands.bundle_folder``); ``width``, optional:
the pixels the panel showing them is wide, which every picture is drawn to fit. Answer: ``{"manifest",
"chip": [{"program", "title", "svg"}], "memory": {"spec", "spills"}, "roofline": {"spec", "point"}}``."""

from __future__ import annotations

from pathlib import Path

from .commands import CommandError, bundle_folder, read_bundle_at

COMMAND = "streamed.pictures"
EXAMPLE = '{"bundle": "/…/model.bundle", "width": 640} or {"uri": "file:///…/model.lgm"}'
#: The widths a panel may ask pictures for, in pixels: a narrow sidebar to a wide screen.
WIDTHS = (200, 8000)


def width_arg(obj: dict) -> float | None:
    width = obj.get("width")
    if width is None:
        return None
    if isinstance(width, bool) or not isinstance(width, (int, float)) or not WIDTHS[0] <= width <= WIDTHS[1]:
        raise CommandError(f"`width` is the panel's width in pixels, from {WIDTHS[0]} to {WIDTHS[1]}, not {width!r}"[:200])
    return float(width)


def pictures(obj: dict, folders: list[Path]) -> dict:
    from streamed.spatial.pictures import pictures as draw

    width = width_arg(obj)
    folder = bundle_folder(COMMAND, obj, folders)
    return {"manifest": str(folder / "manifest.json"), **draw(read_bundle_at(folder), width)}
