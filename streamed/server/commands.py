"""workspace/executeCommand: ``streamed.lowerBundle``, ``streamed.openManifest``, ``streamed.showKinds``,
``streamed.goToRepresentative``.

Arguments are checked here and a bad one is a ``CommandError`` whose message names what was sent and what was
expected (the server turns it into a JSON-RPC "invalid params" error). Long commands report ``$/progress`` and stop
when the client cancels. A bundle is written only inside the workspace folders: by default ``<stem>.bundle/``
beside the document.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable
from urllib.parse import unquote, urlparse

from .scheduler import Snapshot
from .settings import MODES


class CommandError(ValueError):
    """Bad command arguments or a refused command, in a sentence a person understands."""


def one_object(command: str, args: Any, example: str) -> dict:
    """The single object argument every command takes."""
    if isinstance(args, (list, tuple)):
        if len(args) != 1:
            raise CommandError(f"`{command}` takes one argument, an object like {example}; it was given {len(args)}")
        args = args[0]
    if not isinstance(args, dict):
        raise CommandError(f"`{command}` takes an object like {example}, not {type(args).__name__} {str(args)[:60]!r}")
    return args


def uri_arg(command: str, obj: dict, example: str) -> str:
    uri = obj.get("uri")
    if not isinstance(uri, str) or not uri:
        raise CommandError(f"`{command}` needs `uri`, the document's URI, as in {example}")
    return uri


def path_of(uri: str) -> Path | None:
    u = urlparse(uri)
    if u.scheme != "file":
        return None
    return Path(unquote(u.path))


def position_arg(command: str, obj: dict) -> tuple[int, int]:
    pos = obj.get("position")
    if not isinstance(pos, dict) or not all(isinstance(pos.get(k), int) and not isinstance(pos.get(k), bool) and pos.get(k) >= 0
                                            for k in ("line", "character")):
        raise CommandError(f"`{command}` needs `position`: {{\"line\": 0-based line, \"character\": UTF-16 column}}, not {pos!r}")
    return pos["line"], pos["character"]


# ---- showKinds ------------------------------------------------------------------------------------------------------


def show_kinds(snap: Snapshot, rejects: dict[str, str] | None = None) -> list[dict]:
    """One entry per kind, for a tree view: ``{name, layers, representative, reject?}``."""
    out = []
    for k in snap.analysis.kinds:
        entry = {"name": k.name, "layers": list(k.layers), "representative": k.representative}
        if rejects and k.name in rejects:
            entry["reject"] = rejects[k.name]
        out.append(entry)
    return out


# ---- lowering -------------------------------------------------------------------------------------------------------

LOWER_EXAMPLE = '{"uri": "file:///…/model.lgm", "mode": "decode"}'


def lowering_available() -> bool:
    try:
        import streamed.bundle  # noqa: F401
        import streamed.streamed  # noqa: F401
    except ImportError:
        return False
    return True


def inside(path: Path, folders: list[Path]) -> bool:
    p = Path(os.path.abspath(path))
    return any(p == f or f in p.parents for f in (Path(os.path.abspath(x)) for x in folders))


def output_folder(obj: dict, doc: Path, folders: list[Path]) -> Path:
    """Where the bundle goes: ``out`` if given (relative to the document's folder), else ``<stem>.bundle/`` beside
    the document. Refused outside the workspace folders (or, with none open, outside the document's folder)."""
    out = obj.get("out")
    if out is not None and not isinstance(out, str):
        raise CommandError(f"`out` must be a folder path, not {out!r}")
    target = (doc.parent / out) if out else doc.with_name(doc.stem + ".bundle")
    allowed = folders or [doc.parent]
    if not inside(target, allowed):
        raise CommandError(f"will not write {target}: it is outside the workspace folders ({', '.join(map(str, allowed))})")
    return Path(os.path.abspath(target))


def deployment_args(obj: dict, defaults: dict) -> dict:
    mode = obj.get("mode", defaults.get("mode"))
    if mode not in MODES:
        raise CommandError(f"`mode` must be one of {', '.join(MODES)}, not {mode!r}")
    dep = {"mode": mode}
    for k in ("ctx", "chunk", "batch", "tp"):
        v = obj.get(k, defaults.get(k))
        if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v <= 0):
            raise CommandError(f"`{k}` must be a positive whole number, not {v!r}")
        dep[k] = v
    return dep


def lower_bundle(snap: Snapshot, obj: dict, settings, folders: list[Path], report: Callable[[str, int], None],
                 cancelled: Callable[[], bool]) -> dict:
    """Lower every kind of the document under the deployment and write the bundle. Runs off the event loop."""
    doc = path_of(snap.uri)
    if doc is None:
        raise CommandError(f"{snap.uri} is not a file on disk; save it first so the bundle has a folder to go beside")
    dep_args = deployment_args(obj, settings.deployment)
    out = output_folder(obj, doc, folders)
    if snap.analysis.errors:
        first = snap.analysis.errors[0]
        raise CommandError(f"the document has {len(snap.analysis.errors)} error(s); the first, line {first.range.start.line + 1}: {first.message}")
    if not lowering_available():
        raise CommandError("lowering is not part of this build yet (streamed.streamed / streamed.bundle are missing)")
    from ..bundle import write_bundle
    from ..streamed import Deployment, StreamedReject, lower_streamed

    target = obj.get("target", settings.target)
    report(f"lowering {len(snap.analysis.kinds)} kinds", 5)
    analysis = snap.analysis.absolute()
    model = lower_streamed(analysis, Deployment(**dep_args), target=target, storage=analysis.storage,
                           progress=lambda msg, pct=None: report(str(msg), int(pct) if pct is not None else 50),
                           cancelled=cancelled)
    if isinstance(model, StreamedReject):
        raise CommandError(f"{model.program} does not lower: {model.why}")
    if cancelled():
        raise CommandError("cancelled")
    report(f"writing {out.name}", 90)
    manifest = write_bundle(model, out, source=str(doc))
    return {"manifest": str(manifest), "kinds": len(snap.analysis.kinds), "layers": len(snap.analysis.programs.layers),
            "estimate": getattr(model, "estimate", None)}


def open_manifest(obj: dict, scheduler_snapshot: Callable[[str], Snapshot | None]) -> dict:
    """``{uri}`` (the document's default bundle) or ``{bundle}`` (a bundle folder) → the manifest's path and a summary."""
    if "bundle" in obj:
        b = obj["bundle"]
        if not isinstance(b, str) or not b:
            raise CommandError(f"`bundle` must be the path of a bundle folder, not {b!r}")
        folder = Path(b)
    else:
        uri = uri_arg("streamed.openManifest", obj, '{"uri": "file:///…/model.lgm"} or {"bundle": "/…/model.bundle"}')
        doc = path_of(uri)
        if doc is None:
            raise CommandError(f"{uri} is not a file on disk")
        folder = doc.with_name(doc.stem + ".bundle")
    manifest = folder / "manifest.json" if folder.is_dir() or not folder.suffix == ".json" else folder
    if not manifest.exists():
        raise CommandError(f"no manifest at {manifest}: lower the bundle first (streamed.lowerBundle)")
    try:
        from ..bundle import read_bundle
    except ImportError:
        read_bundle = None
    summary: dict = {}
    if read_bundle is not None:
        try:
            bundle = read_bundle(manifest.parent)
            summary = getattr(bundle, "summary", None) or {}
        except Exception as e:  # a corrupt bundle is the user's to fix; say which and why
            raise CommandError(f"{manifest} cannot be read: {e}") from None
    if not summary:
        import json

        try:
            data = json.loads(manifest.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise CommandError(f"{manifest} cannot be read: {e}") from None
        summary = {k: data[k] for k in ("model", "deployment", "target", "kinds", "layers") if isinstance(data, dict) and k in data}
    return {"manifest": str(manifest), "summary": summary}
