"""One parse and one check per program up to names: the fast path — each layer shape parsed and checked once, every
other layer of that shape renamed — agrees with a full parse and check of every layer on its own, on random
documents and random edits. And the editor's path — its text as chunks edited in place, analysed incrementally —
agrees with the plain text analysed whole.

The reference here shares nothing: ``parse(share=False)`` and ``programs_of(share=False)`` parse and check each layer
from its own text, and kinds are grouped by ``shape_digest`` of each layer's own tokens (LANGUAGE §7's definition)."""

from __future__ import annotations

import re

import hypothesis.strategies as st
from builders import document
from hypothesis import HealthCheck, given, settings

from streamed.analysis.incremental import IncrementalAnalyzer
from streamed.analysis.text import Text, apply_change
from streamed.analysis.kinds import describe, divergences, shape_digest, stored_q8
from streamed.analysis.whole import analyze, checkpoint_diagnostics, diagnostic_order, divergence_diagnostic
from streamed.lang.parser import parse
from streamed.model.checkpoint import ALL_Q8
from streamed.model.links import programs_of

SPEC = st.fixed_dictionaries({
    "mixer": st.sampled_from(["attention", "attention", "deltanet", "latent"]),
    "ffn": st.sampled_from(["dense", "dense", "experts"]),
    # Heterogeneous layers: one program but for a number — each its own kind, parsed once per frame (``lang.shapes``).
    "eps": st.sampled_from([None, None, "1e-5", "2e-5", "3e-6", "0.00001", "0.00002", "1E-5"]),
}).flatmap(lambda d: st.just(d) if d["mixer"] != "attention" else st.fixed_dictionaries(
    {**{k: st.just(v) for k, v in d.items()}, "window": st.sampled_from([None, None, 512, 1024, 4096])}))

#: What a person types: pieces of statements, names, numbers, headings, line ends of every kind, comments.
PIECES = ["", " ", "x", ".", "(", ")", ",", "0.5", "1e-6", "-", "times", " plus ", "silu of ", "Let q9 be xo1.",
          "Let ", "\n", "\r", "\r\n", "\n## Layer 2\n", "## Layer 3", "# ", "--", " -- note", "é", "😀", "a", "q8",
          "7", "0", "e", "e+", "99999999999999999999999999999999", ", epsilon 4e-5"]


def _texts_agree(layer_fast, layer_ref) -> None:
    assert layer_fast.texts == layer_ref.texts
    assert layer_fast.tokens == layer_ref.tokens
    assert layer_fast.table.comments == layer_ref.table.comments
    assert layer_fast.spans == layer_ref.spans
    assert layer_fast.statements == layer_ref.statements  # names and ranges exactly the layer's own


def reference(text: str):
    """The analysis with nothing shared: every layer parsed, checked and digested from its own text."""
    doc = parse(text, share=False)
    programs = programs_of(doc, share=False)
    groups: dict[str, list] = {}
    for p in programs.layers:
        groups.setdefault(shape_digest(p.section.texts, stored_q8(programs, p, ALL_Q8)), []).append(p)
    return doc, programs, groups


def agree(text: str, fast=None) -> None:
    fast = fast or analyze(text)
    doc, programs, groups = reference(text)
    # Trees and programs, layer by layer.
    assert len(fast.document.layers) == len(doc.layers)
    for a, b in zip(fast.document.layers, doc.layers):
        _texts_agree(a, b)
    assert len(fast.programs.layers) == len(programs.layers)
    for a, b in zip(fast.programs.layers, programs.layers):
        assert (a.input, a.output, a.carried, a.errors) == (b.input, b.output, b.carried, b.errors)
        assert (a.decls, a.shapes, a.bound_at) == (b.decls, b.shapes, b.bound_at)
    # Kinds: the same layers under the same digests, named alike.
    assert {k.digest: k.layers for k in fast.kinds} == {d: tuple(p.section.index for p in ps) for d, ps in groups.items()}
    for k in fast.kinds:
        assert describe(groups[k.digest][0], programs.constants) in k.name
    # Divergences and every diagnostic.
    divs = divergences(programs, list(fast.kinds))
    assert list(fast.divergences) == divs
    diags = list(doc.diagnostics) + list(programs.diagnostics) + checkpoint_diagnostics(programs, ALL_Q8)
    diags += [divergence_diagnostic(programs, d) for d in divs]
    assert list(fast.diagnostics) == sorted(diags, key=diagnostic_order)


