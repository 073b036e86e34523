"""Arbitrary bytes and arbitrary JSON into every entry point of the command line — a document, a config, a GGUF's
header, a target, a manifest — and only two outcomes are accepted: a result (exit 0 or 1 with what the command
prints), or bad input said in one line (``streamed: …``, exit 2). Never a traceback, never another status, never an
exception out of ``main``. (The language server's entry, LSP params, is ``tests/server/test_hostile_params.py``.)

Inputs are drawn two ways: from nothing (any bytes, any JSON), which reaches the readers' first checks, and by
mutating a real input (a shipped config, a GGUF the ``gguf`` package wrote, the shipped SN50 target, a manifest
``lower`` wrote) one field or a few bytes at a time, which reaches everything behind them."""

from __future__ import annotations

import contextlib
import io
import json
import struct
import tempfile
import warnings
from importlib import resources
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ggufs
from repo import CONFIGS, EXAMPLES, TINY
from mutations import mutate
from streamed.cli import main

SETTINGS = settings(max_examples=200, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))

#: Any JSON value: what a file of JSON may hold, nested a few levels.
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70) | st.floats(allow_nan=False)
    | st.text(max_size=12) | st.sampled_from([0, -1, 1, 2**31, 10**9, 10**18, 1e308, 0.5, "", "x\n## Layer 0"]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)


#: JSON texts no ``json.dumps`` writes but a file may hold: what Python's reader mishandles (a 5,000-digit integer,
#: NaN, 1e400 read as infinity, nesting past the recursion limit). ``_raw`` puts one where a drawn value stood.
RAW = ["9" * 5000, "NaN", "-Infinity", "1e400", "[" * 3000 + "]" * 3000, '{"a":' * 3000 + "1" + "}" * 3000]
RAW_VALUES = st.sampled_from([f"@raw{i}@" for i in range(len(RAW))])


def _raw(text: str) -> str:
    for i, raw in enumerate(RAW):
        text = text.replace(f'"@raw{i}@"', raw)
    return text


def run(*argv) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in argv])
    return code, out.getvalue(), err.getvalue()


def accepted(code: int, out: str, err: str, what) -> None:
    """A result, or one line of bad input: nothing else."""
    assert "Traceback" not in err + out, (what, err[-2000:])
    assert code in (0, 1, 2), (what, code, err)
    if code == 2:
        assert err.startswith("streamed: ") and err.count("\n") == 1, (what, err)


PATHS = st.lists(st.integers(0, 1000), min_size=1, max_size=4)


# ---- a document ----------------------------------------------------------------------------------------------------

WORDS = st.sampled_from(["Let", "be", "a", "weight", "of", "by", "d", "rows", "ctx", "an", "input", "times", "plus",
                         "rmsnorm", "with", "epsilon", "attention", "over", "and", "at", "pos", "Return", ".", ",",
                         "(", ")", "## Layer 0", "## Layer 1", "## Model", "## Head", "## Embed", "# T", "0", "-64",
                         "1e999", "\n", "x", "q8", "state", "experts", "top", "heads", "--"])


@SETTINGS
@given(st.one_of(st.binary(max_size=400), st.lists(WORDS, max_size=80).map(" ".join).map(str.encode),
                 st.tuples(st.integers(0, len(TINY)), st.lists(WORDS, max_size=6).map(" ".join))
                 .map(lambda t: (TINY[:t[0]] + t[1] + TINY[t[0]:]).encode())))
def test_any_document_is_checked_and_lowered_or_refused_in_one_line(data):
    with tempfile.TemporaryDirectory() as d:
        doc = Path(d) / "m.lgm"
        doc.write_bytes(data)
        accepted(*run("check", doc), data)
        accepted(*run("lower", doc, "--ctx", "32", "-o", Path(d) / "b"), data)


# ---- a config ------------------------------------------------------------------------------------------------------

REAL_CONFIGS = sorted(CONFIGS.glob("*.json"))


