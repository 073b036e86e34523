import pytest

from streamed.analysis.whole import analyze
from streamed.spatial.synth import two_kind_document

from repo import EXAMPLES, example

SMALL = ["tiny-llama", "small-gemma3", "small-qwen35", "small-deepseek-v2"]


@pytest.fixture(scope="session")
def analyses():
    out = {name: analyze(example(name)) for name in SMALL if (EXAMPLES / f"{name}.lgm").exists()}
    out["generated"] = analyze(two_kind_document(12))
    return out
