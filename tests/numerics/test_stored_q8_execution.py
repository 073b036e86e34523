"""The executor runs the folded programs: a Q8_0 expert bank, a router, a shared expert and MLA's absorbed A and B are
executed from their stored planes and scales (the reference reads the same stored numbers, dequantised once), so a
bundle read from a Q8_0 GGUF is certified bit for bit — and planes that differ from what the reference read are
seen, naming the layer and the tensor."""

import numpy as np
import pytest

import oracle
from streamed.analysis.whole import analyze
from streamed.model.author import author
from streamed.model.gguf import read_gguf
from streamed.numerics.execute import plan_of
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


@pytest.mark.parametrize("weight, tensor", [("Ed2", "fo2"), ("Wvb2", "a2")])
def test_planes_the_bundle_reads_that_differ_from_the_reference_s_numbers_are_caught_at_their_layer(deepseek, weight,
                                                                                                   tensor):
    """Only the executor reads the planes (the reference reads the dense values it was given): one int8 value changed
    in a bank's or a head's planes is a difference in the first tensor computed from it, at its layer."""
    a, weights, storage = deepseek
    p = weights.planes[weight]
    values = p.values.copy()
    values.flat[0] = np.int8(-values.flat[0] if values.flat[0] else 100)
    weights.planes[weight] = Planes(values, p.scales)
    try:
        report = _certify(a, weights, storage, Deployment("decode", CTX))
    finally:
        weights.planes[weight] = p
    bad = report.first_failure
    assert bad is not None and bad.program == "layer 2" and bad.tensor == tensor, bad
