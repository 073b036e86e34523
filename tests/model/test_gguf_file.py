"""The GGUF header reader (``streamed.model.gguf_file``) held to two readers we did not write: the ``gguf`` package's
``GGUFReader`` for what a file holds — every key's value, every tensor's type, shape, offset and data — and
llama.cpp's own parser for which headers are refused."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from gguf import GGUFReader, GGUFValueType, GGUFWriter
from hypothesis import given, settings, strategies as st

import ggufs
from streamed.model.gguf import CheckpointError, read_gguf, read_storage
from streamed.model.gguf_file import GgufFile

llamacpp = pytest.importorskip("llamacpp", reason="llama-cpp-python is not installed (the test extra)")

V = GGUFValueType
#: A value of every type the format has, scalar and array, as ``GGUFWriter`` writes it (type, element type).
EVERY_VALUE = {
    "t.u8": (200, V.UINT8, None), "t.i8": (-100, V.INT8, None), "t.u16": (60000, V.UINT16, None),
    "t.i16": (-30000, V.INT16, None), "t.u32": (4_000_000_000, V.UINT32, None), "t.i32": (-2_000_000_000, V.INT32, None),
    "t.f32": (0.15625, V.FLOAT32, None), "t.u64": (2**63 + 5, V.UINT64, None), "t.i64": (-(2**62), V.INT64, None),
    "t.f64": (1e-300, V.FLOAT64, None), "t.bool": (True, V.BOOL, None), "t.str": ("Ġhello — 世界", V.STRING, None),
    "t.empty_str": ("", V.STRING, None),
    "t.a_u8": ([1, 255], V.ARRAY, V.UINT8), "t.a_i16": ([-1, 2, -3], V.ARRAY, V.INT16),
    "t.a_u32": ([7] * 5, V.ARRAY, V.UINT32), "t.a_i32": ([1, -1], V.ARRAY, V.INT32),
    "t.a_f32": ([0.5, -2.25], V.ARRAY, V.FLOAT32), "t.a_u64": ([2**64 - 1], V.ARRAY, V.UINT64),
    "t.a_i64": ([-5, 5], V.ARRAY, V.INT64), "t.a_f64": ([3.5], V.ARRAY, V.FLOAT64),
    "t.a_bool": ([True, False, True], V.ARRAY, V.BOOL),
    "t.a_str": (["", "a", "Ġtok", "日本語", "x" * 300], V.ARRAY, V.STRING),
}


def _write(path, kv: dict, tensors: dict, alignment: int | None = None):
    w = GGUFWriter(str(path), "llama")
    if alignment is not None:
        w.add_custom_alignment(alignment)
    for key, (value, kind, item) in kv.items():
        w.add_key_value(key, value, kind, sub_type=item)
    rng = np.random.default_rng(0)
    for name, (ne, qtype) in tensors.items():
        if qtype == "I32":
            w.add_tensor(name, rng.integers(-9, 9, tuple(reversed(ne))).astype(np.int32))
        else:
            ggufs.add(w, name, ne, qtype, rng)
    ggufs.finish(w)
    return path


def _typed(value):
    """A value with the Python type of each part, so that ``True`` and ``1`` differ (they are equal in Python)."""
    if isinstance(value, list):
        return [_typed(v) for v in value]
    return type(value).__name__, value


def _same_as_the_gguf_package(path) -> None:
    theirs, ours = GGUFReader(str(path)), GgufFile(str(path))
    want = {k: _typed(f.contents()) for k, f in theirs.fields.items() if not k.startswith("GGUF.")}
    got = {k: _typed(f.contents()) for k, f in ours.fields.items()}
    assert list(got) == list(want)
    assert got == want
    assert (ours.alignment, ours.data_offset) == (theirs.alignment, theirs.data_offset)
    assert [t.name for t in ours.tensors] == [t.name for t in theirs.tensors]
    for a, b in zip(theirs.tensors, ours.tensors):
        assert (b.tensor_type, b.shape, b.n_elements, b.n_bytes, b.data_offset) == \
            (a.tensor_type, tuple(int(x) for x in a.shape), a.n_elements, a.n_bytes, a.data_offset), a.name
        assert (b.data.dtype, b.data.shape) == (a.data.dtype, a.data.shape), a.name
        assert np.asarray(a.data).tobytes() == b.data.tobytes(), a.name


@pytest.mark.parametrize("alignment", [None, 64, 256, 4096])
def test_every_key_and_tensor_reads_as_the_gguf_package_reads_them(tmp_path, alignment):
    path = _write(tmp_path / "m.gguf", EVERY_VALUE, {
        "token_embd.weight": ((64, 16), "F16"), "blk.0.attn_q.weight": ((64, 64), "Q8_0"),
        "blk.0.ffn_up.weight": ((256, 8), "Q4_K"), "blk.0.ffn_down.weight": ((32, 8), "BF16"),
        "output_norm.weight": ((64,), "F32"), "idx": ((3, 2), "I32"), "scalar_like": ((1,), "F32")},
        alignment=alignment)
    _same_as_the_gguf_package(path)


#: Metadata a writer may hold: any number of keys, each a scalar or an array of any element type.
SCALARS = {V.UINT8: st.integers(0, 255), V.INT8: st.integers(-128, 127), V.UINT16: st.integers(0, 2**16 - 1),
           V.INT32: st.integers(-(2**31), 2**31 - 1), V.UINT64: st.integers(0, 2**64 - 1),
           V.FLOAT32: st.floats(width=32, allow_nan=False), V.FLOAT64: st.floats(allow_nan=False),
           V.BOOL: st.booleans(), V.STRING: st.text(max_size=20)}
VALUES = st.one_of(
    *[s.map(lambda v, k=k: (v, k, None)) for k, s in SCALARS.items()],
    *[st.lists(s, min_size=1, max_size=40).map(lambda v, k=k: (v, V.ARRAY, k)) for k, s in SCALARS.items()],
)


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(st.text("abcdefgh.", min_size=1, max_size=12), VALUES, max_size=8))
def test_any_metadata_the_gguf_package_writes_reads_as_it_reads_it(tmp_path_factory, kv):
    path = _write(tmp_path_factory.mktemp("g") / "m.gguf", kv, {"token_embd.weight": ((32, 4), "Q8_0")})
    _same_as_the_gguf_package(path)


def test_a_downloaded_vocabulary_is_read_and_its_tensors_found_after_it(tmp_path):
    """Llama 3's tokenizer block (128,256 tokens, their types, 280,147 merges) before the tensors: the walk past its
    strings lands where the gguf package's does, and nothing of it is decoded for the storage or the spec."""
    kv = {"general.architecture": ("llama", V.STRING, None),
          "tokenizer.ggml.model": ("gpt2", V.STRING, None),
          "tokenizer.ggml.tokens": ([f"Ġt{i}" for i in range(128_256)], V.ARRAY, V.STRING),
          "tokenizer.ggml.token_type": ([1] * 128_256, V.ARRAY, V.INT32),
          "tokenizer.ggml.merges": ([f"Ġ t{i}" for i in range(280_147)], V.ARRAY, V.STRING),
          "llama.vocab_size": (16, V.UINT32, None)}
    path = _write(tmp_path / "v.gguf", kv, {"token_embd.weight": ((64, 16), "F16"), "output.weight": ((64, 16), "Q8_0")})
    ours = GgufFile(str(path))
    theirs = GGUFReader(str(path))
    assert ours.data_offset == theirs.data_offset
    assert [(t.name, t.data_offset) for t in ours.tensors] == [(t.name, t.data_offset) for t in theirs.tensors]
    assert ours.fields["tokenizer.ggml.merges"].count == 280_147
    assert ours.fields["tokenizer.ggml.tokens"].contents()[-1] == "Ġt128255"
    assert read_storage(path).types == {"token_embd.weight": "F16", "output.weight": "Q8_0"}


