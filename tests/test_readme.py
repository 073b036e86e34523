"""The README's examples are held by the program: every command of its shell blocks runs, and every line it quotes
from the program's output is what the program prints.

The commands run as a user runs them, from a scratch folder holding what they name: ``examples/`` (the shipped
ones), ``model.gguf`` (a small Llama-architecture checkpoint, 18 layers, written with the ``gguf`` package),
``doc.lgm`` (``streamed author model.gguf``: its checkpoint names are GGUF names) and ``mistral.lgm`` (authored from
the shipped ``tiny-llama.json`` made a Mistral with a 4096-token window); ``gemma.lgm`` is written by the README's own
first command. Every ``streamed`` command must exit 0 (the README shows no failing command), ``serve`` reading an
empty stdin; ``jq`` runs through jq's own engine (the ``jq`` package); the ``make`` and ``code`` lines are named below
with what runs them instead. A line of a block that is none of these fails the test: a new kind of command in the
README is held like the others or named here.

Quoted output: the tiles line ``lower`` prints, the output a ``# …`` line under a command shows, and the fields the
README gives for ``kinds --json`` and ``run --json``. ``test_a_changed_quote_is_caught`` changes a copy of the README
and shows each check failing.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from ggufs import llama_like
from repo import EXAMPLES, ROOT, config

README = (ROOT / "README.md").read_text()

#: Lines of the README's blocks run by something other than this test.
ELSEWHERE = {
    "make test": "`make test` is the run this test is part of",
    "make demo": "tests/test_readme.py::test_make_demo_runs_its_steps_and_says_what_each_showed",
    "make vsix": "`make test`'s package suite builds the .vsix (vscode-extension/scripts/test-all.sh)",
    "code --install-extension vscode-extension/streamed.vsix": "the e2e suite installs the .vsix into code-server",
}
STREAMED = [sys.executable, "-m", "streamed"]


def blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```", text, flags=re.S | re.M)


def commands(text: str) -> list[tuple[str, str | None]]:
    """Each command line of the README's ``sh`` blocks, with the output a ``# …`` line under it shows (or None)."""
    out: list[tuple[str, str | None]] = []
    for block in blocks(text, "sh"):
        for line in block.splitlines():
            if line.startswith("# ") and out:
                out[-1] = (out[-1][0], line[2:])
            elif line.strip():
                out.append((shlex.join(shlex.split(line, comments=True)), None))
    return out


def quoted_lines(text: str) -> list[str]:
    """The printed lines the README's prose quotes (the tiles line of `lower`), as one line each."""
    return [" ".join(q.split()) for q in re.findall(r"`(tiles  [^`]*)`", text)]


def json_fields(text: str) -> dict[str, set[str]]:
    """The fields the README gives for each command's JSON: `kinds --json` in its block's comment, `run --json` in
    prose."""
    kinds = re.search(r"streamed kinds gemma\.lgm --json +# (\{.*)", text).group(1)
    run = re.search(r"JSON `(\{\"positions\"[^`]*)`", text).group(1)
    return {"kinds": set(re.findall(r"[a-z_]+", kinds)), "run": set(re.findall(r"[a-z_]+", run))}  # a_b one field


def run_command(command: str, cwd: Path) -> subprocess.CompletedProcess:
    argv = shlex.split(command)
    if argv[0] == "jq":
        import jq

        program, file = argv[1:]
        got = jq.compile(program).input_value(json.loads((cwd / file).read_text())).all()
        return subprocess.CompletedProcess(argv, 0, "\n".join(json.dumps(v) for v in got) + "\n", "")
    assert argv[0] == "streamed", f"the README's command `{command}` is neither run here nor named in ELSEWHERE"
    return subprocess.run([*STREAMED, *argv[1:]], cwd=cwd, capture_output=True, text=True, timeout=900,
                          stdin=subprocess.DEVNULL, env={**os.environ, "PYTHONPATH": str(ROOT)})


@pytest.fixture(scope="module")
def ran(tmp_path_factory) -> dict[str, subprocess.CompletedProcess]:
    """Every command of the README's blocks, run in order in one scratch folder: command → its result."""
    cwd = tmp_path_factory.mktemp("readme")
    (cwd / "examples").symlink_to(EXAMPLES)
    llama_like(cwd / "model.gguf", layers=18)
    subprocess.run([*STREAMED, "author", "model.gguf", "-o", "doc.lgm"], cwd=cwd, check=True, capture_output=True)
    mistral = {**config("tiny-llama"), "model_type": "mistral", "architectures": ["MistralForCausalLM"],
               "sliding_window": 4096}
    (cwd / "mistral.json").write_text(json.dumps(mistral))
    subprocess.run([*STREAMED, "author", "mistral.json", "-o", "mistral.lgm"], cwd=cwd, check=True, capture_output=True)
    results = {}
    for command, _ in commands(README):
        if command.startswith(".") or command in ELSEWHERE:
            continue
        results[command] = run_command(command, cwd)
    for code in blocks(README, "python"):
        results[code] = subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=300)
    return results


