"""The operation table: the one place an operation's spelling, its slots and its options are written.

The parser matches these patterns, the server completes and explains from them, the TextMate grammar's word lists
follow them, and the reference interpreter implements each ``name``. A pattern is a sequence of items:

- a literal word or punctuation (``of``, ``with``, ``,``),
- ``$X`` — an operand: an atom (a name, a number, or a parenthesised expression),
- ``#H`` — a number: a literal number or a ``## Model`` constant,
- ``#*H`` — one or more numbers, one after another (a list: LongRoPE's per-frequency factors).

An operation is its ``words`` (how it starts), then its ``pattern``, then any of its ``options``, each introduced by
a comma. Options marked required must appear. Invariant: no two operations start with the same word sequence. Options of one operation may share their leading
words (``heads H sharing G`` and ``heads H``): the parser tries them longest first and keeps the first that reads.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property


@dataclass(frozen=True)
class Option:
    pattern: tuple[str, ...]
    required: bool = False
    doc: str = ""
    needs: str = ""  # the key of an option without which this one means nothing

    @property
    def word(self) -> str:
        return self.pattern[0]

    @cached_property
    def key(self) -> str:
        """The option's name in a parsed call: its leading literal words joined (``heads``, ``chunks of``)."""
        words = []
        for item in self.pattern:
            if item[0] in "$#":
                break
            words.append(item)
        return " ".join(words)


@dataclass(frozen=True)
class Op:
    name: str
    pattern: tuple[str, ...]
    doc: str
    options: tuple[Option, ...] = field(default=())

    @cached_property
    def words(self) -> tuple[str, ...]:
        """The literal words the operation starts with, up to its first slot."""
        out = []
        for item in self.pattern:
            if item[0] in "$#":
                break
            out.append(item)
        return tuple(out)

    @property
    def spelling(self) -> str:
        return " ".join(self.pattern) + "".join(", " + " ".join(o.pattern) for o in self.options)


def _p(text: str) -> tuple[str, ...]:
    return tuple(text.replace(",", " , ").split())


def _op(name: str, pattern: str, doc: str, *options: Option) -> Op:
    return Op(name, _p(pattern), doc, tuple(options))


def _opt(pattern: str, doc: str = "", required: bool = False, needs: str = "") -> Option:
    return Option(_p(pattern), required, doc, needs)


