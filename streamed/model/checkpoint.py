"""How a document's declared weights bind to checkpoint tensors, and how a checkpoint stores them.

``bind`` reads the document's ``## Checkpoint`` entries (``Wq{l} is "blk.{l}.attn_q.weight".``); ``Storage`` answers,
for a checkpoint tensor, the type it is stored as. Together they decide whether a declared ``q8`` weight is read as
stored, Q8_0, or dense — the fact that splits kinds (LANGUAGE §1.6).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import PurePath
from typing import Mapping

from ..lang.syntax import CheckpointEntry

Q8_BLOCK = 32
#: The quantised types a weight is read as stored in — kept in its blocks, never densified whole: each type's
#: values and bytes per block (ggml's ``GGML_QUANT_SIZES``). F32 and F16 are read where they are as arrays.
BLOCKS = {
    "Q8_0": (32, 34), "Q4_0": (32, 18), "Q4_1": (32, 20), "Q5_0": (32, 22), "Q5_1": (32, 24),
    "Q2_K": (256, 84), "Q3_K": (256, 110), "Q4_K": (256, 144), "Q5_K": (256, 176), "Q6_K": (256, 210),
    "MXFP4": (32, 17), "BF16": (1, 2),
}


class CheckpointError(Exception):
    """A checkpoint that cannot be used: the message names the file and what is wrong with it."""


@dataclass(frozen=True)
class TensorRef:
    """The checkpoint tensor a declared weight reads, and the part of it: output features ``columns`` (start, stop,
    every) and input features ``rows`` (start, stop), in the language's ``in by out`` orientation."""

    tensor: str
    columns: tuple[int, int, int | None] | None = None
    rows: tuple[int, int] | None = None
    entry: CheckpointEntry | None = None


@lru_cache(maxsize=4096)
def _pattern(name_pattern: str) -> re.Pattern:
    head, _, tail = name_pattern.partition("{l}")
    if "{l}" not in name_pattern:
        return re.compile(re.escape(name_pattern) + r"\Z")
    return re.compile(re.escape(head) + r"(\d+)" + re.escape(tail) + r"\Z")


def bind(entries: tuple[CheckpointEntry, ...] | list[CheckpointEntry], name: str) -> TensorRef | None:
    """The tensor the declared weight ``name`` (``Wq3``) reads, or ``None`` when no entry names it. The first entry
    that matches wins; a ``{l}`` entry matches only where the name's stem is followed by the index alone."""
    for e in entries:
        m = _pattern(e.pattern).match(name)
        if m is None:
            continue
        tensor = e.tensor.replace("{l}", m.group(1)) if m.groups() else e.tensor
        return TensorRef(tensor, e.columns, e.rows, e)
    return None


#: The file types a document read with no checkpoint may assume its weights written as (``--storage``): llama.cpp's
#: quantizer's ``ftype``s, as its command line names them, and the type each writes a quantisable weight as.
FILE_TYPES = {"q8_0": "Q8_0", "f16": "F16", "bf16": "BF16", "mxfp4_moe": "MXFP4_MOE"}


def quantized_as(shape: tuple, file_type: str, router: bool) -> str:
    """The type llama.cpp's quantizer (``llama-quant.cpp``: ``tensor_allows_quantization``, ``tensor_type_fallback``)
    writes a weight of declared ``shape`` (the language's ``in by out``: GGUF's ``ne[0]`` is its input features, axis
    −2) as, in a file of ``file_type``: a router or shared gate (``ffn_gate_inp``) and a tensor of one dimension are
    never quantised — kept as the converter wrote them, F32; a Q8_0 file's tensor whose input features are not whole
    blocks of 32 falls back to F16; every other weight is the file's type — in an ``MXFP4_MOE`` file (gpt-oss's
    ``quantization_config`` ``mxfp4``), an expert bank (``ne[2] > 1``: a stack of matrices) MXFP4 and every other
    weight Q8_0, both of blocks of 32."""
    if router or len(shape) < 2:
        return "F32"
    if file_type == "MXFP4_MOE":
        file_type = "MXFP4" if len(shape) == 3 and shape[0] != 1 else "Q8_0"
    if file_type in ("Q8_0", "MXFP4") and isinstance(shape[-2], int) and shape[-2] % Q8_BLOCK:
        return "F16"
    return file_type


