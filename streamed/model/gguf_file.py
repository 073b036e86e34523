"""The GGUF container, read as llama.cpp's parser (``ggml/src/gguf.cpp``) reads it: the header, every key–value pair,
every tensor's name, ``ne``, type and offset, the alignment and where the data starts — and each tensor's data a view
of one read-only mapping of the file.

Why not the ``gguf`` package's ``GGUFReader``: it makes a numpy view for every element of every array, so a
downloaded checkpoint's vocabulary — Llama 3's 128,256 tokens, their types and 280,147 merges — took it 10–12 s to
parse (and Gemma 3's 262,144 tokens with their scores more), where this reads such a header in a tenth of a second:
a numeric array is one ``numpy.frombuffer`` view, and an array of strings is walked for its end (a length and a jump
a string) and decoded only when its value is asked for (``Field.contents``). The format's tables — the type of each
value, each tensor type's block and bytes — are still the ``gguf`` package's (``gguf.constants``), so a type it knows
needs no edit here. ``tests/model/test_gguf_file.py`` holds this reader to ``GGUFReader``'s answers, field by field
and tensor by tensor, on files the ``gguf`` package writes.

Invariants: every read is bounds-checked against the file, so a truncated or corrupt header is a ``GgufFormatError``
saying what and at which byte — never an allocation the header's counts ask for, a hang, or an ``IndexError``; a key
or a tensor named twice is refused, and an array of arrays (llama.cpp refuses them all); the file is little-endian (a big-endian GGUF is refused,
as llama.cpp on a little-endian host refuses it). What the tensors' layout must satisfy beyond being readable
(alignment, order, bounds of each tensor's data) is ``model.gguf._tensors``'s to check, in llama.cpp's words.

I/O: opens and maps the file named, read-only.
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass
from typing import Any

import numpy as np

from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFValueType

#: The versions read: 2 and 3 (64-bit counts); version 1's 32-bit counts are long gone from llama.cpp too.
VERSIONS = (2, 3)
#: ``general.alignment`` when a file does not say (``GGUF_DEFAULT_ALIGNMENT``).
DEFAULT_ALIGNMENT = 32

_U32, _U64 = struct.Struct("<I"), struct.Struct("<Q")
#: Each scalar value type: its little-endian numpy dtype.
_SCALARS: dict[GGUFValueType, np.dtype] = {
    GGUFValueType.UINT8: np.dtype("<u1"), GGUFValueType.INT8: np.dtype("<i1"),
    GGUFValueType.UINT16: np.dtype("<u2"), GGUFValueType.INT16: np.dtype("<i2"),
    GGUFValueType.UINT32: np.dtype("<u4"), GGUFValueType.INT32: np.dtype("<i4"),
    GGUFValueType.FLOAT32: np.dtype("<f4"), GGUFValueType.BOOL: np.dtype("?"),
    GGUFValueType.UINT64: np.dtype("<u8"), GGUFValueType.INT64: np.dtype("<i8"),
    GGUFValueType.FLOAT64: np.dtype("<f8"),
}
#: The tensor types whose data is a view of their values (the ``gguf`` package's choice); any other type's data is its
#: bytes, a row of ``ne[0]`` values ``ne[0] / block × bytes`` wide.
_VALUES: dict[GGMLQuantizationType, np.dtype] = {
    GGMLQuantizationType.F32: np.dtype("<f4"), GGMLQuantizationType.F16: np.dtype("<f2"),
    GGMLQuantizationType.F64: np.dtype("<f8"), GGMLQuantizationType.I8: np.dtype("<i1"),
    GGMLQuantizationType.I16: np.dtype("<i2"), GGMLQuantizationType.I32: np.dtype("<i4"),
    GGMLQuantizationType.I64: np.dtype("<i8"),
}


class GgufFormatError(ValueError):
    """A file that is not a readable GGUF: what is wrong, and at which byte where that helps."""


@dataclass(frozen=True)
class Field:
    """One key–value pair: its value's type (``ARRAY`` for an array, whose elements are ``item``), the number of
    elements (1 for a scalar or a string), and where its value's bytes start and end in the file."""

    name: str
    type: GGUFValueType
    item: GGUFValueType | None
    count: int
    start: int
    end: int
    file: "GgufFile"

    def contents(self) -> Any:
        """The value as Python has it: a number, a bool, a ``str`` (UTF-8; a string that is not is an error, as the
        ``gguf`` package's), or a list of them for an array — decoded here, when asked, not when the file is read."""
        buf = self.file.buffer
        if self.type == GGUFValueType.STRING:
            return _text(buf, self.start + 8, _U64.unpack_from(buf, self.start)[0])
        if self.type != GGUFValueType.ARRAY:
            return np.frombuffer(buf, _SCALARS[self.type], 1, self.start).tolist()[0]
        at = self.start + 12
        if self.item == GGUFValueType.STRING:
            out = []
            for _ in range(self.count):
                n = _U64.unpack_from(buf, at)[0]
                out.append(_text(buf, at + 8, n))
                at += 8 + n
            return out
        return np.frombuffer(buf, _SCALARS[self.item], self.count, at).tolist()


