from lsprotocol import types as lsp

from lsphelp import TINY, position_of


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