OPS: tuple[Op, ...] = (
    _op("rmsnorm", "rmsnorm of $X with $G", "Root-mean-square norm per row: x/√(mean x²+ε)·(G+offset) (Zhang & Sennrich 2019).",
        _opt("epsilon #E", "ε, default 1e-6"), _opt("offset #O", "added to the gain (Gemma's 1+g)"),
        _opt("heads #H", "normalise each of H heads separately (QK-norm)")),
    _op("l2norm", "l2norm of $X", "L2 norm per row (or per head): x/√(Σx²+ε).",
        _opt("epsilon #E", "ε, default 1e-6"), _opt("heads #H", "normalise each of H heads separately")),
    _op("layernorm", "layernorm of $X with $G", "Layer norm per row (Ba et al. 2016): (x−mean x)/√(var x+ε)·G (+ B).",
        _opt("bias $B", "added after the gain (StarCoder2's LayerNorm)"), _opt("epsilon #E", "ε, default 1e-5")),
    _op("silu", "silu of $X", "x·σ(x), elementwise."),
    _op("gelu", "gelu of $X", "GELU, tanh approximation: ½x(1+tanh(√(2/π)(x+0.044715x³))), elementwise."),
    _op("sigmoid", "sigmoid of $X", "σ(x) = 1/(1+e⁻ˣ), elementwise."),
    _op("softplus", "softplus of $X", "log(1+eˣ), elementwise."),
    _op("exp", "exp of $X", "eˣ, elementwise."),
    _op("softmax", "softmax of $X", "Softmax over the last axis."),
    _op("soft cap", "soft cap of $X at #C", "C·tanh(x/C), elementwise: values squashed into (−C, C) (Gemma 2's final logits)."),
    _op("columns", "columns #A to #B of $X",
        "Columns A…B−1 of X: one part of a fused product (Phi-3's qkv, InternLM2's wqkv) named as its own tensor.",
        _opt("of every #N", "columns A…B−1 of each group of N (a per-head or per-group interleave)")),
    _op("row", "row $T of $E", "Embedding lookup: E[T[r], :] for each row's token id."),
    _op("rows", "rows $T of $E", "Embedding lookup: E[T[r], :] for each row's token id."),
    _op("rope", "rope of $X at $P with $C and $S", "Rotary position embedding, rotate-half form (Su et al. 2021; GPT-NeoX), of row r at position P+r.",
        _opt("heads #H", "how many heads X holds", required=True), _opt("rotating #R", "rotate only the first R dims of each head"),
        _opt("after #N", "leave the first N dims of each head as they are; rotate the R after them (DeepSeek's [nope | rope] heads)"),
        _opt("interleaved", "rotate adjacent pairs (2i, 2i+1) — GPT-J; llama.cpp's Llama, Llama 4, DeepSeek — not the halves (i, i+R/2)")),
    _op("attention", "attention of $Q over $K and $V at $P", "Causal grouped-query attention of row r (position P+r) over cached positions ≤ P+r (Ainslie et al. 2023).",
        _opt("heads #H sharing #G", "H query heads share G key/value heads", required=True),
        _opt("window #W", "sliding window: keys j > P+r−W"), _opt("chunks of #C", "chunked: keys in the same C-chunk"),
        _opt("scale #F", "logit scale, default 1/√(head width)"), _opt("sinks $S", "one learned sink logit per head (gpt-oss)"),
        _opt("soft cap #L", "scaled logits soft-capped, L·tanh(logit/L), before the mask (Gemma 2)")),
    _op("latent attention", "latent attention of $Q over $C and $R at $P with $A and $B",
        "Multi-head latent attention, absorbed form (DeepSeek-V2, 2024): keys and values from a cache of latents.",
        _opt("heads #H", required=True), _opt("nope #N", "per-head dims without rotation", required=True),
        _opt("rope #M", "per-head rotated dims", required=True), _opt("scale #F", "logit scale, default 1/√(N+M)")),
    _op("gated delta", "gated delta of $Q , $K and $V with state $S , decay $A and beta $B",
        "Gated DeltaNet recurrence (Yang et al. 2024): S ← a·S; S ← S + b·k(v − Sᵀk)ᵀ; o = Sᵀq, row by row. Updates S.",
        _opt("heads #H sharing #G", "H value heads sharing G key heads", required=True), _opt("heads #H", "H value heads, as many key heads"),
        _opt("in turn", "value head h reads key head h mod G (llama.cpp's Qwen3.5 order), not ⌊h/(H/G)⌋"),
        _opt("scale #F", "o = (Sᵀq)·F: the output scaled after its sums (llama.cpp's fused recurrence scales so)")),
    _op("short convolution", "short convolution of $X with state $S and $W",
        "Causal depthwise convolution over the last k rows (Mamba/GDN short conv); S holds the k−1 rows before this step. Updates S."),
    _op("experts", "experts of $X with router $R , top #K , using $G , $U and $D",
        "Mixture of experts: route each row to its top K SwiGLU experts and sum their outputs by weight (Shazeer et al. 2017).",
        _opt("scored by softmax", "softmax over all experts (the default)"), _opt("scored by sigmoid", "sigmoid per expert"), _opt("normalized", "divide the top-K weights by their sum"),
        _opt("routed scale #F", "multiply the routed sum by F"), _opt("selection bias $B", "added to scores to choose experts (DeepSeek-V3)"),
        _opt("groups #N keeping #M", "group-limited routing (DeepSeek-V3)"), _opt("router bias $RB", "added to router logits (gpt-oss)"),
        _opt("expert biases $BG , $BU and $BD", "per-expert projection biases (gpt-oss)"),
        _opt("clamped swiglu at #L", "gpt-oss activation with clamp L"), _opt("weighting inputs", "weight the expert input, not its output (Llama 4)"),
        _opt("shared $G2 , $U2 and $D2", "an always-on shared SwiGLU expert"), _opt("shared gate $S", "σ(X·S) gates the shared expert"),
        _opt("quotient gate", "the shared gate's σ(g) computed as silu(g)/g in float32 (llama.cpp's Qwen2-MoE graph)",
             needs="shared gate")),
    _op("argmax", "index of the largest of $X", "Argmax per row: the next token id."),
)

