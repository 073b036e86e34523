"""Read a GGUF checkpoint — its header through ``gguf_file`` (the container, parsed in a tenth of a second where the
``gguf`` package's ``GGUFReader`` took seconds over a downloaded vocabulary), its types' sizes from the ``gguf``
package's tables: the storage of every tensor, and the ``ModelSpec`` its metadata and tensor list describe.

``read_storage(path) -> Storage`` answers, for each tensor, the GGUF type it is stored as (``Q8_0``, ``F16``…) — the
fact that decides, for a weight the author declares ``q8``, whether it is read as stored (LANGUAGE §1.6).
``read_gguf(path) -> GgufCheckpoint`` adds the spec, for the author.

The spec is read from metadata (``general.architecture``, ``<arch>.block_count``, ``<arch>.attention.head_count``…)
and, for what a layer *is*, from the tensors it has: a layer with ``ssm_conv1d`` is Gated DeltaNet, one with
``attn_kv_a_mqa`` latent attention, one with ``ffn_gate_exps`` a mixture of experts — widths from the tensors'
shapes. Invariant: metadata and tensors agree, or the file is refused; every fault is a ``CheckpointError`` naming the
file and what is wrong (truncated, not GGUF, a tensor the metadata does not allow), never a traceback.

The file is read as llama.cpp reads it: only the keys llama.cpp's loader reads for the architecture are consulted
(``gguf_keys.reads``: a ``sliding_window`` in a ``llama`` GGUF windows nothing), the keys it passes over are named
once in the document's header (``gguf_keys.ignored``), and what llama.cpp fixes per architecture rather than reads —
which layers slide, whether the chosen experts' weights are renormalised — is taken from the same table.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from typing import Any, Mapping

from gguf.constants import GGML_QUANT_SIZES, Keys

from ..lang.files import FileProblem, size_of
from ..lang.limits import MAX_CONTEXT, MAX_DIMENSION, MAX_LAYER, beyond
from .checkpoint import CheckpointError, Storage
from .float32 import f32, fmaf, logf
from .names import gguf_tensor
from . import gguf_keys
from .spec import (
    Attention, Dense, Experts, GatedDeltaNet, LatentAttention, LayerSpec, Linear, ModelSpec, NOPE_NOTE, Norm, Rotation,
    Scaling, SpecError,
)

__all__ = ["CheckpointError", "TensorInfo", "GgufCheckpoint", "Mapped", "mapped", "read_storage", "read_gguf",
           "SUPPORTED"]

#: The architectures whose GGUF metadata this reader turns into a spec (``general.architecture``).
SUPPORTED = ("llama", "qwen2", "qwen3", "qwen3moe", "qwen2moe", "qwen3next", "qwen35", "qwen35moe", "gemma3",
             "deepseek2", "llama4", "gpt-oss", "gemma2", "phi3", "starcoder2", "olmo2", "internlm2", "granite",
             "mistral3", "cohere2", "deci")




@dataclass(frozen=True)
class TensorInfo:
    """One tensor as the file lists it: GGUF ``ne`` order (``[in, out]`` for a projection), its type's name."""

    name: str
    type: str
    shape: tuple[int, ...]
    offset: int
    n_bytes: int


@dataclass(frozen=True)
class GgufCheckpoint:
    path: str
    architecture: str
    metadata: Mapping[str, Any]
    tensors: Mapping[str, TensorInfo]
    storage: Storage
    spec: ModelSpec


@dataclass(frozen=True)
class Mapped:
    """A GGUF file parsed once and mapped read-only: its header (``gguf_file.GgufFile``; its tensors' ``data`` are
    views of one mapping of the file) and the file's size in bytes. What a run reads the storage and then the weights
    through (``read_storage(path, parsed)``, ``numerics.weights.from_gguf(…, parsed=…)``): one header parse and one
    mapping, whose pages, once faulted in by one weight's read, are mapped for every read after it."""

    path: str
    reader: Any
    size: int


def mapped(path: str | os.PathLike) -> Mapped:
    """The GGUF at ``path`` parsed and mapped, or ``CheckpointError`` naming it: not a regular file, shorter than a
    header, without the GGUF magic, or anything the reader cannot parse (a corrupt or truncated file)."""
    from .gguf_file import GgufFile, GgufFormatError

    path = str(path)
    try:
        size = size_of(path, "a GGUF file")  # a directory, a device or a FIFO is refused by what it is, unopened
    except FileProblem as e:
        raise CheckpointError(str(e)) from None
    if size < 24:
        raise CheckpointError(f"{path}: not a GGUF file: {size} bytes, shorter than a GGUF header")
    with open(path, "rb") as f:
        if f.read(4) != b"GGUF":
            raise CheckpointError(f"{path}: not a GGUF file (it does not start with the GGUF magic)")
    try:
        reader = GgufFile(path)
    except GgufFormatError as e:
        raise CheckpointError(f"{path}: a corrupt or truncated GGUF file ({e})") from None
    except OSError as e:
        raise CheckpointError(f"{path}: cannot be read ({e.strerror or e})") from None
    return Mapped(path, reader, size)


#: What llama.cpp's GGUF parser (ggml/src/gguf.cpp, ``gguf_init_from_file_impl``) allows a tensor: a name shorter
#: than ``GGML_MAX_NAME`` bytes and at most ``GGML_MAX_DIMS`` dimensions.
GGML_MAX_NAME, GGML_MAX_DIMS = 64, 4