@SETTINGS
@given(st.one_of(
    st.binary(max_size=200),
    JSON.map(lambda v: json.dumps(v).encode()),
    st.tuples(st.sampled_from(REAL_CONFIGS), st.lists(st.tuples(PATHS, JSON | RAW_VALUES), min_size=1, max_size=3))
    .map(lambda t: _raw(json.dumps(_mutated(json.loads(t[0].read_text()), t[1]))).encode()),
))
def test_any_config_is_authored_or_refused_in_one_line(data):
    with tempfile.TemporaryDirectory() as d:
        src = Path(d) / "config.json"
        src.write_bytes(data)
        accepted(*run("author", src, "-o", Path(d) / "m.lgm"), data[:300])


def _mutated(value, edits):
    for path, new in edits:
        value = mutate(value, path, new)
    return value


# ---- a GGUF's header -----------------------------------------------------------------------------------------------


def _small_gguf() -> tuple[bytes, int]:
    """A two-layer llama GGUF the ``gguf`` package wrote, and where its tensor data begins: everything before is
    the header (magic, version, counts, metadata, tensor infos)."""
    from gguf import GGUFReader

    with tempfile.TemporaryDirectory() as d:
        path = ggufs.llama_like(Path(d) / "m.gguf", layers=2, d=32, heads=2, kv_heads=1, ffn=64, vocab=64)
        return path.read_bytes(), min(int(t.data_offset) for t in GGUFReader(str(path)).tensors)


GGUF, HEADER = _small_gguf()


@SETTINGS
@given(st.one_of(
    st.binary(max_size=300).map(lambda b: b"GGUF" + b),
    st.lists(st.tuples(st.integers(4, HEADER), st.binary(min_size=1, max_size=8)), min_size=1, max_size=4).map(
        lambda edits: _patched(GGUF, edits)),
    st.integers(24, len(GGUF)).map(lambda n: GGUF[:n]),
))
def test_any_gguf_header_is_read_or_refused_in_one_line(data):
    with tempfile.TemporaryDirectory() as d:
        src = Path(d) / "m.gguf"
        src.write_bytes(data)
        accepted(*run("author", src, "-o", Path(d) / "m.lgm"), data[:64])
        accepted(*run("kinds", EXAMPLES / "tiny-llama.lgm", "--checkpoint", src), data[:64])


#: Metadata values as a GGUF may carry them: every kind the format has, and the sizes that broke readers.
GGUF_VALUES = st.one_of(
    st.sampled_from([0, 1, 2, 3, 2**32 - 1, 10**9, -1, -(2**31), 2**62, 0.0, -1.0, float("nan"), float("inf"), 1e30,
                     "", "x", "yarn", "a\n## Layer 0", True, [], [0], [1, 2], [2**31 - 1] * 3, ["s"]]),
    st.integers(-(2**63), 2**64 - 1), st.floats(width=32), st.text(max_size=8),
)
SPEC_KEYS = ["general.architecture", "general.name", "{arch}.block_count", "{arch}.embedding_length",
             "{arch}.attention.head_count", "{arch}.attention.head_count_kv", "{arch}.attention.key_length",
             "{arch}.rope.dimension_count", "{arch}.rope.freq_base", "{arch}.attention.sliding_window",
             "{arch}.attention.layer_norm_rms_epsilon", "{arch}.vocab_size", "{arch}.rope.scaling.type",
             "{arch}.rope.scaling.factor", "{arch}.attention.scale", "{arch}.expert_count", "{arch}.feed_forward_length"]


