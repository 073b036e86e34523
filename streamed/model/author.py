"""The author: a ``ModelSpec`` written out as a document of the language — every section, every layer.

What it guarantees, and what the whole system measures (LANGUAGE §7): layers of equal ``LayerSpec`` are written as the
same program up to their names. Each layer is produced by one function of its spec and its index only; the index
appears only as the suffix of the names it binds (``Wq3``, ``xn3``, ``Kc3``; stems never end in a digit), the
hidden state it reads is ``x`` or ``xo{l-1}`` and it returns ``xo{l}``. Rotation tables are shared by every layer,
indexed by their (width, base), never by a layer.

Every declared weight is bound by one ``## Checkpoint`` entry to the tensor that holds it: llama.cpp's GGUF names
(``blk.3.attn_q.weight``) or transformers' (``model.layers.3.self_attn.q_proj.weight``), as ``names`` gives them,
with the column slices that carve packed tensors (Qwen3-Next's gated queries, DeepSeek's ``kv_a_proj_with_mqa``). A
tensor that holds several projections one product reads whole (Phi-3's ``qkv_proj`` and ``gate_up_proj``, InternLM2's
``wqkv``, a GGUF's ``attn_qkv``) is one product, its parts named by ``columns A to B of``. Every projection is
declared ``q8`` — routers, expert banks and the shared expert's gate included, so that each is read as the checkpoint
stores it; norms' gains, biases and convolution kernels are not.

The text is written as a person would: declarations and computations aligned, numbers that need a reason (a logit
scale, an embedding scale, a rotation scaling the language does not model) commented — once, in the first layer of
each kind; comments are not part of a program, so every layer still reads as its siblings.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from ..lang.limits import MAX_DOCUMENT_BYTES
from ..lang.ops import KEYWORDS
from .spec import (
    Attention, Dense, Experts, GatedDeltaNet, LatentAttention, LayerSpec, Linear, ModelSpec, Norm, Rotation, SpecError,
)
from .float32 import f32
from .names import gguf_arch, gguf_tensor, hf_tensor

__all__ = ["author", "summary", "number", "gguf_tensor", "hf_tensor", "gguf_arch", "kind_label"]


# ---- numbers ----------------------------------------------------------------------------------------------------


def number(v: float) -> str:
    """A number as the language reads it: whole numbers plainly, small ones with an exponent (``1e-6``), others with
    up to 7 significant digits. Never ``e+``: the lexer reads ``1e-6`` and ``0.125`` but a plain integer is clearer."""
    if v == int(v) and abs(v) < 1e15:
        return str(int(v))
    if abs(v) < 1e-3:
        mant, exp = f"{v:.6e}".split("e")
        mant = mant.rstrip("0").rstrip(".")
        return f"{mant}e{int(exp)}"
    return f"{v:.7g}"


def number32(v: float) -> str:
    """A float32 (a factor the tables or the logits are multiplied by, which llama.cpp computes or reads in float32)
    as the shortest decimal that reads back as it, so the document states the value multiplied by, bit for bit; any
    other number as ``number``."""
    if v != f32(v) or v == int(v) or abs(v) < 1e-3:
        return number(v)
    return next(t for t in (f"{v:.{d}g}" for d in range(7, 10)) if f32(float(t)) == v)


# ---- one layer ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Binding:
    """The tensor (``{l}`` for the layer index) a declared stem reads, and the part of it (LANGUAGE §6)."""

    tensor: str
    columns: tuple[int, int, int | None] | None = None
    rows: tuple[int, int] | None = None

    def entry(self) -> str:
        """The right-hand side of its ``## Checkpoint`` line: ``"blk.{l}.attn_q.weight", columns 0 to 256``."""
        out = f'"{self.tensor}"'
        if self.columns is not None:
            a, b, every = self.columns
            out += f", columns {a} to {b}" + (f" of every {every}" if every else "")
        if self.rows is not None:
            out += f", rows {self.rows[0]} to {self.rows[1]}"
        return out


COMMENT_COLUMN = 72


