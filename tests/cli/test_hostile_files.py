"""Files and names as a hostile user gives them to the command line (issue 21): every file-system error is one line
and exit 2 with nothing left behind; sizes are checked before a byte is read (devices and FIFOs refused by what they
are, a 1 GB sparse file at no cost); names that are not UTF-8 are handled; numbers are printed as written; a signal
that lands while the command installs its handlers is one line too.

Permission errors need a process the kernel holds to file modes: under root (CI) the command runs without the
capabilities that bypass them (``setpriv``, util-linux), otherwise as it is."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from privileges import unprivileged
from repo import CONFIGS, EXAMPLES

TINY = EXAMPLES / "tiny-llama.lgm"

STREAMED = [sys.executable, "-m", "streamed"]


def streamed(*args, cwd: Path, limited: bool = True, timeout: float = 60) -> tuple[int, str, str]:
    """Run the command in its own process (subject to file modes unless ``limited`` is false): (status, stdout,
    stderr)."""
    p = subprocess.Popen([*(unprivileged() if limited else []), *STREAMED, *map(str, args)], cwd=cwd,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        raise AssertionError(f"streamed {' '.join(map(str, args))} hung")
    return p.returncode, out.decode("utf-8", "backslashreplace"), err.decode("utf-8", "backslashreplace")


def one_line(code: int, err: str, says: str) -> None:
    assert code == 2, err
    assert err.count("\n") == 1 and err.startswith("streamed: ") and "Traceback" not in err, err
    assert says in err, err


def listing(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


@pytest.fixture
def work(tmp_path) -> Path:
    """A folder holding the tiny model and a bundle of it (``B``)."""
    (tmp_path / "doc.lgm").write_bytes(TINY.read_bytes())
    code, _, err = streamed("lower", "doc.lgm", "--ctx", "32", "-o", "B", cwd=tmp_path, limited=False)
    assert code == 0, err
    return tmp_path


# ---- file-system errors: one line, exit 2, nothing left behind ----------------------------------------------------


@pytest.mark.parametrize("case", ["bundle 000", "programs 000", "bundle read-only", "programs read-only"])
def test_a_bundle_folder_that_may_not_be_read_or_changed_is_one_line_and_is_left_as_it_was(work, case):
    """Issue 21: `chmod 000 B; streamed lower doc -o B` and an unreadable B/programs were tracebacks; a read-only B
    was moved aside, replaced, and its `.B.<pid>.old` left behind for good."""
    folder = work / "B" if case.startswith("bundle") else work / "B" / "programs"
    before = listing(work)
    os.chmod(folder, 0o000 if case.endswith("000") else 0o555)
    try:
        code, _, err = streamed("lower", "doc.lgm", "--ctx", "32", "-o", "B", cwd=work)
    finally:
        os.chmod(folder, 0o755)
    one_line(code, err, "B: cannot be replaced: ")
    assert listing(work) == before  # no .B.<pid>.tmp, no .B.<pid>.old, the bundle whole


def test_an_output_folder_under_a_locked_one_is_one_line_and_nothing_is_made(work):
    """Issue 21: `-o locked/x/y` was a PermissionError traceback."""
    (work / "locked").mkdir()
    os.chmod(work / "locked", 0o555)
    try:
        code, _, err = streamed("lower", "doc.lgm", "--ctx", "32", "-o", "locked/x/y", cwd=work)
    finally:
        os.chmod(work / "locked", 0o755)
    one_line(code, err, "locked/x/y: cannot be written (Permission denied")
    assert list((work / "locked").iterdir()) == []


@pytest.mark.parametrize("command", [["check", "doc.lgm"], ["author", "config.json"], ["verify", "doc.lgm", "--bundle", "B"],
                                     ["lower", "doc.lgm", "--target", "chip.toml", "-o", "C"]])
def test_an_unreadable_input_is_one_line(work, command):
    (work / "config.json").write_bytes((CONFIGS / "tiny-llama.json").read_bytes())
    (work / "chip.toml").write_text("name = 'x'\n")
    unreadable = {"check": work / "doc.lgm", "author": work / "config.json", "verify": work / "B" / "programs",
                  "lower": work / "chip.toml"}[command[0]]
    os.chmod(unreadable, 0o000)
    try:
        code, _, err = streamed(*command, cwd=work)
    finally:
        os.chmod(unreadable, 0o755)
    one_line(code, err, "Permission denied")


# ---- sizes before reading: devices, FIFOs, sparse files --------------------------------------------------------------


@pytest.mark.parametrize("command,as_what", [
    (["check", "{x}"], "a model program"), (["author", "{x}"], "a config.json or a GGUF file"),
    (["lower", "doc.lgm", "--target", "{x}", "-o", "C"], "a target file"),
    (["run", "doc.lgm", "--tokens", "1", "--bundle", "{x}"], None),
])
@pytest.mark.parametrize("kind", ["/dev/zero", "fifo"])
def test_a_device_or_a_fifo_is_refused_by_what_it_is_and_never_read(work, command, as_what, kind):
    """Issue 21: `streamed check /dev/zero` read until memory ran out; a FIFO as document, manifest or program hung."""
    if kind == "fifo":
        os.mkfifo(work / "fifo")
    x = kind if kind == "/dev/zero" else "fifo"
    args = [a.replace("{x}", x) for a in command]
    if as_what is None:  # a bundle whose manifest is the device or FIFO
        (work / "D").mkdir()
        os.symlink("/dev/zero", work / "D" / "manifest.json") if kind == "/dev/zero" else \
            os.mkfifo(work / "D" / "manifest.json")
        args[-1] = "D"
    code, _, err = streamed(*args, cwd=work, timeout=60)
    what = {"/dev/zero": "a character device", "fifo": "a FIFO (a named pipe)"}[kind]
    if as_what is None and kind == "/dev/zero":
        one_line(code, err, "leads out of the bundle through a symbolic link")
    else:
        one_line(code, err, f"is {what}, not {as_what or 'a manifest'}")


@pytest.mark.parametrize("file", ["programs/layer-0.json", "programs/head.json"])
def test_a_fifo_as_a_program_is_refused_by_verify_and_protected_from_lower(work, file):
    (work / "B" / file).unlink()
    os.mkfifo(work / "B" / file)
    code, _, err = streamed("verify", "doc.lgm", "--bundle", "B", cwd=work)
    one_line(code, err, f"B/{file}: is a FIFO")
    code, _, err = streamed("lower", "doc.lgm", "--ctx", "32", "-o", "B", cwd=work)
    one_line(code, err, f"B: holds {file}, which no lowering wrote")
    assert (work / "B" / file).is_fifo()


def _peak_kb(args: list[str], cwd: Path) -> tuple[int, str, int]:
    p = subprocess.Popen([*STREAMED, *args], cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err = p.stderr.read().decode()
    _, status, usage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    return p.returncode, err, usage.ru_maxrss


@pytest.mark.parametrize("which", ["document", "manifest", "program"])
def test_a_1_gb_sparse_file_is_refused_by_its_size_before_it_is_read(work, which):
    """Issue 21: a 1 GB sparse document or manifest reached 2.1 GB of memory before it was refused. The peak of the
    whole process is compared with the same command refused for a missing file: the sparse gigabyte adds nothing."""
    path = {"document": work / "big.lgm", "manifest": work / "B" / "manifest.json",
            "program": work / "B" / "programs" / "head.json"}[which]
    with open(path, "wb") as f:
        f.truncate(1 << 30)
    args = ["check", "big.lgm"] if which == "document" else ["verify", "doc.lgm", "--bundle", "B"]
    code, err, peak = _peak_kb(args, work)
    one_line(code, err, "is 1,073,741,824 bytes; streamed reads model programs up to 4,194,304 bytes"
             if which == "document" else "is 1,073,741,824 bytes; streamed reads")
    baseline_args = ["check", "missing.lgm"] if which == "document" else ["verify", "doc.lgm", "--bundle", "nothing"]
    _, _, baseline = _peak_kb(baseline_args, work)
    assert peak < baseline + 64 * 1024, (peak, baseline)  # far below the gigabyte a read would cost


def test_a_document_over_the_size_limit_is_bad_input_exit_2(work):
    """The README: 2 for "a size past its limit"; a document over 4 MB exited 1."""
    (work / "big.lgm").write_bytes(b"-- a comment\n" * 400_000)
    for command in (["check", "big.lgm"], ["kinds", "big.lgm"], ["lower", "big.lgm", "-o", "X"]):
        code, _, err = streamed(*command, cwd=work, limited=False)
        one_line(code, err, "big.lgm: the document is 5,200,000 bytes; streamed reads model programs up to 4,194,304 "
                            "bytes (4 MiB;")
    assert not (work / "X").exists()


# ---- names that are not UTF-8 ---------------------------------------------------------------------------------------


def test_names_and_paths_that_are_not_utf8_are_handled(work):
    """Issue 21: `author --name $'a\\x85b'` and a config named `bad\\xff.json` were UnicodeEncodeError tracebacks;
    `lower $'doc\\xff.lgm'` blamed "a figure … is not a finite number"."""
    def run(*args):
        p = subprocess.run([*STREAMED, *args], cwd=work, capture_output=True)
        return p.returncode, p.stdout, p.stderr

    config = os.fsencode(work) + b"/bad\xff.json"
    Path(os.fsdecode(config)).write_bytes((CONFIGS / "tiny-llama.json").read_bytes())
    code, out, err = run("author", os.fsdecode(b"bad\xff.json"), "--name", os.fsdecode(b"a\x85b"))
    assert (code, err) == (2, b"streamed: --name a\\x85b: is not UTF-8 text; a title is one line of UTF-8 text\n")
    code, out, err = run("author", os.fsdecode(b"bad\xff.json"), "-o", "from-bad.lgm")
    assert code == 0, err
    text = (work / "from-bad.lgm").read_text("utf-8")
    assert text.startswith("# bad\\xff\n-- Authored by `streamed author` from bad\\xff.json.\n")
    Path(os.fsdecode(os.fsencode(work) + b"/doc\xff.lgm")).write_bytes(TINY.read_bytes())
    code, out, err = run("lower", os.fsdecode(b"doc\xff.lgm"), "--ctx", "32", "-o", os.fsdecode(b"B\xff"))
    assert code == 0, err
    assert out.startswith(b"B\xff: decode bundle")  # printed back as the bytes the user typed
    manifest = json.loads(Path(os.fsdecode(os.fsencode(work) + b"/B\xff/manifest.json")).read_text("utf-8"))
    assert manifest["document"]["name"] == "doc\\xff.lgm"
    code, out, err = run("verify", os.fsdecode(b"doc\xff.lgm"), "--bundle", os.fsdecode(b"B\xff"), "--steps", "1")
    assert code == 0 and b"bundle and reference agree" in out, err
    code, out, err = run("check", os.fsdecode(b"missing\xff.lgm"))
    assert (code, err) == (2, b"streamed: missing\\xff.lgm: no such file\n")  # said as the shell writes it


# ---- numbers, tokens ------------------------------------------------------------------------------------------------


def test_a_number_is_printed_as_written_not_in_exponent_form(run, tmp_path):
    """Issue 21: a width of 268,435,457 (one past the limit) was said as 2.68435e+08."""
    doc = tmp_path / "d.lgm"
    doc.write_text(TINY.read_text().replace("Let d be 64.", "Let d be 268435457."))
    code, out, _ = run("check", doc)
    assert code == 1
    assert "`d` is 268,435,457, but it is used as a dimension: a whole number from 1 to 268,435,456" in out
    assert "e+08" not in out


@pytest.mark.parametrize("tokens,says", [
    ("١", "token 1 is '١', not a token id"), ("𝟙", "token 1 is '𝟙', not a token id"),
    ("1_000", "token 1 is '1_000', not a token id"), ("+1", "token 1 is '+1', not a token id"),
    ("0x10", "token 1 is '0x10', not a token id"), ("1,,2", "token 2 is '', not a token id"),
    ("99999999999999", "token 1 is 99,999,999,999,999, past the limit of 268,435,456"),
    ("9" * 5000, "token 1 is a number of 5,000 digits, past the limit of 268,435,456"),
    ("1," * (1 << 24) + "1", "16,777,217 tokens, past the limit of 16,777,216"),
])
def test_tokens_are_ascii_decimal_ids_within_a_limit(run, tokens, says):
    """Issue 21: `--tokens` accepted `١`, `𝟙`, `1_000` and any count (Python's int() reads all of them)."""
    code, _, err = run("run", TINY, "--tokens", tokens)
    one_line(code, err, says)


# ---- a signal while the handlers are installed ----------------------------------------------------------------------


@pytest.mark.parametrize("sig,status,said", [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143,
                                                                                   "stopped by SIGTERM")])
def test_a_signal_that_lands_while_the_handlers_are_installed_is_one_line(capsys, monkeypatch, sig, status, said):
    """Issue 21: a signal that landed during `cli/signals.py`'s installation escaped as a `Stopped` traceback. Here
    it lands right after its own handler is set (SIGINT's is the first, SIGTERM's the second; the others are not yet):
    `main` returns its status, says one line, and leaves the process's handlers as they were."""
    import streamed.cli.signals as signals
    from streamed.cli import main

    real = signals.signal.signal
    installed = []

    def install(s, handler):
        previous = real(s, handler)
        installed.append(s)
        if s == sig and installed.count(s) == 1:
            os.kill(os.getpid(), sig)  # the handler just set runs now, in this thread, before the others are set
        return previous

    before = {s: signal.getsignal(s) for s in signals.STOPPING}
    monkeypatch.setattr(signals.signal, "signal", install)
    code = main(["kinds", str(TINY)])
    monkeypatch.undo()
    assert code == status
    assert capsys.readouterr().err == f"streamed: {said}\n"
    assert {s: signal.getsignal(s) for s in signals.STOPPING} == before
