"""Generated model documents of any depth, for tests and benchmarks of the lowering and the analysis.

``two_kind_document`` writes a Gemma-3-like model: every ``every``-th layer global attention, the others sliding-window
attention, each with a SwiGLU feed-forward — two layer kinds however deep. ``per_layer_ffn`` gives every layer its
own FFN width instead (as many kinds as layers: the naive baseline the benchmark compares against).
``nas_document`` writes a Nemotron-NAS-like model: every layer its own attention block (its own KV grouping, removed,
or one linear map) and its own FFN width, as ``block_configs`` give them — as many kinds as its blocks.
"""

from __future__ import annotations


def _layer(l: int, d: int, heads: int, kv: int, hd: int, ffn: int, window: int | None, q8: str) -> str:
    inp = "x" if l == 0 else f"xo{l - 1}"
    win = f", window {window}" if window else ""
    return f"""## Layer {l}
Let {inp} be an input of rows by d.
Let pos be a position.
Let g{l} be a weight of d.
Let Wq{l} be a {q8}weight of d by {heads * hd}.
Let Wk{l} be a {q8}weight of d by {kv * hd}.
Let Wv{l} be a {q8}weight of d by {kv * hd}.
Let Wo{l} be a {q8}weight of {heads * hd} by d.
Let gm{l} be a weight of d.
Let Wg{l} be a {q8}weight of d by {ffn}.
Let Wu{l} be a {q8}weight of d by {ffn}.
Let Wd{l} be a {q8}weight of {ffn} by d.
Let Kc{l} be a state of ctx by {kv * hd}.
Let Vc{l} be a state of ctx by {kv * hd}.
Let Rcos1 be a table of ctx by {hd // 2}, cosines of base 10000.
Let Rsin1 be a table of ctx by {hd // 2}, sines of base 10000.
Let xn{l} be rmsnorm of {inp} with g{l}, epsilon 0.000001.
Let qp{l} be rope of (xn{l} times Wq{l}) at pos with Rcos1 and Rsin1, heads {heads}.
Set row pos of Kc{l} to rope of (xn{l} times Wk{l}) at pos with Rcos1 and Rsin1, heads {kv}.
Set row pos of Vc{l} to xn{l} times Wv{l}.
Let a{l} be attention of qp{l} over Kc{l} and Vc{l} at pos, heads {heads} sharing {kv}{win}.
Let h{l} be {inp} plus a{l} times Wo{l}.
Let hn{l} be rmsnorm of h{l} with gm{l}, epsilon 0.000001.
Let f{l} be silu of (hn{l} times Wg{l}) multiplied by (hn{l} times Wu{l}).
Let xo{l} be h{l} plus f{l} times Wd{l}.
Return xo{l}.
"""


def two_kind_document(layers: int, d: int = 64, heads: int = 4, kv: int = 2, hd: int = 16, ffn: int = 128,
                      vocab: int = 256, window: int = 8, every: int = 4, q8: bool = True,
                      per_layer_ffn: bool = False, title: str = "Generated") -> str:
    """A model of ``layers`` layers: layer l is global attention when ``l % every == every − 1``, else windowed."""
    q = "q8 " if q8 else ""
    parts = [f"# {title}\n", "## Model\n", f"Let d be {d}.\nLet vocab be {vocab}.\n", "\n## Checkpoint\n",
             'Emb is "token_embd.weight".\ngf is "output_norm.weight".\nWout is "output.weight".\n']
    for stem, tensor in (("g", "attn_norm"), ("Wq", "attn_q"), ("Wk", "attn_k"), ("Wv", "attn_v"),
                         ("Wo", "attn_output"), ("gm", "ffn_norm"), ("Wg", "ffn_gate"), ("Wu", "ffn_up"),
                         ("Wd", "ffn_down")):
        parts.append(f'{stem}{{l}} is "blk.{{l}}.{tensor}.weight".\n')
    parts.append("\n" + EMBED)
    for l in range(layers):
        width = ffn + 32 * l if per_layer_ffn else ffn
        parts.append(_layer(l, d, heads, kv, hd, width, None if l % every == every - 1 else window, q) + "\n")
    parts.append(_head(layers, q, "0.000001"))
    return "".join(parts)


EMBED = "## Embed\nLet tok be a token.\nLet Emb be a weight of vocab by d.\nLet x be row tok of Emb.\nReturn x.\n\n"


def _head(layers: int, q8: str, epsilon: str) -> str:
    last = f"xo{layers - 1}"
    return (f"## Head\nLet {last} be an input of rows by d.\nLet gf be a weight of d.\n"
            f"Let Wout be a {q8}weight of d by vocab.\n"
            f"Let logits be rmsnorm of {last} with gf, epsilon {epsilon} times Wout.\n"
            f"Let next be index of the largest of logits.\nReturn next.\n")


