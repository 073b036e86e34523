"""The mutation suite: one bug at a time, planted at test time in the lowering or the executor (monkeypatched, or
in a written bundle's program file), and ``streamed verify`` must catch each — exit 1 — naming the check that did:
the tensor compared bit for bit that first differs (its layer, its step), or certify's refusal. A program file edited
after its lowering is caught before anything runs: the bundle reader places and certifies it again and holds it to
the SHA-256 its manifest records, and refuses it as bad input (exit 2).

Each mutation is a bug someone could write: it is seen caught here, and the same command without it passes (the
last test), so it is the planted bug — not the command — that fails."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Callable

import pytest

from streamed.lang.syntax import Name
from streamed.numerics import execute
from streamed.spatial.passes import lift, split_tp
from streamed.spatial import streamed_model

from repo import EXAMPLES

TINY = str(EXAMPLES / "tiny-llama.lgm")
#: A document with a sliding window (5) that default steps decode past.
WINDOWED = str(EXAMPLES.parent / "tests" / "numerics" / "documents" / "options.lgm")


def swapped_weights(monkeypatch):
    """Layer 1's binding sends its kind's gate projection to the layer's up projection and back (one shape)."""
    real = streamed_model.lower_streamed

    def lowered(analysis, deployment, *args, **kw):
        m = real(analysis, deployment, *args, **kw)
        tensors = dict(m.layers[1].tensors)
        tensors["Wg0"], tensors["Wu0"] = tensors["Wu0"], tensors["Wg0"]
        layers = tuple(streamed_model.LayerBinding(1, b.kind, tensors) if b.layer == 1 else b for b in m.layers)
        return replace(m, layers=layers)

    monkeypatch.setattr(streamed_model, "lower_streamed", lowered)


def dropped_residual(monkeypatch):
    """The lift forgets the residual: ``x plus …`` of the layer's input lowers to the ``…`` alone."""
    real = lift._Lifter.binary

    def binary(self, e, dest):
        if e.op == "plus" and isinstance(e.left, Name) and e.left.text == self.p.input:
            return self.expr(e.right, dest)
        return real(self, e, dest)

    monkeypatch.setattr(lift._Lifter, "binary", binary)


def kv_write_one_row_late(monkeypatch):
    """The executor writes a cache row at the position after the one the op names."""
    real = execute.run_op

    def run_op(op, v, *arithmetic):
        if op.kind == "write_rows":
            v = [v[0], v[1] + 1, *v[2:]]
        return real(op, v, *arithmetic)

    monkeypatch.setattr(execute, "run_op", run_op)


def rotary_base_doubled(monkeypatch):
    """The lowering writes every table's fill rule with twice the document's base."""
    real = lift._Lifter.add

    def add(self, name, shape, dtype, role, tier="sram", **kw):
        if role == "table" and kw.get("fill"):
            kind, base = kw["fill"][:2]
            kw["fill"] = (kind, 2 * base, *kw["fill"][2:])
        return real(self, name, shape, dtype, role, tier, **kw)

    monkeypatch.setattr(lift._Lifter, "add", add)


def epsilon_tripled(monkeypatch):
    """The lowering gives every rmsnorm three times its epsilon."""
    real = lift._Lifter.emit

    def emit(self, kind, inputs, attrs=(), dest=None, outputs=None):
        if kind == "rmsnorm":
            attrs = [(k, 3 * v if k == "epsilon" else v) for k, v in attrs]
        return real(self, kind, inputs, attrs, dest, outputs)

    monkeypatch.setattr(lift._Lifter, "emit", emit)


def rope_position_off_by_one_in_prefill(monkeypatch):
    """A prefill program's rope reads the position after its own (decode's is right)."""
    real = lift._Lifter.call

    def call(self, c, dest):
        if c.op == "rope" and self.cut.rows > 1 and not (self.cut.batched or self.cut.forward):
            position = self.position
            self.position = lambda c: self.emit("add", (position(c),), (("scalar", 1.0), ("side", "right")))
            try:
                return real(self, c, dest)
            finally:
                del self.position
        return real(self, c, dest)

    monkeypatch.setattr(lift._Lifter, "call", call)


def ring_one_row_short(monkeypatch):
    """The lowering holds every windowed cache in a ring one row shorter than its window and its step's rows."""
    real = lift.ring_lengths

    def ring_lengths(program, constants, ctx, rows):
        return {name: length - 1 for name, length in real(program, constants, ctx, rows).items()}

    monkeypatch.setattr(lift, "ring_lengths", ring_lengths)


