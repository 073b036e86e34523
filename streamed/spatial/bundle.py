"""A bundle on disk: ``manifest.json`` and one JSON file per program, written atomically.

Layout::

    DIR/manifest.json          the manifest (schema: streamed/spatial/schema/manifest.schema.json)
    DIR/programs/embed.json    one SpatialProgram each (schema: streamed/spatial/schema/program.schema.json)
    DIR/programs/layer-0.json  a layer kind's program, named after its representative
    DIR/programs/head.json

The manifest (``streamed-bundle/2``) is what a runtime loads without the document: the step's programs in order;
each program's weights — every declared weight, its declared shape and the tensors a chip loads it as (Q8_0 planes
and scales, each tensor-parallel chip's slice) — its carried states (each with its shape, and whether it is a windowed
cache's ring, written at ``pos mod`` its rows: LANGUAGE §8) and its tables (with their fill rules); and, one
row per layer, that layer's own names for its kind's weights and states, the checkpoint tensor each weight reads
and how it is stored. Per-layer data is a table — a kind's columns are written once, a layer is a row of names — so
the manifest grows by one short row per layer, whatever the deployment.

What holds, and why:

* **Nothing is lost.** An existing ``DIR`` is replaced only when everything in it is what its manifest's record
  proves a lowering wrote: the manifest lists every file it wrote (``files``; an older bundle is read by its layout)
  and records each program's SHA-256 (``digests``), and a file, folder or link it does not list — notes, a ``.git``
  — or lists but cannot prove (not a streamed program, or not the one whose digest it records) makes the write
  refuse, naming the first such entry. An empty folder is taken; a file is never. A bundle folder that may not be
  read or changed is refused before anything moves (a read-only one would be moved aside and never removed).
* **Whole or not at all.** The bundle is written into ``.DIR.<pid>.tmp`` beside ``DIR`` and renamed into place
  (replacing renames the old one to ``.DIR.<pid>.old`` first, and removes it after); any failure, an exception or a
  signal the caller turns into one, removes the temporary and puts the old bundle back. ``uninterrupted`` is the
  context the two renames run in: the command line defers its stop signals there, so a bundle is either installed
  and said to be, or not installed.
* **One writer at a time, nothing left behind.** Writers of bundles in one folder take turns on a lock of that folder
  (``flock``, released by the kernel when a writer dies). Holding it, a writer knows every ``.DIR.*.tmp`` and
  ``.DIR.*.old`` beside ``DIR`` is a dead writer's: it removes them — and if a writer was killed between its two
  renames, so that ``DIR`` is missing and its ``.old`` is the previous bundle, it puts that back first.
* **Strict JSON, read as untrusted.** Files are written with ``allow_nan=False``; the reader reads only regular
  files of at most ``MAX_BUNDLE_FILE_BYTES``, refuses nesting past ``MAX_JSON_DEPTH``, validates the manifest and
  every program against the shipped JSON Schemas before using them, checks that the manifest agrees with itself, and
  refuses any program path — or a manifest — that leaves the bundle.
* **The manifest cannot lie** (``_agrees_with_its_programs``): everything it says that its programs decide is
  derived again from them — each program placed and certified again, the residency plan and the estimate made
  again, the manifest written again — and must be what it says, value for value; the first difference is the
  refusal, named. ``document_problem`` holds a bundle to the document a command has: every weight reads the tensor
  the document binds.

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
from dataclasses import replace
from functools import lru_cache
from importlib import resources
from pathlib import Path, PurePosixPath

from ..lang.files import FileProblem, display, read_file
from ..lang.jsontext import JsonError, dumps, loads
from ..lang.limits import MAX_BUNDLE_FILE_BYTES, MAX_DIMENSION
from ..model.checkpoint import Naming, TensorRef
from .ir import PROGRAM_FORMAT, SpatialProgram, nbytes, op_to_json
from .target import SpatialTarget, target_problem
from .deployment import Deployment, size_problem
from .manifests import (  # noqa: F401 — manifest_text, weight_reads: read from here too
    FORMAT, manifest, manifest_text, program_files, program_text, sha256, weight_reads,
)
from .streamed_model import LayerBinding, LayerKindProgram, StreamedModel, tp_summary

#: Bundles an older streamed wrote: replaced by a new bundle like any bundle, but not read (lower them again).
OLDER_FORMATS = ("streamed-bundle/1",)

#: How long a writer waits while another writing beside the same folder changes nothing in it before it gives up (a
#: bundle takes well under a second to write; a writer that holds the lock longer is stuck).
LOCK_WAIT_SECONDS = 60.0


class BundleError(Exception):
    """A bundle that cannot be written or read: which path, and why."""


# ---- writing ----------------------------------------------------------------------------------------------------


def _destination(out_dir: str | Path) -> Path:
    """The folder to write: ``out_dir``, or where it leads when it is a symbolic link (the link is kept and what it
    points to is written, as writing through a link does), after the checks that need no file system lock."""
    if not str(out_dir):
        raise BundleError("an empty output path: name the bundle directory, such as model.bundle")
    shown = display(out_dir)
    try:
        out = Path(out_dir)
        if out.is_symlink():
            out = Path(os.path.realpath(out))
        here = Path.cwd()
        if Path(os.path.abspath(out)) in (here, *here.parents):
            # Replacing a bundle renames it aside: the directory a shell stands in cannot be renamed.
            raise BundleError(f"{shown}: is the current directory"
                              f"{' or above it' if Path(os.path.abspath(out)) != here else ''}; name a new directory "
                              f"for the bundle, such as {display(here.name) or 'model'}.bundle")
        parent = out.parent if str(out.parent) else Path(".")
        above = next((p for p in (parent, *parent.parents) if p.exists()), None)
        if above is not None and not above.is_dir():
            raise BundleError(f"{shown}: cannot be written: {display(above)} is a file, not a directory")
        if out.exists() and not out.is_dir():
            raise BundleError(f"{shown}: exists and is not a directory")
    except OSError as e:  # a folder on the way that may not be looked into
        raise BundleError(f"{shown}: cannot be written ({e.strerror}: {display(e.filename)})") from None
    return out


def _read_only(out: Path) -> Path | None:
    """The first folder of the bundle ``out`` that this process may not change (``out`` itself, ``programs/``):
    replacing the bundle would move it aside and then fail to remove it, leaving ``.DIR.<pid>.old`` behind."""
    for folder in (out, out / "programs"):
        if folder.is_dir() and not folder.is_symlink() and not os.access(folder, os.W_OK | os.X_OK):
            return folder
    return None


def _remove(path: Path) -> None:
    """Remove a folder this process wrote or is replacing, whole — a folder in it made read-only (``chmod -w``) is
    made writable first, so nothing is left behind."""
    shutil.rmtree(path, ignore_errors=True)
    if os.path.lexists(path) and not path.is_symlink():
        for folder, dirs, _ in os.walk(path):
            for d in (folder, *(os.path.join(folder, x) for x in dirs)):
                with contextlib.suppress(OSError):
                    os.chmod(d, 0o700)
        shutil.rmtree(path, ignore_errors=True)


@contextlib.contextmanager
def _folder_lock(parent: Path, shown: str):
    """Hold the lock of the folder bundles are written in: writers take turns, and the kernel releases a dead
    writer's lock. A writer gives up with a ``BundleError`` when the folder has not changed for ``LOCK_WAIT_SECONDS``
    while it waited: the writer holding the lock is stuck. Writers that finish in turn change the folder (each
    renames its bundle into it), so a writer queued behind many others that all progress keeps waiting: flock is not
    fair, and a loaded machine must not turn a long queue into a failed write."""
    fd = os.open(parent, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        deadline, seen = time.monotonic() + LOCK_WAIT_SECONDS, os.fstat(fd).st_mtime_ns
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                changed = os.fstat(fd).st_mtime_ns
                if changed != seen:
                    deadline, seen = time.monotonic() + LOCK_WAIT_SECONDS, changed
                elif time.monotonic() > deadline:
                    raise BundleError(f"{shown}: another lowering has held {parent} for "
                                      f"{LOCK_WAIT_SECONDS:.0f} s without writing anything; try again when it is "
                                      "done") from None
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
            _remove(path)


def _written_by_a_lowering(out: Path) -> set[str]:
    """The files of ``out`` a lowering provably wrote: its ``manifest.json`` — a regular file, not a link, a streamed
    manifest recording its programs' SHA-256 (``digests``; one of the current format as the shipped schema takes
    it, one an older streamed wrote — which ``read_bundle`` refuses to read — by its digests alone) — and each
    file it records a digest of that is a streamed program whose SHA-256 is the one recorded. Nothing else is
    proven: a file a hand-written manifest lists (``notes.json``, even one that says ``"format":
    "streamed-program/1"``), a program edited since, every file of a manifest that records no digests (a
    hand-written one, or one written before manifests recorded them) is not the manifest's to give away. Empty when
    the manifest proves nothing. ★ The format tag alone was taken as proof, and ``lower -o`` deleted a user's
    ``notes.json`` that carried it."""
    where = out / "manifest.json"
    if where.is_symlink():
        return set()
    try:
        m = loads(read_file(where, MAX_BUNDLE_FILE_BYTES, "a manifest"))
    except (FileProblem, JsonError):
        return set()
    if not isinstance(m, dict) or m.get("format") not in (FORMAT, *OLDER_FORMATS) or \
            not isinstance(m.get("digests"), dict) or (m["format"] == FORMAT and not _validator("manifest").is_valid(m)):
        return set()
    digests = m["digests"]  # what proves a file is its digest: a file ``files`` lists without one is not proven
    proven = {"manifest.json"}
    for f in digests:
        if f == "manifest.json" or not _inside_bundle(f) or (out / f).is_symlink():
            continue
        try:
            data = read_file(out / f, MAX_BUNDLE_FILE_BYTES, "a program")
            program = loads(data)
        except (FileProblem, JsonError):
            continue
        if isinstance(program, dict) and program.get("format") == PROGRAM_FORMAT and digests[f] == sha256(data):
            proven.add(f)
    return proven


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
    try:
        if not out.is_dir():
            return
        foreign = _first_foreign(out)
        locked = _read_only(out)
    except OSError as e:  # a bundle folder (or its programs/) that may not be read
        raise BundleError(f"{shown}: cannot be replaced: {display(e.filename)} cannot be read ({e.strerror})") from None
    if foreign is not None:
        raise BundleError(f"{shown}: holds {display(foreign)}, which no lowering wrote; lower into another folder, or "
                          f"move it out first")
    if locked is not None:
        raise BundleError(f"{shown}: cannot be replaced: {display(locked)} is read-only; make it writable (chmod u+w) "
                          f"or lower into another folder")


def write_bundle(model: StreamedModel, out_dir: str | Path, source: str | None = None, *,
                 uninterrupted=contextlib.nullcontext) -> Path:
    """Write ``model`` to ``out_dir`` atomically; returns the manifest's path. ``uninterrupted()`` is the context the
    renames that install it run in (the command line defers its stop signals there)."""
    out = _destination(out_dir)
    parent = out.parent if str(out.parent) else Path(".")
    shown = display(out_dir)
    with contextlib.ExitStack() as held:
        try:
            parent.mkdir(parents=True, exist_ok=True)
            held.enter_context(_folder_lock(parent, shown))
            _recover(parent, out)
        except OSError as e:
            raise BundleError(f"{shown}: cannot be written ({e.strerror}: {display(e.filename)})") from None
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
        for program, name in program_files(model):
            (tmp / name).write_text(program_text(program), "utf-8")
        (tmp / "manifest.json").write_text(manifest_text(manifest(model, source)), "utf-8")
    except BaseException as e:
        _remove(tmp)
        if isinstance(e, OSError):
            raise BundleError(f"{shown}: cannot be written ({e.strerror})") from None
        if isinstance(e, ValueError) and not isinstance(e, UnicodeError):  # allow_nan=False: a NaN or an infinity
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
        _remove(tmp)
        if old is not None and not out.exists():
            os.rename(old, out)
        if isinstance(e, OSError):
            raise BundleError(f"{shown}: cannot be written ({e.strerror})") from None
        raise
    if old is not None:
        _remove(old)


# ---- reading ----------------------------------------------------------------------------------------------------


def _inside_bundle(name: str) -> bool:
    """Whether ``name`` is a relative path that stays inside the bundle (no root, no drive, no ``..``, no ``\\``)."""
    p = PurePosixPath(name)
    return bool(name) and not p.is_absolute() and ".." not in p.parts and "\\" not in name and ":" not in name


def _read_json(path: Path, what: str):
    """The JSON value of the bundle file ``path`` — a regular file, its size checked before it is read."""
    try:
        return loads(read_file(path, MAX_BUNDLE_FILE_BYTES, what))
    except FileProblem as e:
        raise BundleError(str(e)) from None
    except JsonError as e:
        raise BundleError(f"{display(path)}: {e}") from None


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
    _states_are_each_layers_own(m, kinds, bad)
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


#: A name of the language (``lang.lexer``'s words), as every name a lowering writes is: an authored binder, and the
#: suffix a deployment adds (``_s1``).
_NAME = re.compile(r"[A-Za-z0-9_]{1,200}")


def _states_are_each_layers_own(m: dict, kinds: dict, bad) -> None:
    """Every state a layer carries is its own, named as a lowering names one: a name of the language, carried by no
    other layer and read as no weight; and a kind's representative carries the states its kind's program names. ★
    A manifest whose layer 2 named layer 1's caches ran with layer 2 reading them (logits 1.69 away), and one
    naming a state ``/etc/passwd`` was certified. Which name the document gives a layer's state is held by
    ``document_problem``, for the commands that have the document."""
    weights = {n for row in m["layers"] for n in row["weights"]}
    carried: dict[str, int] = {}
    for row in m["layers"]:
        kind, layer = kinds[row["kind"]], row["layer"]
        for n in row["states"]:
            if not isinstance(n, str) or not _NAME.fullmatch(n):
                raise bad(f"layer {layer} carries a state named {_brief(n)}, not a name a lowering writes (letters, "
                          f"digits and _)")
            if n in carried:
                raise bad(f"layers {carried[n]} and {layer} both carry the state `{n[:40]}`; each layer carries its "
                          f"own")
            if n in weights:
                raise bad(f"layer {layer} carries the state `{n[:40]}`, which a layer reads as a weight")
            carried[n] = layer
        own = [s["name"] for s in kind["states"]]
        if layer == kind["representative"] and row["states"] != own:
            raise bad(f"layer {layer}, kind `{kind['name'][:40]}`'s representative, carries the states "
                      f"{_brief(row['states'])}, but its kind's program names them {_brief(own)}")


def read_bundle(directory: str | Path) -> StreamedModel:
    """The model a bundle directory holds (the inverse of ``write_bundle``), with every layer bound by its row of
    the manifest's table and every weight named by the checkpoint tensor the manifest records — after the manifest
    and every program are validated against their schemas and the manifest against itself, each program read from
    inside the bundle; ``BundleError`` naming the file and the first thing wrong otherwise."""
    root = Path(directory)
    where = root / "manifest.json"
    real_root = os.path.realpath(root)
    inside = lambda file: os.path.commonpath([real_root, os.path.realpath(file)]) == real_root  # noqa: E731
    if os.path.islink(where) and not inside(where):
        raise BundleError(f"{display(where)}: leads out of the bundle through a symbolic link; a bundle's manifest is "
                          f"inside it")
    m = _read_json(where, "a manifest")
    if isinstance(m, dict) and m.get("format") in OLDER_FORMATS:
        raise BundleError(f"{where}: a {m['format']} bundle, written by an older streamed; lower the document again")
    if not isinstance(m, dict) or m.get("format") != FORMAT:
        raise BundleError(f"{where}: not a {FORMAT} manifest")
    _consistent(_validated(m, "manifest", where), where)

    def program(name: str) -> SpatialProgram:
        file = root / name
        if not inside(file):  # a link that leads out
            raise BundleError(f"{where}: the program {name[:60]!r} leads out of the bundle through a symbolic link")
        data = _validated(_read_json(file, "a program"), "program", file)
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
            kinds.append(LayerKindProgram(k["name"], k["representative"], tuple(k["layers"]), p, tuple(p.carried),
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
        naming = Naming(m["checkpoint"]["naming"], m["checkpoint"]["file"], refs=refs,
                        assumed=m["checkpoint"].get("assumed"), recorded=m["checkpoint"].get("stored"))
        target = SpatialTarget(**m["target_spec"])
        if target_problem(target) is not None:
            raise BundleError(f"{where}: not a {FORMAT} manifest: its target's {target_problem(target)}")
        deployment = Deployment(m["mode"], ctx=m["ctx"], chunk=m["chunk"] or 0, batch=m["batch"], tp=m["tp"])
        refusal = deployment.refusal()
        if refusal is not None:
            raise BundleError(f"{where}: not a {FORMAT} manifest: its deployment is {refusal}")
        model = StreamedModel(
            embed=embed, kinds=tuple(kinds), head=program(m["programs"]["head"]), layers=tuple(layers),
            residency=m["residency"], estimate=m["estimate"], deployment=deployment, target=target,
            title=m.get("title"), embed_identity=m["identities"]["embed"], head_identity=m["identities"]["head"],
            naming=naming, document_sha256=m["document"]["sha256"], trained=m.get("trained"),
            statements=({name: tuple(sts) for name, sts in m["statements"].items()} if "statements" in m else None))
    except (KeyError, TypeError, ValueError) as e:  # what the schemas leave open, said rather than raised
        raise BundleError(f"{where}: malformed bundle ({type(e).__name__}: {str(e)[:120]})") from None
    _agrees_with_its_programs(model, m, root, where)
    return model


# ---- the manifest cannot lie ------------------------------------------------------------------------------------


def _agrees_with_its_programs(model: StreamedModel, m: dict, root: Path, where: Path) -> None:
    """★ THE MANIFEST CANNOT LIE. Everything it says that its programs decide is derived again from the programs
    and compared, and the first difference refuses the bundle, named: each program is placed and certified again
    on the manifest's target (its ops' figures and its certificate must be what ``place`` and ``certify`` give — so
    every op reads what the program holds or an earlier op wrote, every output is declared and written once, shapes
    agree op by op, tiles cover once, it fits); the residency plan and the estimate are made again over the
    programs (every weight's and state's tier, every byte count); and the manifest is written again from the model
    so read — every program's weights, states and tables with their shapes, dtypes and bytes, the tiles, the step,
    the files and their SHA-256 — and must be the manifest read, value for value. What no program decides (the
    checkpoint tensors' names, the document's name and digest, the identities, the statements behind the ops, the
    estimate at other sizes — ``estimate.sweep``, the document lowered again) is the manifest's own, except that a
    weight a program reads as Q8_0 planes and scales must be stored ``Q8_0``."""
    from .passes.certify import certify  # the passes, loaded with the first bundle read
    from .passes.errors import LoweringError
    from .passes.place import place
    from .residency import estimate, plan

    target = model.target
    files = {id(p): name for p, name in program_files(model)}
    for name, p in model.programs():
        file = display(root / files[id(p)])
        bad = lambda why: BundleError(f"{file}: not a program a lowering wrote: {why}")  # noqa: E731
        # Its sizes are the deployment's cut — checked first: the passes loop over its chips and rows.
        cut = model.deployment.cut(name if name in ("embed", "head") else "layer")
        if (diff := _difference({"rows": p.rows, "ctx": p.ctx, "tp": p.tp},
                                {"rows": cut.rows, "ctx": cut.ctx, "tp": cut.tp})) is not None:
            raise bad(f"its `{diff[0]}` is {_brief(diff[1])}, but its bundle's {model.deployment.mode} deployment "
                      f"gives {_brief(diff[2])}")
        for t in p.tensors:
            if any(d > MAX_DIMENSION for d in t.shape):
                raise bad(f"`{t.name[:40]}` is {_brief(list(t.shape))}, a dimension past the limit of "
                          f"{MAX_DIMENSION:,}")
            if t.bytes != nbytes(t.shape, t.dtype):
                raise bad(f"`{t.name[:40]}` ({'×'.join(map(str, t.shape)) or 'a scalar'} {t.dtype}) is "
                          f"{nbytes(t.shape, t.dtype):,} bytes, not the {t.bytes:,} it says")
        held = {t.name for t in p.tensors}
        for i, op in enumerate(p.ops):
            missing = next((n for n in (*op.inputs, *op.outputs) if n not in held), None)
            if missing is not None:
                raise bad(f"op {i} (`{op.kind}`) {'reads' if missing in op.inputs else 'writes'} `{missing[:40]}`, "
                          f"which the program does not hold")
        # As certified: before the residency plan moved carried states out of SRAM and weights out of HBM.
        lowered_tier = {"state": "sram", "weight": "hbm"}
        as_lowered = replace(p, tensors=tuple(replace(t, tier=lowered_tier[t.role]) if t.role in lowered_tier else t
                                              for t in p.tensors))
        try:
            again = certify(place(as_lowered, target), target)
        except LoweringError as e:
            raise bad(str(e)) from None
        except Exception as e:  # noqa: BLE001 — an op the passes cannot read (a count of 0 heads…): not ours
            raise bad(f"{type(e).__name__}: {str(e)[:160]}") from None
        said = {"ops": [op_to_json(o) for o in p.ops], "certificate": p.certificate,
                "placement": _placement(p)}
        derived = {"ops": [op_to_json(o) for o in again.ops], "certificate": again.certificate,
                   "placement": _placement(again) if p.placement is not None else None}  # None: written before
        if (diff := _difference(said, derived)) is not None:
            raise bad(f"its {diff[0]} is {_brief(diff[1])}, but placing and certifying it gives {_brief(diff[2])}")
    entries = ([("embed", None, model.embed)] if model.embed is not None else []) + \
        [(k.name, list(k.layers), k.program) for k in model.kinds] + [("head", None, model.head)]
    index = {k.name: i + (model.embed is not None) for i, k in enumerate(model.kinds)}
    layer_kinds = [index[b.kind] for b in sorted(model.layers, key=lambda b: b.layer)]
    try:
        residency, placed, tiers = plan(entries, layer_kinds, target)
        est = estimate([(n, ls, p) for (n, ls, _), p in zip(entries, placed)], layer_kinds, tiers,
                       model.deployment.tokens_per_step, target)
    except Exception as e:  # noqa: BLE001 — states that fit no tier: the lowering would have refused them
        raise BundleError(f"{display(where)}: its programs do not fit its target: {str(e)[:200]}") from None
    for (_, _, p), q in zip(entries, placed):
        moved = next((t for t, u in zip(p.tensors, q.tensors) if t != u), None)
        if moved is not None:
            tier = q.tensor(moved.name).tier
            raise BundleError(f"{display(root / files[id(p)])}: `{moved.name[:40]}` is in {moved.tier.upper()}, but "
                              f"the residency plan of its bundle puts it in {tier.upper()}")
    if "sweep" in model.estimate:  # the document lowered at other sizes: no program of this bundle decides it
        est = {**est, "sweep": model.estimate["sweep"]}
    _identities_agree(m, model.deployment, where)
    derived = manifest(replace(model, residency=residency, estimate=est), m["document"]["name"])
    for field in ("digests", "statements"):  # written before manifests recorded them
        if field not in m:
            derived.pop(field)
    if (diff := _difference(m, derived)) is not None:
        raise BundleError(f"{display(where)}: the manifest contradicts its programs: `{diff[0]}` is {_brief(diff[1])} "
                          f"in the manifest, but its programs give {_brief(diff[2])}")
    _storage_agrees(m, where)


def _placement(p: SpatialProgram) -> dict | None:
    """A program's placement as its file records it (``None``: not placed)."""
    return None if p.placement is None else {"pcus": [list(e) for e in p.placement.pcus],
                                             "pmus": [list(e) for e in p.placement.pmus]}