def test_every_command_of_the_readme_runs_and_exits_0(ran):
    assert len(ran) >= 18  # the command-line block (16), the jq query, the library example
    failed = {c: (r.returncode, r.stderr[-500:]) for c, r in ran.items() if r.returncode != 0}
    assert not failed, failed
    assert ran["streamed serve"].stderr == "", "an empty stdin is no message: nothing to warn of"
    python = next(r for c, r in ran.items() if "from streamed import analyze" in c)
    assert python.stdout.splitlines()[0].startswith("attention, window 1024 ")


def unmatched(text: str, ran: dict[str, subprocess.CompletedProcess]) -> list[str]:
    """What the README (``text``) quotes that the program did not print, one entry each."""
    printed = {" ".join(line.split()) for r in ran.values() for line in r.stdout.splitlines()}
    wrong = [f"quoted, not printed: {q}" for q in quoted_lines(text) if q not in printed]
    for command, shown in commands(text):
        if shown is not None and ran[command].stdout.strip() != shown:
            wrong.append(f"`{command}` shows {shown}, prints {ran[command].stdout.strip()}")
    fields = json_fields(text)
    kinds = json.loads(ran["streamed kinds gemma.lgm --json"].stdout)
    if set(kinds) | set(kinds["kinds"][0]) != fields["kinds"]:
        wrong.append(f"kinds --json: the README gives {sorted(fields['kinds'])}, the program "
                     f"{sorted(set(kinds) | set(kinds['kinds'][0]))}")
    run = json.loads(ran["streamed run doc.lgm --checkpoint model.gguf --tokens 1,2,3 --json"].stdout)
    if set(run) != fields["run"]:
        wrong.append(f"run --json: the README gives {sorted(fields['run'])}, the program {sorted(run)}")
    return wrong


def test_every_line_the_readme_quotes_is_what_the_program_prints(ran):
    assert quoted_lines(README) and any(shown for _, shown in commands(README))
    assert unmatched(README, ran) == []


def test_a_changed_quote_is_caught(ran):
    """The checks above on a copy of the README with each kind of quote changed: each change is reported."""
    changed = (README.replace("40 tiles of 820 rows", "36 tiles of 911 rows")
               .replace('# "blk.17.attn_q.weight"', '# "blk.17.attn_k.weight"')
               .replace('"kinds": [{name, layers, representative}]', '"kinds": [{name, layers, first}]')
               .replace('"next": […]', '"tokens": […]'))
    assert changed.count("\n") == README.count("\n") and changed != README
    wrong = unmatched(changed, ran)
    said = ["quoted, not printed: tiles attention: 36 tiles of 911 rows", 'shows "blk.17.attn_k.weight", prints '
            '"blk.17.attn_q.weight"', "kinds --json: the README gives", "run --json: the README gives"]
    assert len(wrong) == 4 and all(sum(s in w for w in wrong) == 1 for s in said), wrong


def test_the_exit_statuses_are_as_the_readme_says(tmp_path):
    """0 success; 1 the document has errors (`kinds` as `check`); 2 bad input, in one line."""
    assert "1 the document has errors" in README and "2 bad input" in README
    broken = tmp_path / "broken.lgm"
    broken.write_text((EXAMPLES / "tiny-llama.lgm").read_text().replace(" times ", " timse ", 1))
    for command in ("kinds", "check"):
        assert subprocess.run([*STREAMED, command, str(EXAMPLES / "tiny-llama.lgm")], capture_output=True).returncode == 0
        assert subprocess.run([*STREAMED, command, str(broken)], capture_output=True).returncode == 1, command
        missing = subprocess.run([*STREAMED, command, str(tmp_path / "nope.lgm")], capture_output=True, text=True)
        assert (missing.returncode, missing.stderr.count("\n")) == (2, 1), command
    unreadable = subprocess.run([*STREAMED, "show", str(tmp_path)], capture_output=True, text=True)
    assert (unreadable.returncode, unreadable.stderr.count("\n")) == (2, 1)


def test_make_demo_runs_its_steps_and_says_what_each_showed(tmp_path):
    """`make demo` (the README's second command), from a folder of the shipped examples: each step announced with what
    it shows, the stand-in it certifies named with why, and a next step that runs on the bundle it wrote."""
    (tmp_path / "examples").symlink_to(EXAMPLES)
    demo = subprocess.run(["make", "--no-print-directory", "-f", str(ROOT / "Makefile"), "-o", ".venv/.installed", "demo",
                           f"PY={sys.executable}"], cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert demo.returncode == 0, demo.stderr
    steps = [l for l in demo.stdout.splitlines() if l.startswith("== ")]
    assert [s.split(":")[0] for s in steps] == ["== 1/3 kinds", "== 2/3 lower", "== 3/3 verify", "== next"]
    assert "random (seed 0)" in demo.stdout and "examples/small-qwen35.lgm" in demo.stdout
    assert "bundle and reference agree" in demo.stdout
    next_step = steps[-1].split(": ", 1)[1].split("  ")[0]
    assert next_step == "streamed show build/qwen3.8.bundle"
    shown = subprocess.run([*STREAMED, *shlex.split(next_step)[1:]], cwd=tmp_path, capture_output=True, text=True)
    assert shown.returncode == 0 and "SN50" in shown.stdout, shown.stderr
