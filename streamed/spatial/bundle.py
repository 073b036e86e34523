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

What holds, and why:

* **Nothing is lost.** An existing ``DIR`` is replaced only when everything in it is what a lowering wrote: the
  manifest lists every file it wrote (``files``; an older bundle is read by its layout), and a file, folder or link
  it does not list — notes, a ``.git`` — makes the write refuse, naming the first such entry. An empty folder is
  taken; a file is never.
* **Whole or not at all.** The bundle is written into ``.DIR.<pid>.tmp`` beside ``DIR`` and renamed into place
  (replacing renames the old one to ``.DIR.<pid>.old`` first, and removes it after); any failure, an exception or a
  signal the caller turns into one, removes the temporary and puts the old bundle back. ``uninterrupted`` is the
  context the two renames run in: the command line defers its stop signals there, so a bundle is either installed
  and said to be, or not installed.
* **One writer at a time, nothing left behind.** Writers of bundles in one folder take turns on a lock of that folder
  (``flock``, released by the kernel when a writer dies). Holding it, a writer knows every ``.DIR.*.tmp`` and
  ``.DIR.*.old`` beside ``DIR`` is a dead writer's: it removes them — and if a writer was killed between its two
  renames, so that ``DIR`` is missing and its ``.old`` is the previous bundle, it puts that back first.
* **Strict JSON, read as untrusted.** Files are written with ``allow_nan=False``; the reader refuses nesting past
  ``MAX_JSON_DEPTH``, validates the manifest and every program against the shipped JSON Schemas before using them,
  checks that the manifest agrees with itself, and refuses any program path that leaves the bundle.