def _identities_agree(m: dict, d: Deployment, where: Path) -> None:
    """Every identity names its program and the cut it was lowered at — the deployment's (its digest is of the text,
    which only the document can check) — and a kind's is its representative layer's."""
    def check(at: str, ident: dict | None, program: str, cut) -> None:
        want = {"program": program, "mode": d.mode, "rows": cut.rows, "ctx": cut.ctx, "batch": cut.batch, "tp": cut.tp}
        said = {k: v for k, v in (ident or {}).items() if k != "digest"}
        if ident is not None and (diff := _difference(said, want, at)) is not None:
            raise BundleError(f"{display(where)}: the manifest contradicts its deployment: `{diff[0]}` is "
                              f"{_brief(diff[1])}, but the {d.mode} deployment gives {_brief(diff[2])}")

    for name in ("embed", "head"):
        if m["programs"][name] is not None:
            check(f"identities.{name}", m["identities"][name], name, d.cut(name))
    rows = {row["layer"]: row for row in m["layers"]}
    for i, k in enumerate(m["kinds"]):
        check(f"kinds[{i}].identity", k["identity"], f"layer {k['representative']}", d.cut("layer"))
        if k["identity"] != rows[k["representative"]]["identity"]:
            raise BundleError(f"{display(where)}: the manifest contradicts itself: kind `{k['name'][:40]}`'s identity "
                              f"is not its representative layer {k['representative']}'s")
    for i, row in enumerate(m["layers"]):
        check(f"layers[{i}].identity", row["identity"], f"layer {row['layer']}", d.cut("layer"))


