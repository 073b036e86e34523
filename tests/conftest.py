"""Fixtures every suite may use. ``tests/support`` (builders, checkpoint writers, the repository's paths) is put on
``sys.path`` here, because pytest imports test modules in importlib mode, where a test folder is not a package."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "support"))


@pytest.fixture
def run(capsys):
    """Run the ``streamed`` command line in-process: (exit status, stdout, stderr)."""
    from streamed.cli import main

    def go(*argv: str):
        code = main([str(a) for a in argv])
        out = capsys.readouterr()
        return code, out.out, out.err

    return go
