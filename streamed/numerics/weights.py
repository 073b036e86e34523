"""The numbers a document's programs read: its declared weights (from a GGUF checkpoint through the document's
``## Checkpoint`` bindings, or from a seeded generator) and its host tables.

Invariants:
- ``Weights[name]`` is every declared weight of every program, keyed by name, in the DECLARED shape — the
  language's ``in by out`` for a product — read where it is: a checkpoint's float32 and float16 tensors are views of
  the memory-mapped file (transposed into product orientation by strides, never copied), its Q8_0 tensors in
  product orientation are ``q8.Planes`` over the file's own blocks, its other quantised matrices ``blocks.Blocks``
  over theirs (a product dequantises a band of columns at a time), a table it stores quantised is a ``Rows`` that
  dequantises only the rows looked up. Only a quantised vector or a sliced table is dequantised whole.
  A weight two programs declare by one name (``Emb``) is one value.
- ``Weights.dense[name]`` is that weight as float32, made when asked (tests, comparisons); ``Weights.planes`` the
  Q8_0 ones. A product reads the stored numbers themselves (``product``), and the product of Q8_0 planes is the
  product of their exact dequantisation — so the reference and the bundle read the same stored numbers, never a
  re-quantisation.
- Seeded weights are a pure function of (seed, tensor name, shape): deterministic per NAME, so a weight shared by
  name is the same wherever it is read, and scaled so hidden states stay O(1) through many layers. A seeded matrix
  is laid out with unit stride along its input axis, as a checkpoint's is, so a product reads it in place.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import blocks, q8 as q8mod
from ..analysis.kinds import stored_q8
from ..lang.syntax import Call, Binary
from ..model.checkpoint import ALL_Q8, Storage, TensorRef, bind
from ..model.program import Decl, Programs
from .kernels import fill_table
from .product import EXACT, Arithmetic


class WeightError(Exception):
    """A weight that cannot be read: which one and why (``name``, ``why``). The CLI prints it; nothing else catches it."""

    def __init__(self, name: str, why: str):
        super().__init__(f"`{name}`: {why}")
        self.name = name
        self.why = why


class Rows:
    """A table the checkpoint stores quantised, read in stored orientation (an embedding): its rows dequantised
    when looked up (``take_rows``), never the whole table. ``data`` is the GGUF tensor's mapped bytes."""

    def __init__(self, data: np.ndarray, qtype, shape: tuple[int, ...]):
        self.data, self.qtype, self.shape = data, qtype, shape
        self.ndim = len(shape)

    def take_rows(self, ids: np.ndarray) -> np.ndarray:
        return _dequantize(self.data[np.asarray(ids, dtype=np.int64)], self.qtype)

    def dense(self) -> np.ndarray:
        return _dequantize(self.data, self.qtype)

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        d = self.dense()
        return d if dtype is None else d.astype(dtype)


def _dequantize(raw: np.ndarray, qtype) -> np.ndarray:
    """A quantised tensor's bytes as float32, exactly (``blocks.dequantize_rows``; Q8_0 by ``q8``)."""
    if qtype.name == "Q8_0":
        return q8mod.dequantize_blocks(*q8mod.from_bytes(raw))
    return blocks.dequantize_rows(raw, qtype.name)


def as_float32(value) -> np.ndarray:
    """A weight's value as float32 in its declared shape (a copy unless it is float32 already)."""
    if isinstance(value, (q8mod.Planes, blocks.Blocks, Rows)):
        return value.dense()
    return np.asarray(value, dtype=np.float32)


class _Dense(Mapping):
    """``Weights.dense``: every weight as float32, each made when read."""

    def __init__(self, values: dict):
        self.values = values

    def __getitem__(self, name: str) -> np.ndarray:
        return as_float32(self.values[name])

    def __iter__(self):
        return iter(self.values)

    def __len__(self) -> int:
        return len(self.values)


@dataclass
class Weights:
    values: dict[str, object]
    source: str = ""
    storage: Storage = ALL_Q8

    def __getitem__(self, name: str):
        return self.values[name]

    def __contains__(self, name: str) -> bool:
        return name in self.values

    @property
    def dense(self) -> Mapping[str, np.ndarray]:
        return _Dense(self.values)

    @property
    def planes(self) -> dict[str, q8mod.Planes]:
        return {n: v for n, v in self.values.items() if isinstance(v, q8mod.Planes)}


def declared_weights(programs: Programs) -> dict[str, Decl]:
    """Every weight any program declares, by name; one name declared with two shapes is an error."""
    out: dict[str, Decl] = {}
    for p in programs.all():
        for d in p.weights():
            if d.name in out and out[d.name].shape != d.shape:
                raise WeightError(d.name, f"declared {out[d.name].shape} in one program and {d.shape} in {p.label}")
            out.setdefault(d.name, d)
    return out


