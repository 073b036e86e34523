"""Every example document through the real server: analysed cleanly, every whole-document request answered, and
formatting leaves it as `streamed author` (or its author) wrote it."""

import glob
from pathlib import Path

import pytest
from lsprotocol import types as lsp

from lsphelp import ROOT, doc, pos, request

pytestmark = pytest.mark.asyncio(loop_scope="module")
EXAMPLES = sorted(glob.glob(str(ROOT / "examples" / "*.lgm")))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: Path(p).stem)
async def test_each_example_answers_every_request_and_formats_to_itself(editor, client, path):
    text = Path(path).read_text()
    uri = editor.open(text, Path(path).name)
    done = await editor.analysed(uri, timeout=30)
    assert done.layers >= 1 and editor.diagnostics(uri) == []
    end = pos((text.count("\n") + 1, 0))
    lenses = await request(client.text_document_code_lens_async(lsp.CodeLensParams(doc(uri))))
    assert len(lenses) == done.layers + 1
    symbols = await request(client.text_document_document_symbol_async(lsp.DocumentSymbolParams(doc(uri))))
    layers = [s for s in symbols if s.name.startswith("Layer ")]
    assert [s.name for s in layers] == [f"Layer {l}" for l in range(done.layers)] and all(s.detail for s in layers)
    tokens = await request(client.text_document_semantic_tokens_full_async(lsp.SemanticTokensParams(doc(uri))))
    assert len(tokens.data) % 5 == 0 and tokens.data
    hints = await request(client.text_document_inlay_hint_async(lsp.InlayHintParams(doc(uri), lsp.Range(pos((0, 0)), end))))
    assert len(hints) >= done.layers
    edits = await request(client.text_document_formatting_async(lsp.DocumentFormattingParams(doc(uri), lsp.FormattingOptions(2, True))))
    assert not edits
