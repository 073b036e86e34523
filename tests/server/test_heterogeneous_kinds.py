"""A heterogeneous model in the editor: Llama-3.1-Nemotron-51B, every layer its own ``block_configs`` entry, authored and
opened — each layer's lens names the kind its block makes it (equal entries one kind: ``nas.block_kinds``, from the
published config alone), the layers that kind holds and its first; the model's lens counts the kinds; no layer is
offered as a divergence to compare, its heading saying what the source made it."""

import json
import re

import pytest
from lsprotocol import types as lsp

import nas
from lsphelp import ROOT, doc, request
from streamed.model.author import author
from streamed.model.hf import spec_from_config

pytestmark = pytest.mark.asyncio(loop_scope="module")

CONFIG = json.loads((ROOT / "tests" / "model" / "configs" / "llama-3_1-nemotron-51b-instruct.json").read_text())


async def test_each_layer_of_a_nemotron_nas_document_shows_its_kind(editor, client):
    text = author(spec_from_config(CONFIG))
    uri = editor.open(text, "nemotron-51b.lgm")
    done = await editor.analysed(uri, timeout=60)
    assert done.layers == 80 and editor.diagnostics(uri) == []
    lenses = await request(client.text_document_code_lens_async(lsp.CodeLensParams(doc(uri))), timeout=30)
    by_line = {l.range.start.line: l.command for l in lenses}
    headings = {int(m.group(1)): i for i, line in enumerate(text.splitlines()) if (m := re.match(r"## Layer (\d+)", line))}
    kinds = nas.kind_of_layer(CONFIG)
    for layer, line in headings.items():
        name, layers = kinds[layer]
        n = len(layers)
        assert by_line[line].title == f"{name} · {n} layer{'s' if n != 1 else ''} · first: layer {layers[0]}", layer
        assert by_line[line].command == "streamed.goToRepresentative"
    model = by_line[text.splitlines().index("## Model")]
    assert model.title.startswith(f"{len(nas.block_kinds(CONFIG))} kinds · ")
    assert not [l for l in lenses if l.command.command == "streamed.compareWithRepresentative"]
    assert len(lenses) == 80 + 1
