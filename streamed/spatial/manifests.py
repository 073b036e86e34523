"""The manifest a bundle carries, as data: built from a ``StreamedModel`` alone (no file is touched here; writing
and reading are ``bundle``'s). What it holds, and why, is ``bundle``'s docstring; the format's schema is
``schema/manifest.schema.json``.

``manifest(model)`` is a function of the model: ``bundle.read_bundle`` writes it again from the programs it read and
holds the manifest on disk to it, value for value — so everything here must be derived from the model, never from
the time or the place it is written.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict
from pathlib import PurePath

from ..lang.files import display
from ..lang.jsontext import dumps
from ..model.checkpoint import Naming, TensorRef, stored_bytes
from ..model.context import longrope_factors
from .ir import SpatialProgram, tile_to_json
from .passes.fold_q8 import read_dense
from .streamed_model import LayerBinding, LayerKindProgram, StreamedModel, tiling

FORMAT = "streamed-bundle/2"


def _program_file(name: str) -> str:
    return f"programs/{name}.json"


def kind_file(kind: LayerKindProgram) -> str:
    return _program_file(f"layer-{kind.representative}")


def program_files(model: StreamedModel) -> list[tuple[SpatialProgram, str]]:
    """Every program of the bundle with the file it is written to."""
    files = [(model.embed, _program_file("embed"))] if model.embed is not None else []
    return files + [(k.program, kind_file(k)) for k in model.kinds] + [(model.head, _program_file("head"))]


def program_text(program: SpatialProgram) -> str:
    """A program's file as written: compact strict JSON (its SHA-256 is what the manifest records)."""
    return dumps(program.to_json(), separators=(",", ":"))


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


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


def _factors(t) -> dict:
    """A LongRoPE table's list, as the bundle's context decides it (``model.context.longrope_factors``): ``{"factors":
    "short"|"long"}``; nothing for any other table."""
    params = dict(t.fill[2]) if t.fill and len(t.fill) > 2 else {}
    if params.get("scaling") != "longrope":
        return {}
    return {"factors": longrope_factors(t.shape[0], params["context"])}


def _program(p: SpatialProgram, naming: Naming | None = None) -> dict:
    """A program's weights (with their checkpoint tensor when the program is bound to no layer: the embed and the
    head), carried states (a chip's share with its ``slice`` of the whole), tables, and the weights stored Q8_0 it
    reads dense, with why (``read_dense``, from its certificate)."""
    weights = weight_reads(p)
    if naming is not None:
        for w in weights:
            ref = naming.ref(w["name"])
            w.update(checkpoint=ref.tensor, storage=naming.stored(w["name"], ref), **_part(ref))
    carried = set(p.carried)
    rings = {op.outputs[0] for op in p.ops if op.kind == "write_rows" and op.attr("ring")}
    states = [{"name": t.name, "shape": list(t.shape), "dtype": t.dtype, "bytes": t.bytes, "chip": t.chip,
               "ring": t.name in rings, **({"of": t.of, "slice": list(t.slice)} if t.slice is not None else {})}
              for t in p.tensors if t.name in carried]
    tables = [{"name": t.name, "shape": list(t.shape), "dtype": t.dtype, "bytes": t.bytes,
               "fill": list(t.fill) if t.fill else None, **_factors(t)} for t in p.tensors if t.role == "table"]
    return {"weights": weights, "states": states, "tables": tables, "read_dense": read_dense(p)}


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


def _checkpoint(model: StreamedModel, naming: Naming) -> dict:
    """Where the tensor names come from and, for a GGUF the lowering read, the bytes the file holds the tensors the
    bundle reads in, by stored type (``stored``: what a runtime maps, as against what the chip holds —
    ``residency``)."""
    out = {"naming": naming.kind, "file": naming.file, "storage": naming.said, "assumed": naming.assumed}
    if naming.refs is not None:  # read back without the file: what the manifest said (the file is not at hand)
        return out if naming.recorded is None else {**out, "stored": dict(naming.recorded)}
    if naming.kind == "gguf":
        names = [naming.ref(w["name"]).tensor for p in (model.embed, model.head) if p is not None
                 for w in weight_reads(p)]
        kinds = {k.name: k.program for k in model.kinds}
        names += [naming.ref(b.tensors.get(w["name"], w["name"])).tensor for b in model.layers
                  for w in weight_reads(kinds[b.kind])]
        out["stored"] = stored_bytes(naming.storage, names)
    return out


def manifest(model: StreamedModel, source: str | None = None) -> dict:
    """The manifest (the module docstring): what runs at each layer, and every tensor it loads — by its own name, its
    checkpoint tensor and its part of it — without the document; ``files``, every file the bundle's writer writes
    (what a later lowering may replace). ``source``: the document's path (its name is recorded, beside the SHA-256 of
    its text)."""
    d = model.deployment
    naming = model.naming or Naming("declared")
    name = display(PurePath(source).name) if source else None
    tiers = _layer_tiers(model.residency)
    kinds = []
    for k in model.kinds:
        spec = _program(k.program)
        tp = {key: k.tp[key] for key in ("chips", "allreduces", "read_dense", "replicas")} if k.tp else None
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
        "chunk": d.chunk or None,  # a prefill's rows; a decode's, the prefill it continues (0: none)
        "tp": d.chips,
        "trained": model.trained,
        "past_trained": model.past_training,
        "checkpoint": _checkpoint(model, naming),
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
        "statements": {name: list(sts) for name, sts in (model.statements or {}).items()},
        "files": sorted({"manifest.json", *(name for _, name in program_files(model))}),
        "digests": {name: sha256(program_text(p).encode("utf-8")) for p, name in sorted(
            program_files(model), key=lambda pn: pn[1])},
    }


def manifest_text(m: dict) -> str:
    """The manifest as written: one key per line, and one line per element of a list of objects (a layer's row, a
    kind) — a table a person can read line by line and a diff shows row by row, at the size of compact JSON."""
    compact = lambda v: dumps(v, separators=(",", ":"), ensure_ascii=False)  # noqa: E731 — strict: no bare NaN
    lines = []
    for key, value in m.items():
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            body = ",\n".join(f"  {compact(v)}" for v in value)
            lines.append(f" {json.dumps(key)}: [\n{body}\n ]")
        else:
            lines.append(f" {json.dumps(key)}: {compact(value)}")
    return "{\n" + ",\n".join(lines) + "\n}\n"
