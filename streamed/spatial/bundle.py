"""A bundle on disk: ``manifest.json`` and one JSON file per program, written atomically.

Layout::

    DIR/manifest.json          the manifest (schema: streamed/spatial/schema/manifest.schema.json)
    DIR/programs/embed.json    one SpatialProgram each (schema: streamed/spatial/schema/program.schema.json)
    DIR/programs/layer-0.json  a layer kind's program, named after its representative
    DIR/programs/head.json

The manifest (``streamed-bundle/2``) is what a runtime loads without the document: the step's programs in order;
each program's weights — every declared weight, its declared shape and the tensors a chip loads it as (Q8_0 planes
and scales, each tensor-parallel chip's slice) — its carried states and its tables (with their fill rules); and, one
row per layer, that layer's own names for its kind's weights and states, the checkpoint tensor each weight reads
and how it is stored. Per-layer data is a table — a kind's columns are written once, a layer is a row of names — so
the manifest grows by one short row per layer, whatever the deployment.

Writing is atomic: the bundle is written into a temporary directory beside ``DIR`` and renamed into place, so a
reader never sees half of one (replacing a bundle renames the old one aside first: between the two renames there is
briefly no ``DIR``); a failure leaves no directory behind and never touches an existing one. An existing ``DIR`` is replaced only when it is a bundle (or empty) — never a directory of other
files. ``read_bundle(write_bundle(m))`` writes the same manifest and programs as ``m``: a layer's binding is read
back as the names a runtime needs (its weights and carried states; a derived name is ``kinds.rebind`` of the
representative's).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import asdict
from importlib import resources
from pathlib import Path, PurePath

from ..model.checkpoint import Naming, TensorRef
from .ir import SpatialProgram, tile_to_json
from .target import SpatialTarget
from .deployment import Deployment
from .streamed_model import LayerBinding, LayerKindProgram, StreamedModel, tiling, tp_summary

FORMAT = "streamed-bundle/2"
#: Bundles an older streamed wrote: replaced by a new bundle like any bundle, but not read (lower them again).
OLDER_FORMATS = ("streamed-bundle/1",)


class BundleError(Exception):
    """A bundle that cannot be written or read: which path, and why."""


def _program_file(name: str) -> str:
    return f"programs/{name}.json"


def kind_file(kind: LayerKindProgram) -> str:
    return _program_file(f"layer-{kind.representative}")


def weight_reads(program: SpatialProgram) -> list[dict]:
    """Every declared weight ``program`` reads, in the order the program first holds it: its name (the program's),
    its declared shape, and the tensors it is loaded as — ``encoding`` ``dense``, ``planes`` or ``scales``, dtype,
    shape, bytes, the ``chip`` holding it (``None``: every chip) and the ``slice`` ``[axis, start, stop]`` of the
    declared weight it keeps (``None``: all of it)."""
    out: dict[str, dict] = {}
    for t in program.tensors:
        if t.role != "weight":
            continue
        name = t.of or t.name
        w = out.setdefault(name, {"name": name, "shape": None, "reads": []})
        w["reads"].append({"tensor": t.name, "encoding": t.part or "dense", "dtype": t.dtype, "shape": list(t.shape),
                           "bytes": t.bytes, "chip": t.chip, "slice": list(t.slice) if t.slice else None})
        if t.part != "scales":  # dense values and planes have the declared shape, but along a slice's axis
            shape = list(t.shape)
            if t.slice is not None:
                axis, _, stop = t.slice
                shape[axis] = stop  # the chips' slices tile the axis: the largest stop is its length
            w["shape"] = shape if w["shape"] is None else [max(a, b) for a, b in zip(w["shape"], shape)]
    return list(out.values())


def _part(ref: TensorRef) -> dict:
    """The part of its checkpoint tensor a binding keeps: output ``columns`` [start, stop, every] and input ``rows``
    [start, stop], in the language's ``in by out`` orientation."""
    out = {}
    if ref.columns is not None:
        out["columns"] = list(ref.columns)
    if ref.rows is not None:
        out["rows"] = list(ref.rows)
    return out


def _program(p: SpatialProgram, naming: Naming | None = None) -> dict:
    """A program's weights (with their checkpoint tensor when the program is bound to no layer: the embed and the
    head), carried states and tables."""
    weights = weight_reads(p)
    if naming is not None:
        for w in weights:
            ref = naming.ref(w["name"])
            w.update(checkpoint=ref.tensor, storage=naming.stored(w["name"], ref), **_part(ref))
    carried = set(p.carried)
    states = [{"name": t.name, "shape": list(t.shape), "dtype": t.dtype, "bytes": t.bytes, "chip": t.chip}
              for t in p.tensors if t.name in carried]
    tables = [{"name": t.name, "shape": list(t.shape), "dtype": t.dtype, "bytes": t.bytes,
               "fill": list(t.fill) if t.fill else None} for t in p.tensors if t.role == "table"]
    return {"weights": weights, "states": states, "tables": tables}


def _layer_tiers(residency: dict) -> dict[int, dict]:
    return {l: {"weights": g["weights"], "states": g["states"]} for g in residency.get("layers", ())
            for l in g["layers"]}


def _row(b: LayerBinding, kind: dict, naming: Naming, tiers: dict) -> dict:
    """One layer of the table: its names for its kind's weights (in the kind's order), the checkpoint tensor each
    reads and its storage, the parts of tensors it keeps, its names for the kind's carried states, and the tiers its
    weights and states live in."""
    names = [b.tensors.get(w["name"], w["name"]) for w in kind["weights"]]
    refs = [naming.ref(n) for n in names]
    row = {"layer": b.layer, "kind": b.kind, "weights": names, "checkpoint": [r.tensor for r in refs],
           "storage": [naming.stored(n, r) for n, r in zip(names, refs)]}
    parts = {n: _part(r) for n, r in zip(names, refs) if r.columns is not None or r.rows is not None}
    if parts:
        row["parts"] = parts
    row["states"] = [b.tensors.get(s["name"], s["name"]) for s in kind["states"]]
    row["tiers"] = tiers.get(b.layer)
    row["identity"] = b.identity
    return row


def tiles_entry(p: SpatialProgram) -> dict | None:
    """A program's tiles as the manifest lists them: ``tiling`` in brief, and each tile in order with what it reads
    and writes (in the program's names; a layer's binding maps a kind's to the layer's)."""
    brief = tiling(p)
    return None if brief is None else {**brief, "order": [tile_to_json(t) for t in p.tiles]}


def manifest(model: StreamedModel, source: str | None = None) -> dict:
    """The manifest (the module docstring): what runs at each layer, and every tensor it loads — by its own name, its
    checkpoint tensor and its part of it — without the document. ``source``: the document's path (its name is
    recorded, beside the SHA-256 of its text)."""
    d = model.deployment
    naming = model.naming or Naming("declared")
    name = PurePath(source).name if source else None
    tiers = _layer_tiers(model.residency)
    kinds = []
    for k in model.kinds:
        spec = _program(k.program)
        tp = {key: k.tp[key] for key in ("chips", "allreduces", "read_dense")} if k.tp else None
        kinds.append({"name": k.name, "representative": k.representative, "layers": list(k.layers),
                      "program": kind_file(k), "carried": list(k.carried), "tp": tp, **spec,
                      "identity": k.identity, "tiles": tiles_entry(k.program)})
    by_name = {k["name"]: k for k in kinds}
    step = ([_program_file("embed")] if model.embed is not None else []) + \
        [by_name[b.kind]["program"] for b in sorted(model.layers, key=lambda b: b.layer)] + [_program_file("head")]
    return {
        "format": FORMAT,
        "source": name,
        "document": {"name": name, "sha256": model.document_sha256},
        "title": model.title,
        "mode": d.mode,
        "target": model.target.name,
        "target_spec": asdict(model.target),
        "ctx": d.ctx,
        "rows": d.rows,
        "batch": d.batch if d.batched else 1,
        "chunk": d.chunk if d.mode == "prefill" else None,
        "tp": d.chips,
        "checkpoint": {"naming": naming.kind, "file": naming.file},
        "programs": {"embed": _program_file("embed") if model.embed is not None else None,
                     "head": _program_file("head")},
        "step": step,
        "shared": {"embed": _program(model.embed, naming) if model.embed is not None else None,
                   "head": _program(model.head, naming)},
        "kinds": kinds,
        "layers": [_row(b, by_name[b.kind], naming, tiers) for b in model.layers],
        "identities": {"embed": model.embed_identity, "head": model.head_identity},
        "tiles": {"embed": tiles_entry(model.embed) if model.embed is not None else None,
                  "head": tiles_entry(model.head)},
        "residency": model.residency,
        "estimate": model.estimate,
    }


def manifest_text(m: dict) -> str:
    """The manifest as written: one key per line, and one line per element of a list of objects (a layer's row, a
    kind) — a table a person can read line by line and a diff shows row by row, at the size of compact JSON."""
    compact = lambda v: json.dumps(v, separators=(",", ":"), ensure_ascii=False)  # noqa: E731
    lines = []
    for key, value in m.items():
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            body = ",\n".join(f"  {compact(v)}" for v in value)
            lines.append(f" {json.dumps(key)}: [\n{body}\n ]")
        else:
            lines.append(f" {json.dumps(key)}: {compact(value)}")
    return "{\n" + ",\n".join(lines) + "\n}\n"


def _is_bundle(path: Path) -> bool:
    m = path / "manifest.json"
    try:
        return json.loads(m.read_text("utf-8")).get("format") in (FORMAT, *OLDER_FORMATS)
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
        (tmp / "manifest.json").write_text(manifest_text(manifest(model, source)), "utf-8")
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
    """The model a bundle directory holds (the inverse of ``write_bundle``), with every layer bound by its row of
    the manifest's table and every weight named by the checkpoint tensor the manifest records."""
    root = Path(directory)
    m = _read_json(root / "manifest.json")
    if isinstance(m, dict) and m.get("format") in OLDER_FORMATS:
        raise BundleError(f"{root / 'manifest.json'}: a {m['format']} bundle, written by an older streamed; lower "
                          f"the document again")
    if not isinstance(m, dict) or m.get("format") != FORMAT:
        raise BundleError(f"{root / 'manifest.json'}: not a {FORMAT} manifest")
    try:
        program = lambda name: SpatialProgram.from_json(_read_json(root / name))
        embed = program(m["programs"]["embed"]) if m["programs"].get("embed") else None
        kinds, layers, refs = [], [], {}
        by_name = {k["name"]: k for k in m["kinds"]}
        for k in m["kinds"]:
            p = program(k["program"])
            kinds.append(LayerKindProgram(k["name"], k["representative"], tuple(k["layers"]), p, tuple(k["carried"]),
                                          tp_summary(p), k.get("identity")))
        for row in m["layers"]:
            kind = by_name[row["kind"]]
            tensors = {w["name"]: n for w, n in zip(kind["weights"], row["weights"])}
            tensors.update({s["name"]: n for s, n in zip(kind["states"], row["states"])})
            layers.append(LayerBinding(row["layer"], row["kind"], tensors, identity=row.get("identity")))
            parts = row.get("parts", {})
            for n, tensor, stored in zip(row["weights"], row["checkpoint"], row["storage"]):
                refs[n] = (_ref(tensor, parts.get(n, {})), stored)
        for shared in m["shared"].values():
            for w in (shared or {}).get("weights", ()):
                refs[w["name"]] = (_ref(w["checkpoint"], w), w["storage"])
        naming = Naming(m["checkpoint"]["naming"], m["checkpoint"]["file"], refs=refs)
        spec = m["target_spec"]
        target = SpatialTarget(**spec)
        deployment = Deployment(m["mode"], ctx=m["ctx"], chunk=m["chunk"] or 0, batch=m["batch"], tp=m["tp"])
        return StreamedModel(
            embed=embed, kinds=tuple(kinds), head=program(m["programs"]["head"]), layers=tuple(layers),
            residency=m["residency"], estimate=m["estimate"], deployment=deployment, target=target,
            title=m.get("title"), embed_identity=m["identities"]["embed"], head_identity=m["identities"]["head"],
            naming=naming, document_sha256=m["document"]["sha256"])
    except (KeyError, TypeError) as e:
        raise BundleError(f"{root / 'manifest.json'}: malformed bundle ({e})") from None


def _ref(tensor: str, part: dict) -> TensorRef:
    columns, rows = part.get("columns"), part.get("rows")
    return TensorRef(tensor, tuple(columns) if columns else None, tuple(rows) if rows else None)


def schema(name: str = "manifest") -> dict:
    """The JSON Schema shipped with the package: ``manifest`` or ``program``."""
    return json.loads(resources.files("streamed.spatial").joinpath("schema", f"{name}.schema.json").read_text("utf-8"))
