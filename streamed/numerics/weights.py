"""The numbers a document's programs read: its declared weights (from a GGUF checkpoint through the document's
``## Checkpoint`` bindings, or from a seeded generator) and its host tables.

Invariants:
- ``Weights.dense[name]`` is float32 in the DECLARED shape — the language's ``in by out`` for a product — for every
  declared weight of every program, keyed by name: a weight two programs declare by one name (``Emb``) is one array.
- A weight the checkpoint stores Q8_0 and the program reads as stored (``kinds.stored_q8``) also has
  ``Weights.planes[name]``: its int8 values and fp16 block scales (``q8.Planes``), and its dense array is exactly
  their dequantisation — so the reference and the bundle read the same stored numbers, never a re-quantisation.
- Seeded weights are a pure function of (seed, tensor name, shape): deterministic per NAME, so a weight shared by
  name is the same wherever it is read, and scaled so hidden states stay O(1) through many layers.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import q8 as q8mod
from ..analysis.kinds import stored_q8
from ..lang.syntax import Call, Binary
from ..model.checkpoint import ALL_Q8, Storage, TensorRef, bind
from ..model.program import Decl, Programs
from ..spatial.bundle import weight_reads
from .kernels import fill_table


class WeightError(Exception):
    """A weight that cannot be read: which one and why (``name``, ``why``). The CLI prints it; nothing else catches it."""

    def __init__(self, name: str, why: str):
        super().__init__(f"`{name}`: {why}")
        self.name = name
        self.why = why


@dataclass
class Weights:
    dense: dict[str, np.ndarray]
    planes: dict[str, q8mod.Planes] = field(default_factory=dict)
    source: str = ""
    storage: Storage = ALL_Q8

    def __getitem__(self, name: str) -> np.ndarray:
        return self.dense[name]

    def __contains__(self, name: str) -> bool:
        return name in self.dense


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
    """How each name is used where its scale matters: ``lookup`` (an embedding), ``gain`` (an RMS-norm gain; with
    ``offset O`` recorded as ``gain+O``)."""
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


def seeded(programs: Programs, seed: int = 0, storage: Storage = ALL_Q8) -> Weights:
    """Seeded weights for every declared weight; those read as stored Q8_0 are quantised once (as GGUF would store
    them) and read back, so the dense array and the planes are one stored weight."""
    uses = _uses(programs)
    q8_names = read_as_q8(programs, storage)
    dense: dict[str, np.ndarray] = {}
    planes: dict[str, q8mod.Planes] = {}
    for name, d in declared_weights(programs).items():
        shape = concrete(d.shape)
        w = seeded_array(seed, name, shape, uses.get(name, set()))
        if name in q8_names and len(shape) >= 2 and shape[-2] % q8mod.BLOCK == 0:
            planes[name] = q8mod.quantize_weight(w)
            w = planes[name].dense()
        dense[name] = w
    return Weights(dense, planes, f"seed {seed}", storage)


# ---- host tables ---------------------------------------------------------------------------------------------------


def tables(programs: Programs, ctx: int) -> dict[str, np.ndarray]:
    """Every host table the programs declare, filled as declared (§4), its ``ctx`` bound."""
    out: dict[str, np.ndarray] = {}
    for p in programs.all():
        for d in p.decls.values():
            if d.role != "table" or d.name in out:
                continue
            if d.fill is None:
                raise WeightError(d.name, "a table must say how it is filled (`cosines of base 10000`)")
            rows, width = concrete(d.shape, ctx=ctx)
            out[d.name] = fill_table(d.fill, rows, width)
    return out


# ---- GGUF ----------------------------------------------------------------------------------------------------------


def _columns(n: int, cols: tuple[int, int, int | None]) -> np.ndarray:
    a, b, every = cols
    if every is None:
        return np.arange(a, b)
    return np.concatenate([g * every + np.arange(a, b) for g in range(n // every)])


def _orient(name: str, ref: TensorRef, arr_np: np.ndarray, declared: tuple[int, ...],
            lookup: bool = False) -> tuple[bool, np.ndarray | None]:
    """Whether the tensor binds in product orientation (numpy's last two axes swapped: GGUF ``ne = [in, out]`` read
    ``in by out``) or stored orientation, and the kept output columns. Where both fit (a square tensor) a weight
    the programs look rows up in (an embedding) binds as stored, any other in product orientation (§6)."""
    for product in ((False, True) if lookup else (True, False)):
        shape = list(arr_np.shape)
        if product and len(shape) >= 2:
            shape[-1], shape[-2] = shape[-2], shape[-1]
        elif product:
            continue
        cols = None
        if ref.columns is not None:
            if ref.columns[1] > shape[-1] or (ref.columns[2] and shape[-1] % ref.columns[2]):
                continue
            cols = _columns(shape[-1], ref.columns)
            shape[-1] = len(cols)
        if ref.rows is not None:
            if len(shape) < 2 or ref.rows[1] > shape[-2]:
                continue
            shape[-2] = ref.rows[1] - ref.rows[0]
        if tuple(shape) == declared:
            return product, cols
    raise WeightError(name, f"declared {'×'.join(map(str, declared))} but \"{ref.tensor}\" is "
                            f"{'×'.join(map(str, reversed(arr_np.shape)))} in GGUF order (ne)"
                            + ("" if ref.columns is None and ref.rows is None else " before its slice"))


def gguf_storage(path: str | Path) -> Storage:
    """How a GGUF checkpoint stores each tensor (``Q8_0``, ``F16``…) — ``streamed.model.gguf.read_storage``, which
    refuses a file that is not GGUF or is truncated with a ``CheckpointError`` naming it."""
    from ..model.gguf import read_storage

    return read_storage(path)


def _tensors(path: str | Path) -> dict:
    from gguf import GGUFReader

    return {t.name: t for t in GGUFReader(str(path)).tensors}


def _read(tensors: dict, name: str, ref: TensorRef, declared: tuple[int, ...], keep_planes: bool,
          lookup: bool = False):
    """The declared weight ``name`` read from checkpoint tensor ``ref``, oriented and sliced as §6 says (``lookup``: a
    weight the programs look rows up in, which binds as stored when both orientations fit): its dense float32 value
    and, when ``keep_planes`` and the tensor is Q8_0 in product orientation, its stored planes."""
    from gguf import GGMLQuantizationType
    from gguf.quants import dequantize

    t = tensors.get(ref.tensor)
    if t is None:
        raise WeightError(name, f"the checkpoint has no tensor \"{ref.tensor}\"")
    # GGML's tensors have four dimensions and a file lists ``ne`` only up to the last that is not 1: a stored ``[d]``
    # is ``[d, 1]`` (llama.cpp's loader takes either for a shared expert's gate). A tensor of fewer dimensions than
    # its declaration is read with the missing trailing ``ne`` of 1 — numpy's leading axes.
    pad = (1,) * max(0, len(declared) - len(t.shape))
    if t.tensor_type == GGMLQuantizationType.Q8_0:
        qv, qs = q8mod.from_bytes(np.asarray(t.data))
        qv, qs = qv.reshape(pad + qv.shape), qs.reshape(pad + qs.shape)
        logical = qv
    else:
        logical = np.asarray(t.data)
        logical = logical.reshape(pad + logical.shape)
    product, cols = _orient(name, ref, logical, declared, lookup)
    if t.tensor_type == GGMLQuantizationType.Q8_0 and product:
        p = q8mod.Planes.of_stored(qv, qs).select(ref.rows, cols)
        return p.dense(), (p if keep_planes else None)
    if t.tensor_type == GGMLQuantizationType.Q8_0:
        full = q8mod.dequantize_blocks(qv, qs)
    elif t.tensor_type in (GGMLQuantizationType.F32, GGMLQuantizationType.F16):
        full = np.asarray(logical, dtype=np.float32)
    else:
        full = np.asarray(dequantize(np.asarray(t.data), t.tensor_type), dtype=np.float32)
        full = full.reshape(pad + full.shape)
    if product and full.ndim >= 2:
        full = np.swapaxes(full, -1, -2)
    if ref.rows is not None:
        full = full[..., ref.rows[0]:ref.rows[1], :]
    if cols is not None:
        full = full[..., cols]
    return np.ascontiguousarray(full, dtype=np.float32), None


def from_gguf(path: str | Path, programs: Programs, storage: Storage | None = None) -> Weights:
    """Every declared weight read from a GGUF checkpoint through the document's bindings, oriented and sliced as §6
    says. Q8_0 tensors are decoded from their bytes (``q8.from_bytes``); those the programs read as stored also keep
    their planes."""
    storage = storage or gguf_storage(path)
    tensors = _tensors(path)
    q8_names = read_as_q8(programs, storage)
    uses = _uses(programs)
    entries = programs.document.checkpoint
    dense: dict[str, np.ndarray] = {}
    planes: dict[str, q8mod.Planes] = {}
    for name, d in declared_weights(programs).items():
        ref = bind(entries, name)
        if ref is None:
            raise WeightError(name, "no `## Checkpoint` entry binds it")
        dense[name], p = _read(tensors, name, ref, concrete(d.shape), name in q8_names, "lookup" in uses.get(name, ()))
        if p is not None:
            planes[name] = p
    return Weights(dense, planes, f"checkpoint {storage.source}", storage)


def from_bundle(model, path: str | Path) -> Weights:
    """Every weight a bundle's programs read, at every layer, from a GGUF checkpoint through the names its manifest
    records — without the document: the embed's and the head's by their own names, each layer's by the names its
    row gives its kind's weights (``Wq17``), each read from the checkpoint tensor the manifest names for it, in the
    declared shape the manifest gives its kind, keeping the Q8_0 planes of those the program reads as planes. What a
    runtime loading the bundle does; ``model`` is a ``StreamedModel`` (``spatial.bundle.read_bundle``)."""
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
    dense: dict[str, np.ndarray] = {}
    planes: dict[str, q8mod.Planes] = {}
    for program, names in bound:
        for w in columns.setdefault(id(program), weight_reads(program)):
            name = names.get(w["name"], w["name"])
            if name in dense:
                continue
            keep = any(r["encoding"] == "planes" for r in w["reads"])
            lookup = (id(program), w["name"]) in looked_up
            dense[name], p = _read(tensors, name, naming.ref(name), tuple(w["shape"]), keep, lookup)
            if p is not None:
                planes[name] = p
            elif keep:
                raise WeightError(name, f"the bundle reads it as Q8_0 planes but \"{naming.ref(name).tensor}\" is "
                                        f"stored {storage.types.get(naming.ref(name).tensor, 'otherwise')}")
    return Weights(dense, planes, f"checkpoint {storage.source}", storage)