def _rename(text: str, layer: int, new_stem: str) -> str:
    """Every name of layer ``layer`` that carries its index renamed to ``new_stem`` + index: the layer's shape is
    kept (a rename), or broken where ``new_stem`` makes a word of the language."""
    m = re.search(rf"^## Layer {layer}\b.*$", text, re.M)
    if m is None:
        return text
    end = text.find("\n## ", m.end())
    end = len(text) if end < 0 else end
    body = re.sub(rf"\b([A-Za-z]+?){layer}\b", lambda w: (new_stem + str(layer)) if w.group(1) == "xn" else w.group(0),
                  text[m.end():end])
    return text[:m.end()] + body + text[end:]


@st.composite
def edits(draw, text: str):
    """A few edits as an editor sends them: a range in (line, UTF-16 column) — possibly past the end — and text."""
    out = []
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["type", "type", "delete", "rename"]))
        if kind == "rename":
            out.append(("rename", draw(st.integers(0, 9)), draw(st.sampled_from(["zn", "norm", "silu"]))))
            continue
        lines = max(1, text.count("\n") + 1)
        a = (draw(st.integers(0, lines)), draw(st.integers(0, 80)))
        b = a if kind == "type" else (a[0] + draw(st.integers(0, 2)), draw(st.integers(0, 80)))
        out.append(("change", a, b, draw(st.sampled_from(PIECES)) if kind == "type" else ""))
    return out


@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(specs=st.lists(SPEC, min_size=2, max_size=9), data=st.data())
def test_the_shared_parse_agrees_with_a_full_parse_of_every_layer_through_random_edits(specs, data):
    text = document(specs)
    agree(text)
    analyzer = IncrementalAnalyzer()
    chunked = Text.of(text)
    analyzer.analyze(chunked)
    for e in data.draw(edits(text)):
        if e[0] == "rename":
            text = _rename(text, e[1], e[2])
            chunked = Text.of(text)
        else:
            _, a, b, new = e
            text = apply_change(text, a, b, new)
            chunked = chunked.edit(a, b, new)
        assert str(chunked) == text
        fast = analyze(text)
        agree(text, fast)
        inc = analyzer.analyze(chunked)
        assert inc.diagnostics == fast.diagnostics
        assert inc.kinds == fast.kinds
        assert inc.divergences == fast.divergences


def test_a_deep_model_parses_and_checks_each_shape_once():
    text = document(24, window=512)
    a = analyze(text)
    layers = a.document.layers
    assert sum(s.shared_from is None for s in layers) == 1  # one parse for 24 layers of one shape
    assert sum(p._rep is None for p in a.programs.layers) == 1  # one check
    agree(text, a)


def test_layers_differing_only_in_numbers_are_parsed_once_and_checked_as_their_own_texts():
    # Every layer its own kind — each its own epsilon — and one of them a width the check refuses: the frame's tree
    # is parsed once, each layer checked with its own numbers, the refused one reported as its own check reports it.
    text = document([dict(eps=f"{l + 1}e-6") for l in range(10)])
    text = text.replace("Let Wk6 be a q8 weight of d by 32.", "Let Wk6 be a q8 weight of d by 0.")
    a = analyze(text)
    assert sum(s.shared_from is None for s in a.document.layers) == 1
    assert len(a.kinds) == 10
    assert any("a dimension is a whole number" in d.message for d in a.errors)
    agree(text, a)