``read_bundle(write_bundle(m))`` writes the same manifest and programs as ``m``: a layer's binding is read back as the
names a runtime needs (its weights and carried states; a derived name is ``kinds.rebind`` of the representative's).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import time
from dataclasses import asdict
from functools import lru_cache
from importlib import resources
from pathlib import Path, PurePath, PurePosixPath

from ..lang.jsontext import JsonError, dumps, loads
from ..model.checkpoint import Naming, TensorRef
from .ir import SpatialProgram, tile_to_json
from .target import SpatialTarget, target_problem
from .deployment import Deployment, size_problem
from .streamed_model import LayerBinding, LayerKindProgram, StreamedModel, tiling, tp_summary

FORMAT = "streamed-bundle/2"
#: Bundles an older streamed wrote: replaced by a new bundle like any bundle, but not read (lower them again).
OLDER_FORMATS = ("streamed-bundle/1",)

#: How long a writer waits for another writing beside the same folder before it gives up (a bundle takes well under a
#: second to write; a writer that holds the lock longer is stuck).
LOCK_WAIT_SECONDS = 60.0


class BundleError(Exception):
    """A bundle that cannot be written or read: which path, and why."""


def _program_file(name: str) -> str:
    return f"programs/{name}.json"


def kind_file(kind: LayerKindProgram) -> str:
    return _program_file(f"layer-{kind.representative}")


def _program_files(model: StreamedModel) -> list[tuple[SpatialProgram, str]]:
    """Every program of the bundle with the file it is written to."""
    files = [(model.embed, _program_file("embed"))] if model.embed is not None else []
    return files + [(k.program, kind_file(k)) for k in model.kinds] + [(model.head, _program_file("head"))]


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
    checkpoint tensor and its part of it — without the document; ``files``, every file the bundle's writer writes
    (what a later lowering may replace). ``source``: the document's path (its name is recorded, beside the SHA-256 of
    its text)."""
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
        "statements": {name: list(sts) for name, sts in (model.statements or {}).items()},
        "files": sorted({"manifest.json", *(name for _, name in _program_files(model))}),
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


# ---- writing ----------------------------------------------------------------------------------------------------


def _destination(out_dir: str | Path) -> Path:
    """The folder to write: ``out_dir``, or where it leads when it is a symbolic link (the link is kept and what it
    points to is written, as writing through a link does), after the checks that need no file system lock."""
    if not str(out_dir):
        raise BundleError("an empty output path: name the bundle directory, such as model.bundle")
    out = Path(out_dir)
    if out.is_symlink():
        out = Path(os.path.realpath(out))
    here = Path.cwd()
    if Path(os.path.abspath(out)) in (here, *here.parents):
        # Replacing a bundle renames it aside: the directory a shell stands in cannot be renamed.
        raise BundleError(f"{out_dir}: is the current directory{' or above it' if Path(os.path.abspath(out)) != here else ''}"
                          f"; name a new directory for the bundle, such as {here.name or 'model'}.bundle")
    parent = out.parent if str(out.parent) else Path(".")
    above = next((p for p in (parent, *parent.parents) if p.exists()), None)
    if above is not None and not above.is_dir():
        raise BundleError(f"{out_dir}: cannot be written: {above} is a file, not a directory")
    if out.exists() and not out.is_dir():
        raise BundleError(f"{out_dir}: exists and is not a directory")
    return out


@contextlib.contextmanager
def _folder_lock(parent: Path, shown: str):
    """Hold the lock of the folder bundles are written in: writers take turns, and the kernel releases a dead
    writer's lock. A writer that waits longer than ``LOCK_WAIT_SECONDS`` gives up with a ``BundleError``."""
    fd = os.open(parent, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        deadline = time.monotonic() + LOCK_WAIT_SECONDS
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise BundleError(f"{shown}: another lowering has been writing in {parent} for "
                                      f"{LOCK_WAIT_SECONDS:.0f} s; try again when it is done") from None
                time.sleep(0.02)
        yield
    finally:
        os.close(fd)  # releases the lock


def _temporaries(parent: Path, name: str) -> list[tuple[Path, str]]:
    """The ``.NAME.<pid>.tmp`` and ``.NAME.<pid>.old`` folders beside ``NAME`` that hold only what a writer writes
    (anything else of that name is left alone: it is not ours to remove)."""
    pattern = re.compile(rf"\.{re.escape(name)}\.\d+\.(tmp|old)")
    out = []
    for entry in sorted(parent.iterdir()):
        m = pattern.fullmatch(entry.name)
        if m and entry.is_dir() and not entry.is_symlink() and _holds_only_bundle_files(entry):
            out.append((entry, m.group(1)))
    return out


def _holds_only_bundle_files(folder: Path) -> bool:
    names = {p.name for p in folder.iterdir()}
    if not names <= {"manifest.json", "programs"}:
        return False
    programs = folder / "programs"
    return not programs.exists() or (programs.is_dir() and not programs.is_symlink() and
                                     all(p.is_file() and not p.is_symlink() for p in programs.iterdir()))


def _recover(parent: Path, out: Path) -> None:
    """Under the folder's lock: what dead writers left beside ``out`` is removed; a previous bundle a writer had moved
    aside when it was killed is put back first."""
    for path, what in _temporaries(parent, out.name):
        if what == "old" and not out.exists():
            os.rename(path, out)
        else:
            shutil.rmtree(path, ignore_errors=True)


def _written_by_a_lowering(out: Path) -> set[str]:
    """The files a lowering wrote in ``out``, as its manifest lists them; empty when it has no streamed manifest."""
    try:
        m = loads((out / "manifest.json").read_bytes())
    except (OSError, JsonError):
        return set()
    if not isinstance(m, dict) or m.get("format") not in (FORMAT, *OLDER_FORMATS):
        return set()
    files = m.get("files")
    if files is None:  # a bundle written before manifests listed their files: the layout named files of
        programs = m.get("programs") if isinstance(m.get("programs"), dict) else {}
        kinds = m.get("kinds") if isinstance(m.get("kinds"), list) else []
        files = ["manifest.json", *programs.values(), *(k.get("program") for k in kinds if isinstance(k, dict))]
    if not isinstance(files, list):
        return set()
    return {f for f in files if isinstance(f, str) and _inside_bundle(f)}


def _first_foreign(out: Path) -> str | None:
    """The first entry of ``out`` in sorted order that no lowering wrote — a file its manifest does not list, a folder
    that holds none it lists, any symbolic link — or ``None``. A foreign folder is named (``.git/``), not entered, so
    only the bundle's own folders are walked."""
    written = _written_by_a_lowering(out)
    folders = {str(PurePosixPath(f).parent) for f in written} - {"."}
    foreign, stack = [], [""]
    while stack:
        rel = stack.pop()
        for e in os.scandir(out / rel if rel else out):
            path = f"{rel}/{e.name}" if rel else e.name
            if e.is_symlink():
                foreign.append(path)
            elif e.is_dir():
                if path in folders:
                    stack.append(path)
                else:
                    foreign.append(path + "/")
            elif path not in written:
                foreign.append(path)
    return min(foreign, default=None)


def _check_replaceable(out: Path, shown: str) -> None:
    if out.is_dir():
        foreign = _first_foreign(out)
        if foreign is not None:
            raise BundleError(f"{shown}: holds {foreign}, which no lowering wrote; lower into another folder, or move "
                              f"it out first")


def write_bundle(model: StreamedModel, out_dir: str | Path, source: str | None = None, *,
                 uninterrupted=contextlib.nullcontext) -> Path:
    """Write ``model`` to ``out_dir`` atomically; returns the manifest's path. ``uninterrupted()`` is the context the
    renames that install it run in (the command line defers its stop signals there)."""
    out = _destination(out_dir)
    parent = out.parent if str(out.parent) else Path(".")
    shown = str(out_dir)
    with contextlib.ExitStack() as held:
        try:
            parent.mkdir(parents=True, exist_ok=True)
            held.enter_context(_folder_lock(parent, shown))
            _recover(parent, out)
        except OSError as e:
            raise BundleError(f"{shown}: cannot be written ({e.strerror}: {e.filename})") from None
        _check_replaceable(out, shown)
        tmp = parent / f".{out.name}.{os.getpid()}.tmp"
        _write_files(model, source, tmp, shown)
        with uninterrupted():
            _install(tmp, out, shown)
    return out / "manifest.json"


def _write_files(model: StreamedModel, source: str | None, tmp: Path, shown: str) -> None:
    """Every file of the bundle, into ``tmp``; on any failure (or interrupt) ``tmp`` is removed."""
    try:
        tmp.mkdir()
        # A bundle is an ordinary folder: its mode is what the umask gives (mkdir applies it).
        (tmp / "programs").mkdir()
        for program, name in _program_files(model):
            (tmp / name).write_text(dumps(program.to_json(), separators=(",", ":")), "utf-8")
        (tmp / "manifest.json").write_text(manifest_text(manifest(model, source)), "utf-8")
    except BaseException as e:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(e, OSError):
            raise BundleError(f"{shown}: cannot be written ({e.strerror})") from None
        if isinstance(e, ValueError):  # allow_nan=False: a NaN or an infinity reached the bundle
            raise BundleError(f"{shown}: not written: a figure of the bundle is not a finite number ({e})") from None
        raise


def _install(tmp: Path, out: Path, shown: str) -> None:
    """Rename ``tmp`` into ``out``, the old ``out`` aside first and removed after; a failure puts the old one back."""
    old = None
    try:
        if out.exists():
            old = out.parent / f".{out.name}.{os.getpid()}.old"
            os.rename(out, old)
        os.rename(tmp, out)
    except BaseException as e:
        shutil.rmtree(tmp, ignore_errors=True)
        if old is not None and not out.exists():
            os.rename(old, out)
        if isinstance(e, OSError):
            raise BundleError(f"{shown}: cannot be written ({e.strerror})") from None
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


# ---- reading ----------------------------------------------------------------------------------------------------


def _inside_bundle(name: str) -> bool:
    """Whether ``name`` is a relative path that stays inside the bundle (no root, no drive, no ``..``, no ``\\``)."""
    p = PurePosixPath(name)
    return bool(name) and not p.is_absolute() and ".." not in p.parts and "\\" not in name and ":" not in name


def _read_json(path: Path):
    try:
        return loads(path.read_bytes())
    except OSError as e:
        raise BundleError(f"{path}: cannot be read ({e.strerror})") from None
    except JsonError as e:
        raise BundleError(f"{path}: {e}") from None


@lru_cache(maxsize=None)
def _validator(name: str):
    """The Draft 2020-12 validator of the shipped schema ``name`` (loaded once: building one costs milliseconds)."""
    import jsonschema  # loaded with the first bundle read, not with the command line

    return jsonschema.Draft202012Validator(schema(name))


def _validated(value, name: str, path: Path):
    """``value`` if the shipped schema ``name`` accepts it; else one ``BundleError`` naming the first place it does
    not (``kinds[0].layers[1]: -1 is less than the minimum of 0``)."""
    from jsonschema.exceptions import best_match

    error = best_match(_validator(name).iter_errors(value))
    if error is not None:
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path).lstrip(".")
        message = error.message if len(error.message) <= 160 else error.message[:159] + "…"
        raise BundleError(f"{path}: not a {FORMAT} {name}: {where + ': ' if where else ''}{message}")
    return value


