"""`make test` tells the truth about this run: one line per suite — `passed`, `failed` or `not run (why)` — every
suite attempted that can run whatever the others did, and a failing exit status when any failed.

The repository's own Makefile and ``vscode-extension/scripts/test-all.sh`` run, copied into a scratch tree, with
stand-ins for what they call: a ``python`` whose pytest reports the counts a test chooses, and an ``npm`` and a
cleanup script whose suites pass or fail as the test says (the stand-in ``npm run package`` writes a real zip holding
a wheel's name, which the script reads with ``unzip``). What is under test is the harness's bookkeeping, not the
suites, which the harness runs for real in ``make test``.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from repo import ROOT

SUITES = ("python", "grammar", "typecheck", "unit", "package", "e2e", "e2e-cleanup")

# The stand-in npm: `npm run -s SCRIPT` passes unless SCRIPT is named in $FAIL (space separated), printing the summary
# line the real suite prints; `package` writes streamed.vsix (a zip with the server wheel's name in it) when it passes.
NPM = r"""#!/usr/bin/env bash
[[ $1 == ci ]] && exit 0
script=$3
fails() { [[ " $FAIL " == *" $1 "* ]]; }
case $script in
  test:grammar) if fails grammar; then echo "grammar: 3 passed, 1 failed"; exit 1; fi; echo "grammar: 4 passed, 0 failed";;
  typecheck) if fails typecheck; then echo "src/x.ts(1,1): error TS1"; exit 2; fi;;
  test:unit) if fails unit; then printf 'ℹ pass 5\nℹ fail 1\n'; exit 1; fi; printf 'ℹ pass 6\nℹ fail 0\n';;
  package) if fails package; then echo "vsce: error"; exit 1; fi
    python3 -c 'import zipfile, sys; z = zipfile.ZipFile("streamed.vsix", "w"); [z.writestr(n, "") for n in sys.argv[1:]]' \
      extension/package.json extension/README.md extension/server/streamed_lgm-0.1.0-py3-none-any.whl;;
  test:e2e) [[ -n ${STREAMED_E2E_VSIX:-} ]] || { echo "e2e: no STREAMED_E2E_VSIX"; exit 9; }
    if fails e2e; then echo "e2e: 40 passed, 1 failed"; exit 1; fi; echo "e2e: 41 passed, 0 failed";;
esac
"""
CLEANUP = """if ((process.env.FAIL ?? '').split(' ').includes('e2e-cleanup')) { console.log('e2e-cleanup: 1 passed, 1 failed'); process.exit(1); }
console.log('e2e-cleanup: 2 passed, 0 failed');
"""
# The stand-in Python: `python tests/support/llama_builds.py` (the other kernel paths' llama.cpp builds) exits with
# $BUILDS_EXIT; `python -m pytest …` prints the last line pytest -q prints and exits with $PYTEST_EXIT.
PYTHON = r"""#!/usr/bin/env bash
if [[ $1 == tests/support/llama_builds.py ]]; then
  [[ -f $1 ]] || { echo "stand-in python: no $1" >&2; exit 97; }
  exit "${BUILDS_EXIT:-0}"
fi
case ${PYTEST_EXIT:-0} in
  0) echo "12 passed in 1.00s";;
  1) echo "2 failed, 10 passed in 1.00s";;
  5) echo "no tests ran in 0.01s";;