@dataclass(frozen=True)
class Storage:
    """Which of the weights the author declares ``q8`` the checkpoint stores Q8_0.

    ``types is None``: no checkpoint is read, and the storage is *assumed* — what llama.cpp's quantizer writes for
    the file type ``assumed`` (``Q8_0`` unless the user names another: ``--storage``), weight by weight from the
    document (``Program.assumed_storage``: routers kept F32, a Q8_0 file's weights whose input features are not whole
    blocks F16). Otherwise ``types`` maps each checkpoint tensor to its GGUF type name (``Q8_0``, ``F16``…), read
    from the file ``source``."""

    types: Mapping[str, str] | None = None
    source: str = "every q8 weight stored Q8_0"
    shapes: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    assumed: str = "Q8_0"

    @property
    def all_q8(self) -> bool:
        return self.types is None

    def stored_as(self, ref: TensorRef | None, declared_q8: bool) -> str:
        """How the weight is stored, as a person says it: ``Q8_0``, ``F16``, ``F32``, ``missing``."""
        if self.types is None:  # assumed: the type of a weight the document declares q8 is the program's to say
            return self.assumed if declared_q8 else "dense"
        if ref is None:
            return "unbound"
        return self.types.get(ref.tensor, "missing")

    def kept(self, ref: TensorRef | None, declared_q8: bool) -> str | None:
        """The type a declared weight is kept in, as stored (``Q8_0``, ``Q4_K``, ``BF16``… — ``BLOCKS``), or
        ``None`` when it is read as an array: declared ``q8``, stored in one of ``BLOCKS``, and its part of the
        tensor whole blocks. Part of a layer's kind: two layers whose weights are kept differently differ."""
        if self.q8(ref, declared_q8):
            return "Q8_0"
        if not declared_q8 or self.types is None or ref is None:
            return None
        kind = self.types.get(ref.tensor)
        if kind not in BLOCKS:
            return None
        block = BLOCKS[kind][0]
        if ref.rows is not None and (ref.rows[0] % block or ref.rows[1] % block):
            return None
        return kind

    def q8(self, ref: TensorRef | None, declared_q8: bool) -> bool:
        """Whether a declared weight is read as stored, Q8_0: declared ``q8``, stored Q8_0, and its part of the
        tensor whole blocks (a row slice must start and end on a 32-element block)."""
        if not declared_q8:
            return False
        if self.types is None:  # assumed: ``Program.assumed_storage`` says which (``analysis.kinds.stored_q8``)
            return self.assumed == "Q8_0"
        if ref is None or self.types.get(ref.tensor) != "Q8_0":
            return False
        if ref.rows is not None and (ref.rows[0] % Q8_BLOCK or ref.rows[1] % Q8_BLOCK):
            return False
        return True


ALL_Q8 = Storage()

#: Values and bytes per block of every type whose bytes are counted (``BLOCKS`` and the float types).
SIZES = {**BLOCKS, "F32": (1, 4), "F16": (1, 2)}


def stored_bytes(storage: Storage, tensors) -> dict[str, int]:
    """The bytes the checkpoint holds ``tensors`` in (each counted once), by type (``{"Q4_K": …, "Q6_K": …}``):
    values over the type's block times its bytes per block — the file's own bytes. A tensor the checkpoint lacks,
    or of a type with no size here, is not counted."""
    out: dict[str, int] = {}
    for name in sorted(set(tensors)):
        kind = (storage.types or {}).get(name)
        shape = storage.shapes.get(name)
        if kind not in SIZES or shape is None:
            continue
        values, nbytes = SIZES[kind]
        n = 1
        for d in shape:
            n *= int(d)
        out[kind] = out.get(kind, 0) + n // values * nbytes
    return out


