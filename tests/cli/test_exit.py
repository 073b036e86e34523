"""The ``streamed`` command ends its process without tearing the interpreter down (``cli.program``: 0.2 s of a
run, issue 33) — and a user loses nothing by it: what it prints is all there, even into a pipe, the files it writes
are whole, its exit status is the command's, and a reader that stops reading early is no traceback. A command that
started Ray ends the ordinary way, so that Ray's exit handler stops the cluster it started."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np

from repo import EXAMPLES, ROOT

TINY = str(EXAMPLES / "tiny-llama.lgm")

#: The console script's own call (``program``), in a process that would say it was torn down: an exit handler
#: registered before the command runs. ``ray``, when asked, is in ``sys.modules`` as a command that started Ray has it.
COMMAND = """
import atexit, json, sys, types
argv, ray = json.loads(sys.argv[1])
atexit.register(lambda: print("torn down", file=sys.stderr, flush=True))
if ray:
    sys.modules["ray"] = types.ModuleType("ray")
from streamed.cli import program
sys.argv = ["streamed", *argv]
program()
"""


#: A user's environment: output into a pipe is block-buffered (this machine's sets ``PYTHONUNBUFFERED``).
BUFFERED = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}


def command(*argv: str, ray: bool = False) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", COMMAND, json.dumps([list(argv), ray])], cwd=ROOT, env=BUFFERED,
                          capture_output=True, timeout=600)


def test_the_command_ends_untorn_with_all_its_output_and_whole_files(tmp_path, run):
    saved = tmp_path / "logits.npz"
    p = command("run", TINY, "--tokens", "5,17,3,200", "--save", str(saved))
    assert p.returncode == 0, p.stderr
    assert b"torn down" not in p.stderr
    code, out, _ = run("run", TINY, "--tokens", "5,17,3,200", "--save", str(tmp_path / "in-process.npz"))
    assert code == 0 and p.stdout.decode() == out.replace(str(tmp_path / "in-process.npz"), str(saved))
    with np.load(saved) as got, np.load(tmp_path / "in-process.npz") as want:
        assert np.array_equal(got["logits"], want["logits"])

    # Output larger than a pipe's buffer, block-buffered: all of it, parsed whole.
    p = command("run", TINY, "--tokens", ",".join(["7"] * 40), "--decode", "--json")
    assert p.returncode == 0 and len(p.stdout) > 65536, p.stderr
    assert len(json.loads(p.stdout)["logits"]) == 40


def test_the_command_s_exit_status_is_its_own(tmp_path):
    missing = command("kinds", str(tmp_path / "absent.lgm"))
    assert missing.returncode == 2 and b"absent.lgm" in missing.stderr and b"Traceback" not in missing.stderr
    broken = tmp_path / "broken.lgm"
    broken.write_text("## Model\nLet d be 64.\n## Layer 0\nLet y be x times .\n", encoding="utf-8")
    assert command("check", str(broken)).returncode == 1
    assert command("check", TINY).returncode == 0


def test_a_reader_that_stops_early_is_no_traceback():
    """Whether the reader goes away in the middle of the output or before any of it is written (``check``'s one line
    waits in the buffer until the command ends)."""
    big = ["run", TINY, "--tokens", ",".join(["7"] * 40), "--decode", "--json"]
    for argv, read in ((big, 10), (["check", TINY], 0)):
        with subprocess.Popen([sys.executable, "-c", COMMAND, json.dumps([argv, False])], cwd=ROOT, env=BUFFERED,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) as p:
            assert len(p.stdout.read(read)) == read
            p.stdout.close()  # the reader goes away with the command's output unread
            err = p.stderr.read()
            assert p.wait(timeout=600) == 0, err
        assert b"Traceback" not in err and b"Exception ignored" not in err, err


def test_a_command_that_started_ray_ends_the_ordinary_way_for_ray_s_exit_handler():
    p = command("check", TINY, ray=True)
    assert p.returncode == 0 and b"torn down" in p.stderr, p.stderr