#: Nemotron-NAS's per-layer choices, as its ``block_configs`` give them (Llama-3.1-Nemotron-51B, -Super-49B): each
#: layer's attention keeps its own number of query heads per KV head (``n_heads_in_group``), is removed
#: (``no_op``) or is replaced by one linear map (``replace_with_linear``); its FFN has its own width multiplier
#: (``ffn_mult``) or is removed. A cycle of such choices, as the searched architectures mix them.
NAS_BLOCKS = (
    (8, 5.25), (8, 5.25), (4, 3.28125), ("none", 2.625), (8, 2.625), ("linear", 1.3125), (2, 5.25), ("none", 1.3125),
    (8, 3.28125), (1, 2.625), ("linear", "none"), (4, 5.25), (8, 1.3125), ("none", "none"), (2, 3.28125), (8, 5.25),
)


def nas_width(mult: float, d: int, multiple: int = 32) -> int:
    """An FFN multiplier as a width, as Nemotron-NAS sizes it: ⌈(2/3 · mult · d) / multiple⌉ · multiple."""
    return -(-int(2 * mult * d / 3) // multiple) * multiple


def _nas_layer(l: int, d: int, heads: int, hd: int, attention, ffn, q8: str) -> str:
    inp = "x" if l == 0 else f"xo{l - 1}"
    out = [f"## Layer {l}", f"Let {inp} be an input of rows by d.", "Let pos be a position."]
    h = inp
    if attention == "linear":
        out += [f"Let g{l} be a weight of d.", f"Let Wl{l} be a {q8}weight of d by d.",
                f"Let xn{l} be rmsnorm of {inp} with g{l}, epsilon 0.00001.", f"Let h{l} be {inp} plus xn{l} times Wl{l}."]
        h = f"h{l}"
    elif attention != "none":
        kv = heads // attention
        out += [f"Let g{l} be a weight of d.", f"Let Wq{l} be a {q8}weight of d by {heads * hd}.",
                f"Let Wk{l} be a {q8}weight of d by {kv * hd}.", f"Let Wv{l} be a {q8}weight of d by {kv * hd}.",
                f"Let Wo{l} be a {q8}weight of {heads * hd} by d.", f"Let Kc{l} be a state of ctx by {kv * hd}.",
                f"Let Vc{l} be a state of ctx by {kv * hd}.",
                f"Let Rcos1 be a table of ctx by {hd // 2}, cosines of base 500000.",
                f"Let Rsin1 be a table of ctx by {hd // 2}, sines of base 500000.",
                f"Let xn{l} be rmsnorm of {inp} with g{l}, epsilon 0.00001.",
                f"Let qp{l} be rope of (xn{l} times Wq{l}) at pos with Rcos1 and Rsin1, heads {heads}.",
                f"Set row pos of Kc{l} to rope of (xn{l} times Wk{l}) at pos with Rcos1 and Rsin1, heads {kv}.",
                f"Set row pos of Vc{l} to xn{l} times Wv{l}.",
                f"Let a{l} be attention of qp{l} over Kc{l} and Vc{l} at pos, heads {heads} sharing {kv}.",
                f"Let h{l} be {inp} plus a{l} times Wo{l}."]
        h = f"h{l}"
    if ffn == "none":
        out.append(f"Let xo{l} be {h}.")
    else:
        width = ffn if isinstance(ffn, int) else nas_width(ffn, d)
        out += [f"Let gm{l} be a weight of d.", f"Let Wg{l} be a {q8}weight of d by {width}.",
                f"Let Wu{l} be a {q8}weight of d by {width}.", f"Let Wd{l} be a {q8}weight of {width} by d.",
                f"Let hn{l} be rmsnorm of {h} with gm{l}, epsilon 0.00001.",
                f"Let f{l} be silu of (hn{l} times Wg{l}) multiplied by (hn{l} times Wu{l}).",
                f"Let xo{l} be {h} plus f{l} times Wd{l}."]
    out.append(f"Return xo{l}.")
    return "\n".join(out) + "\n"


def nas_document(layers: int, d: int = 64, heads: int = 8, hd: int = 16, vocab: int = 256, blocks=NAS_BLOCKS,
                 q8: bool = True, title: str = "Generated NAS") -> str:
    """A Nemotron-NAS-like model of ``layers`` layers: layer l is ``blocks[l % len(blocks)]`` — ``(attention,
    ffn)`` with attention the query heads per KV head, ``"none"`` or ``"linear"``, and ffn a width multiplier, a
    width (``int``) or ``"none"``. Kinds: one per distinct block (and layer 0, which reads ``x``, joins its block's
    kind like any other)."""
    q = "q8 " if q8 else ""
    parts = [f"# {title}\n", "## Model\n", f"Let d be {d}.\nLet vocab be {vocab}.\n", "\n" + EMBED]
    for l in range(layers):
        attention, ffn = blocks[l % len(blocks)]
        parts.append(_nas_layer(l, d, heads, hd, attention, ffn, q) + "\n")
    parts.append(_head(layers, q, "0.00001"))
    return "".join(parts)