@SETTINGS
@given(st.dictionaries(st.sampled_from(SPEC_KEYS), GGUF_VALUES, min_size=1, max_size=3))
def test_any_gguf_metadata_is_read_or_refused_in_one_line(edits):
    """A GGUF the ``gguf`` package writes, its metadata values replaced: a head count of 0 was a ZeroDivisionError
    and a block count of 1e9 took 57 s to refuse."""
    with tempfile.TemporaryDirectory() as d:
        try:
            src = ggufs.llama_like(Path(d) / "m.gguf", layers=2, d=32, heads=2, kv_heads=1, ffn=64, vocab=64,
                                   extra_kv=_typed(edits))
        except (struct.error, OverflowError, ValueError, TypeError):
            return  # a value the format cannot carry: no such file can exist
        accepted(*run("author", src, "-o", Path(d) / "m.lgm"), edits)


def _typed(edits: dict) -> dict:
    """Metadata values in the GGUF types ``ggufs.write`` writes them as (ints as uint32: wider ones as floats)."""
    return {k: float(v) if isinstance(v, int) and not isinstance(v, bool) and not 0 <= v < 2**32 else v
            for k, v in edits.items()}


def _patched(data: bytes, edits) -> bytes:
    b = bytearray(data)
    for at, new in edits:
        b[at:at + len(new)] = new
    return bytes(b)


# ---- a target ------------------------------------------------------------------------------------------------------

SN50 = resources.files("streamed.spatial").joinpath("targets", "sn50.toml").read_text("utf-8")
SN50_KEYS = [line.split("=")[0].strip() for line in SN50.splitlines() if "=" in line and not line.startswith("#")]
TOML_VALUES = st.one_of(
    st.sampled_from(["nan", "inf", "-inf", "0", "-1", "1e300", "1e-300", "0.000001", "1_000_000_000_000", '"x"',
                     "[]", "[1, 2]", "{a = 1}", "true", "9" * 5000, "1979-05-27", "[" * 2000 + "]" * 2000]),
    st.integers(-(2**63), 2**63 - 1).map(str),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
)


@SETTINGS
@given(st.one_of(
    st.binary(max_size=200),
    st.lists(st.tuples(st.sampled_from(SN50_KEYS), TOML_VALUES), min_size=1, max_size=3).map(
        lambda edits: _target(edits).encode()),
))
def test_any_target_is_used_or_refused_in_one_line(data):
    with tempfile.TemporaryDirectory() as d:
        target = Path(d) / "mine.toml"
        target.write_bytes(data)
        accepted(*run("check", EXAMPLES / "tiny-llama.lgm", "--target", target), data[:300])


def _target(edits) -> str:
    lines = SN50.splitlines()
    for key, value in edits:
        lines = [f"{key} = {value}" if line.split("=")[0].strip() == key else line for line in lines]
    return "\n".join(lines) + "\n"


# ---- a manifest ----------------------------------------------------------------------------------------------------


def _manifest() -> dict:
    with tempfile.TemporaryDirectory() as d:
        assert run("lower", EXAMPLES / "tiny-llama.lgm", "--ctx", "32", "-o", Path(d) / "b")[0] == 0
        return {"manifest": json.loads((Path(d) / "b" / "manifest.json").read_text()),
                "programs": {p.name: (Path(d) / "b" / "programs" / p.name).read_bytes()
                             for p in (Path(d) / "b" / "programs").iterdir()}}


BUNDLE = _manifest()


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(st.one_of(
    st.binary(max_size=200),
    JSON.map(lambda v: json.dumps(v).encode()),
    st.lists(st.tuples(PATHS, JSON | RAW_VALUES), min_size=1, max_size=2).map(
        lambda edits: _raw(json.dumps(_mutated(BUNDLE["manifest"], edits))).encode()),
))
def test_any_manifest_is_certified_or_refused_in_one_line(data):
    with tempfile.TemporaryDirectory() as d:
        b = Path(d) / "b"
        (b / "programs").mkdir(parents=True)
        for name, content in BUNDLE["programs"].items():
            (b / "programs" / name).write_bytes(content)
        (b / "manifest.json").write_bytes(data)
        accepted(*run("verify", EXAMPLES / "tiny-llama.lgm", "--bundle", b, "--steps", "1"), data[:300])


# ---- what the issue of round three found, each as its repro ---------------------------------------------------------


