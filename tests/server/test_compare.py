"""streamed.compareWithRepresentative end to end: a diverging layer and its representative as the two texts of a diff
view, offered by a code lens and a code action on the divergence."""

import difflib

import pytest
from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcInvalidParams

from lsphelp import DIVERGENT, SIX, doc, position_of, request

pytestmark = pytest.mark.asyncio(loop_scope="module")


async def run(client, *args):
    return await request(client.workspace_execute_command_async(
        lsp.ExecuteCommandParams("streamed.compareWithRepresentative", list(args))), 10.0)


def changed_lines(left: str, right: str) -> list[tuple[str, str]]:
    """The (left, right) pairs of lines a line diff marks as changed."""
    a, b = left.splitlines(), right.splitlines()
    out = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b).get_opcodes():
        if tag != "equal":
            out.append(("\n".join(a[i1:i2]), "\n".join(b[j1:j2])))
    return out


async def test_the_lens_on_a_diverging_layer_gives_texts_that_differ_only_in_the_diverging_statement(editor, client):
    uri = editor.open(DIVERGENT)
    await editor.analysed(uri)
    lenses = await request(client.text_document_code_lens_async(lsp.CodeLensParams(doc(uri))))
    (lens,) = [l for l in lenses if l.command.command == "streamed.compareWithRepresentative"]
    got = await run(client, *lens.command.arguments)
    assert (got["layer"], got["representative"], got["kind"]) == (4, 0, "attention (layer 0)")
    (warning,) = [d for d in editor.diagnostics(uri) if d.code == "divergence"]
    assert got["why"] and got["why"] in warning.message
    assert changed_lines(got["representativeText"], got["layerText"]) == [
        ("Let xn0 be rmsnorm of x with g0, epsilon 0.00001.", "Let xn0 be rmsnorm of x with g0, epsilon 0.001.")]


async def test_the_divergence_offers_the_comparison_among_its_quick_fixes(editor, client):
    uri = editor.open(DIVERGENT)
    await editor.analysed(uri)
    w = next(d for d in editor.diagnostics(uri) if d.code == "divergence")
    actions = await request(client.text_document_code_action_async(lsp.CodeActionParams(
        doc(uri), w.range, lsp.CodeActionContext(diagnostics=[w]))))
    see = next(a for a in actions if a.title == "Compare layer 4 with layer 0")
    assert see.kind == lsp.CodeActionKind.QuickFix and see.edit is None
    assert see.command.command == "streamed.compareWithRepresentative"
    assert list(see.command.arguments) == [{"uri": uri, "layer": 4}]


async def test_a_position_in_a_layer_of_the_kind_compares_it_with_its_first_layer_and_nothing_differs(editor, client):
    uri = editor.open(SIX)
    await editor.analysed(uri)
    line, col = position_of(SIX, "Wo3", after="Let h3 be")
    got = await run(client, {"uri": uri, "position": {"line": line, "character": col}})
    assert (got["layer"], got["representative"], got["why"]) == (3, 0, None)
    assert got["layerText"] == got["representativeText"] and "Wo0" in got["layerText"]


@pytest.mark.parametrize("arg, says", [
    ({"layer": 0}, "layer 0 is the first layer of its kind"),
    ({"layer": 99}, "the document has no layer 99"),
    ({"position": {"line": 0, "character": 0}}, "place the cursor in a layer"),
])
async def test_what_cannot_be_compared_is_said_in_a_sentence(editor, client, arg, says):
    uri = editor.open(SIX)
    await editor.analysed(uri)
    with pytest.raises(JsonRpcInvalidParams, match=says):
        await run(client, {"uri": uri, **arg})
