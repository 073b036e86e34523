"""The checkpoints people download, made as they are made: llama.cpp's own quantizer (``llama_model_quantize``) over
an F32 GGUF, and — to hold a run of one against llama.cpp in float32 — the same file with every tensor dequantised
by the ``gguf`` package (the format's reference, not ``streamed``'s dequantiser) and stored F32."""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType, GGUFReader, GGUFValueType, GGUFWriter
from gguf.quants import dequantize

#: The file types the tests make, by the name ``llama-quantize`` gives them.
FTYPES = ("Q4_K_M", "Q5_K_M", "Q6_K", "Q4_0", "BF16")


def quantize(src: Path, dst: Path, ftype: str, requantize: bool = False) -> Path:
    """``src`` (an F32 GGUF; or, with ``requantize``, an already quantised one, as ``llama-quantize
    --allow-requantize``) quantised by llama.cpp to ``ftype`` (``Q4_K_M``…) at ``dst``: its own choice of type per
    tensor (a Q4_K_M keeps some ``attn_v`` and ``ffn_down`` Q6_K, the output Q6_K)."""
    import llama_cpp

    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = getattr(llama_cpp, f"LLAMA_FTYPE_MOSTLY_{ftype}")
    params.nthread = 2
    params.allow_requantize = requantize
    status = llama_cpp.llama_model_quantize(str(src).encode(), str(dst).encode(), ctypes.byref(params))
    assert status == 0, f"llama_model_quantize({src}, {ftype}) returned {status}"
    return dst


def types(path: Path) -> dict[str, str]:
    """Each tensor's stored type, as the file says."""
    return {t.name: t.tensor_type.name for t in GGUFReader(path).tensors}


def dequantized(src: Path, dst: Path) -> Path:
    """``src`` with every tensor stored F32, its values ``gguf.quants.dequantize`` of the stored blocks, and its
    metadata as it is — the checkpoint llama.cpp computes in float32 what the quantised one holds."""
    reader = GGUFReader(src)
    arch = reader.fields["general.architecture"].contents()
    w = GGUFWriter(str(dst), arch)
    for name, field in reader.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        vtype = field.types[0]
        sub = field.types[-1] if vtype == GGUFValueType.ARRAY else None
        w.add_key_value(name, field.contents(), vtype, sub)
    for t in reader.tensors:
        data = np.asarray(t.data)
        if t.tensor_type not in (GGMLQuantizationType.F32,):
            data = dequantize(data, t.tensor_type)
        w.add_tensor(t.name, np.ascontiguousarray(data, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return dst