def _config(tmp: Path, name: str, **changes) -> Path:
    cfg = json.loads((CONFIGS / f"{name}.json").read_text())
    cfg.update(changes)
    src = tmp / f"{name}.json"
    src.write_text(json.dumps(cfg))
    return src


def test_author_never_writes_a_document_check_rejects(tmp_path):
    """Issue 30: a Granite `embedding_multiplier` of 1e308 was written as a number past the language's largest; the
    document `author` wrote, `check` rejected."""
    out = tmp_path / "m.lgm"
    with warnings.catch_warnings(record=True) as warned:  # a warning would print its own lines above the message
        warnings.simplefilter("always")
        code, _, err = run("author", _config(tmp_path, "small-granite", embedding_multiplier=1e308), "-o", out)
    assert code == 2 and err.count("\n") == 1 and "would not check" in err and "too large a number" in err, err
    assert not warned, [str(w.message) for w in warned]
    assert not out.exists()
    # a soft cap float32 holds as 0 is refused the same way (its check is the document's)
    code, _, err = run("author", _config(tmp_path, "small-gemma2", attn_logit_softcapping=1e-300), "-o", out)
    assert code == 2 and "below the smallest float32" in err and not out.exists(), err
    # and what checks is written as before
    code, _, err = run("author", CONFIGS / "small-granite.json", "-o", out)
    assert code == 0 and run("check", out)[0] == 0, err


def test_a_granite_attention_multiplier_of_0_is_refused_as_every_other_multiplier_s_0(tmp_path):
    for field in ("attention_multiplier", "embedding_multiplier", "residual_multiplier", "logits_scaling"):
        code, _, err = run("author", _config(tmp_path, "small-granite", **{field: 0}))
        assert code == 2 and f"{field}" in err and "is 0; a multiplier of 0 would erase what it scales" in err, err


def test_check_writes_no_character_a_terminal_acts_on(tmp_path):
    """Issue 30: `check` echoed a document's raw NUL and U+202E (which turns the rest of the line around)."""
    doc = tmp_path / "m.lgm"
    doc.write_text(TINY.replace("Let x be row tok of Emb.", "Let x be row tok of Emb\u202e\x00\x1b[2J.", 1))
    code, out, _ = run("check", doc)
    assert code == 1 and out
    assert not any(c in out for c in "\u202e\x00\x1b"), out
    assert "\\u202e" in out or "\\x00" in out or "\\x1b" in out, out


@pytest.mark.parametrize("argv", [["lower", "DOC", "--ctx", "1e9"], ["lower", "DOC", "--ctx", "4096.0"],
                                  ["verify", "DOC", "--steps", "two"], ["run", "DOC", "--tokens", "1", "--seed", "0x1"],
                                  ["check", "DOC", "--batch", "½"]])
def test_an_option_that_takes_a_whole_number_refuses_anything_else_in_one_line(tmp_path, argv):
    """Issue 30: `--ctx 1e9` printed argparse's seven-line usage."""
    doc = tmp_path / "m.lgm"
    doc.write_text(TINY)
    code, out, err = run(*[str(doc) if a == "DOC" else a for a in argv])
    option, value = argv[-2], argv[-1]
    assert code == 2 and out == "" and err == f"streamed: {option} {value}: not a whole number; give it in the digits " \
                                              f"0-9 (as 4096)\n", err


def test_show_svg_naming_no_folder_writes_nothing_where_the_user_stands(tmp_path, monkeypatch):
    """Issue 30: `show B --svg ''` wrote five SVGs into the current folder."""
    doc = tmp_path / "m.lgm"
    doc.write_text(TINY)
    assert run("lower", doc, "--ctx", "16", "-o", tmp_path / "B")[0] == 0
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    code, out, err = run("show", tmp_path / "B", "--svg", "")
    assert code == 2 and err.count("\n") == 1 and "--svg '': names no folder" in err
    assert list(here.iterdir()) == []