def read_as_q8(programs: Programs, storage: Storage = ALL_Q8) -> frozenset[str]:
    """The weights some program reads as stored Q8_0 (declared ``q8``, stored Q8_0, whole blocks)."""
    out: set[str] = set()
    for p in programs.all():
        out |= stored_q8(programs, p, storage)
    return frozenset(out)


def concrete(shape: tuple, rows: int | None = None, ctx: int | None = None) -> tuple[int, ...]:
    """A declared shape with the deployment words bound."""
    bound = {"rows": rows, "ctx": ctx}
    out = []
    for d in shape:
        if isinstance(d, str):
            if bound.get(d) is None:
                raise WeightError(d, f"the deployment does not bind `{d}`")
            out.append(int(bound[d]))
        else:
            out.append(int(d))
    return tuple(out)


# ---- seeded --------------------------------------------------------------------------------------------------------


def _uses(programs: Programs) -> dict[str, set[str]]:
    """How each name is used where its scale matters: ``lookup`` (an embedding), ``gain`` (an RMS-norm or layer-norm
    gain; with ``offset O`` recorded as ``gain+O``)."""
    uses: dict[str, set[str]] = {}

    def walk(e, constants):
        if isinstance(e, Binary):
            walk(e.left, constants)
            walk(e.right, constants)
        elif isinstance(e, Call):
            if e.op in ("row", "rows") and getattr(e.arg("E"), "text", None):
                uses.setdefault(e.arg("E").text, set()).add("lookup")
            if e.op == "rmsnorm" and getattr(e.arg("G"), "text", None):
                o = e.number("O")
                off = 0.0 if o is None else (o.value if hasattr(o, "value") else constants.get(o.text, 0.0))
                uses.setdefault(e.arg("G").text, set()).add(f"gain+{off}")
            if e.op == "layernorm" and getattr(e.arg("G"), "text", None):
                uses.setdefault(e.arg("G").text, set()).add("gain+0.0")
            for _, a in e.args:
                walk(a, constants)

    for p in programs.all():
        for st in p.statements:
            v = getattr(st, "value", None)
            if v is not None:
                walk(v, programs.constants)
    return uses


def _rng(seed: int, name: str) -> np.random.Generator:
    h = int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "little")
    return np.random.default_rng([seed, h])


def seeded_array(seed: int, name: str, shape: tuple[int, ...], use: set[str] = frozenset()) -> np.ndarray:
    """One seeded weight: an embedding ``N(0,1)``; an RMS-norm gain ``1 − O + 0.1·N`` (so ``G + O ≈ 1``); any other
    vector ``0.1·N``; a matrix (or a stack of them) ``N / √in`` so a product keeps the variance of its input."""
    z = _rng(seed, name).standard_normal(shape)
    gains = [u for u in use if u.startswith("gain+")]
    if "lookup" in use:
        w = z
    elif gains:
        w = 1.0 - float(gains[0][5:]) + 0.1 * z
    elif len(shape) == 1:
        w = 0.1 * z
    else:
        w = z / np.sqrt(shape[-2])
    return w.astype(np.float32)


def seeded(programs: Programs, seed: int = 0, storage: Storage = ALL_Q8, only: frozenset[str] | None = None) -> Weights:
    """Seeded weights for every declared weight (those named in ``only``, when given: a layer range's, each the
    same as in the whole model's); those read as stored Q8_0 are quantised once (as GGUF would store them) and kept
    as their planes."""
    uses = _uses(programs)
    q8_names = read_as_q8(programs, storage)
    values: dict[str, object] = {}
    for name, d in declared_weights(programs).items():
        if only is not None and name not in only:
            continue
        shape = concrete(d.shape)
        w = seeded_array(seed, name, shape, uses.get(name, set()))
        if name in q8_names and len(shape) >= 2 and shape[-2] % q8mod.BLOCK == 0:
            values[name] = q8mod.quantize_weight(w)
        elif len(shape) >= 2 and "lookup" not in uses.get(name, set()):
            values[name] = np.swapaxes(np.ascontiguousarray(np.swapaxes(w, -1, -2)), -1, -2)  # as a checkpoint lays it
        else:
            values[name] = w
    return Weights(values, f"random weights from seed {seed}", storage)


# ---- host tables ---------------------------------------------------------------------------------------------------


def tables(programs: Programs, ctx: int, arithmetic: Arithmetic = EXACT,
           context: int | None = None) -> dict[str, np.ndarray]:
    """Every host table the programs declare, filled as declared (§4), its ``ctx`` bound, in ``arithmetic``, for a
    model run at ``context`` positions (default ``ctx``; ``model.context.longrope_factors``)."""
    out: dict[str, np.ndarray] = {}
    for p in programs.all():
        for d in p.decls.values():
            if d.role != "table" or d.name in out:
                continue
            if d.fill is None:
                raise WeightError(d.name, "a table must say how it is filled (`cosines of base 10000`)")
            rows, width = concrete(d.shape, ctx=ctx)
            out[d.name] = fill_table(d.fill, rows, width, arithmetic, context)
    return out


