"""`streamed run` and `streamed verify` over a Ray cluster: the model's layer ranges on actors, each holding only its
own weights and caches — and the answer the single process gives, bit for bit, whatever the split, through an actor
killed mid-run; a cluster too small is refused before anything starts.

One local Ray cluster serves the module (starting one costs seconds): two CPUs, a small object store, no dashboard.
"""

import json
import subprocess
import sys
import time
from itertools import combinations

import numpy as np
import pytest
import ray  # the cluster extra (the test extra installs it)

import ggufs
from repo import EXAMPLES, ROOT

TINY = str(EXAMPLES / "tiny-llama.lgm")
GEMMA = str(EXAMPLES / "small-gemma3.lgm")  # 12 layers, sliding windows (rings) and global attention
QWEN = str(EXAMPLES / "small-qwen35.lgm")  # 8 layers, gated delta (recurrent states) between attention


@pytest.fixture(scope="module", autouse=True)
def cluster():
    """The local cluster every test here uses, started as ``--cluster auto`` starts one (``engine.connect``: tried
    twice, a start under the machine's load can time out)."""
    from streamed.cluster.engine import connect

    connect("auto")
    yield
    ray.shutdown()


def logits(run, *argv):
    code, out, err = run("run", *argv, "--json")
    assert code == 0, err
    got = json.loads(out)
    return got["positions"], np.asarray(got["logits"], dtype=np.float32), got["next"]


@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory):
    path = tmp_path_factory.mktemp("ckpt") / "tiny.gguf"
    return str(ggufs.write(path, "llama", {}, ggufs.tensors_of((EXAMPLES / "tiny-llama.lgm").read_text())))


@pytest.mark.parametrize("doc,actors", [(GEMMA, "1,9,2"), (QWEN, "5,3")])
def test_logits_over_the_cluster_equal_the_single_process_bit_for_bit(run, doc, actors):
    tokens = ("--tokens", "7,3,250,9,41,5,88", "--prefill", "4")
    want = logits(run, doc, *tokens)
    got = logits(run, doc, *tokens, "--cluster", "auto", "--actors", actors)
    assert got[0] == want[0] and got[2] == want[2]
    np.testing.assert_array_equal(got[1], want[1])


def test_a_checkpoint_s_logits_over_three_actors_equal_the_single_process_in_llama_cpp_s_arithmetic(run,
                                                                                                   tiny_checkpoint):
    argv = (TINY, "--tokens", "1,2,3,4,5", "--decode", "--checkpoint", tiny_checkpoint, "--arithmetic", "llama.cpp")
    want = logits(run, *argv)
    got = logits(run, *argv, "--cluster", "auto", "--actors", "2,1,1")
    np.testing.assert_array_equal(got[1], want[1])


def test_a_tensor_parallel_bundle_over_two_actors_gives_the_single_process_logits(run, tmp_path):
    code, _, err = run("lower", GEMMA, "--mode", "tp", "--tp", "2", "--ctx", "8", "-o", tmp_path / "b")
    assert code == 0, err
    argv = (GEMMA, "--tokens", "9,8,7,6,5,4", "--decode", "--bundle", tmp_path / "b")
    want = logits(run, *argv)
    got = logits(run, *argv, "--cluster", "auto", "--actors", "5,7")
    assert got[0] == want[0]
    np.testing.assert_array_equal(got[1], want[1])


@pytest.mark.parametrize("argv", [("--mode", "tp", "--tp", "2", "--steps", "4"),
                                  ("--mode", "prefill", "--chunk", "2", "--steps", "5")])
def test_verify_over_the_cluster_prints_the_single_process_report(run, argv):
    want = run("verify", GEMMA, *argv)
    got = run("verify", GEMMA, *argv, "--cluster", "auto", "--actors", "3")
    assert want[0] == 0 and got == want


def test_a_bundle_that_differs_fails_over_the_cluster_at_the_same_tensor(run, monkeypatch):
    from streamed.spatial.passes import lift

    real = lift._Lifter.emit

    def emit(self, kind, inputs, attrs=(), dest=None, outputs=None):  # every rmsnorm's epsilon tripled
        if kind == "rmsnorm":
            attrs = [(k, 3 * v if k == "epsilon" else v) for k, v in attrs]
        return real(self, kind, inputs, attrs, dest, outputs)

    monkeypatch.setattr(lift._Lifter, "emit", emit)
    want = run("verify", TINY, "--steps", "2")
    got = run("verify", TINY, "--steps", "2", "--cluster", "auto", "--actors", "2")
    assert want[0] == 1 and "FAIL: layer 0, tensor `xn0` differs at step 0" in want[2]
    assert got == want