def document_problem(model: StreamedModel, analysis, storage) -> str | None:
    """Why ``model`` (a bundle read back) is not a lowering of the document ``analysis`` is of, or ``None``: the same
    kinds over the same layers, each layer declaring the weights its row names, and each weight reading the
    checkpoint tensor (and part) the document's ``## Checkpoint`` binds — stored as ``storage`` says, when the bundle
    was lowered against the same kind of source. What a runtime loads is then what the document reads."""
    from ..analysis.whole import layer_ranges

    theirs = [(k.name, tuple(k.layers)) for k in model.kinds]
    ours = [(k.name, tuple(k.layers)) for k in analysis.kinds]
    if theirs != ours:
        show = lambda ks: "; ".join(f"{n}: {layer_ranges(ls)}" for n, ls in ks) or "none"  # noqa: E731
        return f"its kinds are {show(theirs)}; the document's are {show(ours)}"
    programs = analysis.programs
    q8 = {n: t for p in programs.all() for n, t in p.assumed_storage(storage.assumed)}
    naming = Naming.of(analysis.document.checkpoint, storage, q8)
    compare_storage = model.naming is not None and model.naming.kind == naming.kind
    kinds = {k.name: k for k in model.kinds}
    for b in model.layers:
        declared = {d.name for d in programs.layer(b.layer).weights()}
        names = [b.tensors[w["name"]] for w in weight_reads(kinds[b.kind].program)]
        if set(names) != declared:
            odd = sorted(set(names) ^ declared)[0]
            return f"layer {b.layer} of the bundle {'reads' if odd in names else 'does not read'} `{odd[:40]}`"
        for n in names:
            if (why := _reads_as_bound(model.naming, naming, n, compare_storage, f"layer {b.layer}'s")) is not None:
                return why
    if (why := _states_problem(model, programs)) is not None:
        return why
    for name, program in (("the embed's", model.embed), ("the head's", model.head)):
        for w in (weight_reads(program) if program is not None else ()):
            if (why := _reads_as_bound(model.naming, naming, w["name"], compare_storage, name)) is not None:
                return why
    return _statements_problem(model, analysis)


