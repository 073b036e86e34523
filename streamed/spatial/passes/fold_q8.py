"""``fold_q8``: ★ A WEIGHT MOVES AS IT IS STORED — every product over a weight the checkpoint stores Q8_0 reads its
int8 planes and block scales, whatever op computes the product; every other weight is read dense, and a weight the
checkpoint stores Q8_0 that is read dense anyway is named with why.

In: the program's tensors and ops (over the chips, when tensor parallel) and the declared weights read as stored
Q8_0. Out: the same program with those products folded and the planes and scales they read (a dense weight no op
reads any more leaves it), and the weights of ``q8`` some op still reads dense, each with why.

The products (``product_weights``): a ``matmul``'s weight (it becomes ``matmul_q8``); an ``experts`` op's router,
its expert banks G, U and D (``E by k by n``: each expert a product) and its shared expert's and shared gate's
weights; a ``latent_attention``'s absorbed A and B (one ``k by n`` matrix per head). Those ops keep their kind and
say which inputs they read as planes (attr ``q8``: their positions), the scales following their other inputs in the
same order (ir.py). The blocks of 32 run along each product's input features (axis −2): a weight whose input
features are not whole blocks is refused, each on its statement.

``read_dense`` reads a lowered program back for the manifest: the weights the checkpoint stores Q8_0 that it reads
dense, on which chips, and why (``certificate["read_dense"]``) — where a host must dequantise before loading.
``undeclared_dense`` says why for the weights the checkpoint stores Q8_0 but the document does not declare ``q8``.
"""

from __future__ import annotations

from dataclasses import replace

from ..ir import Q8_BLOCK, Op, SpatialProgram, Tensor, nbytes
from .errors import LoweringError

#: An ``experts`` op's optional inputs that are a product's weight (the shared expert, its gate).
EXPERT_PRODUCTS = ("shared_gate_proj", "shared_up", "shared_down", "shared_gate")


def product_weights(op: Op) -> tuple[int, ...]:
    """The positions of ``op``'s inputs that are the weight of a product it computes (before any is folded)."""
    if op.kind == "matmul":
        return (1,)
    if op.kind == "latent_attention":
        return (4, 5)
    if op.kind == "experts":
        optional = op.attr("optional", ())
        return (1, 2, 3, 4) + tuple(5 + i for i, a in enumerate(optional) if a in EXPERT_PRODUCTS)
    return ()


def _why_dense(kind: str) -> str:
    """Why an op of ``kind`` that reads a weight stored Q8_0 other than as a product's weight reads it dense."""
    if kind == "lookup":
        return "its rows are looked up (`lookup`), not multiplied: the embed reads them dense"
    return f"`{kind}` reads it as values, not as a product's weight"


def fold_q8(tensors: dict[str, Tensor], ops: list[Op], q8: frozenset[str]):
    """Every product over a weight of ``q8`` reads its int8 planes and fp16 block scales; every other weight is read
    dense. A dense weight no op reads any more leaves the program. Returns the tensors, the ops, and the weights of
    ``q8`` an op reads dense anyway, with why. Every product whose weight's input features are not whole blocks is
    refused, each on its statement."""
    out_ops = []
    errors: list[LoweringError] = []
    dense: dict[str, str] = {}

    def folded(name: str, op: Op) -> tuple[str, str] | None:
        """The planes and scales of weight ``name``, made once; ``None`` when it is read dense."""
        w = tensors[name]
        declared = w.of or w.name
        if w.role != "weight" or w.part is not None or declared not in q8:
            return None
        *lead, k, n = w.shape
        if k % Q8_BLOCK:
            errors.append(LoweringError(f"`{declared}` is stored Q8_0 but its {k} input features are not whole blocks "
                                        f"of {Q8_BLOCK}", op.statement, declared))
            return None
        planes, scales = f"{w.name}__q8", f"{w.name}__scales"
        if planes not in tensors:
            tensors[planes] = replace(w, name=planes, dtype="int8", part="planes", of=declared,
                                      bytes=nbytes(w.shape, "int8"))
            shape = (*lead, k // Q8_BLOCK, n)
            tensors[scales] = replace(w, name=scales, shape=shape, dtype="f16", part="scales", of=declared,
                                      bytes=nbytes(shape, "f16"))
        return planes, scales

    for op in ops:
        slots = product_weights(op)
        ins = list(op.inputs)
        planes_at: list[int] = []
        scales: list[str] = []
        for i in slots:
            pair = folded(ins[i], op)
            if pair is not None:
                ins[i] = pair[0]
                planes_at.append(i)
                scales.append(pair[1])
        for i, name in enumerate(op.inputs):
            t = tensors[name]
            if i not in slots and t.role == "weight" and t.part is None and (t.of or t.name) in q8:
                dense.setdefault(t.of or t.name, _why_dense(op.kind))
        if planes_at and op.kind == "matmul":
            op = replace(op, kind="matmul_q8", inputs=(ins[0], ins[1], scales[0]))
        elif planes_at:
            op = replace(op, inputs=(*ins, *scales), attrs=(*op.attrs, ("q8", tuple(planes_at))))
        out_ops.append(op)
    if errors:
        raise LoweringError.of(errors)
    read = {n for op in out_ops for n in op.inputs} | {n for op in out_ops for n in op.outputs}
    kept = {n: t for n, t in tensors.items() if not (t.role == "weight" and t.part is None and n not in read)}
    return kept, out_ops, dense


def undeclared_dense(program: SpatialProgram, names: frozenset[str]) -> dict[str, str]:
    """Why ``program`` reads dense each weight of ``names`` it holds — weights the checkpoint stores Q8_0 that the
    document does not declare ``q8``, so no product folds them."""
    readers: dict[str, set[str]] = {}
    for op in program.ops:
        for n in op.inputs:
            t = program.tensor(n)
            if t.role == "weight" and (t.of or t.name) in names:
                readers.setdefault(t.of or t.name, set()).add(op.kind)
    return {n: _why_dense("lookup") if kinds == {"lookup"} else
            "the document does not declare it `q8`, so its products read it dense (declare it `q8` to read it as "
            "stored)" for n, kinds in sorted(readers.items())}


def read_dense(program: SpatialProgram) -> list[dict]:
    """The weights the checkpoint stores Q8_0 that ``program`` reads dense (``certificate["read_dense"]``, written by
    the lowering), the chips that do (every chip of the program when each holds it whole), and why."""
    found = (program.certificate or {}).get("read_dense", {})
    # Every chip of the program: those its chip-local tensors name (a chip holds some of every split), chip 0 alone
    # untensor-parallel — counted from the tensors, so a program file claiming 10³⁰ chips costs nothing here.
    every = sorted({t.chip for t in program.tensors if t.chip is not None}) or [0]
    chips: dict[str, set[int]] = {}
    for t in program.tensors:
        if t.role == "weight" and t.part is None and (t.of or t.name) in found:
            chips.setdefault(t.of or t.name, set()).update(every if t.chip is None else (t.chip,))
    return [{"of": w, "chips": sorted(chips.get(w, ())), "why": why} for w, why in found.items()]