def storage_said(assumed: str | None, file: str | None) -> str:
    """Where a lowering's storage comes from, as a person reads it: ``read from`` the checkpoint's file, or
    ``assumed`` — for the file type assumed, and what that means weight by weight."""
    if assumed is None:
        return f"read from {file}"
    article = "an" if assumed[0] in "AEFHILMNORSX" else "a"
    if assumed == "MXFP4_MOE":
        return ("assumed: what llama.cpp's quantizer writes for an MXFP4_MOE file (expert banks MXFP4, 17 bytes per "
                "32 values; routers and shared gates F32; every other weight Q8_0, F16 where its input features are "
                "not whole blocks of 32)")
    return (f"assumed: what llama.cpp's quantizer writes for {article} {assumed} file (routers and shared gates F32"
            + (", weights whose input features are not whole blocks of 32 F16" if assumed == "Q8_0" else "") + ")")



@dataclass(frozen=True)
class Naming:
    """Which checkpoint tensor each declared weight reads, by the name a layer gives it (``Wq17``), and how that
    tensor is stored: what a bundle's manifest records for every weight of every layer, so that a runtime loads each
    layer's own tensors without the document.

    ``assumed``: the file type assumed when no checkpoint was read (``said``). ``kind`` says where the names come
    from: ``gguf`` — the document's ``## Checkpoint`` bindings, of the GGUF the
    lowering read (``file``), which also says each tensor's type; ``document`` — those bindings with no checkpoint
    read (the names are the authoring's own: GGUF names from a GGUF, Hugging Face names from a ``config.json``), and
    the storage assumed (``Storage``: what llama.cpp's quantizer writes for the file type assumed);
    ``declared`` — the document binds nothing, so each weight's tensor is its declared name (as seeded weights are
    read). A weight no binding names is read under its declared name in every case. ``refs`` holds the names a
    manifest recorded, when a bundle is read back without its document, and ``recorded`` the bytes it said the file
    holds them in (``checkpoint.stored``). ``declared_q8``: the weights the document declares ``q8``, each with the
    type it is assumed stored as without a checkpoint (``Program.assumed_storage``)."""

    kind: str
    file: str | None = None
    entries: tuple[CheckpointEntry, ...] = ()
    storage: Storage = ALL_Q8
    refs: Mapping[str, tuple[TensorRef, str]] | None = None
    declared_q8: Mapping[str, str] = field(default_factory=dict)
    assumed: str | None = None
    recorded: Mapping[str, int] | None = None

    @property
    def said(self) -> str:
        """Whether the storage of every weight was read from the checkpoint or assumed, and from what."""
        return storage_said(self.assumed, self.file)

    @staticmethod
    def of(entries: tuple[CheckpointEntry, ...], storage: Storage, declared_q8: Mapping[str, str]) -> "Naming":
        """The naming a lowering of a document with checkpoint ``entries`` over ``storage`` gives."""
        kind = "declared" if not entries else "document" if storage.all_q8 else "gguf"
        file = None if storage.all_q8 else PurePath(storage.source).name
        return Naming(kind, file, tuple(entries), storage, None, dict(declared_q8),
                      storage.assumed if storage.all_q8 else None)

    def ref(self, name: str) -> TensorRef:
        """The tensor (and part of it) the declared weight ``name`` reads."""
        if self.refs is not None and name in self.refs:
            return self.refs[name][0]
        return (bind(self.entries, name) if self.entries else None) or TensorRef(name)

    def stored(self, name: str, ref: TensorRef | None = None) -> str:
        """How the weight ``name`` (which reads ``ref``, when known) is stored: the checkpoint's type (``Q8_0``,
        ``F16``, ``F32``…; ``missing`` when the checkpoint lacks it); without a checkpoint, the type assumed for a
        weight declared ``q8`` (``Program.assumed_storage``) and ``dense`` for any other."""
        if self.refs is not None and name in self.refs:
            return self.refs[name][1]
        if self.storage.all_q8:
            return self.declared_q8.get(name, "dense")
        return self.storage.stored_as(ref or self.ref(name), name in self.declared_q8)