class _Writer:
    """One program's lines. Names are ``stem + suffix`` (the layer index, or nothing for the embed and the head);
    ``comments`` is False for every layer but the first of its kind, so reasons are said once."""

    def __init__(self, author: "_Author", suffix: str, comments: bool):
        self.a = author
        self.suffix = suffix
        self.comments = comments
        self.lines: list[tuple[str, str, str, str | None]] = []  # (verb, binder, rest, comment); verb Decl is a Let
        self.input = "x"  # the hidden state the program reads

    def n(self, stem: str) -> str:
        """``stem`` + the layer index. ★ A stem that is a word of the language with a digit appended (``q`` at layer
        8 is ``q8``, the quantisation keyword) would not be a name: stems are chosen so that none is."""
        name = f"{stem}{self.suffix}"
        assert name not in KEYWORDS and not stem[-1].isdigit(), name
        return name

    def say(self, comment: str | None) -> str | None:
        return comment if self.comments else None

    def weight(self, stem: str, shape: str, slot: str | None, *, q8: bool = False, columns=None, rows=None,
               comment: str | None = None) -> str:
        name = self.n(stem)
        article = "a q8" if q8 else "a"
        self.lines.append(("Decl", name, f"be {article} weight of {shape}", self.say(comment)))
        if slot is not None:
            self.a.bind(stem, self.suffix, slot, columns, rows)
        return name

    def declare(self, name: str, what: str, comment: str | None = None) -> str:
        self.lines.append(("Decl", name, f"be {what}", self.say(comment)))
        return name

    def state(self, stem: str, shape: str) -> str:
        return self.declare(self.n(stem), f"a state of {shape}")

    def table(self, rot: Rotation) -> tuple[str, str]:
        i = self.a.rotation_index(rot)
        why = f"{rot.unmodelled}: not modelled, plain base-{number(rot.base)} frequencies" if rot.unmodelled else None
        fill = f"of base {number(rot.base)}{_scaling(rot)}"
        c = self.declare(f"Rcos{i}", f"a table of ctx by {rot.table_width}, cosines {fill}", why)
        s = self.declare(f"Rsin{i}", f"a table of ctx by {rot.table_width}, sines {fill}")
        return c, s

    def let(self, stem: str, expr: str, comment: str | None = None) -> str:
        name = self.n(stem)
        self.lines.append(("Let", name, f"be {expr}", self.say(comment)))
        return name

    def set(self, text: str, comment: str | None = None) -> None:
        self.lines.append(("Set", "", text, self.say(comment)))

    def ret(self, name: str) -> None:
        self.lines.append(("Return", "", name, None))

    def text(self) -> str:
        # Declarations come first, as a person writes a program: what it reads, then what it computes.
        self.lines = [x for x in self.lines if x[0] == "Decl"] + [x for x in self.lines if x[0] != "Decl"]
        width = max((len(b) for v, b, _, _ in self.lines if v in ("Let", "Decl")), default=0)
        body = []
        for verb, binder, rest, _ in self.lines:
            if verb in ("Let", "Decl"):
                body.append(f"Let {binder.ljust(width)} {rest}.")
            else:
                body.append(f"{verb} {rest}.")
        # Comments start in one column, past the commented lines that are not unusually long.
        commented = [len(b) for b, x in zip(body, self.lines) if x[3] and len(b) <= COMMENT_COLUMN]
        col = max(commented, default=0)
        out = []
        for line, (_, _, _, comment) in zip(body, self.lines):
            out.append(f"{line.ljust(col)}  -- {one_line(comment)}" if comment else line)
        return "\n".join(out)


def _scaling(rot: Rotation) -> str:
    """A table fill's scaling options (LANGUAGE §4): ``, llama3 scaling by 8 from 8192 with low 1 and high 4``."""
    out = ""
    sc = rot.scaling
    if sc is not None and sc.kind == "longrope":
        out += (f", longrope scaling from {number(sc.context)} with short factors {' '.join(map(number, sc.short))}"
                f" and long factors {' '.join(map(number, sc.long))}")
    elif sc is not None:
        out += f", {sc.kind} scaling by {number(sc.factor)}"
        if sc.kind == "llama3":
            out += f" from {number(sc.context)} with low {number(sc.low)} and high {number(sc.high)}"
        elif sc.kind == "yarn":
            out += f" from {number(sc.context)} with fast {number(sc.fast)} and slow {number(sc.slow)}"
            if sc.unrounded:
                out += ", unrounded ramp"
    if rot.attention != 1:
        out += f", attention factor {number32(f32(rot.attention))}"
    return out


def _norm(x: str, g: str, norm: Norm, heads: int | None = None, bias: str | None = None) -> str:
    if norm.layer:
        return f"layernorm of {x} with {g}" + (f", bias {bias}" if bias else "") + f", epsilon {number(norm.eps)}"
    out = f"rmsnorm of {x} with {g}, epsilon {number(norm.eps)}"
    if norm.offset:
        out += f", offset {number(norm.offset)}"
    if heads is not None:
        out += f", heads {heads}"
    return out


def _atom(expr: str) -> str:
    """An expression as an operand: parenthesised unless it is one word."""
    return expr if expr.replace("_", "").isalnum() else f"({expr})"


def kind_label(layer: LayerSpec) -> str:
    """What a layer does, as ``streamed.analysis.kinds.describe`` will name its kind — for the layer heading's note.
    A layer without a mixer that mixes positions (none, or one product in its place) is a ``feed-forward`` layer; one
    with no block at all, ``identity``."""
    m = layer.mixer
    if isinstance(m, Attention):
        name = "attention"
        if m.window:
            name += f", window {m.window}"
        if m.chunk:
            name += f", chunks of {m.chunk}"
        if m.rotation is None:
            name += " (no rotation)"
    elif m is None or isinstance(m, Linear):
        name = "identity" if m is None and layer.ffn is None else "feed-forward"
    else:
        name = m.kind
    if isinstance(layer.ffn, Experts):
        name += ", experts"
    return name


def blocks_note(layer: LayerSpec) -> str:
    """A layer's blocks in words, for the heading of a layer meant to differ from its siblings (``distinct — …``):
    ``attention, 64 heads sharing 8; feed-forward 14336 wide``."""
    m, f = layer.mixer, layer.ffn
    if isinstance(m, Attention):
        mixer = f"attention, {m.heads} heads sharing {m.kv_heads}"
    elif isinstance(m, Linear):
        mixer = "one product in place of attention"
    elif m is None:
        mixer = "no attention"
    else:
        mixer = m.kind
    if isinstance(f, Dense):
        ffn = f"feed-forward {f.width} wide"
    elif isinstance(f, Experts):
        ffn = f"{f.count} experts of {f.width}"
    elif isinstance(f, Linear):
        ffn = "one product in place of the feed-forward block"
    else:
        ffn = "no feed-forward block"
    return f"{mixer}; {ffn}"


def distinct_layers(spec: ModelSpec) -> set[int]:
    """The layers meant to differ from their siblings: those whose spec is not the most common one among the layers
    their kind is named like (numbers erased: ``attention, window 512`` is named like ``attention, window 1024``).
    Their headings say ``distinct``, so that the analysis reports no divergence for a difference the source states
    (a Nemotron-NAS layer's own key/value grouping or feed-forward width, LANGUAGE §7)."""
    common: dict[str, LayerSpec] = {}
    counts: dict[LayerSpec, int] = {}
    for layer in spec.layers:
        counts[layer] = counts.get(layer, 0) + 1
    for layer in sorted(counts, key=lambda x: -counts[x]):  # stable: the first of equally common specs
        common.setdefault(re.sub(r"\d+", "#", kind_label(layer)), layer)
    return {l for l, layer in enumerate(spec.layers) if common[re.sub(r"\d+", "#", kind_label(layer))] != layer}


