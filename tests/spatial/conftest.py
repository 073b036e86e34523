from pathlib import Path

import pytest

from streamed.analysis import analyze
from streamed.spatial.synth import two_kind_document

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
SMALL = ["tiny-llama", "small-gemma3", "small-qwen35", "small-deepseek-v2"]


def example(name: str) -> str:
    return (EXAMPLES / f"{name}.lgm").read_text("utf-8")


@pytest.fixture(scope="session")
def analyses():
    out = {name: analyze(example(name)) for name in SMALL if (EXAMPLES / f"{name}.lgm").exists()}
    out["generated"] = analyze(two_kind_document(12))
    return out
