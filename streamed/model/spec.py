"""ModelSpec: a model's architecture as data — what the author writes out as a document.

A spec says, for the whole model, its dimensions, vocabulary and norms, and for each layer its mixer (attention with
its rotation and window, Gated DeltaNet, or latent attention), its feed-forward block (dense, or a mixture of experts)
and the norms around them. It names no tensor and holds no weight: the naming is the author's (``author.py``), the
values the importers' (``hf.py`` from a ``config.json``, ``gguf.py`` from a GGUF's metadata).

Invariant: two layers whose ``LayerSpec`` are equal are written by the author as one program up to their names, and
so fall into one kind (LANGUAGE §7). Everything that makes a layer's program differ is therefore in its
``LayerSpec``, and nothing in a ``LayerSpec`` that the program does not show (an index, a name) — frozen dataclasses,
compared by value.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union


@dataclass(frozen=True)
class Scaling:
    """How a rotation's frequencies are scaled (LANGUAGE §4, ``numerics.kernels.rotary_frequencies``): ``linear`` by
    ``factor``; ``llama3`` by ``factor`` from the original ``context`` with its ``low`` and ``high`` frequency
    factors; ``yarn`` by ``factor`` from ``context`` with its ``fast`` and ``slow`` rotation counts, the ramp's ends
    rounded to whole dims unless ``unrounded``."""

    kind: str
    factor: float
    context: float | None = None
    low: float | None = None
    high: float | None = None
    fast: float | None = None
    slow: float | None = None
    unrounded: bool = False
    short: tuple[float, ...] | None = None
    long: tuple[float, ...] | None = None


@dataclass(frozen=True)
class Rotation:
    """Rotary position embedding of a head: ``dims`` of it rotate, at frequencies of ``base`` scaled as ``scaling``
    says, the cosines and sines multiplied by ``attention`` (YaRN's attention factor).

    ``skip`` dims of each head come first and are left as they are (DeepSeek's heads are ``[nope | rope]``).
    ``interleaved``: the pairs that turn are adjacent dims (GPT-J; how llama.cpp stores Llama's q and k, and how
    DeepSeek and Llama 4 rotate), not the halves. ``unmodelled`` names a scaling scheme the language cannot express
    (``dynamic``: it depends on the sequence's length), said in a comment; the tables are then unscaled."""

    dims: int
    base: float
    scaling: Scaling | None = None
    skip: int = 0
    interleaved: bool = False
    attention: float = 1.0
    unmodelled: str | None = None

    @property
    def table_width(self) -> int:
        return self.dims // 2


@dataclass(frozen=True)
class Norm:
    """An RMS norm: ``x/√(mean x²+ε)·(g+offset)``. Gemma and Qwen3-Next store ``g`` so that ``offset`` is 1. With
    ``layer`` a layer norm, ``(x − mean x)/√(var x + ε)·g``, plus a learned bias when ``bias`` (StarCoder2)."""

    eps: float = 1e-6
    offset: float = 0.0
    layer: bool = False
    bias: bool = False


@dataclass(frozen=True)
class Attention:
    """Grouped-query attention. ``rotation`` None is NoPE; ``window`` a sliding window of W keys; ``chunk`` Llama 4's
    chunked attention; ``qk_norm`` an RMS norm per head of queries and keys (Qwen3, Gemma 3), ``qk_l2`` a weightless
    L2 norm (Llama 4); ``gated`` Qwen3-Next's sigmoid output gate packed with the queries; ``bias`` biases on q, k, v,
    ``out_bias`` on the output projection; ``sinks`` one learned logit per head (gpt-oss); ``scale`` the logit scale
    when it is not ``1/√head_dim``, with the reason in ``scale_why``; ``scale_queries``: the scale multiplies the
    rotated queries, and the logits are not scaled again (llama.cpp's Gemma graphs: ``ggml_scale`` of Q, attention at a
    scale of 1); ``softcap`` soft-caps the scaled logits (Gemma 2). ``qk_norm_whole``: the q/k norm is over the whole projection, not per head (OLMo 2). ``fused``: q, k and v are
    one stored tensor, so one product whose columns are split — ``"qkv"`` all queries, keys, values in turn (Phi-3),
    ``"grouped"`` per key/value head its queries, its key, its value (InternLM2's ``wqkv``)."""

    heads: int
    kv_heads: int
    head_dim: int
    rotation: Rotation | None
    window: int | None = None
    chunk: int | None = None
    qk_norm: Norm | None = None
    qk_l2: bool = False
    gated: bool = False
    bias: bool = False
    out_bias: bool = False
    sinks: bool = False
    scale: float | None = None
    scale_why: str | None = None
    notes: tuple[str, ...] = ()
    softcap: float | None = None
    qk_norm_whole: bool = False
    fused: str | None = None
    scale_queries: bool = False

    kind = "attention"


@dataclass(frozen=True)
class GatedDeltaNet:
    """Gated DeltaNet (Qwen3-Next's linear attention): ``key_heads`` heads of ``key_dim`` for q and k, ``value_heads``
    of ``value_dim`` for v, a causal short convolution of ``conv_kernel`` over q, k and v, and a gated RMS norm of the
    output per value head. Value head ``h`` reads key head ``h // (value_heads/key_heads)``, or ``h mod key_heads``
    when ``in_turn`` (llama.cpp's converter reorders Qwen3.5's value heads so)."""

    key_heads: int
    value_heads: int
    key_dim: int
    value_dim: int
    conv_kernel: int
    norm: Norm = Norm()
    in_turn: bool = False

    kind = "gated deltanet"


@dataclass(frozen=True)
class LatentAttention:
    """DeepSeek-V2 multi-head latent attention: queries directly (``q_rank`` None) or through a rank-``q_rank``
    bottleneck, keys and values from a ``kv_rank`` latent with ``rope_dim`` shared rotated key dims; per head
    ``nope_dim`` + ``rope_dim`` query dims and ``v_dim`` value dims."""

    heads: int
    q_rank: int | None
    kv_rank: int
    nope_dim: int
    rope_dim: int
    v_dim: int
    rotation: Rotation
    scale: float | None = None
    scale_why: str | None = None
    kv_b_packed: bool = True  # keys' and values' up-projections in one tensor (kv_b_proj), or split (attn_k_b, attn_v_b)

    kind = "latent attention"


@dataclass(frozen=True)
class Linear:
    """One ``d by d`` product in place of a block (Nemotron-NAS's ``replace_with_linear``): as a mixer it reads the
    layer's normed input and joins the residual as attention would; as a feed-forward block, the normed residual."""

    kind = "linear"


Mixer = Union[Attention, GatedDeltaNet, LatentAttention, Linear]


@dataclass(frozen=True)
class Dense:
    """A gated feed-forward block ``(act(x·G) ⊙ x·U)·D`` of ``width``; ``activation`` is ``silu`` or ``gelu``. Not
    ``gated``: ``act(x·U + bu)·D + bd`` (StarCoder2), biased when ``bias``. ``fused``: the gate and up projections
    are one stored tensor, gate first (Phi-3's ``gate_up_proj``), so one product whose halves are split."""

    width: int
    activation: str = "silu"
    gated: bool = True
    bias: bool = False
    fused: bool = False


@dataclass(frozen=True)
class Experts:
    """A mixture of ``count`` SwiGLU experts of ``width``, ``top_k`` per token.

    ``scoring`` softmax or sigmoid; ``normalized`` divides the top-k weights by their sum; ``routed_scale`` multiplies
    the routed sum; ``selection_bias`` (DeepSeek-V3) and ``groups``/``keep_groups`` choose experts; ``router_bias``
    and ``expert_biases`` and ``clamp`` are gpt-oss's; ``weighting_inputs`` Llama 4's; ``shared_width`` one always-on
    expert of that width, ``shared_gate`` its sigmoid gate (Qwen2-MoE, Qwen3-Next), ``quotient_gate`` that σ(g)
    computed as ``silu(g)/g`` (llama.cpp's Qwen2-MoE graph; float32's quotient differs from its σ in last bits)."""

    count: int
    top_k: int
    width: int
    scoring: str = "softmax"
    normalized: bool = False
    routed_scale: float | None = None
    selection_bias: bool = False
    groups: int | None = None
    keep_groups: int | None = None
    router_bias: bool = False
    expert_biases: bool = False
    clamp: float | None = None
    weighting_inputs: bool = False
    shared_width: int | None = None
    shared_gate: bool = False
    quotient_gate: bool = False


FeedForward = Union[Dense, Experts, Linear]


@dataclass(frozen=True)
class LayerSpec:
    """One layer: its mixer, its feed-forward block, its norms. ``sandwich`` is Gemma's post-norms: the mixer's and
    the feed-forward block's outputs are normed before they join the residual. Without ``pre_norm`` the mixer and the
    feed-forward block read the residual stream itself (OLMo 2, whose only norms are the post-norms).

    A block that is ``None`` is removed (Nemotron-NAS's ``no_op``): the residual passes it by, with no norm and no
    weight of its own — a layer with neither is its input. ``parallel``: the feed-forward block reads the mixer's
    normed input, and both outputs join the residual at once (Cohere's one LayerNorm): ``(x + mixer) + ffn`` as
    transformers adds them, or ``(ffn + x) + mixer`` with ``ffn_first`` (llama.cpp's Cohere 2 graph; float32 sums
    in another order differ in a last bit). ``residual_scale`` multiplies
    each block's output before it joins the residual (Granite's ``residual_multiplier``)."""

    mixer: Mixer | None
    ffn: FeedForward | None
    norm: Norm
    sandwich: bool = False
    pre_norm: bool = True
    parallel: bool = False
    residual_scale: float | None = None
    ffn_first: bool = False


@dataclass(frozen=True)
class ModelSpec:
    """A whole model. ``layers`` in order; ``embed_scale`` multiplies the embedding (Gemma's √d, with its reason in a
    comment); ``tied`` means the output projection is the embedding; ``source`` names where the spec came from (for
    the document's title comment); ``notes`` are facts of the source the language does not model, said in comments.

    ``final_softcap`` soft-caps the logits (Gemma 2). ``logit_scale`` multiplies them (Cohere's ``logit_scale``,
    Granite's ``1/logits_scaling``), with its reason in ``logit_scale_why``; ``embed_scale_why`` is the embedding
    scale's reason where it is not Gemma's √d.

    ``naming`` is ``"gguf"`` or ``"hf"``: whose tensor names the author binds (llama.cpp's or transformers').
    ``trained`` is the context the model was trained at (a config's ``max_position_embeddings``, else its rope
    scaling's original context; a GGUF's ``context_length``): the document's ``trained`` constant, past which a
    deployment's context is warned of (LANGUAGE §3).
    ``modelled`` is how many positions the document computes as the model does, when a part of the model that
    changes with the position is not written past them (Llama 4's query temperature on its NoPE layers, 1 below its
    ``floor_scale``), with the reason in ``modelled_why``: the document's ``modelled`` constant, past which a
    deployment or a run is refused (LANGUAGE §3) — never a silent approximation.
    ``assumed`` says, a sentence each, which of the fields that size the model the source left out and what was
    taken for them (transformers' class default): the author writes them first among the notes, and ``streamed
    author`` repeats them as warnings, so a config missing ``hidden_size`` is never authored at 4096 without a word."""

    name: str
    architecture: str
    d: int
    vocab: int
    layers: tuple[LayerSpec, ...]
    final_norm: Norm
    tied: bool = False
    embed_scale: float | None = None
    final_softcap: float | None = None
    logit_scale: float | None = None
    logit_scale_why: str | None = None
    embed_scale_why: str | None = None
    naming: str = "hf"
    hf_prefix: str = "model."
    source: str = ""
    notes: tuple[str, ...] = field(default=())
    assumed: tuple[str, ...] = field(default=())
    trained: int | None = None
    modelled: int | None = None
    modelled_why: str | None = None

    def __post_init__(self):
        if not self.layers:
            raise ValueError("a model has at least one layer")


#: What a Llama 4 NoPE layer's attention says of its query temperature, by both routes (the document's ``modelled``).
NOPE_NOTE = "NoPE layer: its query temperature is 1 within `modelled` positions, and is not written"


class SpecError(Exception):
    """A source that does not describe a model this tool can write: the message names the field and what is wrong
    with it, and where it came from (``config.json: num_hidden_layers is 0``)."""
