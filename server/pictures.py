"""``streamed.pictures``: a bundle's pictures — the chip, the memory and the roofline — as the core draws them
(``streamed.spatial.pictures``), for the editor's manifest view: the chip as SVG (one per program), the memory and
the roofline as Vega-Lite specifications the view renders, with the memory's spill sentences.

Argument: ``{"bundle"}`` (a bundle folder or its manifest) or ``{"uri"}`` (the document's default bundle), read only
inside the workspace folders, as ``streamed.openManifest`` reads (``commands.bundle_folder``). Answer: ``{"manifest",
"chip": [{"program", "title", "svg"}], "memory": {"spec", "spills"}, "roofline": {"spec", "point"}}``."""

from __future__ import annotations

from pathlib import Path

from .commands import bundle_folder, read_bundle_at

COMMAND = "streamed.pictures"
EXAMPLE = '{"bundle": "/…/model.bundle"} or {"uri": "file:///…/model.lgm"}'


def pictures(obj: dict, folders: list[Path]) -> dict:
    from streamed.spatial.pictures import pictures as draw

    folder = bundle_folder(COMMAND, obj, folders)
    return {"manifest": str(folder / "manifest.json"), **draw(read_bundle_at(folder))}