def _tensors(path: str, reader, size: int) -> dict[str, TensorInfo]:
    """Every tensor the file lists, held to what llama.cpp's parser and loader check of the file's layout, in their
    order, so a file llama.cpp refuses is refused here in one line naming the tensor (and one it loads is read):

    - a name shorter than 64 bytes, at most 4 dimensions, a row (``ne[0]``) of whole blocks of the type;
    - the data in the order the tensors are listed, each exactly where the one before it ends padded to the file's
      alignment (``general.alignment``, 32 by default) — so no tensor starts misaligned, overlaps another, or leaves
      a gap (llama.cpp: "tensor 'X' has offset 1, expected 0");
    - the data within the file (llama.cpp's loader: "data is not within the file bounds").

    Sizes come from the ``gguf`` package's own table of types (``GGML_QUANT_SIZES``), so a type it reads needs no
    edit here. ★ A tensor retyped F16→F32 in its header doubles its bytes over the next tensor's: the reader of the
    ``gguf`` package maps it all the same, and the run read the neighbours' bytes as its weights."""
    out: dict[str, TensorInfo] = {}
    alignment = int(reader.alignment)
    expected, before = 0, None
    for t in reader.tensors:
        shown = repr(t.name)
        if len(t.name.encode("utf-8")) >= GGML_MAX_NAME:
            raise CheckpointError(f"{path}: tensor {shown}: a name of {len(t.name.encode('utf-8'))} bytes; llama.cpp "
                                  f"refuses one of {GGML_MAX_NAME} or more")
        if len(t.shape) > GGML_MAX_DIMS:
            raise CheckpointError(f"{path}: tensor {shown} has {len(t.shape)} dimensions; llama.cpp reads at most "
                                  f"{GGML_MAX_DIMS}")
        shape = tuple(int(x) for x in t.shape)
        block, type_size = GGML_QUANT_SIZES[t.tensor_type]
        if shape and shape[0] % block:
            raise CheckpointError(f"{path}: tensor {shown} of type {t.tensor_type.name} has {shape[0]} values a row, "
                                  f"not whole blocks of {block}")
        n_bytes = math.prod(shape) // block * type_size
        offset = int(t.data_offset) - int(reader.data_offset)
        if offset != expected:
            where = (f"inside the data of {before!r} before it" if offset < expected and before is not None
                     else "not where the tensor before it ends" if before is not None else "not at the data's start")
            raise CheckpointError(f"{path}: tensor {shown} has offset {offset}, expected {expected} ({where}, padded "
                                  f"to {alignment} bytes): a file llama.cpp refuses")
        end = int(t.data_offset) + n_bytes
        if end > size:
            raise CheckpointError(f"{path}: truncated: tensor {shown} ends at byte {end} but the file has {size}")
        expected += -(-n_bytes // alignment) * alignment
        before = t.name
        out[t.name] = TensorInfo(t.name, t.tensor_type.name, shape, int(t.data_offset), n_bytes)
    return out


def read_storage(path: str | os.PathLike, parsed: Mapped | None = None) -> Storage:
    """How the GGUF at ``path`` stores every tensor: ``types`` tensor → GGUF type name, ``shapes`` tensor → ``ne`` —
    from ``parsed`` (``mapped(path)``) when the caller has it, else parsed here."""
    path = str(path)
    m = parsed if parsed is not None else mapped(path)
    tensors = _tensors(path, m.reader, m.size)
    return Storage({n: t.type for n, t in tensors.items()}, path, {n: t.shape for n, t in tensors.items()})


def _metadata(reader) -> dict[str, Any]:
    """Every key's value but the tokenizer's (``tokenizer.ggml.*``: no spec reads them, and a downloaded vocabulary's
    hundreds of thousands of strings are not decoded for nothing); a string that is not UTF-8 is left out, as the
    keys nothing reads are."""
    from .gguf_file import GgufFormatError

    out: dict[str, Any] = {}
    for name, field in reader.fields.items():
        if name.startswith("tokenizer.ggml."):
            continue
        try:
            out[name] = field.contents()
        except GgufFormatError:
            continue
    return out


def read_gguf(path: str | os.PathLike, name: str | None = None) -> GgufCheckpoint:
    """The checkpoint at ``path``: its storage, its tensors, and the ``ModelSpec`` they describe (named by
    llama.cpp's tensor names). ``CheckpointError`` when the file is unreadable or describes no model this reads."""
    path = str(path)
    m = mapped(path)
    reader = m.reader
    tensors = _tensors(path, reader, m.size)
    meta = _metadata(reader)
    storage = Storage({n: t.type for n, t in tensors.items()}, path, {n: t.shape for n, t in tensors.items()})
    rope = {t.name: [float(x) for x in t.data.ravel()] for t in reader.tensors if t.name in ROPE_TENSORS}
    try:
        spec = _spec(path, meta, tensors, name, rope)
    except SpecError as e:
        raise CheckpointError(str(e)) from None
    return GgufCheckpoint(path, spec.architecture, meta, tensors, storage, spec)


# ---- the spec from metadata and tensors ---------------------------------------------------------------------------


class _Meta:
    """The metadata as llama.cpp's loader sees it for ``arch``: a key it does not read (``gguf_keys.reads``) is absent
    here, whatever the file says."""

    def __init__(self, path: str, meta: Mapping[str, Any], arch: str):
        self.path, self.meta, self.arch = path, meta, arch
        self.reads = gguf_keys.reads(arch, meta)

    def key(self, k: str) -> str:
        return k.format(arch=self.arch)

    def has(self, k: str) -> bool:
        kk = self.key(k)
        return kk in self.reads and kk in self.meta

    def get(self, k: str, default: Any = None, required: bool = False) -> Any:
        kk = self.key(k)
        if not self.has(k):
            if required:
                raise SpecError(f"{self.path}: metadata `{kk}` is missing; a {self.arch} GGUF needs it")
            return default
        return self.meta[kk]

    def int(self, k: str, default: Any = None, required: bool = False, layer: int | None = None, minimum: int = 1,
            maximum: int = MAX_DIMENSION) -> int | None:
        """A whole number from ``minimum`` to ``maximum`` (a width or a count: ``MAX_DIMENSION`` bounds them all), the
        layer's own when the metadata lists one per layer."""
        v = self.get(k, default, required)
        if isinstance(v, list):
            if layer is None:
                v = v[0] if v else default
            elif layer < len(v):
                v = v[layer]
            else:
                raise SpecError(f"{self.path}: metadata `{self.key(k)}` lists {len(v)} layers; layer {layer} has none")
        if v is None:
            return None
        why = beyond(v, maximum, minimum=minimum)
        if why is not None:
            raise SpecError(f"{self.path}: metadata `{self.key(k)}` {why}")
        return int(v)

    def float(self, k: str, default: float | None = None, positive: bool = False) -> float | None:
        v = self.get(k, default)
        if v is None:
            return None
        why = beyond(v, math.inf, minimum=-math.inf, whole=False)
        if why is None and positive and v <= 0:
            why = f"is {v:g}; it must be positive"
        if why is not None:
            raise SpecError(f"{self.path}: metadata `{self.key(k)}` {why}")
        return float(v)


def _t(slot: str, arch: str, layer: int | None = None) -> str:
    name = gguf_tensor(slot, arch)
    return name.replace("{l}", str(layer)) if layer is not None else name


def _spec(path: str, meta: Mapping[str, Any], tensors: Mapping[str, TensorInfo], name: str | None,
          rope: Mapping[str, list[float]] | None = None) -> ModelSpec:
    arch = meta.get(Keys.General.ARCHITECTURE)
    if not isinstance(arch, str):
        raise SpecError(f"{path}: metadata `general.architecture` is missing; it names the model's architecture")
    if arch not in SUPPORTED:
        raise SpecError(f"{path}: architecture {arch!r} is not supported (supported: {', '.join(SUPPORTED)})")
    m = _Meta(path, meta, arch)
    for k, (inert, what) in gguf_keys.UNMODELLED.items():
        if m.has(k) and not (inert(m.get(k)) if callable(inert) else m.get(k) == inert):
            raise SpecError(f"{path}: metadata `{m.key(k)}` is {_shown(m.get(k))}: llama.cpp {what} for a {arch} model, "
                            f"which the language does not express")
    n = m.int(Keys.LLM.BLOCK_COUNT, required=True, maximum=MAX_LAYER + 1)
    d = m.int(Keys.LLM.EMBEDDING_LENGTH, required=True)

    def shape(t: str) -> tuple[int, ...] | None:
        info = tensors.get(t)
        return info.shape if info else None

    def need(t: str, why: str) -> tuple[int, ...]:
        s = shape(t)
        if s is None:
            raise SpecError(f"{path}: tensor {t} is missing, but the metadata says {why}")
        return s

    # Every block tensor belongs to a layer the metadata declares.
    for t in tensors:
        mm = re.match(r"blk\.(\d+)\.", t)
        if mm and int(mm.group(1)) >= n:
            raise SpecError(f"{path}: tensor {t} belongs to layer {mm.group(1)}, but `{m.key(Keys.LLM.BLOCK_COUNT)}` is {n}")
    emb = need(_t("token_embd", arch), "the model has an embedding")
    if emb[0] != d:
        raise SpecError(f"{path}: tensor token_embd.weight is {emb[0]} wide, but `{m.key(Keys.LLM.EMBEDDING_LENGTH)}` is {d}")
    vocab = m.int(Keys.LLM.VOCAB_SIZE, emb[1])
    if vocab != emb[1]:
        raise SpecError(f"{path}: tensor token_embd.weight holds {emb[1]} tokens, but `{m.key(Keys.LLM.VOCAB_SIZE)}` is {vocab}")
    if arch in LAYER_NORMED:
        # llama.cpp's LLM_NORM: a layer norm, its epsilon under its own key, biased where the file holds the biases.
        eps = m.float(Keys.Attention.LAYERNORM_EPS, 1e-5)
        norm = Norm(eps, layer=True, bias=shape(_t("attn_norm_bias", arch, 0)) is not None)
        final_norm = Norm(eps, layer=True, bias=shape(_t("output_norm_bias", arch)) is not None)
    else:
        eps = m.float(Keys.Attention.LAYERNORM_RMS_EPS, 1e-6)
        norm = final_norm = Norm(eps)
    notes: list[str] = []
    passed = gguf_keys.ignored(arch, meta)
    if passed:
        notes.append(f"llama.cpp ignores these metadata keys of a {arch} model, and so does this document: "
                     + ", ".join(f"`{k}` ({_shown(meta[k])})" for k in passed) + ".")

    if arch == "phi3" and (window := m.int(Keys.Attention.SLIDING_WINDOW, 0, minimum=0)):
        notes.append(f"llama.cpp reads this Phi-3's sliding window ({window}) and disables it: every layer attends over "
                     f"every position, here as there.")
    base = m.float(Keys.Rope.FREQ_BASE, 10000.0, positive=True)
    scaling = _Rope(path, m, arch, base, rope or {})
    if scaling.unmodelled:
        notes.append(f"{scaling.unmodelled} is not modelled: the rotation tables are plain base-{base:g} frequencies.")

    if arch == "granite" and m.get(Keys.Rope.SCALING_FINETUNED, True) is False:
        notes.append("`rope.scaling.finetuned` is false: llama.cpp's Granite rotates no layer (its rope switch).")
    layers: list[LayerSpec] = []
    swa = _swa_layers(m, n)
    residual = _scale(m, Keys.LLM.RESIDUAL_SCALE)
    skipped = []
    for l in range(n):
        mixer = _mixer(path, m, arch, l, d, tensors, need, shape, base, scaling, swa, n)
        ffn = _ffn(path, m, arch, l, d, tensors, need, shape)
        if ffn is None and mixer is not None:
            # ★ deci.cpp `continue`s past a layer without a feed-forward block before its attention joins the
            # residual, dropping it; the model's own code adds it (LANGUAGE §4): the document keeps the attention, as
            # the config.json route does, and says where llama.cpp differs.
            skipped.append(l)
        sandwich = shape(_t("ffn_post_norm", arch, l)) is not None
        # OLMo 2 norms only the blocks' outputs; a deci layer without attention has only its feed-forward norm.
        pre_norm = shape(_t("attn_norm", arch, l)) is not None if mixer is not None else \
            ffn is None or shape(_t("ffn_norm", arch, l)) is not None
        # ★ llama.cpp's Cohere 2 graph adds a parallel layer's outputs as (ffn + x) + attention.
        layers.append(LayerSpec(mixer, ffn, norm, sandwich, pre_norm, parallel=arch in PARALLEL,
                                residual_scale=residual, ffn_first=arch in PARALLEL))
    if skipped:
        which = f"layer{'s' if len(skipped) > 1 else ''} {', '.join(map(str, skipped))}"
        notes.append(f"llama.cpp skips {which} whole, and this document does not: its deci graph `continue`s past a "
                     f"layer without a feed-forward block before the attention joins the residual; the model's own "
                     f"code (transformers' decoder layer) adds it, and so does this document.")
    if any(isinstance(l.mixer, LatentAttention) and l.mixer.kv_b_packed for l in layers):
        notes.append("This checkpoint packs the keys' and values' up-projections in attn_kv_b; the language reads the "
                     "absorbed 3-D weights from attn_k_b and attn_v_b, as current llama.cpp converters write them.")
    tied = shape(_t("output", arch)) is None or arch in ALWAYS_TIED
    # llama.cpp's Gemma graphs multiply the embedding by sqrtf(n_embd): √d as a float32.
    embed_scale = f32(math.sqrt(d)) if arch in ("gemma2", "gemma3") else _scale(m, Keys.LLM.EMBEDDING_SCALE)
    logit_scale, why = _logit_scale(path, m)
    if arch in ("gemma2", "gemma3", "qwen3next", "qwen35", "qwen35moe"):
        notes.append("llama.cpp stores these norms' gains with the +1 already added: no offset.")
    # Gemma 2's graph soft-caps its logits always (30 unless the file says), Gemma 3's when the file gives a cap.
    cap = m.float(Keys.LLM.FINAL_LOGIT_SOFTCAPPING, 30.0 if arch == "gemma2" else 0.0)
    title = name or meta.get(Keys.General.NAME) or os.path.splitext(os.path.basename(path))[0]
    return ModelSpec(str(title), arch, d, vocab, tuple(layers), final_norm, tied=tied, embed_scale=embed_scale,
                     final_softcap=cap or None, logit_scale=logit_scale, logit_scale_why=why,
                     embed_scale_why="the checkpoint's embedding_scale" if arch not in ("gemma2", "gemma3") else None,
                     naming="gguf", source=path, notes=tuple(notes),
                     trained=m.int(Keys.LLM.CONTEXT_LENGTH, maximum=MAX_CONTEXT),  # llama.cpp's n_ctx_train
                     **(LLAMA4_TEMPERATURE if arch == "llama4" and not _llama4_unchunked(m) and n >= 4 else {}))


#: llama.cpp's Llama 4 multiplies its NoPE layers' queries by ``log(floor((p + 1)/8192) + 1)·0.1 + 1``
#: (``n_attn_temp_floor_scale``, ``f_attn_temp_scale``, fixed for the architecture): exactly 1 for the first 8,191
#: positions, which the document computes as the model does; past them a deployment is refused (``ModelSpec.modelled``).
LLAMA4_TEMPERATURE = {"modelled": 8191, "modelled_why": "llama.cpp's Llama 4 NoPE layers scale their queries by a "
                                                        "temperature that is 1 only before position 8,191, and is not "
                                                        "written"}


def _llama4_unchunked(m: "_Meta") -> bool:
    """Whether a Llama 4 file's sliding window is 0: then llama.cpp chunks no layer and only the last is NoPE, with
    no query temperature (``n_no_rope_layer_step`` becomes the layer count)."""
    return m.has(Keys.Attention.SLIDING_WINDOW) and m.int(Keys.Attention.SLIDING_WINDOW, minimum=0) == 0


def _scale(m: _Meta, key: str) -> float | None:
    """A multiplier llama.cpp applies only when it is not 0 (Granite's ``residual_scale``, ``embedding_scale``): None
    when absent, 0 or 1 — none of which changes a value."""
    v = m.float(key, 0.0)
    return None if v in (0.0, 1.0) else v


def _logit_scale(path: str, m: _Meta) -> tuple[float | None, str | None]:
    """The logits' multiplier: Granite's graph divides by its required ``logit_scale``, Cohere 2's multiplies by it
    when it is not 0."""
    if m.arch == "granite":
        v = m.float(Keys.LLM.LOGIT_SCALE)
        if v is None:
            raise SpecError(f"{path}: metadata `{m.key(Keys.LLM.LOGIT_SCALE)}` is missing; a granite GGUF needs it")
        if v == 0:
            raise SpecError(f"{path}: metadata `{m.key(Keys.LLM.LOGIT_SCALE)}` is 0; Granite divides its logits by it")
        return (None, None) if v == 1 else (1 / v, f"1/{v:g}: llama.cpp's Granite divides its logits by logit_scale")
    if m.arch == "cohere2":
        v = m.float(Keys.LLM.LOGIT_SCALE)
        if v is None:
            raise SpecError(f"{path}: metadata `{m.key(Keys.LLM.LOGIT_SCALE)}` is missing; a cohere2 GGUF needs it")
        return (None, None) if v in (0.0, 1.0) else (v, "the checkpoint's logit_scale")
    return None, None


def _shown(v: Any) -> str:
    """A metadata value as the document quotes it: short, one line."""
    if isinstance(v, list):
        return f"a list of {len(v)}"
    text = f"{v:g}" if isinstance(v, float) else str(v)
    return text if len(text) <= 40 else text[:37] + "…"


ROPE_FREQS = "rope_freqs.weight"
#: Phi-3's LongRoPE factors (``get_rope_factors``: the long ones when the context exceeds the original one).
ROPE_LONG, ROPE_SHORT = "rope_factors_long.weight", "rope_factors_short.weight"
ROPE_TENSORS = (ROPE_FREQS, ROPE_LONG, ROPE_SHORT)
#: The architectures llama.cpp rotates in adjacent pairs (``LLAMA_ROPE_TYPE_NORM`` in ``llama_model_rope_type``;
#: its converter permutes Llama's, InternLM2's, Granite's, Mistral 3's and deci's q and k to match; Cohere rotates
#: so in transformers too); every other one here rotates halves (``NEOX``).
INTERLEAVED = ("llama", "llama4", "deepseek2", "internlm2", "granite", "mistral3", "cohere2", "deci")
#: The architectures whose graph feeds attention and the feed-forward block from one norm and adds both (Cohere).
PARALLEL = ("cohere2",)
#: The architectures whose loader never reads an ``output`` tensor: the head is the embedding.
ALWAYS_TIED = ("cohere2",)
#: The architectures whose layers may lack attention (``head_count`` 0), have one product in its place
#: (``head_count_kv`` 0) or lack a feed-forward block (``feed_forward_length`` 0), layer by layer (Nemotron-NAS).
NO_OP_BLOCKS = ("deci",)
#: The architectures whose layers that do not slide do not rotate either (Cohere 2's global layers).
NOPE_GLOBAL = ("cohere2",)
#: The architectures whose norms are layer norms (``LLM_NORM``), their epsilon ``attention.layer_norm_epsilon``.
LAYER_NORMED = ("starcoder2", "cohere2")
#: The architectures whose feed-forward activation is GELU (``LLM_FFN_GELU``), the others' SiLU.
GELU = ("gemma2", "gemma3", "starcoder2")
#: The architectures whose dense block has no ``ffn_gate``: Phi-3's gate is fused into ``ffn_up``, StarCoder2's block
#: is not gated.
UP_ONLY = {"phi3": "fused", "starcoder2": "ungated"}
#: The architectures whose llama.cpp graph divides their frequencies by ``rope_freqs`` (``get_rope_factors``).
READS_ROPE_FREQS = ("llama", "llama4", "granite", "mistral3", "deci")


class _Rope:
    """A GGUF's rotation as llama.cpp computes it (``llama_context``'s YaRN set-up, ``ggml_rope_ext``): the scaling
    its metadata states (``rope.scaling.type``, ``.factor``, ``.original_context_length``, ``.attn_factor``) or its
    ``rope_freqs`` tensor (Llama 3's, read back into the ``llama3`` parameters that reproduce it), and the attention
    factor the cosines and sines carry. llama.cpp reads YaRN's betas from the metadata of Mistral 3 alone: for the
    others they are its defaults, 32 and 1."""

    def __init__(self, path: str, m: _Meta, arch: str, base: float, rope: Mapping[str, list[float]]):
        self.arch, self.base, self.unmodelled = arch, base, None
        kind = m.get(Keys.Rope.SCALING_TYPE, "linear")
        factor = m.float(Keys.Rope.SCALING_FACTOR) or m.float("{arch}.rope.scale_linear") or 1.0
        self.factor = factor
        attn = m.float(Keys.Rope.SCALING_ATTN_FACTOR, 1.0)
        self.scaling: Scaling | None = None
        # What an unscaled rotation's cosines carry: the graph's factor (YaRN's own term is 1 at freq_scale 1).
        self.stated_attention = self.attention = attn
        # ln of the frequencies' divisor as llama.cpp forms it (freq_scale = 1/F in float32, unscaled when none), and
        # YaRN's log multiplier as its loader holds it: what DeepSeek-V2's attention scale is made of.
        scaled = kind != "none" and factor != 1
        self.ln_factor = logf(f32(1.0) / f32(f32(1.0) / f32(factor))) if scaled else 0.0
        self.log_mul = m.float(Keys.Rope.SCALING_YARN_LOG_MUL, 0.0)
        if arch == "deepseek2":
            self.log_mul = f32(self.log_mul / f32(0.1))  # its loader undoes the converter's 0.1 (deepseek2.cpp)
        if kind == "yarn" and factor != 1:
            context = m.int(Keys.Rope.SCALING_ORIG_CTX_LEN) or m.int(Keys.LLM.CONTEXT_LENGTH, required=True)
            self.scaling = Scaling("yarn", factor, float(context), fast=m.float(Keys.Rope.SCALING_YARN_BETA_FAST, 32.0),
                                   slow=m.float(Keys.Rope.SCALING_YARN_BETA_SLOW, 1.0))
            self.stated_attention, self.attention = self.yarn_attention(arch, attn)
        elif kind == "linear" and factor != 1:
            self.scaling = Scaling("linear", factor)
        elif kind not in ("linear", "yarn", "none", "longrope"):  # LongRoPE's factors are tensors (``longrope``)
            self.unmodelled = f"rope scaling `{kind}`"
        self.freqs = rope.get(ROPE_FREQS) if arch in READS_ROPE_FREQS else None
        if self.freqs is not None and self.scaling is not None:
            raise SpecError(f"{path}: {ROPE_FREQS} and rope scaling `{kind}` together: a table has one scaling")
        if arch == "phi3" and ROPE_SHORT in rope:
            self.scaling = self.longrope(path, m, rope)
        self.path = path

    def yarn_attention(self, arch: str, attn: float) -> tuple[float, float]:
        """YaRN's attention factor as llama.cpp computes it, in float32 (``float32``): ``llama_context`` makes the
        graph's ``attn_factor`` — ``get_mscale(F, m)/get_mscale(F, log_mul)`` (``m`` = log_mul for DeepSeek-V2, whose
        ratio is so 1, else 1; without a log_mul ``get_mscale(F, 1)`` = 1 + 0.1 ln F), times ``1/(1 + 0.1 ln F)``,
        times the file's ``attn_factor`` — and ggml's ``rope_yarn`` multiplies it by ``1 + 0.1 ln F`` again (an
        fma) before the cosines and sines take it. ``F`` is ``1/freq_scale`` with ``freq_scale = 1/factor``, each in
        float32. Returns (the graph's factor — an unscaled rotation's, whose own term is 1 — and the rotation's)."""
        tenth, ln, log_mul = f32(0.1), self.ln_factor, self.log_mul

        def get_mscale(ms: float) -> float:
            return f32(f32(f32(tenth * ms) * ln) + 1.0)

        if log_mul:
            own = log_mul if arch == "deepseek2" and log_mul != 1 else 1.0
            graph = f32(get_mscale(own) / get_mscale(log_mul))
        else:
            graph = get_mscale(1.0)
        graph = f32(f32(graph * f32(1.0 / f32(f32(tenth * ln) + 1.0))) * attn)
        return graph, f32(graph * fmaf(tenth, ln, 1.0))

    def longrope(self, path: str, m: _Meta, rope: Mapping[str, list[float]]) -> Scaling:
        """Phi-3's LongRoPE: the short and long factors as stored, chosen by the context against the original one
        (``rope.scaling.original_context_length``, else the training context), as ``get_rope_factors`` chooses."""
        short, long = rope.get(ROPE_SHORT), rope.get(ROPE_LONG)
        if long is None or len(long) != len(short):
            raise SpecError(f"{path}: tensors {ROPE_SHORT} and {ROPE_LONG} come as a pair of equal lengths")
        if self.scaling is not None or not all(math.isfinite(f) and f > 0 for f in short + long):
            raise SpecError(f"{path}: tensors {ROPE_SHORT} and {ROPE_LONG} hold positive factors, with no other scaling")
        context = m.int(Keys.Rope.SCALING_ORIG_CTX_LEN) or m.int(Keys.LLM.CONTEXT_LENGTH, required=True)
        return Scaling("longrope", 1.0, float(context), short=tuple(short), long=tuple(long))

    def rotation(self, dims: int, *, skip: int = 0, base: float | None = None, scaled: bool = True) -> Rotation:
        base = self.base if base is None else base
        interleaved = self.arch in INTERLEAVED
        if not scaled:
            return Rotation(dims, base, skip=skip, interleaved=interleaved, attention=self.stated_attention)
        scaling = self.scaling
        if self.freqs is not None:
            scaling = llama3_from_factors(self.path, self.freqs, base, dims)
        return Rotation(dims, base, scaling, skip=skip, interleaved=interleaved, attention=self.attention,
                        unmodelled=self.unmodelled)


def llama3_factors(dims: int, base: float, s: Scaling) -> list[float]:
    """What llama.cpp's converter stores as ``rope_freqs`` for a ``llama3`` scaling: per frequency, the divisor
    ``1``, ``F`` or ``1/((1−s)/F + s)`` (``conversion/llama.py``)."""
    out = []
    for i in range(dims // 2):
        wavelength = 2 * math.pi * base ** (2 * i / dims)
        if wavelength < s.context / s.high:
            out.append(1.0)
        elif wavelength > s.context / s.low:
            out.append(s.factor)
        else:
            smooth = (s.context / wavelength - s.low) / (s.high - s.low)
            out.append(1 / ((1 - smooth) / s.factor + smooth))
    return out


def llama3_from_factors(path: str, factors: list[float], base: float, dims: int) -> Scaling | None:
    """The ``llama3`` scaling whose factors are ``factors`` (``None`` when all are 1): the stored factors determine
    the divisor ``F``, and — through the factors between 1 and ``F`` — the wavelengths where the ramp starts and
    ends; a config's ``original_max_position_embeddings`` and its ``low``/``high`` factors are those up to one common
    choice, so the low factor is taken as 1 (every Llama 3 and 4 config's) and the context as the one the smooth
    factors give (a whole number, or a power of two where they leave it free). The parameters are kept only if they
    reproduce every stored factor (to float32 rounding): llama.cpp then rotates exactly as the document says."""
    if len(factors) != dims // 2:
        raise SpecError(f"{path}: tensor {ROPE_FREQS} holds {len(factors)} factors, but the rotation turns {dims // 2} pairs")
    if not all(math.isfinite(f) and f > 0 for f in factors):
        raise SpecError(f"{path}: tensor {ROPE_FREQS} holds a factor that is not a positive number")
    top = max(factors)
    if top == 1 and min(factors) == 1:
        return None

    def fits(s: Scaling) -> bool:
        return all(abs(a - b) <= 1e-5 * b for a, b in zip(llama3_factors(dims, base, s), factors))

    wavelengths = [2 * math.pi * base ** (2 * i / dims) for i in range(dims // 2)]
    between = [(lam, (1 / f - 1 / top) / (1 - 1 / top)) for lam, f in zip(wavelengths, factors)
               if 1 + 1e-6 < f < top * (1 - 1e-6)]
    candidates: list[tuple[float, float]] = []  # (context, high), low being 1
    if len(between) >= 2:
        # s = (N/λ − 1)/(H − 1) is linear in 1/λ: a line through the smooth factors.
        (l1, s1), (l2, s2) = between[0], between[-1]
        slope = (s1 - s2) / (1 / l1 - 1 / l2)  # N/(H − 1)
        cut = s1 - slope / l1  # −1/(H − 1)
        if cut < 0:
            high = 1 - 1 / cut
            context = slope * (high - 1)
            candidates.append((context, high))
    lows = [lam for lam, f in zip(wavelengths, factors) if f <= 1 + 1e-6]
    tops = [lam for lam, f in zip(wavelengths, factors) if f >= top * (1 - 1e-6)]
    for k in range(4, 32):
        context = float(2 ** k)
        if len(between) == 1:
            lam, sm = between[0]
            candidates.append((context, 1 + (context / lam - 1) / sm))
        elif not between and (not lows or max(lows) < context) and (not tops or context < min(tops)):
            candidates.append((context, 1.0))
    for context, high in candidates:
        # The plainest numbers that reproduce the factors: a whole context, the high factor to as few places as do.
        for c, h in [(float(round(context)), float(round(high, k))) for k in range(4)] + [(context, high)]:
            if h >= 1 and c > 0:
                s = Scaling("llama3", top, c, 1.0, h)
                if fits(s):
                    return s
    raise SpecError(f"{path}: tensor {ROPE_FREQS} holds frequency factors that no llama3 scaling gives; the "
                    f"language's tables cannot say them")


def _swa_layers(m: _Meta, n: int) -> list[bool]:
    """Which layers llama.cpp attends through a sliding window (or Llama 4's chunks): none for an architecture without
    a default pattern (``gguf_keys.SWA_PATTERN``), none for Gemma 3 or OLMo 2 without a positive window or Llama 4 with
    a window of 0; otherwise the metadata's pattern — a flag per layer, or a period N of which the last layer of every
    N attends globally (0: every layer slides) — else the architecture's own period (``load_swa_pattern``)."""
    every = gguf_keys.SWA_PATTERN.get(m.arch)
    window = m.get(Keys.Attention.SLIDING_WINDOW, gguf_keys.SWA_DEFAULT.get(m.arch))
    if every is None or (m.arch in gguf_keys.SWA_IF_POSITIVE and not (isinstance(window, int) and window > 0)) \
            or (m.arch == "llama4" and window == 0 and m.has(Keys.Attention.SLIDING_WINDOW)):
        return [False] * n
    pattern = m.get(Keys.Attention.SLIDING_WINDOW_PATTERN, every)
    if isinstance(pattern, list):
        return [bool(pattern[i]) if i < len(pattern) else False for i in range(n)]
    why = beyond(pattern, MAX_LAYER + 1, minimum=0)
    if why is not None:
        raise SpecError(f"{m.path}: metadata `{m.key(Keys.Attention.SLIDING_WINDOW_PATTERN)}` {why}")
    return [pattern == 0 or i % pattern < pattern - 1 for i in range(n)]


def _mixer(path, m: _Meta, arch, l, d, tensors, need, shape, base, scaling: _Rope, swa, n):
    T = lambda slot: _t(slot, arch, l)  # noqa: E731
    if shape(T("ssm_conv1d")) is not None:
        conv = shape(T("ssm_conv1d"))
        kernel = m.int(Keys.SSM.CONV_KERNEL, conv[0])
        dk = m.int(Keys.SSM.STATE_SIZE, required=True)
        nk = m.int(Keys.SSM.GROUP_COUNT, required=True)
        nv = m.int(Keys.SSM.TIME_STEP_RANK, required=True)
        inner = m.int(Keys.SSM.INNER_SIZE, required=True)
        if inner % nv:
            raise SpecError(f"{path}: metadata `{m.key(Keys.SSM.INNER_SIZE)}` ({inner}) is not a multiple of `{m.key(Keys.SSM.TIME_STEP_RANK)}` ({nv})")
        if conv[1] != 2 * nk * dk + inner:
            raise SpecError(f"{path}: tensor {T('ssm_conv1d')} convolves {conv[1]} channels, but the metadata's heads make {2 * nk * dk + inner}")
        # llama.cpp's converter stores Qwen3.5's value heads in turn over the key heads (ggml_repeat tiles them);
        # Qwen3-Next's stay grouped (its graph repeats each key head in place).
        return GatedDeltaNet(nk, nv, dk, inner // nv, kernel, Norm(m.float(Keys.Attention.LAYERNORM_RMS_EPS, 1e-6)),
                             in_turn=arch in ("qwen35", "qwen35moe"))
    removable = arch in NO_OP_BLOCKS
    heads = m.int(Keys.Attention.HEAD_COUNT, required=True, layer=l, minimum=0 if removable else 1)
    if heads == 0:
        return None  # deci: an attention-free layer
    if shape(T("attn_kv_a_mqa")) is not None:
        kv_rank = m.int(Keys.Attention.KV_LORA_RANK, required=True)
        q_rank = m.int(Keys.Attention.Q_LORA_RANK, 0, minimum=0) or None
        rope = m.int(Keys.Rope.DIMENSION_COUNT, required=True)
        if m.has(Keys.Attention.KEY_LENGTH_MLA):
            qk, v = m.int(Keys.Attention.KEY_LENGTH_MLA), m.int(Keys.Attention.VALUE_LENGTH_MLA, required=True)
        else:
            qk, v = m.int(Keys.Attention.KEY_LENGTH, required=True), m.int(Keys.Attention.VALUE_LENGTH, required=True)
        kva = shape(T("attn_kv_a_mqa"))
        if kva[1] != kv_rank + rope:
            raise SpecError(f"{path}: tensor {T('attn_kv_a_mqa')} has {kva[1]} outputs, but kv_lora_rank + rope dims is {kv_rank + rope}")
        rotation = scaling.rotation(rope, skip=qk - rope)
        scale, why = None, None
        if (scaling.log_mul and scaling.ln_factor) or rotation.attention != 1:
            # llama.cpp's DeepSeek-V2 graph, in float32 (its library rounds each step): the logit scale is
            # (A · (1 + 0.1 ln F) · (1 + 0.1 · log_mul · ln F))² / √(N+M), with A the graph's attention factor.
            tenth, ln = f32(0.1), scaling.ln_factor
            ms = f32(scaling.stated_attention * f32(1.0 + f32(tenth * ln)))
            ms = f32(ms * f32(1.0 + f32(f32(tenth * scaling.log_mul) * ln)))
            scale = f32(f32(ms * ms) / f32(math.sqrt(qk)))
            why = f"1/√{qk} × {ms:.4f}²: yarn's attention scale"
        return LatentAttention(heads, q_rank, kv_rank, qk - rope, rope, v, rotation,
                               scale, why, kv_b_packed=shape(T("attn_k_b")) is None)
    kv = m.int(Keys.Attention.HEAD_COUNT_KV, heads, layer=l, minimum=0 if removable else 1)
    if kv == 0:
        # deci's "linear attention": the normed input times attn_output, a d by d product.
        wo = need(T("attn_output"), f"layer {l} has one product in place of attention")
        if wo[:2] != (d, d):
            raise SpecError(f"{path}: tensor {T('attn_output')} is {wo[0]} by {wo[1]}, but layer {l}'s product in "
                            f"place of attention is {d} by {d}")
        return Linear()
    hd = m.int(Keys.Attention.KEY_LENGTH, d // heads if d % heads == 0 else None)
    if hd is None:
        raise SpecError(f"{path}: metadata `{m.key(Keys.Attention.KEY_LENGTH)}` is missing and {d} is not a multiple of {heads} heads")
    fused = shape(T("attn_qkv"))  # create_tensor_qkv: q, k and v in one tensor, in turn, for any architecture
    q = fused or need(T("attn_q"), f"layer {l} has attention")
    what = T("attn_qkv") if fused else T("attn_q")
    if q[0] != d:
        raise SpecError(f"{path}: tensor {what} reads {q[0]} inputs, but `{m.key(Keys.LLM.EMBEDDING_LENGTH)}` is {d}")
    gated = not fused and q[1] == 2 * heads * hd
    want = (heads + 2 * kv) * hd if fused else heads * hd
    if not gated and q[1] != want:
        raise SpecError(f"{path}: tensor {what} has {q[1]} outputs, but {heads} heads{f' and 2 × {kv}' if fused else ''} "
                        f"of {hd} make {want}")
    k = None if fused else need(T("attn_k"), f"layer {l} has attention")
    if k is not None and k[1] != kv * hd:
        raise SpecError(f"{path}: tensor {T('attn_k')} has {k[1]} outputs, but {kv} key/value heads of {hd} make {kv * hd}")
    rope_dims = m.int(Keys.Rope.DIMENSION_COUNT, hd)
    window = chunk = None
    rotation: Rotation | None = scaling.rotation(rope_dims)
    notes: tuple[str, ...] = ()
    if arch == "llama4":
        # llama.cpp: chunks of 8192 whatever the metadata says, on the layers its pattern slides (three of four), and
        # rotation on every layer but each 4th (NoPE, with a query temperature) — unless its sliding window is 0: then
        # no layer is chunked and only the last is NoPE (n_no_rope_layer_step becomes the layer count).
        unchunked = _llama4_unchunked(m)
        if swa[l]:
            chunk = 8192
            rotation = scaling.rotation(rope_dims, base=m.float(Keys.Rope.FREQ_BASE_SWA, base, positive=True))
        if (l + 1) % (n if unchunked else 4) == 0:
            rotation = None
            if not unchunked:
                notes = (NOPE_NOTE,)  # its query temperature: the document's `modelled` (LLAMA4_TEMPERATURE)
    elif swa[l]:
        default = gguf_keys.SWA_DEFAULT.get(arch)
        window = m.int(Keys.Attention.SLIDING_WINDOW, default, required=default is None)
        if arch == "gemma3":
            # llama.cpp's sliding layers rotate at their own base (10000 unless stated), unscaled (freq_scale_swa 1).
            rotation = scaling.rotation(rope_dims, base=m.float(Keys.Rope.FREQ_BASE_SWA, 10000.0, positive=True),
                                        scaled=False)
        elif arch == "olmo2":
            # Olmo 3's sliding layers: at the global base (olmo2.cpp's graph passes no other), unscaled and with no
            # attention factor.
            rotation = Rotation(rope_dims, base)
        else:
            # gpt-oss, Gemma 2: at their own base when stated, scaled as every layer.
            rotation = scaling.rotation(rope_dims, base=m.float(Keys.Rope.FREQ_BASE_SWA, base, positive=True))
    rope_off = arch == "granite" and m.get(Keys.Rope.SCALING_FINETUNED, True) is False  # Granite's rope switch
    if (arch in NOPE_GLOBAL and not swa[l]) or rope_off:
        rotation = None
    scale, why, scale_queries = None, None, False
    if m.float(Keys.Attention.SCALE, 0.0):  # 0: the graph's default, 1/√head width
        scale = m.float(Keys.Attention.SCALE)
        why = "the checkpoint's attention scale"
    elif arch in ("gemma2", "gemma3"):
        # ★ llama.cpp's Gemma graphs multiply the rotated queries by f_attention_scale, 1.0f/sqrtf of the head width
        # (of d / heads for Gemma 3 27B and Gemma 2 27B: query_pre_attn_scalar) in float32, and attend at a scale of
        # 1: the logits scaled after K·q, or by the 7-digit decimal, differ in last bits.
        width = d // heads if (arch, n) in (("gemma3", 62), ("gemma2", 46)) else hd
        scale, scale_queries = f32(1.0 / f32(math.sqrt(width))), True
        why = f"the rotated queries scaled by 1/√{width} in float32, as llama.cpp's Gemma graph scales them" + (
            f" (Gemma {arch[-1]} 27B's query_pre_attn_scalar)" if width != hd else "")
    qn = shape(T("attn_q_norm"))
    qk_norm = Norm(m.float(Keys.Attention.LAYERNORM_RMS_EPS, 1e-6)) if qn is not None else None
    # Gemma 2's graph soft-caps every attention logit (50 unless the file says).
    softcap = m.float(Keys.LLM.ATTN_LOGIT_SOFTCAPPING, 50.0, positive=True) if arch == "gemma2" else None
    return Attention(heads, kv, hd, rotation, window=window, chunk=chunk, qk_norm=qk_norm,
                     qk_norm_whole=qn is not None and qn[0] == heads * hd != hd, softcap=softcap,
                     fused="qkv" if fused else None,
                     # llama.cpp norms Llama 4's rotated q and k unless the model has 128 experts (Maverick).
                     qk_l2=arch == "llama4" and rotation is not None and shape(T("attn_q_norm")) is None
                     and m.int(Keys.LLM.EXPERT_COUNT, 0, minimum=0) != 128,
                     gated=gated, bias=shape(T("attn_qkv_bias" if fused else "attn_q_bias")) is not None,
                     out_bias=shape(T("attn_output_bias")) is not None, sinks=shape(T("attn_sinks")) is not None,
                     scale=scale, scale_why=why, scale_queries=scale_queries, notes=notes)


def _normalized(m: _Meta) -> bool:
    """Whether llama.cpp divides the chosen experts' weights by their sum: fixed by the architecture's graph
    (``gguf_keys.TOPK_NORMALIZED``) or, for DeepSeek-V2, read from ``expert_weights_norm`` (false when absent)."""
    fixed = gguf_keys.TOPK_NORMALIZED[m.arch]
    return bool(m.get(Keys.LLM.EXPERT_WEIGHTS_NORM, False)) if fixed is None else fixed


def _ffn(path, m: _Meta, arch, l, d, tensors, need, shape):
    T = lambda slot: _t(slot, arch, l)  # noqa: E731
    width = m.int(Keys.LLM.FEED_FORWARD_LENGTH, 0, layer=l, minimum=0) if arch in NO_OP_BLOCKS else None
    if width == 0:
        return None  # deci: a layer without a feed-forward block
    gate_exps = shape(T("ffn_gate_exps")) or shape(T("ffn_up_exps"))
    if gate_exps is not None:
        if arch not in gguf_keys.TOPK_NORMALIZED:
            raise SpecError(f"{path}: tensor {T('ffn_gate_exps')} holds experts, but llama.cpp's {arch} model has none")
        count = m.int(Keys.LLM.EXPERT_COUNT, required=True)
        if gate_exps[2] != count:
            raise SpecError(f"{path}: tensor {T('ffn_gate_exps')} holds {gate_exps[2]} experts, but `{m.key(Keys.LLM.EXPERT_COUNT)}` is {count}")
        if gate_exps[0] != d:
            raise SpecError(f"{path}: tensor {T('ffn_gate_exps')} reads {gate_exps[0]} inputs, but the model is {d} wide")
        top = m.int(Keys.LLM.EXPERT_USED_COUNT, required=True)
        gating = m.int(Keys.LLM.EXPERT_GATING_FUNC, 1, minimum=0)
        shared = shape(T("ffn_gate_shexp"))
        groups = m.int(Keys.LLM.EXPERT_GROUP_COUNT, 1, minimum=0) or 1
        scale = m.float(Keys.LLM.EXPERT_WEIGHTS_SCALE)
        llama4 = arch == "llama4"
        return Experts(count, top, gate_exps[1], scoring="sigmoid" if gating == 2 or llama4 else "softmax",
                       normalized=_normalized(m),
                       routed_scale=scale if scale and scale != 1 else None,
                       selection_bias=shape(T("exp_probs_b")) is not None,
                       groups=groups if groups > 1 else None,
                       keep_groups=m.int(Keys.LLM.EXPERT_GROUP_USED_COUNT) if groups > 1 else None,
                       router_bias=shape(T("ffn_gate_inp_bias")) is not None,
                       expert_biases=shape(T("ffn_gate_exps_bias")) is not None,
                       clamp=7.0 if arch == "gpt-oss" else None, weighting_inputs=llama4,
                       shared_width=shared[1] if shared else None,
                       shared_gate=shape(T("ffn_gate_inp_shexp")) is not None,
                       # ★ qwen2moe.cpp gates its shared expert by ggml_div(ggml_silu(g), g), not ggml_sigmoid(g).
                       quotient_gate=arch == "qwen2moe" and shape(T("ffn_gate_inp_shexp")) is not None)
    activation = "gelu" if arch in GELU else "silu"
    if shape(T("ffn_gate")) is None and arch in UP_ONLY:
        # Phi-3 keeps its gate and up projections in ffn_up, gate first (LLM_FFN_SWIGLU splits it); StarCoder2's block
        # is not gated (LLM_FFN_SEQ), its up and down projections biased.
        up = need(T("ffn_up"), f"layer {l} has a feed-forward block")
        if up[0] != d:
            raise SpecError(f"{path}: tensor {T('ffn_up')} reads {up[0]} inputs, but the model is {d} wide")
        if UP_ONLY[arch] == "fused":
            if up[1] % 2:
                raise SpecError(f"{path}: tensor {T('ffn_up')} has {up[1]} outputs: not a gate and an up projection "
                                f"of one width")
            return Dense(up[1] // 2, activation, fused=True)
        return Dense(up[1], activation, gated=False, bias=shape(T("ffn_up_bias")) is not None)
    gate = need(T("ffn_gate"), f"layer {l} has a feed-forward block")
    if gate[0] != d:
        raise SpecError(f"{path}: tensor {T('ffn_gate')} reads {gate[0]} inputs, but the model is {d} wide")
    if width is not None and gate[1] != width:
        raise SpecError(f"{path}: tensor {T('ffn_gate')} has {gate[1]} outputs, but "
                        f"`{m.key(Keys.LLM.FEED_FORWARD_LENGTH)}` says layer {l}'s block is {width} wide")
    # Granite's (and any graph's) optional biases on the three projections: the language's biased block has all three.
    biases = [shape(T(f"ffn_{p}_bias")) is not None for p in ("gate", "up", "down")]
    if any(biases) and not all(biases):
        raise SpecError(f"{path}: layer {l} biases only some of ffn_gate, ffn_up and ffn_down; the language's biased "
                        f"block biases all three")
    return Dense(gate[1], activation, bias=all(biases))
