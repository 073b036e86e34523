"""One more layer like the last: ``repair.new_layer`` on every shipped example."""

from __future__ import annotations

import re

import pytest
from repo import EXAMPLES

from streamed.analysis.incremental import IncrementalAnalyzer
from streamed.analysis.repair import new_layer
from streamed.analysis.whole import analyze

NAMES = sorted(p.stem for p in EXAMPLES.glob("*.lgm"))


def grown(text: str) -> tuple[str, int]:
    """``text`` with the new layer placed after its last layer and the head's renames applied, by offsets."""
    a = IncrementalAnalyzer().analyze(text)
    last, head = a.programs.layers[-1], a.programs.head
    made = new_layer(last, a.chunk_texts[a.index_of(last.section)], head)
    data = text.encode()
    hb, lb = a.base_of(head.section), a.base_of(last.section)
    edits = [(hb.offset + r.start.offset, hb.offset + r.end.offset, name) for r, name in made.head]
    end = lb.offset + last.tokens[-1].range.end.offset
    edits.append((end, end, "\n\n" + made.text))
    for s, e, t in sorted(edits, reverse=True):
        data = data[:s] + t.encode() + data[e:]
    return data.decode(), made.index


@pytest.mark.parametrize("name", NAMES)
def test_the_new_layer_is_the_last_layer_renumbered_and_one_kind_with_it(name):
    text = (EXAMPLES / f"{name}.lgm").read_text()
    before = analyze(text)
    after_text, n = grown(text)
    after = analyze(after_text)
    assert n == len(before.programs.layers)
    assert after.errors == [] and after.divergences == ()
    assert len(after.programs.layers) == n + 1
    (kind,) = [k for k in after.kinds if n - 1 in k.layers]
    assert n in kind.layers
    # Layer n's text is layer n-1's with the layer's own number moved on in every name it binds — written here as
    # the language states it (LANGUAGE §4: a per-layer name carries its index as the suffix of its first part; the
    # input is the previous layer's output; host tables keep their names).
    section = lambda t, l: t.split(f"## Layer {l}", 1)[1].split("\n## ", 1)[0]  # noqa: E731
    prev = section(after_text, n - 1)
    binders = set(re.findall(r"\bLet (\w+)", prev))
    tables = {b for b in binders if re.search(rf"\bLet {b}\s+be an? table\b", prev)}

    def moved(m):
        w = m.group(0)
        if w == f"xo{n - 2}" or (n == 1 and w == "x"):
            return f"xo{n - 1}"
        if w not in binders or w in tables:
            return w
        head, sep, tail = w.partition("_")
        return head[: -len(str(n - 1))] + str(n) + sep + tail if head.endswith(str(n - 1)) else w

    assert section(after_text, n) == re.sub(r"\b\w+\b", moved, prev)
    # The head reads the new layer's output.
    assert re.search(rf"\bLet xo{n}\s+be an input\b", after_text.split("## Head", 1)[1])