def test_a_cluster_too_small_is_refused_in_one_line_before_any_actor_starts(run, tiny_checkpoint):
    code, out, err = run("run", TINY, "--tokens", "1,2", "--checkpoint", tiny_checkpoint, "--cluster", "auto",
                         "--actors", "2", "--actor-memory", "20K")
    assert code == 1 and out == ""
    assert err.count("\n") == 1 and "the cluster cannot hold the model" in err and "Traceback" not in err
    assert "layer 0 needs" in err and "may use 20 KB" in err


@pytest.mark.parametrize("argv,message", [
    (("--actors", "2"), "--actors 2: only with --cluster"),
    (("--cluster", "tcp://x:1"), "--cluster tcp://x:1: say `auto`"),
    (("--cluster", "auto", "--actors", "two"), "--actors two: a number of actors"),
    (("--cluster", "auto", "--actors", "1,1"), "--actors 1,1: 1+1 layers, but"),
    (("--cluster", "auto", "--actors", "5"), "--actors 5: more actors than"),
    (("--cluster", "auto", "--actor-memory", "lots"), "--actor-memory lots: not a size"),
])
def test_cluster_options_given_wrongly_are_one_message_naming_them(run, argv, message):
    code, out, err = run("run", TINY, "--tokens", "1,2", *argv)
    assert code == 2 and out == "" and message in err and "Traceback" not in err


def test_run_without_cluster_never_imports_ray():
    code = ("import sys; from streamed.cli import main; "
            f"status = main(['run', {TINY!r}, '--tokens', '1,2', '--json']); "
            "assert status == 0; assert 'ray' not in sys.modules, 'ray was imported'")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr


# ---- the engine: faults and stopping -------------------------------------------------------------------------------


def _pipeline(doc: str, counts: list[int], restarts: int):
    """A document's pipeline over ``counts`` layers an actor, seeded weights, exact arithmetic; and its programs."""
    from streamed.analysis.whole import analyze
    from streamed.cluster import engine
    from streamed.cluster.split import costs, split
    from streamed.cluster.stage import Source
    from streamed.numerics.product import EXACT

    programs = analyze((EXAMPLES / doc).read_bytes()).programs
    ranges = split(costs(programs, None, rows=1, ctx=8, positions=8), engine.slots(ray, len(counts), None), counts)
    make = lambda r: (programs, r, Source(seed=0), EXACT, 8, 1, None)  # noqa: E731
    return engine.Pipeline(ray, ranges, make, restarts), programs


def test_an_actor_killed_mid_run_is_restarted_and_the_logits_do_not_change():
    from streamed.cluster.stage import Task
    from streamed.numerics.run import reference_logits
    from streamed.numerics.weights import seeded

    pipeline, programs = _pipeline("small-gemma3.lgm", [4, 4, 4], restarts=2)
    tokens = [5, 9, 1, 77, 3, 12, 8, 60]
    killed = []

    def kill(step, stage, ranges):  # after the first actor's part of steps 3 and 6: the second, then the third dies
        if stage == 0 and step in (3, 6):
            victim = pipeline.actors[1 if step == 3 else 2]
            ray.kill(victim, no_restart=False)
            killed.append(step)

    pipeline.progress = kill
    try:
        rows = [pipeline.step(Task(np.asarray([t]), (p,)))[-1].logits for p, t in enumerate(tokens)]
    finally:
        pipeline.close()
    assert killed == [3, 6] and pipeline.replays == 2
    want = reference_logits(programs, seeded(programs, 0), tokens, 1, ctx=8)
    np.testing.assert_array_equal(np.concatenate([np.atleast_2d(r) for r in rows]), want.logits)


def test_an_actor_that_cannot_be_restarted_ends_the_run_in_one_line_naming_its_layers_and_node():
    from streamed.cluster.engine import ClusterFault
    from streamed.cluster.stage import Task

    pipeline, _ = _pipeline("small-gemma3.lgm", [3, 6, 3], restarts=0)
    pipeline.progress = lambda step, stage, ranges: ray.kill(pipeline.actors[1], no_restart=True) \
        if (step, stage) == (2, 0) else None
    try:
        with pytest.raises(ClusterFault) as e:
            for p, t in enumerate([5, 9, 1, 4]):
                pipeline.step(Task(np.asarray([t]), (p,)))
    finally:
        pipeline.close()
    message = str(e.value)
    assert "\n" not in message and message.startswith(f"layers 3-8 on node {pipeline.ranges[1].host}: ")
    assert "died" in message