def _consistent(m: dict, path: Path) -> None:
    """What the schema cannot say: the sizes within their limits; the layers 0, 1, 2, … once each, each bound to a
    kind the manifest has, each row as long as its kind's columns; each kind's layers exactly those bound to it and
    its representative one of them; the step the embed's, each layer's kind's and the head's programs in order; every
    program path inside the bundle."""
    def bad(why: str) -> BundleError:
        return BundleError(f"{path}: not a {FORMAT} manifest: {why}")

    for size in ("ctx", "chunk", "batch", "tp"):
        why = size_problem(size, m[size]) if m.get(size) is not None else None
        if why is not None:
            raise bad(f"`{size}` {why}")
    layers = [row["layer"] for row in m["layers"]]
    if layers != list(range(len(layers))):
        raise bad(f"its layers are {layers[:8]}{'…' if len(layers) > 8 else ''}, not 0, 1, 2, … in order")
    kinds = {k["name"]: k for k in m["kinds"]}
    if len(kinds) != len(m["kinds"]):
        raise bad("two kinds have one name")
    for row in m["layers"]:
        kind = kinds.get(row["kind"])
        if kind is None:
            raise bad(f"layer {row['layer']} runs kind `{row['kind'][:40]}`, which it does not list")
        for column, of in (("weights", "weights"), ("checkpoint", "weights"), ("storage", "weights"),
                           ("states", "states")):
            if len(row[column]) != len(kind[of]):
                raise bad(f"layer {row['layer']} lists {len(row[column])} {column} for the {len(kind[of])} "
                          f"{of} of kind `{kind['name'][:40]}`")
    for k in m["kinds"]:
        bound = [row["layer"] for row in m["layers"] if row["kind"] == k["name"]]
        if k["layers"] != bound:
            raise bad(f"kind `{k['name'][:40]}` lists layers {k['layers'][:8]} but layers {bound[:8]} are bound to it")
        if k["representative"] not in k["layers"]:
            raise bad(f"kind `{k['name'][:40]}`'s representative, layer {k['representative']}, is not one of its layers")
    step = ([m["programs"]["embed"]] if m["programs"]["embed"] else []) + \
        [kinds[row["kind"]]["program"] for row in m["layers"]] + [m["programs"]["head"]]
    if m["step"] != step:
        raise bad(f"its step runs {len(m['step'])} programs, not the embed's, each layer's kind's and the head's "
                  f"({len(step)})")
    for name in [*m["programs"].values(), *(k["program"] for k in m["kinds"]), *m["step"]]:
        if name is not None and not _inside_bundle(name):
            raise bad(f"the program path {name[:60]!r} leaves the bundle; a bundle's programs are inside it")


