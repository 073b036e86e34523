"""workspace/executeCommand: ``streamed.lowerBundle``, ``streamed.openManifest``, ``streamed.showKinds``,
``streamed.goToRepresentative`` (``streamed.pictures`` is ``pictures.py``'s, ``streamed.compareWithRepresentative``
``compare.py``'s).

Arguments are checked here and a bad one is a ``CommandError`` whose message names what was sent and what was
expected (the server turns it into a JSON-RPC "invalid params" error). Long commands report ``$/progress`` and stop
when the client cancels. A bundle is written only for a document saved on disk, only inside the workspace folders
(a root folder such as ``/`` confines nothing and is not counted; with none, the document's folder, where no folder
but the bundle's own is created) — by default ``<stem>.bundle/`` beside the document — and a manifest is read only
from there; so is a target or a checkpoint a command names (``readable``), unless the user's settings name it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable
from urllib.parse import unquote, urlparse

from streamed.spatial.deployment import MODES, SIZE_LIMITS, Deployment, size_problem
from streamed.spatial.target import BUILTIN as BUILTIN_TARGETS

from .scheduler import Snapshot


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


def show_arg(command: str, obj: dict) -> bool:
    """``show``: whether the server shows the command's answer itself, through the protocol (a document, a message);
    ``true`` unless the client says ``false`` because it shows answers in views of its own."""
    show = obj.get("show", True)
    if not isinstance(show, bool):
        raise CommandError(f"`{command}`: `show` is true or false, not {show!r}")
    return show


def position_arg(command: str, obj: dict) -> tuple[int, int]:
    pos = obj.get("position")
    if not isinstance(pos, dict) or not all(isinstance(pos.get(k), int) and not isinstance(pos.get(k), bool) and pos.get(k) >= 0
                                            for k in ("line", "character")):
        raise CommandError(f"`{command}` needs `position`: {{\"line\": 0-based line, \"character\": UTF-16 column}}, not {pos!r}")
    return pos["line"], pos["character"]


# ---- showKinds ------------------------------------------------------------------------------------------------------


def show_kinds(snap: Snapshot) -> list[dict]:
    """One entry per kind, for a tree view: ``{name, layers, representative, reject?}`` — ``reject`` the message of
    the kind's lowering reject under the current deployment, when it has one."""
    rejects = {}
    for d in snap.rejects:
        for layer in (d.data or {}).get("layers", ()):
            rejects.setdefault(layer, d.message)
    out = []
    for k in snap.analysis.kinds:
        entry = {"name": k.name, "layers": list(k.layers), "representative": k.representative}
        if k.representative in rejects:
            entry["reject"] = rejects[k.representative]
        out.append(entry)
    return out


# ---- lowering -------------------------------------------------------------------------------------------------------

LOWER_EXAMPLE = '{"uri": "file:///…/model.lgm", "mode": "decode"}'


def inside(path: Path, folders: list[Path]) -> bool:
    """Whether ``path`` is in one of ``folders``, symbolic links followed (a link cannot lead a bundle out)."""
    p = Path(os.path.realpath(path))
    return any(p == f or f in p.parents for f in (Path(os.path.realpath(x)) for x in folders))


def confining(folders: list[Path], doc: Path | None = None) -> list[Path]:
    """The folders a command may write bundles in and read manifests from: the workspace folders — but not one that
    is a file system's root, which would confine nothing (a client that adds ``/`` lifts no limit) — or, when none is
    left, the document's own folder."""
    real = [Path(os.path.realpath(f)) for f in folders]
    kept = [f for f in real if f != Path(f.anchor)]
    return kept or ([Path(os.path.realpath(doc.parent))] if doc is not None else [])


def readable(field: str, value, own, doc: Path, folders: list[Path]) -> str | None:
    """The file a command's ``field`` names for the server to read (``target``, ``checkpoint``), or ``None``: the
    user's own setting ``own`` as it is — settings are the user's, like a command line — else a shipped name (a
    built-in target), else a path (relative to the document's folder) inside the confining folders (``confining``). A
    command's arguments come from whatever sent them, so a path elsewhere (``/etc/shadow``) is refused before it is
    opened: a file the server parses would otherwise be described back, line and column, to the sender."""
    if value is None or value == own:
        return value
    if not isinstance(value, str) or not value:
        raise CommandError(f"`{field}` must be a path, not {value!r}"[:200])
    if field == "target" and value in BUILTIN_TARGETS:
        return value
    path = Path(os.path.abspath(doc.parent / value))
    allowed = confining(folders, doc)
    if not inside(path, allowed):
        where = f"the workspace folders ({', '.join(map(str, allowed))})" if allowed else "a workspace folder"
        raise CommandError(f"will not read {path} (`{field}`): a command reads files inside {where}, or the one the "
                           f"settings name")
    return str(path)