def _states_problem(model: StreamedModel, programs) -> str | None:
    """Why a layer of ``model`` carries a state under another name than the lowering of the document gives it
    (``layer_namer``: the layer's own binder, and the deployment's suffix), or ``None``."""
    from .streamed_model import layer_namer

    kinds = {k.name: k for k in model.kinds}
    namers = {k.name: layer_namer(k.program, k.representative, programs.layer(k.representative).section.texts)
              for k in model.kinds}
    for b in model.layers:
        kind = kinds[b.kind]
        want = namers[b.kind](b.layer, programs.layer(b.layer).section.texts)
        for s in kind.program.carried:
            if b.tensors.get(s) != want.get(s):
                return (f"layer {b.layer} of the bundle carries the state `{str(b.tensors.get(s))[:40]}` where the "
                        f"document's layer {b.layer} carries `{str(want.get(s))[:40]}`")
    return None


def _statements_problem(model: StreamedModel, analysis) -> str | None:
    """Why the statements the bundle records behind its programs' ops (what its pictures say each region serves) are
    not the document's, or ``None``; a bundle written before they were recorded says none."""
    from .streamed_model import statements_of

    if model.statements is None:
        return None
    programs, data = analysis.programs, analysis.document.text.encode("utf-8")
    authored = {k.name: (programs.layer(k.representative), k.program) for k in model.kinds}
    if model.embed is not None:
        authored["embed"] = (programs.embed, model.embed)
    authored["head"] = (programs.head, model.head)
    for name, (source, lowered) in authored.items():
        said, want = tuple(model.statements.get(name, ())), statements_of(source, lowered, data)
        if said != want:
            first = next((i for i, (a, b) in enumerate(zip(said, want)) if a != b), min(len(said), len(want)))
            return (f"the statements it records behind {name}'s ops are not the document's (the "
                    f"{first + 1}{'st' if first == 0 else 'th'} differs)")
    return None