#: How the host fills a table (LANGUAGE §4): ``cosines of base B`` or ``sines of base B``, then the rotation's scaling.
#: Not operations of an expression — only a table declaration reads them — but written here, as every operation is,
#: so the parser, the grammar and completion read one definition. Invariant: the numbers a fill names are all a
#: table needs (``numerics.kernels.fill_table`` computes it from them and nothing else).
_SCALING = (
    _opt("linear scaling by #F", "frequencies divided by F (position interpolation)"),
    _opt("llama3 scaling by #F from #N with low #L and high #H",
         "Llama 3's: wavelengths above N/L divided by F, below N/H kept, smoothly between"),
    _opt("yarn scaling by #F from #N with fast #BF and slow #BS",
         "YaRN: frequencies divided by F, ramped back to the base between the dims where N spans BF and BS turns"),
    _opt("unrounded ramp", "YaRN's ramp ends are not rounded to whole dims (transformers' truncate: false)"),
    _opt("longrope scaling from #N with short factors #*SF and long factors #*LF",
         "LongRoPE (Phi-3): frequency i divided by the short factor i when the table holds at most N positions, "
         "else by the long factor i"),
    _opt("attention factor #A", "cosines and sines multiplied by A (YaRN's attention factor)"),
)
FILLS: tuple[Op, ...] = (
    _op("cosines", "cosines of base #B", "T[p, i] = A·cos(p·θᵢ), θᵢ = base^(−i/w) as the scaling says.", *_SCALING),
    _op("sines", "sines of base #B", "T[p, i] = A·sin(p·θᵢ), θᵢ = base^(−i/w) as the scaling says.", *_SCALING),
)
FILL_BY_FIRST_WORD: dict[str, Op] = {o.pattern[0]: o for o in FILLS}

#: The words an expression may apply: ``times``, ``plus``… are binary; these are the named operations' first words.
OP_BY_FIRST_WORD: dict[str, list[Op]] = {}
for _o in OPS:
    OP_BY_FIRST_WORD.setdefault(_o.pattern[0], []).append(_o)

BINARY_WORDS = ("plus", "minus", "times", "multiplied", "scaled")

ROLES = ("weight", "input", "state", "table")
#: Every word the language gives a meaning to: what completion offers and the grammar colours.
VOCABULARY = frozenset(
    {"Let", "be", "Set", "to", "Return", "a", "an", "q8", "of", "by", "token", "position", "rows", "ctx", "row",
     "cosines", "sines", "base", *ROLES, *BINARY_WORDS}
    | {item for o in OPS + FILLS for item in o.pattern if item[0] not in "$#,"}
    | {item for o in OPS + FILLS for opt in o.options for item in opt.pattern if item[0] not in "$#,"}
)

#: The words that cannot be bound: every word of the language. A kind's digest treats every occurrence of a bound
#: word as the binder (LANGUAGE §7), so a layer that bound ``q8`` — layer 8's query, by the usual naming — would read
#: its own ``a q8 weight`` declarations as that name and stop being one program with its siblings.
KEYWORDS = VOCABULARY

#: How a person names each operation: its leading words without a trailing ``of`` (``latent attention``).
OPERATION_NAMES = tuple(sorted({" ".join(o.words[:-1] if o.words[-1] == "of" else o.words) for o in OPS}))


def op_named(name: str) -> Op:
    for o in OPS + FILLS:
        if o.name == name:
            return o
    raise KeyError(name)