class _Author:
    def __init__(self, spec: ModelSpec):
        self.spec = spec
        self.bindings: dict[str, dict[Binding, list[str]]] = {}  # stem → binding → suffixes
        self.order: list[str] = []
        self.rotations: dict[tuple, int] = {}  # (width, base, scaling, attention) → the tables' index
        self.constants: dict[str, int] = {"d": spec.d, "vocab": spec.vocab}
        dense = {l.ffn.width for l in spec.layers if isinstance(l.ffn, Dense)}
        if len(dense) == 1:
            self.constants["ffn"] = dense.pop()
        experts = {l.ffn.width for l in spec.layers if isinstance(l.ffn, Experts)}
        if len(experts) == 1:
            self.constants["eff"] = experts.pop()
        residual = {l.residual_scale for l in spec.layers}
        if len(residual) == 1 and None not in residual:
            self.constants["rscale"] = residual.pop()

    # -- names --
    def tensor(self, slot: str) -> str:
        if self.spec.naming == "gguf":
            return gguf_tensor(slot, self.spec.architecture)
        return hf_tensor(slot, self.spec.architecture, self.spec.hf_prefix)

    def bind(self, stem: str, suffix: str, slot: str, columns, rows) -> None:
        b = Binding(self.tensor(slot), columns, rows)
        if stem not in self.bindings:
            self.bindings[stem] = {}
            self.order.append(stem)
        self.bindings[stem].setdefault(b, []).append(suffix)

    def rotation_index(self, rot: Rotation) -> int:
        key = (rot.table_width, rot.base, rot.scaling, rot.attention)
        return self.rotations.setdefault(key, len(self.rotations) + 1)

    def dim(self, n: int, prefer: str | None = None) -> str:
        """A width as a constant's name when the document has one for it."""
        if prefer and self.constants.get(prefer) == n:
            return prefer
        return str(n)

    # -- sections --
    def checkpoint(self) -> str:
        rows: list[tuple[str, str]] = []
        for stem in self.order:
            variants = self.bindings[stem]
            if len(variants) == 1:
                (b, suffixes), = variants.items()
                per_layer = suffixes != [""]
                if per_layer:
                    rows.append((f"{stem}{{l}}", b.entry()))
                else:
                    rows.append((stem, b.entry()))
            else:
                # ★ One stem bound to different tensors in different layers cannot share a `{l}` entry (the first
                # matching entry wins): such a stem is bound layer by layer.
                for b, suffixes in variants.items():
                    for s in suffixes:
                        rows.append((f"{stem}{s}", b.entry().replace("{l}", s)))
        width = max(len(p) for p, _ in rows)
        return "\n".join(f"{p.ljust(width)} is {t}." for p, t in rows)

    def embed(self) -> str:
        w = _Writer(self, "", True)
        w.declare("tok", "a token")
        w.weight("Emb", "vocab by d", "token_embd")
        if self.spec.embed_scale is not None:
            why = self.spec.embed_scale_why or "Gemma scales the embedding by √d"
            w.let("x", "row tok of Emb scaled by escale", why)
        else:
            w.let("x", "row tok of Emb")
        w.ret("x")
        return w.text()

    def head(self) -> str:
        spec = self.spec
        w = _Writer(self, "", True)
        last = f"xo{len(spec.layers) - 1}"
        w.declare(last, "an input of rows by d")
        w.weight("gf", "d", "output_norm")
        bias = w.weight("gfb", "d", "output_norm_bias") if spec.final_norm.bias else None
        if spec.tied:
            w.weight("Wout", "d by vocab", "token_embd", q8=True, comment="tied: the embedding, read as d by vocab")
        else:
            w.weight("Wout", "d by vocab", "output", q8=True)
        w.let("xf", _norm(last, "gf", spec.final_norm, bias=bias))
        logits = w.let("logits", "xf times Wout")
        if spec.logit_scale is not None:
            logits = w.let("lgs", f"{logits} scaled by lscale", spec.logit_scale_why)
        if spec.final_softcap is not None:
            logits = w.let("capped", f"soft cap of {logits} at {number(spec.final_softcap)}",
                           f"the logits soft-capped at {number(spec.final_softcap)}")
        w.let("next", f"index of the largest of {logits}")
        w.ret("next")
        return w.text()

    def layer(self, l: int, first_of_kind: bool) -> str:
        spec = self.spec
        layer = spec.layers[l]
        w = _Writer(self, str(l), first_of_kind)
        xin = "x" if l == 0 else f"xo{l - 1}"
        w.input = xin
        w.declare(xin, "an input of rows by d")
        m = layer.mixer
        if isinstance(m, (Attention, LatentAttention)):
            w.declare("pos", "a position")
        normed = layer.pre_norm and m is not None
        g = w.weight("g", "d", "attn_norm") if normed else None
        if normed and layer.norm.bias:
            w.weight("gb", "d", "attn_norm_bias")
        if isinstance(m, Attention):
            o = self.attention(w, m, layer)
        elif isinstance(m, GatedDeltaNet):
            o = self.deltanet(w, m, layer)
        elif isinstance(m, LatentAttention):
            o = self.latent(w, m, layer)
        elif isinstance(m, Linear):
            Wl = w.weight("Wlin", "d by d", "attn_linear", q8=True, comment="one product in place of attention")
            o = w.let("o", f"{self.pre_norm(w, layer)} times {Wl}")
        else:
            o = None  # attention removed: the residual passes by
        self.feed_forward(w, layer, xin, g, o)
        return w.text()

    # -- mixers --
    def pre_norm(self, w: _Writer, layer: LayerSpec) -> str:
        """The mixer's input: the layer's input normed (``xn``), or the input itself where the layer has no pre-norm."""
        if not layer.pre_norm:
            return w.input
        return w.let("xn", _norm(w.input, w.n("g"), layer.norm, bias=w.n("gb") if layer.norm.bias else None))

    def attention(self, w: _Writer, m: Attention, layer: LayerSpec) -> str:
        qd, kd = m.heads * m.head_dim, m.kv_heads * m.head_dim
        gated = m.gated
        qcols = (0, m.head_dim, 2 * m.head_dim) if gated else None
        if m.fused:
            layout = ("queries, keys and values in turn" if m.fused == "qkv" else
                      "per key/value head its queries, its key and its value")
            Wqkv = w.weight("Wqkv", f"d by {qd + 2 * kd}", "attn_qkv", q8=True,
                            comment=f"{m.heads} query heads and {m.kv_heads} key/value heads of {m.head_dim}: {layout}")
            bqkv = w.weight("bqkv", str(qd + 2 * kd), "attn_qkv_bias") if m.bias else None
        else:
            Wq = w.weight("Wq", f"d by {qd}", "attn_q", q8=True, columns=qcols,
                          comment=f"{m.heads} query heads of {m.head_dim}" + (", packed with their gates" if gated else ""))
            Wqg = w.weight("Wqg", f"d by {qd}", "attn_q", q8=True, columns=(m.head_dim, 2 * m.head_dim, 2 * m.head_dim),
                           comment="the output gate of each head") if gated else None
            Wk = w.weight("Wk", f"d by {kd}", "attn_k", q8=True, comment=f"{m.kv_heads} key/value heads")
            Wv = w.weight("Wv", f"d by {kd}", "attn_v", q8=True)
            if m.bias:
                bq = w.weight("bq", str(qd), "attn_q_bias")
                bk = w.weight("bk", str(kd), "attn_k_bias")
                bv = w.weight("bv", str(kd), "attn_v_bias")
        Wo = w.weight("Wo", f"{qd} by d", "attn_output", q8=True)
        if m.out_bias:
            bo = w.weight("bo", "d", "attn_output_bias")
        if m.qk_norm is not None:
            width = (qd, kd) if m.qk_norm_whole else (m.head_dim, m.head_dim)
            gq = w.weight("gq", str(width[0]), "attn_q_norm",
                          comment="the queries normed as a whole, not per head" if m.qk_norm_whole else None)
            gk = w.weight("gk", str(width[1]), "attn_k_norm")
        if m.sinks:
            sk = w.weight("sk", str(m.heads), "attn_sinks")
        if layer.sandwich:
            gpa = w.weight("gpa", "d", "attn_post_norm")
        Kc = w.state("Kc", f"ctx by {kd}")
        Vc = w.state("Vc", f"ctx by {kd}")
        tables = w.table(m.rotation) if m.rotation is not None else None

        xn = self.pre_norm(w, layer)
        if m.fused:
            qkv = w.let("qkv", f"{xn} times {Wqkv}" + (f" plus {bqkv}" if m.bias else ""))
            if m.fused == "qkv":
                parts = [(0, qd, None), (qd, qd + kd, None), (qd + kd, qd + 2 * kd, None)]
            else:
                per, hd = m.heads // m.kv_heads, m.head_dim
                group = (per + 2) * hd
                parts = [(0, per * hd, group), (per * hd, (per + 1) * hd, group), ((per + 1) * hd, group, group)]
            q_of, k_of, v_of = (f"columns {a} to {b} of {qkv}" + (f", of every {e}" if e else "") for a, b, e in parts)
            q = w.let("qp", q_of)
            k = w.let("kp", k_of)
        else:
            q = w.let("qp", f"{xn} times {Wq}" + (f" plus {bq}" if m.bias else ""))
            k = w.let("kp", f"{xn} times {Wk}" + (f" plus {bk}" if m.bias else ""))
            v_of = f"{xn} times {Wv}" + (f" plus {bv}" if m.bias else "")
        if m.qk_norm is not None:
            q = w.let("qn", _norm(q, gq, m.qk_norm, None if m.qk_norm_whole else m.heads))
            k = w.let("kn", _norm(k, gk, m.qk_norm, None if m.qk_norm_whole else m.kv_heads))
        if tables is not None:
            rot = m.rotation
            part = ("" if rot.dims == m.head_dim else f", rotating {rot.dims}") + (", interleaved" if rot.interleaved else "")
            q = w.let("qr", f"rope of {q} at pos with {tables[0]} and {tables[1]}, heads {m.heads}{part}")
            k = w.let("kr", f"rope of {k} at pos with {tables[0]} and {tables[1]}, heads {m.kv_heads}{part}")
        if m.qk_l2:
            # Llama 4's weightless RMS norm of each head, x/√(mean x² + ε), is √n · x/√(Σx² + nε): an L2 norm.
            n = m.head_dim
            eps, root = number(layer.norm.eps * n), number(math.sqrt(n))
            q = w.let("ql", f"(l2norm of {q}, epsilon {eps}, heads {m.heads}) scaled by {root}",
                      f"Llama 4's RMS norm without a gain: √{n} · x/√(Σx² + {n}ε)")
            k = w.let("kl", f"(l2norm of {k}, epsilon {eps}, heads {m.kv_heads}) scaled by {root}")
        w.set(f"row pos of {Kc} to {k}")
        w.set(f"row pos of {Vc} to {v_of}")
        why = m.scale_why
        if m.scale_queries:
            q = w.let("qs", f"{q} scaled by {number32(m.scale)}", why)
            why = None
        opts = f", heads {m.heads} sharing {m.kv_heads}"
        if m.window:
            opts += f", window {m.window}"
        if m.chunk:
            opts += f", chunks of {m.chunk}"
        if m.scale_queries:
            opts += ", scale 1"
        elif m.scale is not None:
            opts += f", scale {number(m.scale)}"
        if m.sinks:
            opts += f", sinks {sk}"
        if m.softcap is not None:
            opts += f", soft cap {number(m.softcap)}"
            capped = f"logits soft-capped at {number(m.softcap)}"
            why = f"{why}; {capped}" if why else capped
        a = w.let("a", f"attention of {q} over {Kc} and {Vc} at pos{opts}", why)
        for note in m.notes:
            w.lines[-1] = w.lines[-1][:3] + (w.say(note) if w.lines[-1][3] is None else w.lines[-1][3] + "; " + note,)
        if gated:
            a = w.let("ag", f"{a} multiplied by (sigmoid of ({xn} times {Wqg}))", "each head gated by σ(x·Wqg)")
        o = w.let("o", f"{a} times {Wo}" + (f" plus {bo}" if m.out_bias else ""))
        if layer.sandwich:
            o = w.let("on", _norm(o, gpa, layer.norm))
        return o

    def deltanet(self, w: _Writer, m: GatedDeltaNet, layer: LayerSpec) -> str:
        fam = self.spec.architecture
        K, V = m.key_heads * m.key_dim, m.value_heads * m.value_dim
        per = m.value_heads // m.key_heads
        hf_next = self.spec.naming == "hf" and fam.startswith("qwen3_next")
        if hf_next:
            # transformers' in_proj_qkvz interleaves per key head: [q | k | v of its value heads | z of them].
            group = 2 * m.key_dim + 2 * per * m.value_dim
            cq, ck = (0, m.key_dim, group), (m.key_dim, 2 * m.key_dim, group)
            cv = (2 * m.key_dim, 2 * m.key_dim + per * m.value_dim, group)
            cz = (2 * m.key_dim + per * m.value_dim, group, group)
        else:
            cq, ck, cv, cz = (0, K, None), (K, 2 * K, None), (2 * K, 2 * K + V, None), None
        Wq = w.weight("Wlq", f"d by {K}", "ssm_qkv", q8=True, columns=cq, comment=f"{m.key_heads} key heads of {m.key_dim}")
        Wk = w.weight("Wlk", f"d by {K}", "ssm_qkv", q8=True, columns=ck)
        Wv = w.weight("Wlv", f"d by {V}", "ssm_qkv", q8=True, columns=cv, comment=f"{m.value_heads} value heads of {m.value_dim}")
        Wz = w.weight("Wlz", f"d by {V}", "ssm_z", q8=True, columns=cz)
        if self._packed_ba():
            Wb = w.weight("Wlb", f"d by {m.value_heads}", "ssm_ba", q8=True, columns=(0, per, 2 * per))
            Wa = w.weight("Wla", f"d by {m.value_heads}", "ssm_ba", q8=True, columns=(per, 2 * per, 2 * per))
        else:
            Wb = w.weight("Wlb", f"d by {m.value_heads}", "ssm_beta", q8=True)
            Wa = w.weight("Wla", f"d by {m.value_heads}", "ssm_alpha", q8=True)
        k = m.conv_kernel
        Cq = w.weight("Cq", f"{k} by {K}", "ssm_conv1d", columns=(0, K, None), comment="the short convolution over q, k and v")
        Ck = w.weight("Ck", f"{k} by {K}", "ssm_conv1d", columns=(K, 2 * K, None))
        Cv = w.weight("Cv", f"{k} by {V}", "ssm_conv1d", columns=(2 * K, 2 * K + V, None))
        dt = w.weight("dtb", str(m.value_heads), "ssm_dt")
        A = w.weight("Alog", str(m.value_heads), "ssm_a",
                     comment="llama.cpp stores −exp(A_log)" if self.spec.naming == "gguf" else "A_log")
        gn = w.weight("gn", str(m.value_dim), "ssm_norm")
        Wo = w.weight("Wlo", f"{V} by d", "ssm_out", q8=True)
        Sq = w.state("Sq", f"{k - 1} by {K}")
        Sk = w.state("Sk", f"{k - 1} by {K}")
        Sv = w.state("Sv", f"{k - 1} by {V}")
        St = w.state("St", f"{m.value_heads} by {m.key_dim} by {m.value_dim}")

        xn = self.pre_norm(w, layer)
        qc = w.let("qc", f"silu of (short convolution of ({xn} times {Wq}) with state {Sq} and {Cq})")
        kc = w.let("kc", f"silu of (short convolution of ({xn} times {Wk}) with state {Sk} and {Ck})")
        vc = w.let("vc", f"silu of (short convolution of ({xn} times {Wv}) with state {Sv} and {Cv})")
        scale, after = 1 / math.sqrt(m.key_dim), ""
        if self.spec.naming == "gguf":
            # llama.cpp's fused recurrence scales its output by 1/sqrtf(dv) after the dot products, not q before them.
            qh = w.let("qh", f"l2norm of {qc}, epsilon 1e-6, heads {m.key_heads}")
            after = f", scale {number32(f32(1 / f32(math.sqrt(m.value_dim))))}"
        else:
            qh = w.let("qh", f"(l2norm of {qc}, epsilon 1e-6, heads {m.key_heads}) scaled by {number(scale)}",
                       f"1/√{m.key_dim}: queries scaled by the key head width")
        kh = w.let("kh", f"l2norm of {kc}, epsilon 1e-6, heads {m.key_heads}")
        bt = w.let("bt", f"sigmoid of ({xn} times {Wb})")
        if self.spec.naming == "gguf":
            gt = w.let("gt", f"softplus of ({xn} times {Wa} plus {dt}) multiplied by {A}")
            dc = w.let("dc", f"exp of {gt}", "the decay exp(−exp(A_log)·softplus(x·Wa + dt))")
        else:
            gt = w.let("gt", f"softplus of ({xn} times {Wa} plus {dt}) multiplied by (exp of {A})")
            dc = w.let("dc", f"exp of ({gt} scaled by -1)", "the decay exp(−exp(A_log)·softplus(x·Wa + dt))")
        sharing = f" sharing {m.key_heads}" + (", in turn" if m.in_turn else "") if m.key_heads != m.value_heads else ""
        u = w.let("u", f"gated delta of {qh}, {kh} and {vc} with state {St}, decay {dc} and beta {bt}, heads {m.value_heads}{sharing}{after}",
                  f"1/√{m.value_dim} on the output, as llama.cpp's ggml_gated_delta_net" if after else None)
        un = w.let("un", f"{_norm(u, gn, m.norm, m.value_heads)} multiplied by (silu of ({xn} times {Wz}))",
                   "a gated RMS norm per value head")
        return w.let("o", f"{un} times {Wo}")

    def _packed_ba(self) -> bool:
        fam = self.spec.architecture
        if self.spec.naming == "gguf":
            from gguf.constants import MODEL_TENSOR, MODEL_TENSORS

            arch = gguf_arch(fam)
            return arch is None or MODEL_TENSOR.SSM_BETA_ALPHA in MODEL_TENSORS.get(arch, [])
        return fam.startswith("qwen3_next")

    def latent(self, w: _Writer, m: LatentAttention, layer: LayerSpec) -> str:
        H, N, M, V, r = m.heads, m.nope_dim, m.rope_dim, m.v_dim, m.kv_rank
        qd = H * (N + M)
        if m.q_rank is None:
            Wq = w.weight("Wq", f"d by {qd}", "attn_q", q8=True, comment=f"{H} heads of {N} + {M} (rotated) dims")
        else:
            Wqa = w.weight("Wqa", f"d by {m.q_rank}", "attn_q_a", q8=True, comment=f"queries through rank {m.q_rank}")
            gqa = w.weight("gqa", str(m.q_rank), "attn_q_a_norm")
            Wqb = w.weight("Wqb", f"{m.q_rank} by {qd}", "attn_q_b", q8=True, comment=f"{H} heads of {N} + {M} (rotated) dims")
        Wkv = w.weight("Wkv", f"d by {r}", "attn_kv_a_mqa", q8=True, columns=(0, r, None), comment=f"the latent, rank {r}")
        Wkr = w.weight("Wkr", f"d by {M}", "attn_kv_a_mqa", q8=True, columns=(r, r + M, None), comment="the shared rotated key")
        gkv = w.weight("gkv", str(r), "attn_kv_a_norm")
        if m.kv_b_packed:
            Wkb = w.weight("Wkb", f"{H} by {N} by {r}", "attn_kv_b", q8=True, columns=(0, N, N + V),
                           comment="the keys' up-projection, absorbed into the queries")
            Wvb = w.weight("Wvb", f"{H} by {r} by {V}", "attn_kv_b", q8=True, columns=(N, N + V, N + V),
                           comment="the values' up-projection")
        else:
            Wkb = w.weight("Wkb", f"{H} by {N} by {r}", "attn_k_b", q8=True,
                           comment="the keys' up-projection, absorbed into the queries")
            Wvb = w.weight("Wvb", f"{H} by {r} by {V}", "attn_v_b", q8=True, comment="the values' up-projection")
        Wo = w.weight("Wo", f"{H * V} by d", "attn_output", q8=True)
        Cl = w.state("Cl", f"ctx by {r}")
        Kr = w.state("Kr", f"ctx by {M}")
        c, s = w.table(m.rotation)
        xn = self.pre_norm(w, layer)
        if m.q_rank is None:
            q = w.let("qp", f"{xn} times {Wq}")
        else:
            qa = w.let("qa", _norm(f"({xn} times {Wqa})", gqa, layer.norm))
            q = w.let("qp", f"{qa} times {Wqb}")
        pairs = ", interleaved" if m.rotation.interleaved else ""
        qr = w.let("qr", f"rope of {q} at pos with {c} and {s}, heads {H}, rotating {M}, after {N}{pairs}",
                   f"each head's last {M} dims rotate")
        w.set(f"row pos of {Cl} to {_norm(f'({xn} times {Wkv})', gkv, layer.norm)}")
        w.set(f"row pos of {Kr} to rope of ({xn} times {Wkr}) at pos with {c} and {s}, heads 1{pairs}")
        scale = f", scale {number32(f32(m.scale))}" if m.scale is not None else ""
        a = w.let("a", f"latent attention of {qr} over {Cl} and {Kr} at pos with {Wkb} and {Wvb}, heads {H}, nope {N}, rope {M}{scale}",
                  m.scale_why)
        return w.let("o", f"{a} times {Wo}")

    # -- feed-forward --
    def feed_forward(self, w: _Writer, layer: LayerSpec, xin: str, g: str | None, o: str | None) -> None:
        """The feed-forward block and the residual: ``h = x + o``, ``xo = h + ffn(norm(h))`` — each output scaled by
        the layer's residual scale first; a parallel layer's block reads the mixer's normed input instead, and with
        ``ffn_first`` joins first (``h = x + ffn``, ``xo = h + o``); a removed block adds nothing (a layer with
        neither returns its input, named as its output)."""
        f = layer.ffn
        own_norm = layer.pre_norm and not layer.parallel and f is not None
        gm = w.weight("gm", "d", "ffn_norm") if own_norm else None
        gmb = w.weight("gmb", "d", "ffn_norm_bias") if own_norm and layer.norm.bias else None
        if layer.sandwich and f is not None:
            gpf = w.weight("gpf", "d", "ffn_post_norm")
        if f is None:
            w.ret(w.let("xo", xin if o is None else self.residual(xin, o, layer)))
            return
        ffn_first = layer.ffn_first and o is not None
        h = xin if o is None or ffn_first else w.let("h", self.residual(xin, o, layer))
        if layer.parallel:
            hn = w.n("xn")
        else:
            hn = w.let("hn", _norm(h, gm, layer.norm, bias=gmb)) if own_norm else h
        if isinstance(f, Dense):
            fo = self.dense(w, f, hn)
        elif isinstance(f, Linear):
            Wl = w.weight("Wlf", "d by d", "ffn_linear", q8=True,
                          comment="one product in place of the feed-forward block")
            fo = w.let("fo", f"{hn} times {Wl}")
        else:
            fo = self.experts(w, f, hn)
        if layer.sandwich:
            fo = w.let("fn", _norm(fo, gpf, layer.norm))
        if ffn_first:  # (ffn + x) + mixer
            w.ret(w.let("xo", self.residual(w.let("h", self.residual(xin, fo, layer)), o, layer)))
        else:
            w.ret(w.let("xo", self.residual(h, fo, layer)))

    def residual(self, h: str, out: str, layer: LayerSpec) -> str:
        """``h plus out``, the block's output scaled first where the layer scales it (Granite's residual multiplier)."""
        if layer.residual_scale is None:
            return f"{h} plus {out}"
        scale = "rscale" if self.constants.get("rscale") == layer.residual_scale else number(layer.residual_scale)
        return f"{h} plus ({out} scaled by {scale})"

    def dense(self, w: _Writer, f: Dense, hn: str) -> str:
        """A dense block: gated (``act(x·G) ⊙ x·U``, the two products one when the checkpoint fuses them) or not
        (``act(x·U + bu)``), then the down projection."""
        width = self.dim(f.width, "ffn")
        act = "gelu" if f.activation == "gelu" else "silu"
        why = "GELU, tanh approximation" if act == "gelu" else None
        if f.gated and f.bias and not f.fused:
            # Granite's `mlp_bias`: each of the three projections biased.
            Wg, bg = w.weight("Wg", f"d by {width}", "ffn_gate", q8=True), w.weight("bg", width, "ffn_gate_bias")
            Wu, bu = w.weight("Wu", f"d by {width}", "ffn_up", q8=True), w.weight("bu", width, "ffn_up_bias")
            Wd, bd = w.weight("Wd", f"{width} by d", "ffn_down", q8=True), w.weight("bd", "d", "ffn_down_bias")
            fg = w.let("f", f"{act} of ({hn} times {Wg} plus {bg}) multiplied by ({hn} times {Wu} plus {bu})", why)
            return w.let("fo", f"{fg} times {Wd} plus {bd}")
        if not f.gated:
            Wu = w.weight("Wu", f"d by {width}", "ffn_up", q8=True)
            bu = w.weight("bu", width, "ffn_up_bias") if f.bias else None
            Wd = w.weight("Wd", f"{width} by d", "ffn_down", q8=True)
            bd = w.weight("bd", "d", "ffn_down_bias") if f.bias else None
            fg = w.let("f", f"{act} of ({hn} times {Wu}" + (f" plus {bu})" if bu else ")"), why)
            return w.let("fo", f"{fg} times {Wd}" + (f" plus {bd}" if bd else ""))
        if f.fused:
            Wgu = w.weight("Wgu", f"d by {2 * f.width}", "ffn_gate_up", q8=True, comment="the gate and up projections, gate first")
            Wd = w.weight("Wd", f"{width} by d", "ffn_down", q8=True)
            gu = w.let("gu", f"{hn} times {Wgu}")
            fg = w.let("f", f"{act} of (columns 0 to {f.width} of {gu}) multiplied by "
                            f"(columns {f.width} to {2 * f.width} of {gu})", why)
        else:
            Wg = w.weight("Wg", f"d by {width}", "ffn_gate", q8=True)
            Wu = w.weight("Wu", f"d by {width}", "ffn_up", q8=True)
            Wd = w.weight("Wd", f"{width} by d", "ffn_down", q8=True)
            fg = w.let("f", f"{act} of ({hn} times {Wg}) multiplied by ({hn} times {Wu})", why)
        return w.let("fo", f"{fg} times {Wd}")

    def experts(self, w: _Writer, e: Experts, hn: str) -> str:
        E, F = e.count, self.dim(e.width, "eff")
        hf = self.spec.naming == "hf"
        fam = self.spec.architecture
        interleaved = hf and fam.startswith("gpt_oss")
        if hf:
            gcols = (0, 1, 2) if interleaved else (0, e.width, None)
            ucols = (1, 2, 2) if interleaved else (e.width, 2 * e.width, None)
        else:
            gcols = ucols = None
        R = w.weight("Wr", f"d by {E}", "ffn_gate_inp", q8=True, comment=f"the router: {E} experts, top {e.top_k}")
        Eg = w.weight("Eg", f"{E} by d by {F}", "ffn_gate_exps", q8=True, columns=gcols)
        Eu = w.weight("Eu", f"{E} by d by {F}", "ffn_up_exps", q8=True, columns=ucols)
        Ed = w.weight("Ed", f"{E} by {F} by d", "ffn_down_exps", q8=True)
        opts = ""
        if e.scoring == "sigmoid":
            opts += ", scored by sigmoid"
        if e.normalized:
            opts += ", normalized"
        if e.routed_scale is not None and e.routed_scale != 1:
            opts += f", routed scale {number(e.routed_scale)}"
        if e.selection_bias:
            eb = w.weight("eb", str(E), "exp_probs_b")
            opts += f", selection bias {eb}"
        if e.groups and e.groups > 1:
            opts += f", groups {e.groups} keeping {e.keep_groups}"
        if e.router_bias:
            rb = w.weight("rb", str(E), "ffn_gate_inp_bias")
            opts += f", router bias {rb}"
        if e.expert_biases:
            bg = w.weight("Ebg", f"{E} by {F}", "ffn_gate_exps_bias", columns=gcols)
            bu = w.weight("Ebu", f"{E} by {F}", "ffn_up_exps_bias", columns=ucols)
            bd = w.weight("Ebd", f"{E} by d", "ffn_down_exps_bias")
            opts += f", expert biases {bg}, {bu} and {bd}"
        if e.clamp is not None:
            opts += f", clamped swiglu at {number(e.clamp)}"
        if e.weighting_inputs:
            opts += ", weighting inputs"
        if e.shared_width:
            S = self.dim(e.shared_width, "eff")
            g2 = w.weight("Wgs", f"d by {S}", "ffn_gate_shexp", q8=True, comment="the shared expert")
            u2 = w.weight("Wus", f"d by {S}", "ffn_up_shexp", q8=True)
            d2 = w.weight("Wds", f"{S} by d", "ffn_down_shexp", q8=True)
            opts += f", shared {g2}, {u2} and {d2}"
            if e.shared_gate:
                sg = w.weight("Wsg", "d by 1", "ffn_gate_inp_shexp", q8=True)
                opts += f", shared gate {sg}" + (", quotient gate" if e.quotient_gate else "")
        return w.let("fo", f"experts of {hn} with router {R}, top {e.top_k}, using {Eg}, {Eu} and {Ed}{opts}")

    # -- the document --
    def document(self) -> str:
        spec = self.spec
        embed = self.embed()
        layers: list[str] = []
        seen: set[LayerSpec] = set()
        size = 0
        distinct = distinct_layers(spec)
        for l, layer in enumerate(spec.layers):
            first = layer not in seen
            seen.add(layer)
            body = self.layer(l, first)
            note = f"distinct — {blocks_note(layer)}" if l in distinct else kind_label(layer)
            layers.append(f"## Layer {l}: {note}\n{body}\n")
            size += len(layers[-1])
            if size > MAX_DOCUMENT_BYTES:  # never write a document streamed would not read
                raise SpecError(f"{spec.source or spec.name}: its {len(spec.layers):,} layers would make a document "
                                f"of over {MAX_DOCUMENT_BYTES // 1048576} MB by layer {l:,}; streamed reads model "
                                f"programs up to {MAX_DOCUMENT_BYTES // 1048576} MB")
        head = self.head()
        consts = [("d", spec.d, "the hidden width"), ("vocab", spec.vocab, None)]
        for k in ("ffn", "eff"):
            if k in self.constants:
                consts.append((k, self.constants[k], "the dense feed-forward width" if k == "ffn" else "each expert's width"))
        if spec.embed_scale is not None:
            consts.append(("escale", spec.embed_scale, spec.embed_scale_why or f"√{spec.d}"))
        if "rscale" in self.constants:
            consts.append(("rscale", self.constants["rscale"],
                           "each block's output scaled before it joins the residual"))
        if spec.logit_scale is not None:
            consts.append(("lscale", spec.logit_scale, "the logits' scale"))
        if spec.trained is not None:
            consts.append(("trained", spec.trained, "the context it was trained at: a longer ctx is warned of"))
        if spec.modelled is not None:
            consts.append(("modelled", spec.modelled, f"the positions it computes as the model does: a longer ctx is "
                                                       f"refused ({spec.modelled_why})"))
        lines = [f"Let {k} be {number32(v)}." for k, v, _ in consts]  # a float32 from a GGUF, to its last bit
        col = max(len(s) for s in lines)
        model = "\n".join(f"{s.ljust(col)}  -- {why}" if why else s for s, (_, _, why) in zip(lines, consts))
        top = [f"# {one_line(spec.name)}"]
        if spec.source:
            top.append(f"-- Authored by `streamed author` from {one_line(spec.source)}.")
        summary_line = summary(spec)
        top.append(f"-- {summary_line}")
        for note in (*spec.assumed, *spec.notes):
            top.append(f"-- {one_line(note)}")
        parts = ["\n".join(top), f"## Model\n{model}", f"## Checkpoint\n{self.checkpoint()}",
                 f"## Embed\n{embed}", *[s.rstrip("\n") for s in layers], f"## Head\n{head}"]
        return "\n\n".join(parts) + "\n"