def output_folder(obj: dict, doc: Path, folders: list[Path]) -> Path:
    """Where the bundle goes: ``out`` if given (relative to the document's folder), else ``<stem>.bundle/`` beside
    the document. Refused outside the confining folders (``confining``). Folders leading to it are created only
    inside a workspace folder the user opened; with none, only the bundle's own folder is (its parent must exist)."""
    out = obj.get("out")
    if out is not None and (not isinstance(out, str) or not out.strip()):
        raise CommandError(f"`out` must be a folder path, not {out!r}")
    target = (doc.parent / out) if out else doc.with_name(doc.stem + ".bundle")
    allowed = confining(folders, doc)
    if not inside(target, allowed):
        raise CommandError(f"will not write {target}: it is outside the workspace folders ({', '.join(map(str, allowed))})")
    target = Path(os.path.realpath(target))
    if not target.parent.is_dir() and not inside(target, confining(folders)):
        raise CommandError(f"will not write {target}: its folder {target.parent} does not exist (with no workspace "
                           f"folder open, folders are not created)")
    return target


def deployment_args(obj: dict, defaults: dict) -> dict:
    mode = obj.get("mode", defaults.get("mode"))
    if mode not in MODES:
        raise CommandError(f"`mode` must be one of {', '.join(MODES)}, not {mode!r}")
    dep = {"mode": mode}
    for k in SIZE_LIMITS:
        v = obj.get(k, defaults.get(k))
        why = size_problem(k, v) if v is not None else None
        if why is not None:
            raise CommandError(f"`{k}` {why}")
        dep[k] = None if v is None else int(v)
    return dep


def deployment_of(dep: dict) -> Deployment:
    """The settings' deployment. Their ``chunk`` sizes a prefill; a decode here is one of its own, continuing none
    (a decode's chunk would size its windowed caches for a prefill's rows: LANGUAGE §8)."""
    chunk = (dep.get("chunk") or 0) if dep["mode"] == "prefill" else 0
    return Deployment(dep["mode"], dep.get("ctx") or 4096, chunk, dep.get("batch") or 1, dep.get("tp") or 1)


def lower_bundle(snap: Snapshot, obj: dict, settings, folders: list[Path], report: Callable[[str, int], None],
                 cancelled: Callable[[], bool], cache: dict | None = None) -> dict:
    """Lower every kind of the document under the deployment and write the bundle; runs off the event loop.
    ``cache`` is the server's kind cache (by digest): a kind lowered before, for diagnostics or a bundle, is reused."""
    doc = path_of(snap.uri)
    if doc is None or not doc.is_file():
        raise CommandError(f"{snap.uri} is not a file on disk; save it first so the bundle has a folder to go beside")
    if not saved(doc, snap.text):
        raise CommandError(f"{doc.name} has changes that are not saved: save it, then lower — the bundle records the "
                           f"file's name and the SHA-256 of the text it was lowered from, which must be the file's")
    dep_args = deployment_args(obj, settings.deployment)
    out = output_folder(obj, doc, folders)
    errors = snap.analysis.errors
    if errors:
        first = errors[0]
        raise CommandError(f"the document has {len(errors)} error{'s' if len(errors) != 1 else ''}; the first, at line "
                           f"{first.range.start.line + 1}: {first.message}")
    from streamed.spatial.bundle import BundleError, write_bundle
    from streamed.analysis.incremental import as_analysis
    from streamed.spatial.streamed_model import Cancelled, StreamedReject, lower_streamed
    from streamed.spatial.sweep import with_sweep

    target = obj.get("target", settings.target)
    if not isinstance(target, str) or not target:
        raise CommandError(f"`target` must be \"sn50\", \"sn40l\" or a path to a target file, not {target!r}")
    target = readable("target", target, settings.target, doc, folders)
    checkpoint = obj.get("checkpoint", settings.checkpoint)
    storage = snap.analysis.storage
    if checkpoint != settings.checkpoint:
        from streamed.model.checkpoint import CheckpointError
        from streamed.model.storage import storage_of

        if checkpoint is not None and not isinstance(checkpoint, str):
            raise CommandError(f"`checkpoint` must be a path or null, not {checkpoint!r}")
        checkpoint = readable("checkpoint", checkpoint, settings.checkpoint, doc, folders)
        try:
            storage = storage_of(checkpoint)
        except CheckpointError as e:
            raise CommandError(str(e)) from None
        if storage is not snap.analysis.storage:
            from streamed.analysis.incremental import IncrementalAnalyzer

            snap = Snapshot(snap.uri, snap.version, snap.generation, IncrementalAnalyzer(storage).analyze(snap.text))
    analysis = as_analysis(snap.analysis)
    kinds, layers = len(analysis.kinds), len(analysis.programs.layers)
    report(f"lowering {kinds} kind{'s' if kinds != 1 else ''} for {layers} layers", 0)

    def progress(label: str, done: int, total: int) -> None:
        report(f"lowering {label}", int(90 * done / max(total, 1)))

    try:
        model = lower_streamed(analysis, deployment_of(dep_args), target=target, storage=storage, cache=cache,
                               progress=progress, cancelled=cancelled, to_document=snap.analysis.to_document)
        report("estimating other batches and contexts", 90)
        model = with_sweep(model, analysis, storage, cache, cancelled)
    except Cancelled:
        raise CommandError("the lowering was cancelled") from None
    except StreamedReject as r:
        where = ""
        if r.layer is not None and r.statement is not None:
            p = snap.analysis.programs.layer(r.layer)
            st = next((x for x in (p.statements if p else ()) if x.index == r.statement), None)
            if st is not None:
                where = f" (line {snap.analysis.to_document(p.section, st.range).start.line + 1})"
        # What lowers instead, as the analysis found it for the settings' deployment (when that is the one asked).
        lowers = None if any(k in obj for k in ("mode", *SIZE_LIMITS)) else next(
            (d.data["lowers"] for d in snap.rejects if (d.data or {}).get("lowers")), None)
        raise CommandError(f"{r}{where}" + (f"; {lowers}" if lowers else "")) from None
    if cancelled():
        raise CommandError("the lowering was cancelled")
    report(f"writing {out.name}/", 95)
    try:
        manifest = write_bundle(model, out, source=str(doc))
    except BundleError as e:
        raise CommandError(str(e)) from None
    return {"manifest": str(manifest), "kinds": kinds, "layers": layers, "estimate": model.estimate}