esac
exit "${PYTEST_EXIT:-0}"
"""


def executable(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


@pytest.fixture
def tree(tmp_path):
    """A scratch checkout: the real Makefile and test-all.sh, an installed-looking .venv, the stand-ins."""
    root = tmp_path / "repo"
    (root / "vscode-extension" / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "Makefile", root / "Makefile")
    shutil.copy(ROOT / "vscode-extension" / "scripts" / "test-all.sh", root / "vscode-extension" / "scripts")
    (root / "vscode-extension" / "package.json").write_text('{"version": "0.1.0"}')
    (root / "vscode-extension" / "package-lock.json").write_text("{}")
    (root / "vscode-extension" / "node_modules" / ".bin").mkdir(parents=True)
    (root / "vscode-extension" / "node_modules" / ".package-lock.json").write_text("{}")
    (root / "vscode-extension" / "e2e").mkdir()
    (root / "vscode-extension" / "e2e" / "cleanup-test.mjs").write_text(CLEANUP)
    executable(root / "tests" / "server" / "neovim-setup.sh", "exit 0\n")
    (root / "tests" / "support").mkdir(parents=True)
    (root / "tests" / "support" / "llama_builds.py").write_text("")  # run by the stand-in python (PYTHON above)
    (root / "pyproject.toml").write_text("")
    executable(root / ".venv" / "bin" / "python", PYTHON)
    os.utime(root / "pyproject.toml", (1, 1))
    (root / ".venv" / ".installed").touch()
    executable(tmp_path / "bin" / "npm", NPM)
    return root


def make_test(root: Path, fail: str = "", pytest_exit: int = 0, builds_exit: int = 0):
    env = {**os.environ, "FAIL": fail, "PYTEST_EXIT": str(pytest_exit), "BUILDS_EXIT": str(builds_exit),
           "PATH": f"{root.parent / 'bin'}:{os.environ['PATH']}"}
    done = subprocess.run(["make", "--no-print-directory", "-C", str(root), "test"], env=env, capture_output=True,
                          text=True, timeout=120)
    tail = done.stdout.split("==== make test: one line per suite, this run\n")[-1].splitlines()
    return done.returncode, {line.split(": ", 1)[0]: line.split(": ", 1)[1] for line in tail}


def test_a_passing_run_says_passed_for_every_suite_and_exits_0(tree):
    code, lines = make_test(tree)
    assert list(lines) == list(SUITES)
    assert all(v.startswith("passed (") for v in lines.values()), lines
    assert lines["e2e"].startswith("passed (41 passed, 0 failed, ")
    assert lines["package"].startswith("passed (streamed.vsix 0.1.0, 3 files, ")
    assert code == 0


def test_a_failing_python_suite_still_runs_and_shows_every_other_suite(tree):
    code, lines = make_test(tree, pytest_exit=1)
    assert list(lines) == list(SUITES)
    assert lines["python"].startswith("failed (2 failed, 10 passed, exit 1, ")
    assert all(lines[s].startswith("passed (") for s in SUITES[1:]), lines
    assert code != 0


def test_the_other_kernel_paths_builds_failing_fail_the_python_line_and_say_so(tree):
    code, lines = make_test(tree, builds_exit=1)
    assert list(lines) == list(SUITES)
    assert lines["python"].startswith("failed (12 passed, exit 1; llama.cpp for the other kernel paths not built "
                                      "(tests/support/llama_builds.py), ")
    assert all(lines[s].startswith("passed (") for s in SUITES[1:]), lines
    assert code != 0


def test_pytest_collecting_no_tests_is_a_failure(tree):
    code, lines = make_test(tree, pytest_exit=5)
    assert lines["python"].startswith("failed (no tests collected, exit 5, ")
    assert code != 0


def test_a_failing_extension_suite_does_not_stop_the_ones_after_it(tree):
    code, lines = make_test(tree, fail="grammar unit e2e")
    assert list(lines) == list(SUITES)
    assert lines["grammar"].startswith("failed (3 passed, 1 failed, exit 1, ")
    assert lines["typecheck"].startswith("passed (")
    assert lines["unit"].startswith("failed (5 passed, 1 failed, exit 1, ")
    assert lines["e2e"].startswith("failed (40 passed, 1 failed, exit 1, ")
    assert lines["e2e-cleanup"].startswith("passed (2 passed, 0 failed, "), "the cleanup suite runs after a failed e2e"
    assert code != 0


def test_without_a_vsix_the_e2e_suites_say_they_were_not_run_and_why(tree):
    code, lines = make_test(tree, fail="package")
    assert lines["package"].startswith("failed (")
    assert lines["e2e"] == "not run (no .vsix to install: the package step failed)"
    assert lines["e2e-cleanup"] == "not run (no .vsix to install: the package step failed)"
    assert code != 0


def test_the_summary_holds_no_line_from_an_earlier_run(tree):
    make_test(tree, fail="e2e", pytest_exit=1)
    code, lines = make_test(tree)
    assert all(v.startswith("passed (") for v in lines.values()), lines
    assert code == 0