def test_an_interrupt_stops_every_actor():
    from streamed.cluster.stage import Task

    pipeline, _ = _pipeline("tiny-llama.lgm", [2, 2], restarts=2)
    actors = list(pipeline.actors)

    def interrupt(step, stage, ranges):
        raise KeyboardInterrupt

    pipeline.progress = interrupt
    with pytest.raises(KeyboardInterrupt):
        try:
            pipeline.step(Task(np.asarray([1]), (0,)))
        finally:
            pipeline.close()
    deadline = time.monotonic() + 120  # a kill lands when the actor's node gets to it: under load, not at once
    for a in actors:
        while True:
            try:
                ray.get(a.where.remote(), timeout=60)
            except ray.exceptions.RayActorError:
                break
            assert time.monotonic() < deadline, "an actor still answers two minutes after the run stopped"
            time.sleep(1)


# ---- the split ------------------------------------------------------------------------------------------------------


def _all_splits(n: int, k: int):
    for cuts in combinations(range(1, n), k - 1):
        bounds = (0, *cuts, n)
        yield [(bounds[i], bounds[i + 1]) for i in range(k)]


@pytest.mark.parametrize("held,caps", [
    ((5, 1, 1, 9, 2, 2, 3), (30, 30, 30)),
    ((1, 1, 1, 1, 1, 1, 1, 1), (5, 30)),
    ((4, 4, 4, 4), (12, 12)),
    ((7, 1, 1, 1, 1, 7), (10, 20, 11)),
])
def test_the_split_is_the_contiguous_one_whose_largest_range_is_smallest_within_each_cap(held, caps):
    from streamed.cluster.split import Costs, Slot, split

    c = Costs(tuple(held), (1,) * len(held), 2, 3)
    got = split(c, [Slot(str(i), f"h{i}", cap) for i, cap in enumerate(caps)])
    k = len(caps)
    load = lambda s: [c.of(a, b, i == 0, i == k - 1) for i, (a, b) in enumerate(s)]  # noqa: E731
    fitting = [s for s in _all_splits(len(held), k) if all(x <= cap for x, cap in zip(load(s), caps))]
    best = min(max(load(s)) for s in fitting)  # the brute-force answer
    assert [r.bytes for r in got] == load([(r.first, r.stop) for r in got])
    assert max(r.bytes for r in got) == best and all(r.bytes <= cap for r, cap in zip(got, caps))
    assert got[0].embed and got[-1].head and [r.first for r in got[1:]] == [r.stop for r in got[:-1]]


def test_a_split_no_cap_allows_is_refused_naming_the_range_and_the_node():
    from streamed.cluster.split import Costs, Slot, SplitRefused, split

    c = Costs((4, 4, 9, 4), (1, 1, 1, 1), 2, 3)
    with pytest.raises(SplitRefused) as e:
        split(c, [Slot("a", "10.0.0.1", 12), Slot("b", "10.0.0.2", 12)])
    assert "cannot hold the model" in str(e.value) and "layer 2 alone needs" in str(e.value)
    assert "\n" not in str(e.value)


def test_a_range_holds_its_own_layers_weights_only(tiny_checkpoint):
    from streamed.analysis.whole import analyze
    from streamed.cluster.split import Range
    from streamed.cluster.stage import Source, Stage
    from streamed.model.gguf import read_storage
    from streamed.numerics.product import EXACT
    from streamed.numerics.weights import declared_weights

    programs = analyze((EXAMPLES / "tiny-llama.lgm").read_bytes(), read_storage(tiny_checkpoint)).programs
    middle = Stage(programs, Range(1, 3, False, False, 0), Source(tiny_checkpoint, read_storage(tiny_checkpoint)),
                   EXACT, 4, 1)
    mine = {d.name for p in programs.layers[1:3] for d in p.weights()}
    assert set(middle.weights.values) == mine and len(mine) < len(declared_weights(programs))
    assert set(middle.reference.states) == {d.name for p in programs.layers[1:3] for d in p.decls.values()
                                            if d.role == "state"}