@dataclass(frozen=True)
class Tensor:
    """One tensor as the file lists it: ``shape`` is GGUF's ``ne`` (fastest-varying first), ``data_offset`` the
    absolute byte its data starts at, ``n_bytes`` its data's size by its type's table."""

    name: str
    tensor_type: GGMLQuantizationType
    shape: tuple[int, ...]
    n_elements: int
    n_bytes: int
    data_offset: int
    file: "GgufFile"

    @property
    def data(self) -> np.ndarray:
        """The data, a read-only view of the mapping, in numpy's order (``ne`` reversed): the values for a float or
        integer type, the bytes of each row for a quantised one. Made when asked, so that a tensor whose data lies
        past the end of the file is refused by the layout check (``model.gguf._tensors``), in words, first."""
        dims = tuple(reversed(self.shape))
        dtype = _VALUES.get(self.tensor_type)
        if dtype is None:
            block, size = GGML_QUANT_SIZES[self.tensor_type]
            if dims and dims[-1] % block:
                raise GgufFormatError(f"tensor {self.name!r}: a row of {dims[-1]} values is not whole blocks of "
                                      f"{block} ({self.tensor_type.name})")
            dims = (*dims[:-1], dims[-1] // block * size) if dims else dims
            dtype = np.dtype(np.uint8)
        count = int(np.prod(dims, dtype=object)) if dims else 1
        if self.data_offset + count * dtype.itemsize > self.file.size:
            raise GgufFormatError(f"tensor {self.name!r}: its data ends past the end of the file")
        return np.frombuffer(self.file.buffer, dtype, count, self.data_offset).reshape(dims)


class GgufFile:
    """A GGUF file's header, read (``fields`` by key in the file's order, ``tensors`` in theirs, ``alignment``,
    ``data_offset``), and its mapping (``buffer``), which every tensor's ``data`` is a view of and which stays
    mapped while any of them, or this, is alive."""

    def __init__(self, path: str):
        with open(path, "rb") as f:
            try:
                self._map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
            except ValueError:  # an empty file cannot be mapped
                raise GgufFormatError("an empty file") from None
        self.path = path
        self.buffer = memoryview(self._map)
        self.size = len(self._map)
        self.fields: dict[str, Field] = {}
        self.tensors: list[Tensor] = []
        self._read()

    # ---- bounds-checked reads ----

    def _need(self, at: int, n: int, what: str) -> None:
        if n < 0 or at + n > self.size:
            raise GgufFormatError(f"{what} at byte {at} runs past the end of the file ({self.size} bytes)")

    def _u32(self, at: int, what: str) -> int:
        self._need(at, 4, what)
        return _U32.unpack_from(self.buffer, at)[0]

    def _u64(self, at: int, what: str) -> int:
        self._need(at, 8, what)
        return _U64.unpack_from(self.buffer, at)[0]

    def _string(self, at: int, what: str) -> tuple[str, int]:
        n = self._u64(at, what)
        self._need(at + 8, n, what)
        return _text(self.buffer, at + 8, n, what), at + 8 + n

    def _value_type(self, at: int, what: str) -> GGUFValueType:
        raw = self._u32(at, what)
        try:
            return GGUFValueType(raw)
        except ValueError:
            raise GgufFormatError(f"{what} at byte {at} has value type {raw}, which GGUF does not define") from None

    def _skip(self, at: int, kind: GGUFValueType, count: int, what: str) -> int:
        """Where ``count`` values of ``kind`` starting at ``at`` end: a jump for numbers, a walk for strings."""
        if kind == GGUFValueType.STRING:
            buf, size, unpack = self.buffer, self.size, _U64.unpack_from
            for _ in range(count):
                if at + 8 > size:
                    self._need(at, 8, what)
                at += 8 + unpack(buf, at)[0]
            if at > size:
                raise GgufFormatError(f"{what} runs past the end of the file ({self.size} bytes)")
            return at
        n = _SCALARS[kind].itemsize * count
        self._need(at, n, what)
        return at + n

    # ---- the header ----

    def _read(self) -> None:
        if self.size < 4 or bytes(self.buffer[:4]) != b"GGUF":
            raise GgufFormatError("it does not start with the GGUF magic")
        version = self._u32(4, "the version")
        if version not in VERSIONS:
            swapped = int.from_bytes(version.to_bytes(4, "little"), "big")
            if version & 0xFFFF == 0 and swapped in VERSIONS:
                raise GgufFormatError(f"a big-endian GGUF (version {swapped}); llama.cpp reads little-endian files")
            raise GgufFormatError(f"GGUF version {version}; versions {' and '.join(map(str, VERSIONS))} are read")
        n_tensors, n_kv = self._u64(8, "the tensor count"), self._u64(16, "the key count")
        at = 24
        for i in range(n_kv):
            what = f"key {i} of {n_kv}"
            name, at = self._string(at, what)
            if not name:
                raise GgufFormatError(f"{what} is empty")
            if name in self.fields:
                raise GgufFormatError(f"key {name!r} appears twice")
            what = f"the value of {name!r}"
            kind = self._value_type(at, what)
            at += 4
            if kind == GGUFValueType.ARRAY:
                item = self._value_type(at, what)
                if item == GGUFValueType.ARRAY:
                    raise GgufFormatError(f"{what} is an array of arrays, which llama.cpp's parser refuses")
                count = self._u64(at + 4, what)
                end = self._skip(at + 12, item, count, what)
            else:
                item, count = None, 1
                end = self._skip(at, kind, 1, what)
            self.fields[name] = Field(name, kind, item, count, at, end, self)
            at = end
        infos = []
        seen: set[str] = set()
        for i in range(n_tensors):
            what = f"tensor {i} of {n_tensors}"
            name, at = self._string(at, what)
            if name in seen:
                raise GgufFormatError(f"tensor {name!r} appears twice")
            seen.add(name)
            what = f"tensor {name!r}"
            n_dims = self._u32(at, what)
            self._need(at + 4, 8 * n_dims + 12, what)
            shape = tuple(np.frombuffer(self.buffer, "<u8", n_dims, at + 4).tolist())
            at += 4 + 8 * n_dims
            raw = self._u32(at, what)
            try:
                kind = GGMLQuantizationType(raw)
            except ValueError:
                kind = None
            if kind not in GGML_QUANT_SIZES:  # a type the package names but has no sizes for is unknown here too
                raise GgufFormatError(f"tensor {name!r} has type {raw}, which this version of the gguf package does "
                                      f"not know")
            offset = self._u64(at + 4, what)
            at += 12
            infos.append((name, kind, shape, offset))
        self.alignment = DEFAULT_ALIGNMENT
        field = self.fields.get("general.alignment")
        if field is not None:
            if field.type != GGUFValueType.UINT32:
                raise GgufFormatError(f"general.alignment is {field.type.name}, not UINT32")
            self.alignment = field.contents()
            if self.alignment == 0 or self.alignment & (self.alignment - 1):
                raise GgufFormatError(f"general.alignment {self.alignment} is not a power of two")
        self.data_offset = -(-at // self.alignment) * self.alignment
        for name, kind, shape, offset in infos:
            block, size = GGML_QUANT_SIZES[kind]
            n = 1
            for x in shape:
                n *= x
            self.tensors.append(Tensor(name, kind, shape, n, n * size // block, self.data_offset + offset, self))


def _text(buf, at: int, n: int, what: str = "a string") -> str:
    try:
        return bytes(buf[at:at + n]).decode("utf-8")
    except UnicodeDecodeError as e:
        raise GgufFormatError(f"{what}: not UTF-8 ({e.reason} at byte {at + e.start})") from None