def allreduce_before_its_partial_sums(monkeypatch):
    """Tensor parallel: the all-reduce is scheduled (listed and phased) ahead of the partial products it sums."""
    real = split_tp._Splitter.allreduce

    def allreduce(self, name, op, ins_of, attrs_of=None):
        real(self, name, op, ins_of, attrs_of)
        ar = self.ops.pop()
        first = min(i for i, o in enumerate(self.ops) if set(o.outputs) & set(ar.inputs))
        self.ops.insert(first, replace(ar, phase=self.ops[first].phase - 1))

    monkeypatch.setattr(split_tp._Splitter, "allreduce", allreduce)


def window_dropped_from_the_program_file(bundle):
    """Every attention op of the bundle's layer programs loses its ``window`` attr, in the JSON on disk."""
    for path in (bundle / "programs").glob("layer-*.json"):
        program = json.loads(path.read_text())
        for op in program["ops"]:
            if op["kind"] == "attention":
                op["attrs"].pop("window", None)
        path.write_text(json.dumps(program))


@dataclass(frozen=True)
class Mutation:
    name: str
    argv: tuple[str, ...]
    caught: str  # what verify prints on stderr: the check that catches it
    plant: Callable | None = None  # (monkeypatch) → None
    in_bundle: Callable | None = None  # (bundle directory) → None; the bundle lowered with `lower ARGV -o DIR`
    lower_argv: tuple[str, ...] = ()
    status: int = 1  # verify's exit status: 1 a difference or a refused lowering, 2 a bundle refused as it is read


MUTATIONS = [
    Mutation("swapped weight bindings of one shape", (TINY, "--steps", "2"),
             "FAIL: layer 1, tensor `f1` differs at step 0", plant=swapped_weights),
    Mutation("a dropped residual add", (TINY, "--steps", "2"),
             "FAIL: layer 0, tensor `h0` differs at step 0", plant=dropped_residual),
    Mutation("a KV-cache write one row late", (TINY, "--steps", "2"),
             "FAIL: layer 0, tensor `Kc0` differs at step 0", plant=kv_write_one_row_late),
    Mutation("a rotary base doubled in the bundle's fill", (TINY, "--steps", "2"),
             "FAIL: layer 0, tensor `Rcos1` differs at step 0", plant=rotary_base_doubled),
    Mutation("an rmsnorm epsilon ×3", (TINY, "--steps", "2"),
             "FAIL: layer 0, tensor `xn0` differs at step 0", plant=epsilon_tripled),
    Mutation("the attention window dropped from the program file", (WINDOWED,),
             "programs/layer-0.json: not a program a lowering wrote", in_bundle=window_dropped_from_the_program_file,
             lower_argv=(WINDOWED, "--mode", "decode", "--ctx", "16"), status=2),
    Mutation("a windowed cache's ring one row short", (WINDOWED,),
             "does not lower: attention reads `Kc0` as a ring of 4 rows, which does not hold the 5 positions its row "
             "reads", plant=ring_one_row_short),
    Mutation("a rope position off by one in prefill only", (TINY, "--mode", "prefill", "--steps", "2"),
             "FAIL: layer 0, tensor `q0` differs at step 0", plant=rope_position_off_by_one_in_prefill),
    Mutation("an all-reduce before its partial sums", (TINY, "--mode", "tp", "--tp", "2", "--steps", "2"),
             "does not lower: `allreduce` in phase", plant=allreduce_before_its_partial_sums),
]


def verify(run, tmp_path, m: Mutation, monkeypatch, planted: bool):
    argv = list(m.argv)
    if m.in_bundle is not None:
        bundle = tmp_path / "bundle"
        code, _, err = run("lower", *m.lower_argv, "-o", bundle)
        assert code == 0, err
        if planted:
            m.in_bundle(bundle)
        argv += ["--bundle", str(bundle)]
    elif planted:
        m.plant(monkeypatch)
    return run("verify", *argv)


@pytest.mark.parametrize("m", MUTATIONS, ids=lambda m: m.name)
def test_verify_catches_the_planted_bug_naming_the_check_that_caught_it(run, tmp_path, monkeypatch, m):
    code, out, err = verify(run, tmp_path, m, monkeypatch, planted=True)
    assert code == m.status, out + err
    assert m.caught in err, err
    if m.caught.startswith("FAIL"):
        assert "(it must agree bit for bit)" in err  # none of these runs reassociates a sum: one ulp is a failure


@pytest.mark.parametrize("m", MUTATIONS, ids=lambda m: m.name)
def test_the_same_verify_passes_without_the_bug(run, tmp_path, monkeypatch, m):
    code, out, err = verify(run, tmp_path, m, monkeypatch, planted=False)
    assert code == 0, out + err
    assert "bundle and reference agree" in out


def test_the_prefill_rope_bug_leaves_decode_right_so_only_a_prefill_certification_sees_it(run, monkeypatch):
    rope_position_off_by_one_in_prefill(monkeypatch)
    code, out, err = run("verify", TINY, "--steps", "2")
    assert code == 0, err
