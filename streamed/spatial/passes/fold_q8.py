"""``fold_q8``: a product over a weight the checkpoint stores Q8_0 reads its int8 planes and block scales
(``matmul_q8``); every other weight is read dense.

In: the program's tensors and ops (over the chips, when tensor parallel) and the declared weights read as stored
Q8_0. Out: the same program with those products folded and the planes and scales it reads; a dense weight no op
reads any more leaves it. A product whose weight's input features are not whole blocks of 32 is refused.
"""

from __future__ import annotations

from dataclasses import replace

from ..ir import Q8_BLOCK, Op, Tensor, nbytes
from .errors import LoweringError


def fold_q8(tensors: dict[str, Tensor], ops: list[Op], q8: frozenset[str]):
    """A product over a weight the checkpoint stores Q8_0 reads its int8 planes and fp16 block scales; every other
    weight is read dense. A dense weight no op reads any more leaves the program. Every product whose weight's input
    features are not whole blocks is refused, each on its statement."""
    out_ops = []
    errors: list[LoweringError] = []
    for op in ops:
        if op.kind == "matmul":
            w = tensors[op.inputs[1]]
            declared = w.of or w.name
            if w.role == "weight" and declared in q8 and w.part is None:
                k, n = w.shape
                if k % Q8_BLOCK:
                    errors.append(LoweringError(f"`{declared}` is stored Q8_0 but its {k} input features are not "
                                                f"whole blocks of {Q8_BLOCK}", op.statement, declared))
                    out_ops.append(op)
                    continue
                planes, scales = f"{w.name}__q8", f"{w.name}__scales"
                if planes not in tensors:
                    tensors[planes] = replace(w, name=planes, dtype="int8", part="planes", of=declared,
                                              bytes=nbytes(w.shape, "int8"))
                    tensors[scales] = replace(w, name=scales, shape=(k // Q8_BLOCK, n), dtype="f16", part="scales",
                                              of=declared, bytes=nbytes((k // Q8_BLOCK, n), "f16"))
                op = replace(op, kind="matmul_q8", inputs=(op.inputs[0], planes, scales))
        out_ops.append(op)
    if errors:
        raise LoweringError.of(errors)
    read = {n for op in out_ops for n in op.inputs} | {n for op in out_ops for n in op.outputs}
    kept = {n: t for n, t in tensors.items() if not (t.role == "weight" and t.part is None and n not in read)}
    return kept, out_ops
