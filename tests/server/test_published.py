"""What the server pushes is what lsprotocol's converter makes of the core's diagnostics: the notification it writes
itself — each diagnostic written once and kept while nothing the client reads of it changed — is, message for
message, the converter's ``publishDiagnostics`` of the same snapshot, through edits that move diagnostics by bytes,
by lines, or not at all."""

from __future__ import annotations

import json
import re

from builders import document
from pygls.protocol import default_converter
from streamed_lsp.diagnostics import Published, publish_params
from streamed_lsp.scheduler import Snapshot

from streamed.analysis.incremental import IncrementalAnalyzer, parse_chunk
from streamed.lang.syntax import Filled, SectionKind
from streamed.spatial.deployment import Deployment
from streamed.spatial.diagnose import reject_diagnostics_of


def test_the_pushed_diagnostics_are_the_converters_through_edits():
    converter = default_converter()
    # Every layer its own kind (each its own epsilon: a divergence each), and layers whose attention does not lower: it
    # reads keys and values it computes, not its caches (an FFN of 80 no longer serves: weights whose input features
    # are not whole Q8_0 blocks are kept F16, as llama.cpp's quantizer keeps them, and lower).
    text = document([dict(eps=f"{l + 1}e-6") for l in range(12)])
    for l in range(12):
        text = text.replace(f"Let a{l} be attention of qr{l} over Kc{l} and Vc{l}",
                            f"Let k{l} be xn{l} times Wk{l}.\nLet v{l} be xn{l} times Wv{l}.\n"
                            f"Let a{l} be attention of qr{l} over k{l} and v{l}")
    assert text.count("over k") == 12
    edits = [("Let hn5 be", "Let  hn5 be"),  # moves what follows by a byte, not a line
             ("Let hn5 be", "Let\nhn5 be"),  # and by a line
             ("Let\nhn5 be", "Let hn5 be"),
             ("epsilon 8e-6", "epsilon 2e-6"),  # layer 7 joins layer 1's kind, which every other layer now diverges from
             ("Return xo0.", "Return xo0.\n-- a note"),  # layer 0's divergence stays, what it points at moves a line
             ("hn9", "norm9")]  # a rename: nothing moves
    analyzer, published, cache = IncrementalAnalyzer(), Published(), {}
    for version, (old, new) in enumerate([("", "")] + edits, start=1):
        text = text.replace(old, new) if old else text
        a = analyzer.analyze(text)
        rejects = reject_diagnostics_of(a, Deployment("decode", 4096), None, cache) if not a.errors else ()
        snap = Snapshot("file:///tmp/model.lgm", version, version, a, rejects)
        sent = json.loads(published.message(snap))
        assert sent == {"jsonrpc": "2.0", "method": "textDocument/publishDiagnostics",
                        "params": converter.unstructure(publish_params(snap))}
        codes = [d["code"] for d in sent["params"]["diagnostics"]]
        assert codes.count("divergence") >= 10 and ("reject" in codes) == (not a.errors)
    assert re.search(r'"version":\s*7', published.message(snap))


def _broken(text: str) -> str:
    """``text`` with every `Let … be …` of its layers and head misspelt `bee`: a syntax error on each of them."""
    head, _, rest = text.partition("## Layer 0")
    rest = "\n".join(l.replace(" be ", " bee ", 1) if l.startswith("Let") else l for l in rest.split("\n"))
    return head + "## Layer 0" + rest


def test_an_edit_above_broken_layers_publishes_what_opening_the_edited_text_does_writing_only_its_chunk():
    """An error on every line of 40 layers: an edit that moves all of them by lines — inside the first layer, whose
    diagnostics it makes again, and in ``## Model``, above every layer — publishes exactly what a fresh server
    publishes for the edited text (and lsprotocol's converter writes), and writes as JSON only the diagnostics of the
    chunk it edited: the others are the same chunk-relative values, moved by their line numbers."""
    uri = "file:///tmp/broken.lgm"
    text = _broken(document(40))
    analyzer, published = IncrementalAnalyzer(), Published()
    a = analyzer.analyze(text)
    published.message(Snapshot(uri, 1, 1, a))
    total = len(a.diagnostics)
    blocks = [diags for base, diags in a.runs if base is not None]  # each layer's and the head's, relative to it
    per_layer = len(blocks[0])
    assert len(blocks) == 41 and per_layer > 10 and published.written == total
    for version, (old, new, remade) in enumerate([
            ("## Layer 0\n", "## Layer 0\n-- a note\n\n", per_layer),  # the first layer's chunk edited, a line added
            ("## Layer 0\n", "## Layer 0\n-- and another\n", per_layer),
            ("## Model\n", "## Model\n-- the model's constants\n", 0)], start=2):
        text = text.replace(old, new, 1)
        written, blocked = published.written, analyzer.blocked
        a = analyzer.analyze(text)
        sent = published.message(Snapshot(uri, version, version, a))
        fresh = Published().message(Snapshot(uri, version, version, IncrementalAnalyzer().analyze(text)))
        assert sent == fresh
        assert json.loads(sent)["params"] == default_converter().unstructure(publish_params(Snapshot(uri, version, version, a)))
        assert len(json.loads(sent)["params"]["diagnostics"]) == total
        assert published.written - written == remade and analyzer.blocked - blocked == remade


def test_opening_layers_broken_alike_makes_diagnostics_of_one_layer_and_writes_every_layers():
    """40 layers with the same errors, each in its own names: the open publishes every layer's diagnostics — the
    converter's of the analysis, each layer's what parsing it on its own says — yet makes ``Diagnostic`` values of
    one layer alone (the parse of their shape); the other 39 are written from their rows (``syntax.Filled``)."""
    uri = "file:///tmp/broken.lgm"
    text = _broken(document(40))
    a = IncrementalAnalyzer().analyze(text)
    sent = json.loads(Published().message(Snapshot(uri, 1, 1, a)))["params"]
    layers = [s for s in a.document.sections if s.kind is SectionKind.LAYER]
    made = [s.index for s in layers if not isinstance(s.diagnostics, Filled) or s.diagnostics.made]
    assert len(layers) == 40 and made == [0]
    assert sent == default_converter().unstructure(publish_params(Snapshot(uri, 1, 1, a)))
    assert len(sent["diagnostics"]) == len(a.diagnostics) > 40 * 10
    for section, chunk in zip(a.document.sections, a.chunk_texts):
        if section.kind is SectionKind.LAYER:
            assert tuple(section.diagnostics) == parse_chunk(chunk).diagnostics != ()
