"""Every example document through the real server: analysed cleanly, every whole-document request answered, and
formatting leaves it as `streamed author` (or its author) wrote it."""

import glob
import re
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
    # No diagnostics, but the one an editor's default ctx (4,096) past the positions the model was trained at is owed:
    # a Warning on `## Model` (the small examples trained shorter declare it so that it is warned of).
    trained = re.search(r"^Let trained be (\d+)\.", text, re.M)
    said = editor.diagnostics(uri)
    if trained and int(trained.group(1)) < 4096:
        assert len(said) == 1 and said[0].severity == lsp.DiagnosticSeverity.Warning, said
        assert f"ctx 4,096 is past the {int(trained.group(1)):,} positions the model was trained at" in said[0].message
        assert said[0].range.start.line == text.splitlines().index("## Model")
    else:
        assert said == []
    assert done.layers >= 1
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
