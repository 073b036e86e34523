"""Code lenses, go to definition and streamed.goToRepresentative, end to end."""

import pytest
from lsprotocol import types as lsp

from lsphelp import DIVERGENT, SIX, TINY, doc, pos, position_of, request

pytestmark = pytest.mark.asyncio(loop_scope="module")


async def test_every_layer_header_has_a_lens_naming_its_kind_and_the_model_a_bundle_lens(editor, client):
    uri = editor.open(DIVERGENT)
    await editor.analysed(uri)
    lenses = await request(client.text_document_code_lens_async(lsp.CodeLensParams(doc(uri))))
    by_line = {l.range.start.line: l.command for l in lenses if l.command.command != "streamed.compareWithRepresentative"}
    l0 = by_line[position_of(DIVERGENT, "## Layer 0")[0]]
    assert l0.title == "attention (layer 0) · 5 layers · first: layer 0"
    assert l0.command == "streamed.goToRepresentative"
    l4 = by_line[position_of(DIVERGENT, "## Layer 4")[0]]
    assert l4.title == "attention (layer 4) · 1 layer · first: layer 4"
    model = by_line[position_of(DIVERGENT, "## Model")[0]]
    assert model.title == "2 kinds · Lower SN50 bundle" and model.command == "streamed.lowerBundle"
    assert list(model.arguments) == [{"uri": uri}]
    compare = [l for l in lenses if l.command.command == "streamed.compareWithRepresentative"]
    assert [(l.range.start.line, l.command.title) for l in compare] == [
        (position_of(DIVERGENT, "## Layer 4")[0], "Compare layer 4 with layer 0")]
    assert len(lenses) == 8


async def test_clicking_a_layer_lens_goes_to_the_representative_header(editor, client):
    uri = editor.open(SIX)
    await editor.analysed(uri)
    lenses = await request(client.text_document_code_lens_async(lsp.CodeLensParams(doc(uri))))
    l3 = next(l for l in lenses if l.range.start.line == position_of(SIX, "## Layer 3")[0])
    got = await request(client.workspace_execute_command_async(lsp.ExecuteCommandParams(l3.command.command, l3.command.arguments)))
    assert got["uri"] == uri
    assert got["range"]["start"] == {"line": position_of(SIX, "## Layer 0")[0], "character": 0}


async def test_go_to_representative_maps_a_token_through_the_renaming(editor, client):
    uri = editor.open(SIX)
    await editor.analysed(uri)
    line, col = position_of(SIX, "Wo3", after="Let h3 be")
    got = await request(client.workspace_execute_command_async(lsp.ExecuteCommandParams(
        "streamed.goToRepresentative", [{"uri": uri, "position": {"line": line, "character": col + 1}}])))
    rl, rc = position_of(SIX, "Wo0", after="Let h0 be")
    assert got["range"]["start"] == {"line": rl, "character": rc}
    assert got["range"]["end"] == {"line": rl, "character": rc + 3}


async def test_go_to_representative_outside_a_layer_is_null(editor, client):
    uri = editor.open(TINY)
    await editor.analysed(uri)
    line, col = position_of(TINY, "Emb", after="## Embed")
    got = await request(client.workspace_execute_command_async(lsp.ExecuteCommandParams(
        "streamed.goToRepresentative", [{"uri": uri, "position": {"line": line, "character": col}}])))
    assert got is None


async def test_definition_on_a_layer_header_is_its_representatives_header(editor, client):
    uri = editor.open(SIX)
    await editor.analysed(uri)
    got = await request(client.text_document_definition_async(lsp.DefinitionParams(doc(uri), pos(position_of(SIX, "Layer 5")))))
    assert got.range.start.line == position_of(SIX, "## Layer 0")[0]


async def test_definition_on_a_name_is_its_let(editor, client):
    uri = editor.open(TINY)
    await editor.analysed(uri)
    use = position_of(TINY, "Wq2", after="Let q2 be")
    got = await request(client.text_document_definition_async(lsp.DefinitionParams(doc(uri), pos(use))))
    line, col = position_of(TINY, "Wq2")
    assert (got.range.start.line, got.range.start.character) == (line, col)
    const = position_of(TINY, "ffn", after="Let Wg1")
    got = await request(client.text_document_definition_async(lsp.DefinitionParams(doc(uri), pos(const))))
    assert got.range.start.line == position_of(TINY, "Let ffn be")[0]


async def test_a_diverging_layer_goes_to_the_representative_of_the_kind_it_was_meant_to_be(editor, client):
    uri = editor.open(DIVERGENT)
    await editor.analysed(uri)
    line, col = position_of(DIVERGENT, "Wqr4", after="Let qr4 be")
    got = await request(client.workspace_execute_command_async(lsp.ExecuteCommandParams(
        "streamed.goToRepresentative", [{"uri": uri, "position": {"line": line, "character": col}}])))
    rl, rc = position_of(DIVERGENT, "Wqr0", after="Let qr0 be")
    assert got["range"]["start"] == {"line": rl, "character": rc}
