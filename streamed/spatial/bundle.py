"""A bundle on disk: ``manifest.json`` and one JSON file per program, written atomically.

Layout::

    DIR/manifest.json          the manifest (schema: streamed/spatial/schema/manifest.schema.json)
    DIR/programs/embed.json    one SpatialProgram each (schema: streamed/spatial/schema/program.schema.json)
    DIR/programs/layer-0.json  a layer kind's program, named after its representative
    DIR/programs/head.json

Writing is atomic: the bundle is written into a temporary directory beside ``DIR`` and renamed into place, so a
reader never sees half of one (replacing a bundle renames the old one aside first: between the two renames there is
briefly no ``DIR``); a failure leaves no directory behind and never touches an existing one. An existing ``DIR`` is replaced only when it is a bundle (or empty) — never a directory of other
files. ``read_bundle(write_bundle(m))`` equals ``m``.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import asdict
from importlib import resources
from pathlib import Path

from .ir import SpatialProgram, tile_to_json
from .target import SpatialTarget
from .deployment import Deployment
from .streamed_model import LayerBinding, LayerKindProgram, StreamedModel, tiling

FORMAT = "streamed-bundle/1"


class BundleError(Exception):
    """A bundle that cannot be written or read: which path, and why."""


def _program_file(name: str) -> str:
    return f"programs/{name}.json"


def kind_file(kind: LayerKindProgram) -> str:
    return _program_file(f"layer-{kind.representative}")


def tiles_entry(p: SpatialProgram) -> dict | None:
    """A program's tiles as the manifest lists them: ``tiling`` in brief, and each tile in order with what it reads
    and writes (in the program's names; a layer's binding maps a kind's to the layer's)."""
    brief = tiling(p)
    return None if brief is None else {**brief, "order": [tile_to_json(t) for t in p.tiles]}


def manifest(model: StreamedModel, source: str | None = None) -> dict:
    """The manifest: what runs at each layer and how each kind's names bind to that layer's tensors."""
    d = model.deployment
    return {
        "format": FORMAT,
        "source": source,
        "title": model.title,
        "mode": d.mode,
        "target": model.target.name,
        "target_spec": asdict(model.target),
        "ctx": d.ctx,
        "rows": d.rows,
        "batch": d.batch if d.batched else 1,
        "chunk": d.chunk if d.mode == "prefill" else None,
        "tp": d.chips,
        "programs": {"embed": _program_file("embed") if model.embed is not None else None,
                     "head": _program_file("head")},
        "kinds": [{"name": k.name, "representative": k.representative, "layers": list(k.layers),
                   "program": kind_file(k), "carried": list(k.carried), "tp": k.tp, "identity": k.identity,
                   "tiles": tiles_entry(k.program)} for k in model.kinds],
        "layers": [{"layer": b.layer, "kind": b.kind, "tensors": b.tensors, "identity": b.identity}
                   for b in model.layers],
        "identities": {"embed": model.embed_identity, "head": model.head_identity},
        "tiles": {"embed": tiles_entry(model.embed) if model.embed is not None else None,
                  "head": tiles_entry(model.head)},
        "residency": model.residency,
        "estimate": model.estimate,
    }


def _is_bundle(path: Path) -> bool:
    m = path / "manifest.json"
    try:
        return json.loads(m.read_text("utf-8")).get("format") == FORMAT
    except (OSError, ValueError, AttributeError):
        return False


def write_bundle(model: StreamedModel, out_dir: str | Path, source: str | None = None) -> Path:
    """Write ``model`` to ``out_dir`` atomically; returns the manifest's path."""
    if not str(out_dir):
        raise BundleError("an empty output path: name the bundle directory, such as model.bundle")
    out = Path(out_dir)
    here = Path.cwd()
    if Path(os.path.abspath(out)) in (here, *here.parents):
        # Replacing a bundle renames it aside: the directory a shell stands in cannot be renamed.
        raise BundleError(f"{out}: is the current directory{' or above it' if Path(os.path.abspath(out)) != here else ''}"
                          f"; name a new directory for the bundle, such as {here.name or 'model'}.bundle")
    parent = out.parent if str(out.parent) else Path(".")
    above = next((p for p in (parent, *parent.parents) if p.exists()), None)
    if above is not None and not above.is_dir():
        raise BundleError(f"{out}: cannot be written: {above} is a file, not a directory")
    try:
        if out.exists() and not out.is_dir():
            raise BundleError(f"{out}: exists and is not a directory")
        if out.is_dir() and any(out.iterdir()) and not _is_bundle(out):
            raise BundleError(f"{out}: exists and is not a bundle; choose another directory or remove it")
        parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=parent))
        # mkdtemp makes its directory private (0700); a bundle is an ordinary directory, as the umask says.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o777 & ~umask)
    except OSError as e:
        raise BundleError(f"{out}: cannot be written ({e.strerror})") from None
    old = None
    try:
        (tmp / "programs").mkdir()
        files = [(model.embed, _program_file("embed"))] if model.embed is not None else []
        files += [(k.program, kind_file(k)) for k in model.kinds] + [(model.head, _program_file("head"))]
        for program, name in files:
            (tmp / name).write_text(json.dumps(program.to_json(), separators=(",", ":")), "utf-8")
        (tmp / "manifest.json").write_text(json.dumps(manifest(model, source), indent=1), "utf-8")
        if out.exists():
            old = parent / f".{out.name}.{os.getpid()}.old"
            os.rename(out, old)
        os.rename(tmp, out)
    except OSError as e:
        shutil.rmtree(tmp, ignore_errors=True)
        if old is not None and not out.exists():
            os.rename(old, out)
        raise BundleError(f"{out}: cannot be written ({e.strerror})") from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        if old is not None and not out.exists():
            os.rename(old, out)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    return out / "manifest.json"


