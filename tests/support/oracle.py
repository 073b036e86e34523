"""Small GGUF checkpoints llama.cpp loads, and what each implementation computes on them.

``write(path, cfg, …)`` turns a Hugging Face ``config.json`` (a dict, shrunk to a few layers) into the GGUF llama.cpp's
converter would write for it: the metadata ``convert.metadata`` gives — transcribed from the converter, read from
transformers' resolved config, so nothing ``streamed.model.hf`` reads reaches llama.cpp — with a vocabulary of type
``none`` and its size standing in for the tokenizer; the tensors of the document ``streamed`` authors from the config
(llama.cpp's names, ``ggufs.as_gguf``), whose shapes llama.cpp's loader holds to that metadata, plus the ones the
converter adds (Llama 3's ``rope_freqs``); seeded random weights scaled so that every layer matters to the logits
(gains near 1, products ``N/√in``, decays in (0, 1)) — F32, or Q8_0 for the projections. ``kv`` adds or (``None``)
removes metadata keys; ``squeeze`` names tensors written with their trailing ``ne`` of 1 dropped (``[d, 1]`` as
``[d]``, which llama.cpp's loader also takes). What ``streamed`` reads back from the file is the thing under test;
nothing here uses its reader.

``ours(path, tokens, prefill)`` is what ``streamed author X.gguf`` then computes: the reference interpreter's logits at
every position, and the bundle executor's (a prefill bundle of ``prefill`` rows — its head reads the last row — then
a decode bundle, one token per step, over the same state)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType
from gguf.quants import quantize

import convert
import ggufs
from streamed.model.author import author
from streamed.model.hf import spec_from_config


# ---- the checkpoint ------------------------------------------------------------------------------------------------


def _values(name: str, ne: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """Seeded values for the tensor ``name`` of GGUF shape ``ne`` (numpy's is reversed), scaled by what it does."""
    shape = tuple(reversed(ne))
    z = rng.standard_normal(shape)
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


@dataclass
class Written:
    path: Path
    arch: str
    text: str  # the document the tensors were laid out from (llama.cpp's names), not the one under test


def write(path: Path, cfg: dict, *, q8: bool = False, seed: int = 0, name: str = "oracle", kv: dict | None = None,
          squeeze: tuple[str, ...] = ()) -> Written:
    arch, meta = convert.metadata(cfg)
    g = ggufs.as_gguf(spec_from_config(cfg), name)  # the tensors' layout: the authored document's names and shapes
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
    w = ggufs.writer(path, arch, meta)
    rng = np.random.default_rng(seed)
    for tname, (ne, qtype) in tensors.items():
        data = _values(tname, ne, rng)
        if q8 and qtype == "Q8_0":
            w.add_tensor(tname, quantize(data, GGMLQuantizationType.Q8_0), raw_dtype=GGMLQuantizationType.Q8_0)
        elif any(tname.endswith(t) for t in squeeze):
            w.add_tensor(tname, data.reshape(tuple(n for n in reversed(ne[1:]) if n != 1) + (ne[0],)))
        else:
            w.add_tensor(tname, data)
    for tname, data in convert.extra_tensors(cfg).items():
        w.add_tensor(tname, data)
    ggufs.finish(w)
    return Written(path, arch, text)


# ---- what streamed computes on it ----------------------------------------------------------------------------------


@dataclass
class Ours:
    text: str  # the document `streamed author X.gguf` writes
    reference: np.ndarray  # every position's logits
    bundle: dict[int, np.ndarray]  # position → logits, where the bundle's head gives them


def ours(path: Path, tokens: list[int], prefill: int, bundle: bool = True) -> Ours:
    from streamed.analysis.whole import analyze
    from streamed.model.gguf import read_gguf
    from streamed.numerics.run import bundle_logits, reference_logits
    from streamed.numerics.weights import from_gguf

    ck = read_gguf(path)
    text = author(ck.spec)
    a = analyze(text, ck.storage)
    assert not a.errors, [d.message for d in a.errors][:3]
    weights = from_gguf(path, a.programs, ck.storage)
    ref = reference_logits(a.programs, weights, tokens, prefill)
    got: dict[int, np.ndarray] = {}
    if bundle:
        b = bundle_logits(a, weights, tokens, prefill, ck.storage)
        got = dict(zip(b.positions, b.logits))
    return Ours(text, ref.logits, got)


def relative(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Per position: the largest difference over the largest logit llama.cpp gives there."""
    got, want = np.atleast_2d(got), np.atleast_2d(want)
    return np.abs(got - want).max(axis=-1) / np.abs(want).max(axis=-1)
