"""Shared fixtures of the numerical certification tests: example documents and small GGUF checkpoints written with
the gguf package itself (Q8_0 data through ``gguf.quants.quantize``), never through the code under test."""

from pathlib import Path

import numpy as np
import pytest
from gguf import GGMLQuantizationType, GGUFWriter
from gguf.quants import quantize

from streamed.model.checkpoint import bind

from repo import EXAMPLES, ROOT  # noqa: F401


def write_gguf(path: Path, tensors: dict) -> Path:
    """A GGUF file of ``tensors``: name → (numpy array in GGUF's numpy order, ``Q8_0``/``F16``/``F32``)."""
    w = GGUFWriter(str(path), "llama")
    for name, (data, qtype) in tensors.items():
        if qtype == "Q8_0":
            w.add_tensor(name, quantize(data, GGMLQuantizationType.Q8_0), raw_dtype=GGMLQuantizationType.Q8_0)
        elif qtype == "F16":
            w.add_tensor(name, np.asarray(data, dtype=np.float16))
        else:
            w.add_tensor(name, np.asarray(data, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def write_checkpoint(path: Path, programs, arrays: dict, type_of) -> Path:
    """Write every declared weight (``arrays[name]``, declared orientation) to a GGUF file under its bound tensor
    name, as ``type_of(name, tensor)`` says: (``Q8_0``/``F16``/``F32``, stored). A matrix is written in product
    orientation — GGUF ``ne = [in, out]``, numpy ``out × in`` — unless ``stored`` (an embedding's ``vocab × d``)."""
    entries = programs.document.checkpoint
    tensors = {}
    for name, a in arrays.items():
        ref = bind(entries, name)
        assert ref is not None and ref.columns is None and ref.rows is None, name
        qtype, stored = type_of(name, ref.tensor)
        data = np.ascontiguousarray(a if (stored or a.ndim == 1) else np.swapaxes(a, -1, -2), dtype=np.float32)
        tensors.setdefault(ref.tensor, (data, qtype))
    return write_gguf(path, tensors)


@pytest.fixture
def tiny_llama_text() -> str:
    return (EXAMPLES / "tiny-llama.lgm").read_text()


@pytest.fixture
def checkpoint_writer():
    return write_checkpoint


@pytest.fixture
def gguf_writer():
    return write_gguf


def mixed_type(name, tensor):
    """tiny-llama stored as a real checkpoint mixes types: its products Q8_0, one layer's output projection F16
    among them, its norms F32, and its embedding Q8_0 as ``vocab × d`` (declared dense: read dequantised, never as
    planes)."""
    if name == "Emb":
        return "Q8_0", True
    if name == "Wo2":
        return "F16", False
    return ("Q8_0" if name.startswith("W") else "F32"), False


@pytest.fixture
def mixed_checkpoint():
    """``(path, programs, seed)`` → tiny-llama's seeded weights written as a GGUF of mixed types (``mixed_type``)."""
    from streamed.numerics.weights import seeded

    return lambda path, programs, seed: write_checkpoint(path, programs, seeded(programs, seed).dense, mixed_type)