def _reads_as_bound(bundle: Naming, document: Naming, n: str, storage: bool, whose: str) -> str | None:
    """Why the weight ``n`` does not read, in the bundle, the tensor (and its part, and storage) the document binds."""
    said, ref = bundle.ref(n), document.ref(n)
    if (said.tensor, said.columns, said.rows) != (ref.tensor, ref.columns, ref.rows):
        return (f"{whose} `{n[:40]}` reads checkpoint tensor {_brief(said.tensor)} in the bundle, but the document "
                f"binds {_brief(ref.tensor)}" + (" (another part of it)" if said.tensor == ref.tensor else ""))
    if storage and bundle.stored(n) != document.stored(n, ref):
        return (f"{whose} `{n[:40]}` is stored {bundle.stored(n)[:20]} in the bundle, but "
                f"{document.stored(n, ref)} by the document's checkpoint")
    return None


def _storage_agrees(m: dict, where: Path) -> None:
    """A weight a program reads as Q8_0 planes and scales is stored ``Q8_0`` in every layer that binds it; and a
    weight stored ``Q8_0`` (at a kind's representative) that a program reads dense is one its ``read_dense`` names,
    as every weight it names is one it reads dense — so the manifest says every weight read otherwise than stored."""
    def folded(weights: list[dict]) -> set[int]:
        return {i for i, w in enumerate(weights) if any(r["encoding"] != "dense" for r in w["reads"])}

    def said_dense(at: str, program: dict, stored) -> None:
        named = {d["of"] for d in program.get("read_dense", ())}
        dense = {w["name"] for i, w in enumerate(program["weights"]) if i not in folded(program["weights"])}
        wrong = next((n for n in sorted(named - dense)), None)
        if wrong is not None:
            raise BundleError(f"{display(where)}: {at}'s read_dense names `{wrong[:40]}`, which it reads as Q8_0 "
                              f"planes and scales" if wrong in {w["name"] for w in program["weights"]} else
                              f"{display(where)}: {at}'s read_dense names `{wrong[:40]}`, which it does not read")
        unsaid = next((w["name"] for i, w in enumerate(program["weights"])
                       if w["name"] in dense - named and stored(i, w) == "Q8_0"), None)
        if unsaid is not None:
            raise BundleError(f"{display(where)}: {at} reads `{unsaid[:40]}` dense though it is stored Q8_0, and its "
                              f"read_dense does not say why")

    kinds = {k["name"]: k for k in m["kinds"]}
    rows = {row["layer"]: row for row in m["layers"]}
    for row in m["layers"]:
        for i in folded(kinds[row["kind"]]["weights"]):
            if row["storage"][i] != "Q8_0":
                raise BundleError(f"{display(where)}: layer {row['layer']} stores `{row['weights'][i][:40]}` as "
                                  f"{row['storage'][i][:20]}, but its program reads it as Q8_0 planes and scales")
    for k in m["kinds"]:
        rep = rows[k["representative"]]
        said_dense(f"kind `{k['name'][:40]}`", k, lambda i, w, rep=rep: rep["storage"][i])
    for name, shared in m["shared"].items():
        for i in folded((shared or {}).get("weights", [])):
            w = shared["weights"][i]
            if w["storage"] != "Q8_0":
                raise BundleError(f"{display(where)}: the {name} stores `{w['name'][:40]}` as {w['storage'][:20]}, but "
                                  f"its program reads it as Q8_0 planes and scales")
        if shared is not None:
            said_dense(f"the {name}", shared, lambda i, w: w["storage"])


