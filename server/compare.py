"""``streamed.compareWithRepresentative``: a layer beside the representative it was meant to be one program with, as
the two texts of a diff view (``streamed.analysis.repair.compare_with_representative``: the layer's names read as
the representative's, so the lines that differ are where the programs differ), offered as a code lens on every
diverging layer and as a code action on its divergence.

Argument: ``{"uri", "layer"}`` or ``{"uri", "position"}`` (the layer holding the position). Answer: ``{"layer",
"representative", "kind", "why", "representativeText", "layerText"}`` — ``why`` the divergence's sentence, or
``null`` for a layer of the representative's own kind. A client without a diff view of its own gets the two as a
unified diff in a file (``write_diff``), shown with ``window/showDocument``; its URI is the answer's ``document``."""

from __future__ import annotations

import difflib
import os
import tempfile
from pathlib import Path

from lsprotocol import types as lsp

from streamed.analysis.repair import compare_with_representative
from streamed.lang.syntax import SectionKind
from .commands import CommandError, path_of, position_arg
from .scheduler import Snapshot

COMMAND = "streamed.compareWithRepresentative"
EXAMPLE = '{"uri": …, "layer": 17} or {"uri": …, "position": {"line": 0, "character": 0}}'


def title(layer: int, representative: int) -> str:
    return f"Compare layer {layer} with layer {representative}"


def command(uri: str, layer: int, representative: int) -> lsp.Command:
    return lsp.Command(title(layer, representative), COMMAND, arguments=[{"uri": uri, "layer": layer}])


def _layer_arg(snap: Snapshot, obj: dict) -> int:
    layer = obj.get("layer")
    if "layer" in obj:
        if not isinstance(layer, int) or isinstance(layer, bool) or snap.analysis.programs.layer(layer) is None:
            raise CommandError(f"`{COMMAND}`: the document has no layer {layer!r}")
        return layer
    line, character = position_arg(COMMAND, obj)
    i = snap.analysis.section_at(line)
    section = snap.analysis.document.sections[i] if i is not None else None
    if section is None or section.kind is not SectionKind.LAYER or snap.analysis.programs.layer(section.index) is None:
        raise CommandError("place the cursor in a layer to compare it with its representative")
    return section.index


def comparison(snap: Snapshot, obj: dict) -> dict:
    a = snap.analysis
    layer = _layer_arg(snap, obj)
    d = a.divergence_of(layer)
    kind = a.kind_of(layer)
    if d is not None:
        rep, kind_name = d.representative, d.kind
    elif kind is not None and kind.representative != layer:
        rep, kind_name = kind.representative, kind.name
    else:
        raise CommandError(f"layer {layer} is the first layer of its kind and diverges from no other: there is no "
                           f"representative to compare it with")
    c = compare_with_representative(a.programs.layer(layer), a.programs.layer(rep))
    return {"layer": layer, "representative": rep, "kind": kind_name, "why": d.why if d is not None else None,
            "representativeText": c.representative_text, "layerText": c.layer_text}


def write_diff(uri: str, c: dict) -> str:
    """The comparison ``c`` as a unified diff (the whole of both layers, the layer's lines marked against the
    representative's) in a file of the user's own folder under the system's temporary folder, one per document and
    layer — rewritten by each comparison; its URI."""
    doc = path_of(uri)
    name = doc.name if doc is not None else uri.rsplit("/", 1)[-1] or "document"
    stem = name.rsplit(".", 1)[0] or "document"
    folder = Path(tempfile.gettempdir()) / f"streamed-{os.getuid() if hasattr(os, 'getuid') else 'user'}" / "compare"
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    L, R = c["layer"], c["representative"]
    rep, mine = c["representativeText"].splitlines(keepends=True), c["layerText"].splitlines(keepends=True)
    header = [f"# {name}: layer {L} beside layer {R}, the first layer of `{c['kind']}`, in layer {R}'s names\n"]
    if c.get("why"):
        header.append(f"# {c['why']}\n")
    lines = difflib.unified_diff(rep, mine, f"layer {R}", f"layer {L} (in layer {R}'s names)", n=max(len(rep), len(mine)))
    path = folder / f"{stem}.layer-{L}.diff"
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("".join(header) + "".join(lines), "utf-8")
    os.replace(tmp, path)
    return path.as_uri()
