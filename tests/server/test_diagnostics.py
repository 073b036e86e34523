import pytest
from lsprotocol import types as lsp

from lsphelp import DIVERGENT, TINY, doc, position_of, request

pytestmark = pytest.mark.asyncio(loop_scope="module")


async def test_a_clean_document_publishes_no_diagnostics_for_its_version(editor):
    uri = editor.open(TINY)
    done = await editor.analysed(uri, 1)
    assert done.kinds == 1 and done.layers == 4 and done.rejects == 0
    assert editor.diagnostics(uri) == []


async def test_a_parse_error_is_an_error_at_the_statement(editor):
    text = TINY.replace("Let hn2 be rmsnorm of", "Let hn2 be rmsnorn of")
    uri = editor.open(text)
    await editor.analysed(uri)
    errors = [d for d in editor.diagnostics(uri) if d.severity == lsp.DiagnosticSeverity.Error]
    assert errors
    line, col = position_of(text, "rmsnorn")
    assert (errors[0].range.start.line, errors[0].range.start.character) == (line, col)
    assert "unknown operation `rmsnorn`" in errors[0].message


async def test_a_divergence_is_a_warning_whose_related_information_points_at_the_representative(editor):
    uri = editor.open(DIVERGENT)
    done = await editor.analysed(uri)
    assert done.kinds == 2
    warnings = [d for d in editor.diagnostics(uri) if d.code == "divergence"]
    assert len(warnings) == 1
    w = warnings[0]
    assert w.severity == lsp.DiagnosticSeverity.Warning
    assert w.range.start.line == position_of(DIVERGENT, "001.", after="## Layer 4")[0]
    assert "layer 4" in w.message and "layer 0" in w.message
    rep_line = position_of(DIVERGENT, "00001", after="## Layer 0")[0]
    related = w.related_information
    assert related[0].location.uri == uri and related[0].location.range.start.line == rep_line
    assert related[1].location.range.start.line == position_of(DIVERGENT, "## Layer 0")[0]


async def test_every_published_diagnostic_set_carries_the_version_it_describes(editor, client):
    uri = editor.open(TINY)
    await editor.analysed(uri, 1)
    line, col = position_of(TINY, "rmsnorm", after="## Layer 1")
    v = editor.replace(uri, (line, col), (line, col + len("rmsnorm")), "rmsnorn")
    await editor.analysed(uri, v)
    assert any("rmsnorn" in d.message for d in editor.diagnostics(uri))
    v = editor.replace(uri, (line, col), (line, col + len("rmsnorn")), "rmsnorm")
    await editor.analysed(uri, v)
    assert editor.diagnostics(uri) == []
    mine = [p for p in client.published if p.uri == uri]
    assert [p.version for p in mine] == [1, 2, 3]
    assert [bool(p.diagnostics) for p in mine] == [False, True, False]


async def test_pull_diagnostics_answer_unchanged_for_the_same_result_id(editor, client):
    uri = editor.open(DIVERGENT)
    await editor.analysed(uri)
    first = await request(client.text_document_diagnostic_async(lsp.DocumentDiagnosticParams(doc(uri))))
    assert first.kind == "full" and any(d.code == "divergence" for d in first.items)
    again = await request(client.text_document_diagnostic_async(lsp.DocumentDiagnosticParams(doc(uri), previous_result_id=first.result_id)))
    assert again.kind == "unchanged" and again.result_id == first.result_id
    line, col = position_of(DIVERGENT, "0.001", after="## Layer 4")
    editor.replace(uri, (line, col), (line, col + len("0.001")), "0.00001")
    after = await request(client.text_document_diagnostic_async(lsp.DocumentDiagnosticParams(doc(uri), previous_result_id=first.result_id)))
    assert after.kind == "full" and list(after.items) == []


async def test_a_burst_of_keystrokes_is_one_analysis(editor, client):
    client.workspace_did_change_configuration(lsp.DidChangeConfigurationParams({"streamed": {"debounceMs": 200}}))
    try:
        uri = editor.open(TINY)
        await editor.analysed(uri, 1)
        line, col = position_of(TINY, "Return xo3.")
        for i, ch in enumerate("-- a comment"):
            editor.replace(uri, (line, col + 11 + i), (line, col + 11 + i), " " if i == 0 else ch)
        await editor.analysed(uri)
        import asyncio

        await asyncio.sleep(0.3)
        mine = [a for a in client.analyses if a.uri == uri]
        assert [a.version for a in mine] == [1, editor.versions[uri]]
    finally:
        client.workspace_did_change_configuration(lsp.DidChangeConfigurationParams({"streamed": {"debounceMs": 0}}))


async def test_an_expression_nested_ten_thousand_deep_is_published_as_one_error(editor):
    text = TINY.replace("Let hn2 be rmsnorm of", "Let hn2 be " + "(" * 10_000 + "x" + ")" * 10_000 + " plus rmsnorm of")
    uri = editor.open(text)
    await editor.analysed(uri)
    (error,) = [d for d in editor.diagnostics(uri) if "nests more than 64 deep" in d.message]
    assert error.range.start.line == position_of(text, "Let hn2")[0]
