"""Generated model documents of any depth, for tests and benchmarks of the lowering.

``two_kind_document`` writes a Gemma-3-like model: every ``every``-th layer global attention, the others sliding-window
attention, each with a SwiGLU feed-forward — two layer kinds however deep. ``per_layer_ffn`` gives every layer its
own FFN width instead (as many kinds as layers: the naive baseline the benchmark compares against).
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
    parts.append("\n## Embed\nLet tok be a token.\nLet Emb be a weight of vocab by d.\nLet x be row tok of Emb.\nReturn x.\n\n")
    for l in range(layers):
        width = ffn + 32 * l if per_layer_ffn else ffn
        parts.append(_layer(l, d, heads, kv, hd, width, None if l % every == every - 1 else window, q) + "\n")
    last = f"xo{layers - 1}"
    parts.append(f"## Head\nLet {last} be an input of rows by d.\nLet gf be a weight of d.\n"
                 f"Let Wout be a {q}weight of d by vocab.\n"
                 f"Let logits be rmsnorm of {last} with gf, epsilon 0.000001 times Wout.\n"
                 f"Let next be index of the largest of logits.\nReturn next.\n")
    return "".join(parts)
