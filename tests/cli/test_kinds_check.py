"""The `streamed kinds` and `streamed check` commands, run as a user runs them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from builders import document, line_of

from repo import ROOT
EXAMPLES = sorted((ROOT / "examples").glob("*.lgm"))


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "streamed", *args], capture_output=True, text=True, cwd=cwd, timeout=120)


def test_kinds_prints_an_aligned_table_with_layer_ranges(tmp_path):
    specs = [dict(window=512) if (l + 1) % 6 else dict(base=1000000, table=2) for l in range(12)]
    doc = tmp_path / "gemma.lgm"
    doc.write_text(document(specs))
    r = run("kinds", str(doc))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == f"{doc}: 12 layers in 2 kinds"
    header = next(l for l in lines if l.startswith("kind"))
    row = next(l for l in lines if l.startswith("attention, window 512"))
    assert row.index("0-4, 6-10") == header.index("layers")
    assert any(l.startswith("attention ") and "5, 11" in l for l in lines)


def test_kinds_json_has_the_documented_fields(tmp_path):
    doc = tmp_path / "m.lgm"
    text = document(6).replace("Let qr4 be rope of (xn4 times Wq4)", "Let qr4 be rope of (xn4 times Wk4)")
    doc.write_text(text)
    r = run("kinds", str(doc), "--json")
    out = json.loads(r.stdout)
    assert out["layers"] == 6
    assert out["kinds"] == [{"name": "attention (layer 0)", "layers": [0, 1, 2, 3, 5], "representative": 0},
                            {"name": "attention (layer 4)", "layers": [4], "representative": 4}]
    (d,) = out["divergences"]
    assert (d["layer"], d["representative"]) == (4, 0)
    assert d["line"] == line_of(text, "Let qr4 be rope") and d["representative_line"] == line_of(text, "Let qr0 be rope")
    assert d["column"] == text.split("\n")[d["line"] - 1].index("Wk4") + 1
    assert "Wk4" in d["why"] and "Wq0" in d["why"]


def test_check_prints_one_diagnostic_per_line_and_fails_on_an_error(tmp_path):
    doc = tmp_path / "bad.lgm"
    text = document(2).replace("Let Wo1 be a q8 weight of 64 by d.", "Let Wo1 be a q8 weight of 128 by d.")
    doc.write_text(text)
    r = run("check", str(doc))
    assert r.returncode == 1
    line = line_of(text, "Let h1 be")
    assert f"{doc}:{line}:" in r.stdout and ": error: `a1` is rows×64 but `Wo1` expects 128 rows" in r.stdout


def test_check_says_no_problems_in_one_line_for_a_correct_document(tmp_path):
    doc = tmp_path / "ok.lgm"
    doc.write_text(document(2))
    r = run("check", str(doc))
    assert (r.returncode, r.stdout, r.stderr) == (0, f"{doc}: no problems\n", "")
    assert json.loads(run("check", str(doc), "--json").stdout) == []


def test_kinds_of_a_document_with_errors_shows_what_it_read_says_the_errors_and_exits_1(tmp_path):
    """The README: exit 1 when the document has errors — `kinds` as `check`, its errors on stderr as `check` prints
    them, the kinds of what it could read on stdout."""
    doc = tmp_path / "bad.lgm"
    text = document(3).replace("Let h1 be xo0 plus a1 times Wo1.", "Let h1 be xo0 plus a1 timse Wo1.")
    doc.write_text(text)
    checked = run("check", str(doc))
    errors = [l for l in checked.stdout.splitlines() if ": error: " in l]
    assert checked.returncode == 1 and errors
    for args in (["kinds", str(doc)], ["kinds", str(doc), "--json"]):
        r = run(*args)
        assert r.returncode == 1, args
        assert r.stderr.splitlines()[:-1] == errors, args
        assert r.stderr.splitlines()[-1] == f"streamed kinds: {doc} has {len(errors)} error{'s' * (len(errors) > 1)}, " \
                                            "the kinds shown are of what could be read"
    assert run("kinds", str(doc)).stdout.startswith(f"{doc}: 3 layers in ")
    assert json.loads(run("kinds", str(doc), "--json").stdout)["layers"] == 3


def test_a_missing_file_is_one_clear_message_and_exit_status_2(tmp_path):
    r = run("kinds", str(tmp_path / "nope.lgm"))
    assert r.returncode == 2
    assert r.stderr.strip() == f"streamed: {tmp_path / 'nope.lgm'}: no such file"
    assert "Traceback" not in r.stderr


def test_every_shipped_example_checks_clean_with_no_divergence():
    assert EXAMPLES, "examples/ has documents"
    for path in EXAMPLES:
        r = run("kinds", str(path), "--json")
        assert r.returncode == 0, (path, r.stderr)
        out = json.loads(r.stdout)
        assert out["divergences"] == [], path
        c = run("check", str(path))
        assert c.returncode == 0, (path, c.stdout[:500])


def test_one_token_changed_inside_one_layer_of_each_example_is_reported_at_that_line(tmp_path):
    for path in EXAMPLES:
        text = path.read_text()
        out = json.loads(run("kinds", str(path), "--json").stdout)
        big = max(out["kinds"], key=lambda k: len(k["layers"]))
        if len(big["layers"]) < 3:
            continue
        victim = big["layers"][len(big["layers"]) // 2]
        lines = text.split("\n")
        start = lines.index(next(l for l in lines if l.startswith(f"## Layer {victim}") and l[len(f"## Layer {victim}"):][:1] in ("", ":", " ")))
        # Change the width of the first weight declaration of that layer: one number, one token.
        for i in range(start + 1, len(lines)):
            words = lines[i].rstrip(".").split()
            if lines[i].startswith("Let ") and "weight of" in lines[i] and words[-1].isdigit():
                lines[i] = lines[i].rstrip(".").rsplit(" ", 1)[0] + f" {int(words[-1]) + 1}."
                break
        copy = tmp_path / path.name
        copy.write_text("\n".join(lines))
        out2 = json.loads(run("kinds", str(copy), "--json").stdout)
        (d,) = out2["divergences"]
        assert d["layer"] == victim and d["line"] == i + 1, (path, d)


def test_the_small_examples_have_the_kinds_of_their_architectures():
    expected = {
        "tiny-llama": [("attention", [0, 1, 2, 3])],
        "small-gemma3": [("attention, window 512", [0, 1, 2, 3, 4, 6, 7, 8, 9, 10]), ("attention", [5, 11])],
        "small-qwen35": [("gated deltanet, experts", [0, 1, 2, 4, 5, 6]), ("attention, experts", [3, 7])],
        "small-deepseek-v2": [("latent attention", [0]), ("latent attention, experts", [1, 2, 3])],
        "small-gemma2": [("attention, window 8", [0, 2]), ("attention", [1, 3])],
        "small-phi3": [("attention", [0, 1, 2, 3])],
        "small-starcoder2": [("attention, window 8", [0, 1, 2, 3])],
        "small-olmo2": [("attention", [0, 1, 2, 3])],
        "small-internlm2": [("attention", [0, 1, 2, 3])],
    }
    for name, kinds in expected.items():
        out = json.loads(run("kinds", str(ROOT / "examples" / f"{name}.lgm"), "--json").stdout)
        assert [(k["name"], k["layers"]) for k in out["kinds"]] == kinds, name
        assert out["divergences"] == []


def test_an_expression_nested_ten_thousand_deep_is_one_error_in_check_kinds_and_lower(tmp_path):
    doc = tmp_path / "deep.lgm"
    text = document(2)
    doc.write_text(text.replace("Let h1 be xo0 plus a1 times Wo1.",
                                "Let h1 be " + "(" * 10_000 + "xo0" + ")" * 10_000 + " plus a1 times Wo1."))
    for command in (["check", str(doc)], ["kinds", str(doc)], ["lower", str(doc), "--mode", "decode", "--ctx", "64",
                                                                "-o", str(tmp_path / "b")]):
        r = run(*command)
        assert "Traceback" not in r.stderr and "RecursionError" not in r.stderr, command
        # one mistake, one error (nothing derived from the line that does not parse), said by each command
        assert r.returncode == 1, command
        assert "nests more than 64 deep" in r.stdout + r.stderr, command
        assert (r.stdout + r.stderr).count(": error: ") == 1, command
