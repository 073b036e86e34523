"""Fixtures every suite may use. ``tests/support`` (builders, checkpoint writers, the repository's paths) is put on
``sys.path`` here, because pytest imports test modules in importlib mode, where a test folder is not a package; and
hypothesis's profile: derandomised."""

import os
import sys
from pathlib import Path

import pytest
from hypothesis import settings

sys.path.insert(0, str(Path(__file__).resolve().parent / "support"))

# No command a test runs (nor a server it starts) compiles ahead in the background: a test that gives a command an
# empty kernel cache would leave a minute of compiling behind it, beside the tests after it. The tests of compiling
# ahead turn it on for themselves (tests/cli/test_ahead.py).
os.environ["STREAMED_COMPILE_AHEAD"] = "0"

# Every property-based test runs derandomised — the same examples on every run, from a seed fixed by the test's own
# source — so a bug one run finds every run finds (CI runs once), and no example database is read or written. A
# test's own @settings inherits this profile; none may turn it off (tests/test_layout.py holds both).
settings.register_profile("streamed", derandomize=True, database=None, print_blob=True)
settings.load_profile("streamed")


@pytest.fixture
def run(capsys):
    """Run the ``streamed`` command line in-process: (exit status, stdout, stderr)."""
    from streamed.cli import main

    def go(*argv: str):
        code = main([str(a) for a in argv])
        out = capsys.readouterr()
        return code, out.out, out.err

    return go


def pytest_report_header(config):
    """The llama.cpp kernel paths this CPU cannot run, each with why: the oracle holds them nowhere here
    (``tests/oracle/test_kernel_paths.py``) — said, not skipped."""
    import llama_builds

    cannot = llama_builds.not_runnable()
    return [f"not testable on this CPU: llama.cpp's {t} path ({why})" for t, why in cannot.items()]
