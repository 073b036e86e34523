"""Small GGUF checkpoints llama.cpp loads, and what each implementation computes on them.

``write(path, cfg, …)`` turns a Hugging Face ``config.json`` (a dict, shrunk to a few layers) into the GGUF llama.cpp's
converter would write for it: the metadata ``convert.metadata`` gives — transcribed from the converter, read from
transformers' resolved config, so nothing ``streamed.model.hf`` reads reaches llama.cpp — with a vocabulary of type
``none`` and its size standing in for the tokenizer; the tensors of the document ``streamed`` authors from the config
(llama.cpp's names, ``ggufs.as_gguf``), whose shapes llama.cpp's loader holds to that metadata, plus the ones the
converter adds (Llama 3's ``rope_freqs``); seeded random weights scaled so that every layer matters to the logits
(gains near 1, products ``N/√in``, decays in (0, 1)) — F32, or Q8_0 for the projections. ``kv`` adds or (``None``)
removes metadata keys; ``squeeze`` names tensors written with their trailing ``ne`` of 1 dropped (``[d, 1]`` as
``[d]``, which llama.cpp's loader also takes); ``fused`` stores every layer's q, k and v in one ``attn_qkv``. What
``streamed`` reads back from the file is the thing under test;
nothing here uses its reader.

``ours(path, tokens, prefill)`` is what ``streamed author X.gguf`` then computes: the reference interpreter's logits at
every position, and the bundle executor's (a prefill bundle of ``prefill`` rows — its head reads the last row — then
a decode bundle, one token per step, over the same state)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType
from gguf.quants import quantize

import convert
import ggufs
from streamed.model.author import author
from streamed.model.hf import spec_from_config


# ---- the checkpoint ------------------------------------------------------------------------------------------------


def _values(name: str, ne: tuple[int, ...], rng: np.random.Generator, fast: bool = False) -> np.ndarray:
    """Seeded values for the tensor ``name`` of GGUF shape ``ne`` (numpy's is reversed), scaled by what it does
    (``fast``: drawn in float32, for the real-size checkpoints)."""
    shape = tuple(reversed(ne))
    z = rng.standard_normal(shape, dtype=np.float32) if fast else rng.standard_normal(shape)
    if name == "token_embd.weight":
        w = z
    elif name.endswith("norm.weight"):
        w = 1.0 + 0.1 * z
    elif name.endswith(".ssm_a"):
        w = -np.exp(0.3 * z)  # llama.cpp stores −exp(A_log)
    elif name.endswith(".bias") or name.endswith(".ssm_dt.bias") or len(ne) == 1:
        w = 0.1 * z
    else:
        w = z / np.sqrt(ne[0])
    return w.astype(np.float32)


def _q8_bytes(ne: tuple[int, ...]) -> int:
    """A Q8_0 tensor's size: 34 bytes per block of 32 along ``ne[0]``."""
    return math.prod(ne) // 32 * 34


@dataclass
class Written:
    path: Path
    arch: str
    text: str  # the document the tensors were laid out from (llama.cpp's names), not the one under test


def _q8_blocks(ne: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """A Q8_0 tensor of GGUF shape ``ne`` made as its blocks: int8 values uniform in [−127, 127] (standard deviation
    about 73) and one fp16 scale, ``1/(73·√in)``, so a product keeps its input's variance as ``_values``' do."""
    rows, blocks = math.prod(ne[1:]), ne[0] // 32
    out = np.empty((rows, blocks, 34), dtype=np.uint8)
    out[..., :2] = np.full((rows, blocks, 1), 1 / (73 * math.sqrt(ne[0])), dtype=np.float16).view(np.uint8)
    out[..., 2:] = rng.integers(-127, 128, (rows, blocks, 32), dtype=np.int8).view(np.uint8)
    return out.reshape(*reversed(ne[1:]), blocks * 34)


def _shape(tname: str, ne: tuple[int, ...], squeeze: tuple[str, ...]) -> tuple[int, ...]:
    """A tensor's numpy shape as written: GGUF's ``ne`` reversed, or with its unit axes dropped where ``squeeze`` says
    (a converter that writes a ``[d]`` gate where the document declares ``d × 1``)."""
    if any(tname.endswith(t) for t in squeeze):
        return tuple(n for n in reversed(ne[1:]) if n != 1) + (ne[0],)
    return tuple(reversed(ne))


def write(path: Path, cfg: dict, *, q8: bool = False, f16: bool = False, seed: int = 0, name: str = "oracle",
          kv: dict | None = None, squeeze: tuple[str, ...] = (), fast: bool = False,
          fused: bool = False) -> Written:
    arch, meta = convert.metadata(cfg)
    g = ggufs.as_gguf(spec_from_config(cfg), name, arch)  # the tensors' layout: the authored document's names and shapes
    if fused:  # q, k and v in one attn_qkv, as llama.cpp's create_tensor_qkv also loads them for any architecture
        g = replace(g, layers=tuple(replace(l, mixer=replace(l.mixer, fused="qkv")) for l in g.layers))
    assert g.architecture == arch, (g.architecture, arch)
    text = author(g)
    meta["general.name"] = name
    meta["tokenizer.ggml.model"] = "none"
    meta.setdefault("{arch}.vocab_size", g.vocab)  # in place of the token list the converter writes
    if arch == "deepseek2":
        # llama.cpp requires the query rank but for its lite models (26 or 27 layers); the converter leaves it out for
        # queries without a bottleneck (`q_lora_rank: null`), so such a small model needs it said: 0, none.
        meta.setdefault("{arch}.attention.q_lora_rank", 0)
    for key, value in (kv or {}).items():
        if value is None:
            meta.pop(key, None)
        else:
            meta[key] = value
    tensors = ggufs.tensors_of(text)
    # The projections (what the document declares q8) Q8_0 or F16 when asked; everything else F32.
    projection = "Q8_0" if q8 else "F16" if f16 else "F32"
    stored = [(tname, ne, projection if qtype == "Q8_0" else "F32") for tname, (ne, qtype) in tensors.items()]
    extra = convert.extra_tensors(cfg)
    w = ggufs.writer(path, arch, meta)
    # Streamed: each tensor's size is stated up front, then its values are made and written one tensor at a time, so
    # writing an 8 GB checkpoint holds one tensor in memory, never the file.
    for tname, ne, qtype in stored:
        if qtype == "Q8_0":
            w.add_tensor_info(tname, tuple(reversed(ne)), np.dtype(np.float32), _q8_bytes(ne), GGMLQuantizationType.Q8_0)
        elif qtype == "F16":
            w.add_tensor_info(tname, tuple(reversed(ne)), np.dtype(np.float16), 2 * math.prod(ne))
        else:
            w.add_tensor_info(tname, _shape(tname, ne, squeeze), np.dtype(np.float32), 4 * math.prod(ne))
    for tname, data in extra.items():
        w.add_tensor_info(tname, data.shape, data.dtype, data.nbytes)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    rng = np.random.default_rng(seed)
    for tname, ne, qtype in stored:
        if fast and qtype == "Q8_0":  # the blocks made directly: seconds for 8 GB, where quantising takes minutes
            w.write_tensor_data(_q8_blocks(ne, rng))
            continue
        data = _values(tname, ne, rng, fast)
        if qtype == "Q8_0":
            w.write_tensor_data(quantize(data, GGMLQuantizationType.Q8_0))
        elif qtype == "F16":
            w.write_tensor_data(data.astype(np.float16))
        else:
            w.write_tensor_data(data.reshape(_shape(tname, ne, squeeze)))
        del data
    for tname, data in extra.items():
        w.write_tensor_data(data)
    w.close()
    return Written(path, arch, text)


# ---- what streamed computes on it ----------------------------------------------------------------------------------


@dataclass
class Ours:
    text: str  # the document `streamed author X.gguf` writes
    reference: np.ndarray  # every position's logits
    bundle: dict[int, np.ndarray]  # position → logits, where the bundle's head gives them


def ours(path: Path, tokens: list[int], prefill: int, bundle: bool = True, arithmetic: str = "exact",
         edit=None) -> Ours:
    """The document `streamed author` writes from the GGUF at ``path`` (its spec through ``edit`` first, when given)
    run on ``tokens``: the reference's logits at every position, and the bundle's."""
    from streamed.analysis.whole import analyze
    from streamed.model.gguf import read_gguf
    from streamed.numerics.product import EXACT, llama_cpp
    from streamed.numerics.run import bundle_logits, reference_logits
    from streamed.numerics.weights import from_gguf

    ck = read_gguf(path)
    text = author(ck.spec if edit is None else edit(ck.spec))
    a = analyze(text, ck.storage)
    assert not a.errors, [d.message for d in a.errors][:3]
    weights = from_gguf(path, a.programs, ck.storage)
    how = EXACT
    if arithmetic == "llama.cpp":  # the path of the build the oracle runs (``llamacpp.BUILT``)
        import llamacpp

        how = llama_cpp(llamacpp.built_path())
    ref = reference_logits(a.programs, weights, tokens, prefill, arithmetic=how)
    got: dict[int, np.ndarray] = {}
    if bundle:
        b = bundle_logits(a, weights, tokens, prefill, ck.storage, arithmetic=how)
        got = dict(zip(b.positions, b.logits))
    return Ours(text, ref.logits, got)


def relative(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Per position: the largest difference over the largest logit llama.cpp gives there."""
    got, want = np.atleast_2d(got), np.atleast_2d(want)
    return np.abs(got - want).max(axis=-1) / np.abs(want).max(axis=-1)
