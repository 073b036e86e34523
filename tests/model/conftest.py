import json
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
EXAMPLES = ROOT / "examples"
CONFIGS = EXAMPLES / "configs"
sys.path.insert(0, str(HERE))  # ggufs.py, the test checkpoints' writer


def config(name: str) -> dict:
    return json.loads((CONFIGS / f"{name}.json").read_text())


@pytest.fixture
def run(capsys):
    """Run the ``streamed`` command line in-process: (exit status, stdout, stderr)."""
    from streamed.cli import main

    def go(*argv: str):
        code = main([str(a) for a in argv])
        out = capsys.readouterr()
        return code, out.out, out.err

    return go