#: What ends a line for the lexer, an editor or a terminal: text from a config or a GGUF (a name, a path, a scaling
#: scheme) written into a title or a comment must not start a line of its own, or it would write headings and
#: statements into the document.
_LINE_BREAKS = re.compile("[\x00-\x1f\x7f\x85\u2028\u2029]+")


def one_line(text: str) -> str:
    """``text`` as one line of a document: each run of control characters and line breaks becomes one space."""
    return _LINE_BREAKS.sub(" ", text).strip()


def summary(spec: ModelSpec) -> str:
    """``48 layers, d = 2048, vocabulary 151936: 36 × gated deltanet, experts; 12 × attention, experts.``"""
    counts: dict[str, int] = {}
    for layer in spec.layers:
        label = kind_label(layer)
        counts[label] = counts.get(label, 0) + 1
    kinds = "; ".join(f"{n} × {k}" for k, n in counts.items())
    return f"{len(spec.layers)} layers, d = {spec.d}, vocabulary {spec.vocab}: {kinds}."


def author(spec: ModelSpec) -> str:
    """The document of ``spec``: title, ``## Model``, ``## Checkpoint``, ``## Embed``, every ``## Layer``, ``## Head``.

    Pure: the same spec gives the same text, byte for byte."""
    return _Author(spec).document()