def _read_json(path: Path):
    try:
        return json.loads(path.read_text("utf-8"))
    except OSError as e:
        raise BundleError(f"{path}: cannot be read ({e.strerror})") from None
    except ValueError as e:
        raise BundleError(f"{path}: not JSON ({e})") from None


def read_bundle(directory: str | Path) -> StreamedModel:
    """The model a bundle directory holds (the inverse of ``write_bundle``)."""
    root = Path(directory)
    m = _read_json(root / "manifest.json")
    if not isinstance(m, dict) or m.get("format") != FORMAT:
        raise BundleError(f"{root / 'manifest.json'}: not a {FORMAT} manifest")
    try:
        program = lambda name: SpatialProgram.from_json(_read_json(root / name))
        embed = program(m["programs"]["embed"]) if m["programs"].get("embed") else None
        kinds = tuple(LayerKindProgram(k["name"], k["representative"], tuple(k["layers"]), program(k["program"]),
                                       tuple(k["carried"]), k["tp"], k.get("identity")) for k in m["kinds"])
        spec = m["target_spec"]
        target = SpatialTarget(**spec)
        deployment = Deployment(m["mode"], ctx=m["ctx"], chunk=m["chunk"] or 0, batch=m["batch"], tp=m["tp"])
        return StreamedModel(
            embed=embed, kinds=kinds, head=program(m["programs"]["head"]),
            layers=tuple(LayerBinding(b["layer"], b["kind"], b["tensors"], identity=b.get("identity"))
                         for b in m["layers"]),
            residency=m["residency"], estimate=m["estimate"], deployment=deployment, target=target,
            title=m.get("title"), embed_identity=m.get("identities", {}).get("embed"),
            head_identity=m.get("identities", {}).get("head"))
    except (KeyError, TypeError) as e:
        raise BundleError(f"{root / 'manifest.json'}: malformed bundle ({e})") from None


def schema(name: str = "manifest") -> dict:
    """The JSON Schema shipped with the package: ``manifest`` or ``program``."""
    return json.loads(resources.files("streamed.spatial").joinpath("schema", f"{name}.schema.json").read_text("utf-8"))