def saved(doc: Path, text: str) -> bool:
    """Whether the file ``doc`` holds ``text`` (the editor's; its byte-order mark, if any, not counted: an editor
    does not show one)."""
    try:
        on_disk = doc.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    return on_disk.removeprefix("\ufeff") == text.removeprefix("\ufeff")


def lowered_message(done: dict) -> str:
    """What a person reads when a bundle is written: where, and what it holds."""
    kinds, layers = done["kinds"], done["layers"]
    return (f"streamed: bundle written — {kinds} kind{'s' if kinds != 1 else ''}, {layers} layer{'s' if layers != 1 else ''}: "
            f"{done['manifest']}")


def bundle_folder(command: str, obj: dict, folders: list[Path]) -> Path:
    """The bundle folder a command reads: ``{bundle}`` (a bundle folder or its manifest) or ``{uri}`` (the document's
    default bundle, ``<stem>.bundle/``) — only inside the confining folders (``confining``), as bundles are written,
    and only one that holds a manifest."""
    doc = None
    if "bundle" in obj:
        b = obj["bundle"]
        if not isinstance(b, str) or not b:
            raise CommandError(f"`bundle` must be the path of a bundle folder, not {b!r}")
        folder = Path(b)
        if folder.name == "manifest.json":
            folder = folder.parent
    else:
        uri = uri_arg(command, obj, '{"uri": "file:///…/model.lgm"} or {"bundle": "/…/model.bundle"}')
        doc = path_of(uri)
        if doc is None:
            raise CommandError(f"{uri} is not a file on disk")
        folder = doc.with_name(doc.stem + ".bundle")
    allowed = confining(folders, doc)
    if not inside(folder, allowed):
        where = f"the workspace folders ({', '.join(map(str, allowed))})" if allowed else "a workspace folder"
        raise CommandError(f"will not read {folder}: manifests are read inside {where}")
    manifest = folder / "manifest.json"
    if not manifest.exists():
        raise CommandError(f"no manifest at {manifest}: lower the bundle first (streamed.lowerBundle)")
    return folder


def read_bundle_at(folder: Path):
    """The model a bundle folder holds, or a ``CommandError`` with the reader's one line."""
    from streamed.spatial.bundle import BundleError, read_bundle

    try:
        return read_bundle(folder)
    except BundleError as e:
        raise CommandError(str(e)) from None


def open_manifest(obj: dict, folders: list[Path]) -> dict:
    """``{uri}`` or ``{bundle}`` (``bundle_folder``) → the manifest's path and a summary: title, deployment, target,
    kinds, layers, estimate."""
    folder = bundle_folder("streamed.openManifest", obj, folders)
    manifest = folder / "manifest.json"
    model = read_bundle_at(folder)
    d = model.deployment
    summary = {
        "title": model.title, "target": model.target.name, "deployment": d.to_json(),
        "kinds": [{"name": k.name, "representative": k.representative, "layers": list(k.layers)} for k in model.kinds],
        "layers": len(model.layers), "estimate": model.estimate,
    }
    return {"manifest": str(manifest), "summary": summary}