def read_bundle(directory: str | Path) -> StreamedModel:
    """The model a bundle directory holds (the inverse of ``write_bundle``), with every layer bound by its row of
    the manifest's table and every weight named by the checkpoint tensor the manifest records — after the manifest
    and every program are validated against their schemas and the manifest against itself, each program read from
    inside the bundle; ``BundleError`` naming the file and the first thing wrong otherwise."""
    root = Path(directory)
    where = root / "manifest.json"
    m = _read_json(where)
    if isinstance(m, dict) and m.get("format") in OLDER_FORMATS:
        raise BundleError(f"{where}: a {m['format']} bundle, written by an older streamed; lower the document again")
    if not isinstance(m, dict) or m.get("format") != FORMAT:
        raise BundleError(f"{where}: not a {FORMAT} manifest")
    _consistent(_validated(m, "manifest", where), where)
    real_root = os.path.realpath(root)

    def program(name: str) -> SpatialProgram:
        file = root / name
        if os.path.commonpath([real_root, os.path.realpath(file)]) != real_root:  # a link that leads out
            raise BundleError(f"{where}: the program {name[:60]!r} leads out of the bundle through a symbolic link")
        data = _validated(_read_json(file), "program", file)
        try:
            return SpatialProgram.from_json(data)
        except ValueError as e:  # what the schema cannot say: a placement naming an op or a tensor it does not hold
            raise BundleError(f"{file}: not a streamed program: {str(e)[:160]}") from None

    try:
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
        target = SpatialTarget(**m["target_spec"])
        if target_problem(target) is not None:
            raise BundleError(f"{where}: not a {FORMAT} manifest: its target's {target_problem(target)}")
        deployment = Deployment(m["mode"], ctx=m["ctx"], chunk=m["chunk"] or 0, batch=m["batch"], tp=m["tp"])
        refusal = deployment.refusal()
        if refusal is not None:
            raise BundleError(f"{where}: not a {FORMAT} manifest: its deployment is {refusal}")
        return StreamedModel(
            embed=embed, kinds=tuple(kinds), head=program(m["programs"]["head"]), layers=tuple(layers),
            residency=m["residency"], estimate=m["estimate"], deployment=deployment, target=target,
            title=m.get("title"), embed_identity=m["identities"]["embed"], head_identity=m["identities"]["head"],
            naming=naming, document_sha256=m["document"]["sha256"],
            statements={name: tuple(sts) for name, sts in m.get("statements", {}).items()})
    except (KeyError, TypeError, ValueError) as e:  # what the schemas leave open, said rather than raised
        raise BundleError(f"{where}: malformed bundle ({type(e).__name__}: {str(e)[:120]})") from None


def _ref(tensor: str, part: dict) -> TensorRef:
    columns, rows = part.get("columns"), part.get("rows")
    return TensorRef(tensor, tuple(columns) if columns else None, tuple(rows) if rows else None)


def schema(name: str = "manifest") -> dict:
    """The JSON Schema shipped with the package: ``manifest`` or ``program``."""
    return json.loads(resources.files("streamed.spatial").joinpath("schema", f"{name}.schema.json").read_text("utf-8"))
