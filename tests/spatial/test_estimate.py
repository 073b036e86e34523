"""The estimate a user sanity-checks against the target: a decode step moves each layer's weights once, the
embedding only for its token, each cache at full context for attention and only its new row for its update."""

from streamed.analysis.whole import analyze
from streamed.spatial.residency import weight_bytes
from streamed.spatial.synth import two_kind_document
from streamed.spatial.deployment import Deployment
from streamed.spatial.streamed_model import lower_streamed


def _model(mode="decode", **sizes):
    # A large vocabulary makes the embedding table the biggest weight: charging it whole would show at once.
    return lower_streamed(analyze(two_kind_document(4, d=256, vocab=32768, q8=False)), Deployment(mode, **sizes))


def test_a_decode_step_reads_the_embedding_rows_of_its_token_not_the_whole_table():
    model = _model(ctx=256)
    embed = model.estimate["programs"]["embed"]
    table = weight_bytes(model.embed)
    assert table > 10 * 1024 * 1024
    assert sum(embed["bytes"].values()) < table / 1000  # one row of 32768 and the token itself


def test_a_cache_update_moves_its_new_row_while_attention_reads_the_whole_cache():
    model = _model(ctx=4096)
    kind = model.kind("attention").program  # the global kind: its attention reads every cached position
    update = next(op for op in kind.ops if op.kind == "write_rows")
    attention = next(op for op in kind.ops if op.kind == "attention")
    cache = kind.tensor(update.inputs[0])
    assert sum(update.bytes_moved.values()) < cache.bytes / 100
    assert sum(attention.bytes_moved.values()) >= 2 * cache.bytes


def test_decode_tokens_per_second_stays_under_the_weight_bandwidth_bound_and_near_it_when_memory_bound():
    model = _model(ctx=256)
    hbm = model.target.hbm_bandwidth
    layer_weights = sum(weight_bytes(k.program) * len(k.layers) for k in model.kinds) + weight_bytes(model.head)
    bound = hbm / layer_weights
    # Under the bound, and within a few per cent of it: the weights are all a memory-bound decode step waits for.
    assert 0.95 * bound <= model.estimate["tokens_per_second"] <= bound
    assert model.estimate["bound"] == "memory"


def test_the_lower_summary_shows_what_a_step_reads_from_memory_so_the_rate_can_be_checked(tmp_path, capsys):
    from streamed.cli import main
    from streamed.spatial.units import size

    doc = tmp_path / "m.lgm"
    doc.write_text(two_kind_document(4, d=256, vocab=32768, q8=False))
    assert main(["lower", str(doc), "--ctx", "256", "-o", str(tmp_path / "b")]) == 0
    line = next(l for l in capsys.readouterr().out.splitlines() if l.strip().startswith("estimate"))
    model = _model(ctx=256)
    assert f"memory-bound, reading {size(model.estimate['step']['bytes']['hbm'])} from HBM)" in line


def test_a_windowed_attention_reads_and_scores_only_its_window_of_the_cache():
    model = _model(ctx=4096)  # layers 0-2 attend over a window of 8, layer 3 over the whole cache
    ops = {k.name: next(op for op in k.program.ops if op.kind == "attention") for k in model.kinds}
    windowed, full = ops["attention, window 8"], ops["attention"]
    assert sum(windowed.bytes_moved.values()) * 100 < sum(full.bytes_moved.values())
    assert windowed.flops * 100 < full.flops
