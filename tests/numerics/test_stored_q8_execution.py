"""The executor runs the folded programs: a Q8_0 expert bank, a shared expert and MLA's absorbed A and B are executed
from their stored blocks (the IR's planes and scales, read where they are — the reference reads the same stored
numbers), so a bundle read from a Q8_0 GGUF is certified bit for bit, and the kernels the executor calls receive the
stored blocks, never a dense copy."""

import pytest

import oracle
from streamed.analysis.whole import analyze
from streamed.model.author import author
from streamed.model.gguf import read_gguf
from streamed.numerics.execute import Executor, plan_of
from streamed.numerics.q8 import Planes
from streamed.numerics.verify import run
from streamed.numerics.weights import from_gguf
from streamed.spatial.deployment import Deployment
from streamed.spatial.streamed_model import lower_streamed

from repo import CONFIGS

CTX = 12


@pytest.fixture(scope="module")
def deepseek(tmp_path_factory):
    """small-deepseek-v2's config as llama.cpp's converter writes it with every projection Q8_0 (the routers F32, as
    the converter keeps them), the document `streamed author` writes from that GGUF, and its weights."""
    import json

    path = tmp_path_factory.mktemp("q8") / "deepseek.gguf"
    oracle.write(path, json.loads((CONFIGS / "small-deepseek-v2.json").read_text()), q8=True)
    ck = read_gguf(path)
    a = analyze(author(ck.spec), ck.storage)
    assert not a.errors
    return a, from_gguf(path, a.programs, ck.storage), ck.storage


def _certify(a, weights, storage, dep):
    return run(a.programs, weights, dep, {"step": plan_of(lower_streamed(a, dep, storage=storage))}, steps=6)


@pytest.mark.parametrize("dep", [Deployment("decode", CTX), Deployment("tp", CTX, tp=2)], ids=lambda d: d.mode)
def test_a_q8_0_moe_checkpoint_runs_its_banks_and_latent_projections_from_their_planes_and_is_certified(deepseek, dep):
    a, weights, storage = deepseek
    model = lower_streamed(a, dep, storage=storage)
    kind = model.kinds[1].program  # latent attention, experts
    experts = next(op for op in kind.ops if op.kind == "experts")
    latent = next(op for op in kind.ops if op.kind == "latent_attention")
    # the banks and the shared expert as stored; the router stored F32 (llama.cpp's converter), so read dense
    assert 1 not in experts.attr("q8") and {2, 3, 4} <= set(experts.attr("q8"))
    assert latent.attr("q8") == (4, 5)
    assert {"Eg1", "Eu1", "Ed1", "Wkb1", "Wvb1"} <= set(weights.planes)
    report = _certify(a, weights, storage, dep)
    assert report.ok, report.first_failure.describe() if report.first_failure else report.error
    if dep.chips == 1:
        assert all(m.bound == 0 for m in report.measures)  # bit for bit


def test_the_executor_hands_the_kernels_a_bank_and_mla_s_weights_as_their_stored_blocks(deepseek, monkeypatch):
    """The bundle's experts and latent attention read the Q8_0 weights where they are — the stored blocks
    (``q8.Planes``), one expert's matrix at a time — never a dense copy made on the way."""
    import streamed.numerics.kernels as nx

    a, weights, storage = deepseek
    seen: dict[str, list] = {"experts": [], "latent_attention": []}
    experts, latent = nx.experts, nx.latent_attention

    def spy_experts(x, router, top, g, u, d, **kw):
        seen["experts"].append((type(g), type(u), type(d), *(type(s) for s in kw.get("shared") or ())))
        return experts(x, router, top, g, u, d, **kw)

    def spy_latent(q, c, r, pos, a_, b_, *args, **kw):
        seen["latent_attention"].append((type(a_), type(b_)))
        return latent(q, c, r, pos, a_, b_, *args, **kw)

    model = lower_streamed(a, Deployment("decode", CTX), storage=storage)
    monkeypatch.setattr(nx, "experts", spy_experts)
    monkeypatch.setattr(nx, "latent_attention", spy_latent)
    executor, plan = Executor(weights), plan_of(model)
    for pos, token in enumerate((3, 17, 5)):
        executor.step(plan, [token], [pos])
    assert seen["experts"] and all(set(t) == {Planes} for t in seen["experts"])
    assert seen["latent_attention"] and all(set(t) == {Planes} for t in seen["latent_attention"])
