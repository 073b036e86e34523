"""A GGUF's layout — each tensor's offset, type and dimensions in its header — held to what llama.cpp's own parser
and loader check, with llama.cpp itself as the judge (``llama-cpp-python``): a file llama.cpp refuses is refused by
``streamed`` in one line naming the tensor, and one llama.cpp loads is read."""

from __future__ import annotations

import random
import struct

import pytest

import ggufs

llamacpp = pytest.importorskip("llamacpp", reason="llama-cpp-python is not installed (the test extra)")


def header(path):
    """Each tensor's header fields as (name, file offset of its type, of its offset, of its dims, n_dims), in order."""
    from gguf import GGUFReader

    out = []
    for t in GGUFReader(str(path)).tensors:
        parts = t.field.parts
        # parts: name length, name, n_dims, dims, type, offset — each a view whose offset in the file is known
        at = t.field.offset + sum(int(p.nbytes) for p in parts[:2])
        dims_at = at + 4  # past n_dims (4 bytes)
        type_at = dims_at + int(parts[3].nbytes)
        out.append((t.name, type_at, type_at + 4, dims_at, int(parts[2][0])))
    return out


def put(data: bytearray, at: int, fmt: str, value) -> None:
    data[at:at + struct.calcsize(fmt)] = struct.pack("<" + fmt, value)


def test_the_issue_s_two_files_are_refused_as_llama_cpp_refuses_them(tmp_path):
    good = ggufs.loadable(tmp_path / "good.gguf")
    assert llamacpp.refusal(good) is None and ggufs.refusal(good) is None
    fields = header(good)
    # A tensor offset moved by one byte …
    data = bytearray(good.read_bytes())
    name, type_at, offset_at, _, _ = fields[0]
    put(data, offset_at, "Q", 1)
    moved = tmp_path / "moved.gguf"
    moved.write_bytes(bytes(data))
    assert "has offset 1, expected 0" in llamacpp.refusal(moved)
    said = ggufs.refusal(moved)
    assert said == f"{moved}: tensor 'token_embd.weight' has offset 1, expected 0 (not at the data's start, padded " \
                   f"to 32 bytes): a file llama.cpp refuses"
    # … and token_embd retyped F16 → F32, so that its bytes run over the next tensors'.
    data = bytearray(good.read_bytes())
    put(data, type_at, "I", 0)  # GGML_TYPE_F32
    retyped = tmp_path / "retyped.gguf"
    retyped.write_bytes(bytes(data))
    assert llamacpp.refusal(retyped) is not None
    said = ggufs.refusal(retyped)
    assert said is not None and f"tensor '{fields[1][0]}' has offset" in said and \
        "inside the data of 'token_embd.weight' before it" in said and "\n" not in said


def mutations(good: bytes, fields, rng: random.Random):
    """One-field mutations of a header, as a hostile or broken writer makes them: (what, bytes)."""
    for _ in range(40):
        name, type_at, offset_at, dims_at, n_dims = rng.choice(fields)
        data = bytearray(good)
        (offset,) = struct.unpack_from("<Q", data, offset_at)
        kind = rng.choice(["offset", "type", "dim", "n_dims", "swap", "truncate"])
        if kind == "offset":
            delta = rng.choice([1, -1, 2, 16, 32, -32, 64, 1 << 20])
            put(data, offset_at, "Q", max(0, offset + delta))
        elif kind == "type":
            put(data, type_at, "I", rng.choice([0, 1, 8, 30]))  # F32, F16, Q8_0, BF16
        elif kind == "dim":
            (ne0,) = struct.unpack_from("<Q", data, dims_at)
            put(data, dims_at, "Q", rng.choice([ne0 + 1, ne0 * 2, max(1, ne0 // 2), ne0 + 32]))
        elif kind == "n_dims":
            put(data, dims_at - 4, "I", 5)
        elif kind == "swap":
            other = rng.choice(fields)
            (theirs,) = struct.unpack_from("<Q", data, other[2])
            put(data, offset_at, "Q", theirs)
            put(data, other[2], "Q", offset)
        else:
            data = data[:rng.randrange(len(data) - 4096, len(data))]
        yield f"{kind} of {name}", bytes(data)


def test_every_corrupt_layout_is_refused_exactly_when_llama_cpp_refuses_it(tmp_path):
    """A fixed-seed fuzz of header mutations: streamed's verdict is llama.cpp's, file by file — one line when it
    refuses, and never a traceback."""
    good = ggufs.loadable(tmp_path / "good.gguf")
    fields = header(good)
    rng = random.Random(30)
    refused = 0
    for i, (what, data) in enumerate(mutations(good.read_bytes(), fields, rng)):
        path = tmp_path / f"m{i}.gguf"
        path.write_bytes(data)
        theirs, mine = llamacpp.refusal(path), ggufs.refusal(path)
        assert (theirs is None) == (mine is None), (what, theirs, mine)
        if mine is not None:
            refused += 1
            assert "\n" not in mine and str(path) in mine, (what, mine)
    assert refused >= 20  # the corpus is mostly files llama.cpp refuses, and some it takes
