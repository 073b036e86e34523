"""What one op makes: the shapes of its outputs from its inputs' (``infer``) and its floating-point operations
(``flops_of``), as ir.py's table of ops defines them.

Every pass that makes an op infers its shapes with ``infer``, and ``certify`` infers them again op by op: a
mismatch is a ``LoweringError`` on the op's statement, never a wrong shape passed on.
"""

from __future__ import annotations

import math

from ..ir import Q8_BLOCK, Op, q8_scales
from .errors import LoweringError


ELEMENTWISE = {"silu", "gelu", "sigmoid", "softplus", "exp", "softcap", "scale", "add", "sub", "mul", "copy"}


def infer(op: Op, shape) -> tuple[tuple[int, ...], ...]:
    """The shapes of ``op``'s outputs from its inputs' (``shape(name)``). Raises ``LoweringError`` on a mismatch."""
    k, ins = op.kind, [shape(n) for n in op.inputs]

    def bad(why):
        raise LoweringError(f"`{op.kind}` of {', '.join(op.inputs)}: {why}", op.statement)

    for i, scales in q8_scales(op).items():  # a weight read as stored Q8_0: its scales, one per block of its planes
        p = shape(op.inputs[i])
        if len(p) < 2 or p[-2] % Q8_BLOCK or shape(scales) != (*p[:-2], p[-2] // Q8_BLOCK, p[-1]):
            bad(f"scales {shape(scales)} for planes {p}")
    if k in ("matmul", "matmul_q8"):
        x, w = ins[0], ins[1]
        if len(x) != 2 or len(w) != 2 or x[1] != w[0]:
            bad(f"{x} times {w}")
        return ((x[0], w[1]),)
    if k in ("add", "sub", "mul"):
        if len(ins) == 1:
            return (ins[0],)
        a, b = ins
        if a == b or b == () or (len(b) == 1 and a and a[-1] == b[0]):
            return (a,)
        if a == () or (len(a) == 1 and b and b[-1] == a[0]):
            return (b,)
        bad(f"{a} and {b} do not broadcast")
    if k in ELEMENTWISE or k in ("softmax", "rmsnorm", "l2norm", "rope"):
        return (ins[0],)
    if k == "layernorm":
        if any(s != (ins[0][-1],) for s in ins[1:]):
            bad(f"gain and bias {ins[1:]} for rows of {ins[0][-1]}")
        return (ins[0],)
    if k == "lookup":
        return ((ins[0][0], ins[1][1]),)
    if k == "attention":
        q, kk, v = ins[0], ins[1], ins[2]
        h, g = op.attr("heads"), op.attr("groups")
        if q[1] % h or kk[1] % g or v[1] % g or q[1] // h != kk[1] // g or kk[0] != v[0]:
            bad(f"queries {q}, keys {kk}, values {v} for {h} heads sharing {g}")
        return ((q[0], h * (v[1] // g)),)
    if k == "latent_attention":
        return ((ins[0][0], op.attr("heads") * ins[5][2]),)
    if k == "gated_delta":
        return ((ins[0][0], op.attr("heads") * ins[3][2]), ins[3])
    if k == "short_convolution":
        return (ins[0], ins[1])
    if k == "experts":
        return (ins[0],)
    if k == "argmax":
        return ((ins[0][0],),)
    if k == "running_argmax":
        return ((ins[0][0],), (ins[0][0],))
    if k == "write_rows":
        s, v = ins[0], ins[2]
        if len(v) != 2 or len(s) != 2 or v[1] != s[1] or v[0] > s[0]:
            bad(f"rows {v} do not fit state {s}")
        return (s,)
    if k == "assign":
        return (ins[0],)
    if k == "take_rows":
        return ((op.attr("count"),) + ins[0][1:],)
    if k == "stack_rows":
        return ((sum(s[0] for s in ins),) + ins[0][1:],)
    if k == "take_cols":
        every = op.attr("every") or ins[0][-1]
        if ins[0][-1] % every or not 0 <= op.attr("start") < op.attr("stop") <= every:
            bad(f"columns {op.attr('start')} to {op.attr('stop')} of every {every} of {ins[0]}")
        return (ins[0][:-1] + ((op.attr("stop") - op.attr("start")) * (ins[0][-1] // every),),)
    if k == "allreduce":
        return (ins[0],)
    if k == "allgather":
        axis = op.attr("axis", -1) % len(ins[0])
        s = list(ins[0])
        s[axis] = sum(x[axis] for x in ins)
        return (tuple(s),)
    bad("unknown op")


def _size(s) -> int:
    return math.prod(s) if s else 1


def keys_reached(op: Op) -> int | float:
    """How many keys one query of an attention op scores at most: a sliding window's ``W``, a chunk's ``C``, else
    every cached position (``inf``: the cache's length decides)."""
    return min(op.attr("window", math.inf) or math.inf, op.attr("chunk", math.inf) or math.inf)


#: The keys one query row scores at a time (attention and latent attention compute their softmax a block of keys at a
#: time, keeping each row's running maximum and sum, as FlashAttention does): the score tile an attention op holds.
KEY_BLOCK = 128
#: Bytes of one value an op holds while it runs: bf16 for what it hands on (an expert's gate and up activations, the
#: absorbed queries, a convolution's window, a partial sum received), f32 for what it accumulates (scores, running
#: maxima and sums, an attention's output accumulator, a recurrence's state as it is updated).
HELD, ACCUMULATED = 2, 4


def held_parts(op: Op, shape) -> list[tuple[str, int]]:
    """What ``op`` holds on chip while it runs beyond its inputs and outputs, each part with its bytes (``R`` the rows
    of one run, ``H`` the op's heads on this chip; ``HELD``/``ACCUMULATED`` bytes a value):

    - ``experts``: the router's scores ``R·E``; the routed experts' gate and up activations ``2·R·top·f`` (``f``
      each expert's width on this chip); the shared expert's gate and up ``2·R·f₂`` and its gate's ``R``;
    - ``attention``: a score tile of ``R·H·min(keys, KEY_BLOCK)`` and each row's running maximum and sum ``2·R·H``
      (f32), the output accumulator ``R·H·dv`` (f32);
    - ``latent_attention``: the absorbed queries ``R·H·r``, the score tile and running maximum and sum as
      attention's (f32), and the latent accumulator ``R·H·r`` (f32) before it is read back through B;
    - ``gated_delta``: the state as it is updated ``H·dk·dv`` and each row's ``Sᵀk`` and delta ``2·H·dv`` (f32);
    - ``short_convolution``: the window ``(k − 1 + R)·c`` — the state's rows and the step's, concatenated;
    - ``allreduce``: the other chips' partial sums ``(tp − 1)·|Y|``, received before they are added.

    Every other op computes as its values stream through (a product reads its weight a block at a time and
    accumulates into its output): it holds nothing more. ★ An op's own buffers are part of a program's footprint as
    its intermediates are — a dense SwiGLU's gate and up are tensors, an expert's the same values held inside one op."""
    k, ins = op.kind, [shape(n) for n in op.inputs]
    if k == "experts":
        x, r, g = ins[0], ins[1], ins[2]
        rows, top = x[0], op.attr("top", 1)
        parts = [("the router's scores", rows * r[-1] * HELD),
                 (f"the routed experts' gate and up activations ({_rows(rows)} × top {top} × {g[-1]:,})",
                  2 * rows * top * g[-1] * HELD)]
        optional = op.attr("optional", ())
        if "shared_gate_proj" in optional:
            f2 = ins[5 + optional.index("shared_gate_proj")][-1]
            parts.append((f"the shared expert's gate and up activations ({_rows(rows)} × {f2:,})", 2 * rows * f2 * HELD))
        if "shared_gate" in optional:
            parts.append(("the shared expert's gate", rows * HELD))
        return parts
    if k in ("attention", "latent_attention"):
        q, cache = ins[0], ins[1]
        rows, heads = q[0], op.attr("heads")
        keys = min(cache[0], keys_reached(op)) if k == "attention" else cache[0]
        block = min(keys, KEY_BLOCK)
        tile = [(f"a score tile ({_rows(rows)} × {heads} heads × {block} keys) and its running maxima and sums",
                 rows * heads * (block + 2) * ACCUMULATED)]
        if k == "attention":
            dv = ins[2][1] // op.attr("groups")
            return tile + [(f"the output accumulator ({_rows(rows)} × {heads} heads × {dv})",
                            rows * heads * dv * ACCUMULATED)]
        rank = cache[1]
        return [(f"the absorbed queries ({_rows(rows)} × {heads} heads × rank {rank})", rows * heads * rank * HELD),
                *tile, (f"the latent accumulator ({_rows(rows)} × {heads} heads × rank {rank})",
                        rows * heads * rank * ACCUMULATED)]
    if k == "gated_delta":
        s = ins[3]
        return [(f"the state as it is updated ({' × '.join(map(str, s))})", _size(s) * ACCUMULATED),
                ("each row's read-out and delta", 2 * s[0] * s[2] * ACCUMULATED)]
    if k == "short_convolution":
        x, w = ins[0], ins[2]
        return [(f"the window ({w[0] - 1} + {_rows(x[0])} × {x[1]:,})", (w[0] - 1 + x[0]) * x[1] * HELD)]
    if k == "allreduce":
        return [(f"the other {len(ins) - 1} chips' partial sums", (len(ins) - 1) * _size(ins[0]) * HELD)]
    return []


def _rows(n: int) -> str:
    return "1 row" if n == 1 else f"{n:,} rows"


def held_bytes(op: Op, shape) -> int:
    """The bytes ``op`` holds on chip while it runs beyond its inputs and outputs (``held_parts``)."""
    return sum(n for _, n in held_parts(op, shape))


def flops_of(op: Op, shape) -> int:
    """Floating-point operations of one op (multiply-adds count two)."""
    k, ins = op.kind, [shape(n) for n in op.inputs]
    out = shape(op.outputs[0]) if op.outputs else ()
    if k in ("matmul", "matmul_q8"):
        return 2 * ins[0][0] * ins[0][1] * ins[1][1]
    if k == "attention":
        q, kk = ins[0], ins[1]
        per_key = 4 * q[1] + (3 * op.attr("heads") if op.attr("softcap") else 0)  # a soft cap: 3 per logit
        return q[0] * per_key * min(kk[0], keys_reached(op))
    if k == "latent_attention":
        q, c, r, a, b = ins[0], ins[1], ins[2], ins[4], ins[5]
        h, n = a[0], a[1]
        return 2 * q[0] * h * (n * c[1] + c[0] * (2 * c[1] + r[1]) + c[1] * b[2])
    if k == "gated_delta":
        s = ins[3]
        return 6 * ins[0][0] * _size(s)
    if k == "short_convolution":
        return 2 * _size(ins[0]) * ins[2][0]
    if k == "experts":
        x, r, g = ins[0], ins[1], ins[2]
        top = op.attr("top", 1)
        f = 6 * x[0] * x[1] * g[2] * top + 2 * x[0] * x[1] * r[1]
        if "shared_gate_proj" in op.attr("optional", ()):
            f += 6 * x[0] * x[1] * shape(op.inputs[5 + op.attr("optional").index("shared_gate_proj")])[1]
        return f
    if k in ("rmsnorm", "l2norm"):
        return 4 * _size(out)
    if k == "layernorm":
        return 6 * _size(out)
    if k == "rope":
        return 6 * _size(out)
    if k in ("softmax", "gelu", "silu", "sigmoid", "softplus", "exp", "softcap"):
        return 4 * _size(out)
    if k in ("add", "sub", "mul", "scale", "argmax", "running_argmax"):
        return _size(ins[0])
    if k == "allreduce":
        return _size(out) * (len(ins) - 1)
    return 0
