"""Small, valid model programs for the core's tests, written the way the author writes them: layers of equal spec are
the same text up to their layer index."""

from __future__ import annotations

HEADER = """# Test model

## Model
Let d be 64.
Let vocab be 128.
Let ffn be 96.
Let nexp be 4.
Let efn be 32.
"""

EMBED = """
## Embed
Let tok be a token.
Let Emb be a weight of vocab by d.
Let x be row tok of Emb.
Return x.
"""


def _input(l: int) -> str:
    return "x" if l == 0 else f"xo{l - 1}"


def attention(l: int, window: int | None = None, chunks: int | None = None, base: int = 10000, table: int = 1) -> str:
    opts = (f", window {window}" if window else "") + (f", chunks of {chunks}" if chunks else "")
    return f"""Let Wq{l} be a q8 weight of d by 64.
Let Wk{l} be a q8 weight of d by 32.
Let Wv{l} be a q8 weight of d by 32.
Let Wo{l} be a q8 weight of 64 by d.
Let Kc{l} be a state of ctx by 32.
Let Vc{l} be a state of ctx by 32.
Let Rcos{table} be a table of ctx by 8, cosines of base {base}.
Let Rsin{table} be a table of ctx by 8, sines of base {base}.
Let qr{l} be rope of (xn{l} times Wq{l}) at pos with Rcos{table} and Rsin{table}, heads 4.
Set row pos of Kc{l} to rope of (xn{l} times Wk{l}) at pos with Rcos{table} and Rsin{table}, heads 2.
Set row pos of Vc{l} to xn{l} times Wv{l}.
Let a{l} be attention of qr{l} over Kc{l} and Vc{l} at pos, heads 4 sharing 2{opts}.
Let h{l} be {_input(l)} plus a{l} times Wo{l}.
"""


def deltanet(l: int) -> str:
    return f"""Let Wq{l} be a q8 weight of d by 32.
Let Wk{l} be a q8 weight of d by 32.
Let Wv{l} be a q8 weight of d by 64.
Let Wa{l} be a weight of d by 4.
Let Wb{l} be a weight of d by 4.
Let Wo{l} be a q8 weight of 64 by d.
Let S{l} be a state of 4 by 16 by 16.
Let qr{l} be l2norm of (xn{l} times Wq{l}), heads 2.
Let k{l} be l2norm of (xn{l} times Wk{l}), heads 2.
Let v{l} be xn{l} times Wv{l}.
Let al{l} be exp of (softplus of (xn{l} times Wa{l}) scaled by -1).
Let be{l} be sigmoid of (xn{l} times Wb{l}).
Let o{l} be gated delta of qr{l}, k{l} and v{l} with state S{l}, decay al{l} and beta be{l}, heads 4 sharing 2.
Let h{l} be {_input(l)} plus o{l} times Wo{l}.
"""


def latent(l: int) -> str:
    return f"""Let Wq{l} be a q8 weight of d by 48.
Let Wc{l} be a q8 weight of d by 16.
Let Wr{l} be a q8 weight of d by 4.
Let gc{l} be a weight of 16.
Let Au{l} be a weight of 4 by 8 by 16.
Let Bu{l} be a weight of 4 by 16 by 8.
Let Wo{l} be a q8 weight of 32 by d.
Let Cc{l} be a state of ctx by 16.
Let Rc{l} be a state of ctx by 4.
Let Rcos2 be a table of ctx by 2, cosines of base 10000.
Let Rsin2 be a table of ctx by 2, sines of base 10000.
Let qr{l} be xn{l} times Wq{l}.
Set row pos of Cc{l} to rmsnorm of (xn{l} times Wc{l}) with gc{l}.
Set row pos of Rc{l} to rope of (xn{l} times Wr{l}) at pos with Rcos2 and Rsin2, heads 1.
Let a{l} be latent attention of qr{l} over Cc{l} and Rc{l} at pos with Au{l} and Bu{l}, heads 4, nope 8, rope 4.
Let h{l} be {_input(l)} plus a{l} times Wo{l}.
"""


def dense_ffn(l: int) -> str:
    return f"""Let gm{l} be a weight of d.
Let Wg{l} be a q8 weight of d by ffn.
Let Wu{l} be a q8 weight of d by ffn.
Let Wd{l} be a q8 weight of ffn by d.
Let hn{l} be rmsnorm of h{l} with gm{l}.
Let f{l} be silu of (hn{l} times Wg{l}) multiplied by (hn{l} times Wu{l}).
Let xo{l} be h{l} plus f{l} times Wd{l}.
Return xo{l}.
"""


def experts_ffn(l: int) -> str:
    return f"""Let gm{l} be a weight of d.
Let Wr{l}e be a weight of d by nexp.
Let Eg{l} be a q8 weight of nexp by d by efn.
Let Eu{l} be a q8 weight of nexp by d by efn.
Let Ed{l} be a q8 weight of nexp by efn by d.
Let hn{l} be rmsnorm of h{l} with gm{l}.
Let f{l} be experts of hn{l} with router Wr{l}e, top 2, using Eg{l}, Eu{l} and Ed{l}, normalized.
Let xo{l} be h{l} plus f{l}.
Return xo{l}.
"""


def layer(l: int, mixer: str = "attention", ffn: str = "dense", note: str | None = None, eps: str | None = None,
          **kw) -> str:
    """Layer ``l``; ``eps``: its first norm's epsilon as written (none by default) — layers alike but for it are one
    program but for a number."""
    head = f"\n## Layer {l}" + (f": {note}" if note else "") + "\n"
    decl = f"Let {_input(l)} be an input of rows by d.\nLet pos be a position.\nLet g{l} be a weight of d.\n"
    norm = f"Let xn{l} be rmsnorm of {_input(l)} with g{l}{f', epsilon {eps}' if eps else ''}.\n"
    mix = {"attention": attention, "deltanet": deltanet, "latent": latent}[mixer](l, **kw)
    f = dense_ffn(l) if ffn == "dense" else experts_ffn(l)
    return head + decl + norm + mix + f


def head(last: int) -> str:
    return f"""
## Head
Let xo{last} be an input of rows by d.
Let gf be a weight of d.
Let Wout be a q8 weight of d by vocab.
Let logits be rmsnorm of xo{last} with gf times Wout.
Let next be index of the largest of logits.
Return next.
"""


def document(layers: list[dict] | int, **common) -> str:
    """A whole document: ``layers`` is a count (all alike) or one dict of ``layer`` arguments per layer."""
    specs = [dict(common) for _ in range(layers)] if isinstance(layers, int) else layers
    body = "".join(layer(l, **spec) for l, spec in enumerate(specs))
    return HEADER + EMBED + body + head(len(specs) - 1)


def line_of(text: str, needle: str, occurrence: int = 0) -> int:
    """The 1-based line of the ``occurrence``-th line containing ``needle``."""
    hits = [i + 1 for i, line in enumerate(text.split("\n")) if needle in line]
    return hits[occurrence]
