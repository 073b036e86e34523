"""Code lenses: on every ``## Layer N`` header its kind (``attention, window 512 · 52 layers · first: layer 0``,
clicking goes to the representative) and, on a layer that diverges, the comparison with its representative; on
``## Model`` the kind count and the bundle command, named after the target it lowers for — or, when the deployment is
refused, why and the values that lower instead."""

from __future__ import annotations

from lsprotocol import types as lsp

from streamed.lang.syntax import SectionKind
from . import compare
from .convert import to_range
from .scheduler import Snapshot


def lens_title(kind, layer: int | None = None) -> str:
    n = len(kind.layers)
    return f"{kind.name} · {n} layer{'s' if n != 1 else ''} · first: layer {kind.representative}"


def bundle_title(target: str) -> str:
    """``Lower SN50 bundle``: the chip's name as the target gives it (a target file names its own). No ellipsis: the
    lens lowers in one step, with the current deployment."""
    from streamed.spatial.target import TargetError, load_target  # function-local: the server starts without spatial

    try:
        return f"Lower {load_target(target).name.upper()} bundle"
    except TargetError:
        return "Lower bundle"


def refused(snap: Snapshot) -> str | None:
    """Why the document does not lower under the current deployment, and what would — the first reject's reason and
    the values that lower (``diagnose.values_that_lower``) — or ``None`` when it lowers."""
    if not snap.rejects:
        return None
    d = snap.rejects[0]
    data = d.data or {}
    lowers = data.get("lowers")
    return f"Not lowered: {data.get('why') or d.message}" + (f" — {lowers}" if lowers else "")


def code_lenses(snap: Snapshot, target: str = "sn50") -> list[lsp.CodeLens]:
    a = snap.analysis
    out: list[lsp.CodeLens] = []
    checked = {p.section.index for p in a.programs.layers}
    for section, base in zip(a.document.sections, a.bases):
        heading = base.range(section.heading)
        if section.kind is SectionKind.LAYER and section.index in checked:
            kind = a.kind_of(section.index)
            if kind is None:
                continue
            # The command maps this heading to the representative's (``definition.representative_location``).
            arg = {"uri": snap.uri, "position": {"line": heading.start.line, "character": heading.start.character}}
            out.append(lsp.CodeLens(range=to_range(heading), command=lsp.Command(title=lens_title(kind), command="streamed.goToRepresentative", arguments=[arg])))
            d = a.divergence_of(section.index)
            if d is not None:
                out.append(lsp.CodeLens(range=to_range(heading), command=compare.command(snap.uri, d.layer, d.representative)))
        elif section.kind is SectionKind.MODEL:
            n = len(a.kinds)
            title = f"{n} kind{'s' if n != 1 else ''} · {refused(snap) or bundle_title(target)}"
            out.append(lsp.CodeLens(range=to_range(heading), command=lsp.Command(title=title, command="streamed.lowerBundle", arguments=[{"uri": snap.uri}])))
    return out