# ---- GGUF ----------------------------------------------------------------------------------------------------------


def _columns(n: int, cols: tuple[int, int, int | None]):
    """The kept output columns: a ``slice`` for one range (a view of the stored tensor), else an index array."""
    a, b, every = cols
    if every is None:
        return slice(a, b)
    return np.concatenate([g * every + np.arange(a, b) for g in range(n // every)])


def _kept(n: int, cols) -> int:
    return len(range(n)[cols]) if isinstance(cols, slice) else len(cols)


def _orient(name: str, ref: TensorRef, logical: tuple[int, ...], declared: tuple[int, ...],
            lookup: bool = False) -> tuple[bool, object]:
    """Whether the tensor of numpy shape ``logical`` binds in product orientation (numpy's last two axes swapped:
    GGUF ``ne = [in, out]`` read ``in by out``) or stored orientation, and the kept output columns. Where both fit
    (a square tensor) a weight the programs look rows up in (an embedding) binds as stored, any other in product
    orientation (§6)."""
    for product in ((False, True) if lookup else (True, False)):
        shape = list(logical)
        if product and len(shape) >= 2:
            shape[-1], shape[-2] = shape[-2], shape[-1]
        elif product:
            continue
        cols = None
        if ref.columns is not None:
            if ref.columns[1] > shape[-1] or (ref.columns[2] and shape[-1] % ref.columns[2]):
                continue
            cols = _columns(shape[-1], ref.columns)
            shape[-1] = _kept(shape[-1], cols)
        if ref.rows is not None:
            if len(shape) < 2 or ref.rows[1] > shape[-2]:
                continue
            shape[-2] = ref.rows[1] - ref.rows[0]
        if tuple(shape) == declared:
            return product, cols
    raise WeightError(name, f"declared {'×'.join(map(str, declared))} but \"{ref.tensor}\" is "
                            f"{'×'.join(map(str, reversed(logical)))} in GGUF order (ne)"
                            + ("" if ref.columns is None and ref.rows is None else " before its slice"))


def gguf_storage(path: str | Path) -> Storage:
    """How a GGUF checkpoint stores each tensor (``Q8_0``, ``F16``…) — ``streamed.model.gguf.read_storage``, which
    refuses a file that is not GGUF or is truncated with a ``CheckpointError`` naming it."""
    from ..model.gguf import read_storage

    return read_storage(path)


def _tensors(path: str | Path, parsed=None) -> dict:
    """The checkpoint's tensors by name; their ``data`` are views of the file, memory-mapped read-only — of
    ``parsed``'s mapping (a ``model.gguf.Mapped`` of ``path``) when the caller has one, else of a new one."""
    from ..model.gguf import mapped

    return {t.name: t for t in (parsed if parsed is not None else mapped(path)).reader.tensors}


def _logical(t) -> tuple[int, ...]:
    """A tensor's numpy shape in values (a Q8_0 tensor's bytes hold 32 values per 34)."""
    from gguf import GGMLQuantizationType

    shape = tuple(int(n) for n in t.data.shape)
    if t.tensor_type == GGMLQuantizationType.Q8_0:
        return (*shape[:-1], shape[-1] // q8mod.BLOCK_BYTES * q8mod.BLOCK)
    return tuple(int(n) for n in reversed(t.shape)) if t.data.dtype == np.uint8 else shape


def _read(tensors: dict, name: str, ref: TensorRef, declared: tuple[int, ...], lookup: bool = False):
    """The declared weight ``name`` read from checkpoint tensor ``ref``, oriented and sliced as §6 says (``lookup``: a
    weight the programs look rows up in, which binds as stored when both orientations fit) — where it is: a view of
    the mapped file for float32 and float16, ``q8.Planes`` over the file's blocks for Q8_0 in product orientation,
    ``blocks.Blocks`` over them for any other quantisation in product orientation, ``Rows`` for a quantised table
    read as stored; what is left (a quantised vector, a sliced table) dequantised. A type this does not read
    (``blocks.unread``) is refused, naming the tensor and its type."""
    from gguf import GGMLQuantizationType

    t = tensors.get(ref.tensor)
    if t is None:
        raise WeightError(name, f"the checkpoint has no tensor \"{ref.tensor}\"")
    # GGML's tensors have four dimensions and a file lists ``ne`` only up to the last that is not 1: a stored ``[d]``
    # is ``[d, 1]`` (llama.cpp's loader takes either for a shared expert's gate). A tensor of fewer dimensions than
    # its declaration is read with the missing trailing ``ne`` of 1 — numpy's leading axes (a view, as every read).
    why = blocks.unread(t.tensor_type.name)
    if why is not None:
        raise WeightError(name, f"\"{ref.tensor}\" is {why}")
    pad = (1,) * max(0, len(declared) - len(t.shape))
    # A plain view of the mapping (it keeps the mapping alive): ``np.memmap``'s slicing runs Python hooks, thousands a
    # decode step at real size, for nothing a read-only weight needs.
    stored = t.data.view(np.ndarray)
    data = stored.reshape(pad + stored.shape)
    product, cols = _orient(name, ref, pad + _logical(t), declared, lookup)
    if t.tensor_type == GGMLQuantizationType.Q8_0 and product:
        return q8mod.Planes(data).select(ref.rows, cols)
    if t.tensor_type.name in blocks.TYPES and product:
        return blocks.Blocks(data.view(np.uint8), t.tensor_type.name).select(ref.rows, cols)
    if t.tensor_type in (GGMLQuantizationType.F32, GGMLQuantizationType.F16):
        full = data
    elif not product and ref.rows is None and cols is None and len(declared) == 2 and not pad:
        return Rows(stored, t.tensor_type, declared)
    else:
        full = _dequantize(data, t.tensor_type)
    if product and full.ndim >= 2:
        full = np.swapaxes(full, -1, -2)
    if ref.rows is not None:
        full = full[..., ref.rows[0]:ref.rows[1], :]
    if cols is not None:
        full = full[..., cols]
    return full


def from_gguf(path: str | Path, programs: Programs, storage: Storage | None = None,
              only: frozenset[str] | None = None, parsed=None) -> Weights:
    """Every declared weight read from a GGUF checkpoint through the document's bindings, oriented and sliced as §6
    says, where it is in the mapped file (``_read``) — or only those named in ``only`` (a layer range's: the rest of
    the file is mapped but never touched, so its pages are never read in). ``parsed``: the file already parsed and
    mapped (``model.gguf.mapped(path)``, which the storage was read from): its mapping is read, not a new one."""
    storage = storage or gguf_storage(path)
    tensors = _tensors(path, parsed)
    uses = _uses(programs)
    entries = programs.document.checkpoint
    values: dict[str, object] = {}
    for name, d in declared_weights(programs).items():
        if only is not None and name not in only:
            continue
        ref = bind(entries, name)
        if ref is None:
            raise WeightError(name, "no `## Checkpoint` entry binds it")
        values[name] = _read(tensors, name, ref, concrete(d.shape), "lookup" in uses.get(name, ()))
    return Weights(values, f"checkpoint {storage.source}", storage)


def from_bundle(model, path: str | Path) -> Weights:
    """Every weight a bundle's programs read, at every layer, from a GGUF checkpoint through the names its manifest
    records — without the document: the embed's and the head's by their own names, each layer's by the names its
    row gives its kind's weights (``Wq17``), each read from the checkpoint tensor the manifest names for it, in the
    declared shape the manifest gives its kind, where it is in the mapped file. A weight the bundle reads as Q8_0
    planes must be stored Q8_0. What a runtime loading the bundle does; ``model`` is a ``StreamedModel``
    (``spatial.bundle.read_bundle``)."""
    from ..spatial.manifests import weight_reads  # a bundle's: a reference run imports no lowering

    storage = gguf_storage(path)
    tensors = _tensors(path)
    naming = model.naming
    kinds = {k.name: k.program for k in model.kinds}
    bound = [(p, {}) for p in (model.embed, model.head) if p is not None]
    # A square embedding binds as stored (§6): the weights some program looks rows up in, in the program's names.
    looked_up = {(id(p), o.inputs[1]) for p in (model.embed, model.head, *kinds.values()) if p is not None
                 for o in p.ops if o.kind == "lookup"}
    bound += [(kinds[b.kind], b.tensors) for b in model.layers]
    columns: dict[int, list[dict]] = {}
    values: dict[str, object] = {}
    for program, names in bound:
        for w in columns.setdefault(id(program), weight_reads(program)):
            name = names.get(w["name"], w["name"])
            if name in values:
                continue
            lookup = (id(program), w["name"]) in looked_up
            values[name] = _read(tensors, name, naming.ref(name), tuple(w["shape"]), lookup)
            if any(r["encoding"] == "planes" for r in w["reads"]) and not isinstance(values[name], q8mod.Planes):
                raise WeightError(name, f"the bundle reads it as Q8_0 planes but \"{naming.ref(name).tensor}\" is "
                                        f"stored {storage.types.get(naming.ref(name).tensor, 'otherwise')}")
    return Weights(values, f"checkpoint {storage.source}", storage)