def _difference(said, derived, at: str = "") -> tuple[str, object, object] | None:
    """The first place (``kinds[0].weights[1].shape``) where two JSON values differ, with each one's value there."""
    if isinstance(said, dict) and isinstance(derived, dict):
        for key in [*derived, *(k for k in said if k not in derived)]:
            where = f"{at}.{key}" if at else str(key)
            if key not in said or key not in derived:
                return where, said.get(key, _MISSING), derived.get(key, _MISSING)
            if (d := _difference(said[key], derived[key], where)) is not None:
                return d
        return None
    if isinstance(said, (list, tuple)) and isinstance(derived, (list, tuple)):  # a tuple is written as a list
        for i, (a, b) in enumerate(zip(said, derived)):
            if (d := _difference(a, b, f"{at}[{i}]")) is not None:
                return d
        if len(said) != len(derived):  # the first element one of them has and the other not
            i = min(len(said), len(derived))
            return f"{at}[{i}]", said[i] if i < len(said) else _MISSING, derived[i] if i < len(derived) else _MISSING
        return None
    numbers = (int, float)
    same_kind = type(said) is type(derived) or (isinstance(said, numbers) and isinstance(derived, numbers)
                                                 and not isinstance(said, bool) and not isinstance(derived, bool))
    return None if same_kind and said == derived else (at, said, derived)


class _Missing:
    def __repr__(self) -> str:
        return "missing"


_MISSING = _Missing()


def _brief(v) -> str:
    text = "missing" if v is _MISSING else dumps(v) if not isinstance(v, str) else json.dumps(v, ensure_ascii=False)
    return text if len(text) <= 80 else text[:79] + "…"


def _ref(tensor: str, part: dict) -> TensorRef:
    columns, rows = part.get("columns"), part.get("rows")
    return TensorRef(tensor, tuple(columns) if columns else None, tuple(rows) if rows else None)


def schema(name: str = "manifest") -> dict:
    """The JSON Schema shipped with the package: ``manifest`` or ``program``."""
    return json.loads(resources.files("streamed.spatial").joinpath("schema", f"{name}.schema.json").read_text("utf-8"))