# ---- refused headers: refused as llama.cpp refuses them ------------------------------------------------------------



def _key_at(data: bytes, key: str) -> int:
    """The byte where key ``key``'s length field starts."""
    raw = key.encode()
    at = data.index(struct.pack("<Q", len(raw)) + raw)
    return at


def _first_tensor_type_at(path) -> int:
    """Where the first tensor's type is in the header, as the ``gguf`` package finds it (name, dims, then type)."""
    t = GGUFReader(str(path)).tensors[0]
    return t.field.offset + sum(int(part.nbytes) for part in t.field.parts[:4])


def _mutants(good: bytes, type_at: int):
    """Headers a broken or hostile writer makes, each one change from a file llama.cpp loads: (what, bytes)."""
    key = _key_at(good, "tokenizer.ggml.model")
    value = key + 8 + len("tokenizer.ggml.model")  # its value type, then its string
    yield "version 1", good[:4] + struct.pack("<I", 1) + good[8:]
    yield "version 4", good[:4] + struct.pack("<I", 4) + good[8:]
    yield "a big-endian version", good[:4] + struct.pack(">I", 3) + good[8:]
    yield "an impossible key count", good[:16] + struct.pack("<Q", 2**62) + good[24:]
    yield "an impossible tensor count", good[:8] + struct.pack("<Q", 2**40) + good[16:]
    yield "value type 13", good[:value] + struct.pack("<I", 13) + good[value + 4:]
    yield "an empty key", good[:key] + struct.pack("<Q", 0) + good[key + 8 + len("tokenizer.ggml.model"):]
    # ``tokenizer.ggml.model`` renamed ``general.architecture`` (both 20 bytes): that key twice.
    yield "a key named twice", good[:key + 8] + b"general.architecture" + good[key + 28:]
    yield "a string that runs past the end", good[:value + 4] + struct.pack("<Q", 2**40) + good[value + 12:]
    yield "an array of arrays", _nested(good, value)
    yield "tensor type 99", good[:type_at] + struct.pack("<I", 99) + good[type_at + 4:]


def _nested(data: bytes, value: int) -> bytes:
    """``tokenizer.ggml.model``'s string value replaced by an array holding one empty array of strings."""
    (n,) = struct.unpack_from("<Q", data, value + 4)
    nested = struct.pack("<IIQ", int(V.ARRAY), int(V.ARRAY), 1) + struct.pack("<IQ", int(V.STRING), 0)
    return data[:value] + nested + data[value + 12 + n:]


def test_every_broken_header_is_refused_in_one_line_as_llama_cpp_refuses_it(tmp_path):
    good = ggufs.loadable(tmp_path / "good.gguf")
    assert llamacpp.refusal(good) is None and ggufs.refusal(good) is None
    data = good.read_bytes()
    for i, (what, bad) in enumerate(_mutants(data, _first_tensor_type_at(good))):
        path = tmp_path / f"bad{i}.gguf"
        path.write_bytes(bad)
        assert llamacpp.refusal(path) is not None, what
        said = ggufs.refusal(path)
        assert said is not None and said.startswith(f"{path}: ") and "\n" not in said, (what, said)
        assert what != "a big-endian version" or "a big-endian GGUF (version 3)" in said, said
        with pytest.raises(CheckpointError):
            read_gguf(path)
