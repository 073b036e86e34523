"""Random edit sequences into the real server — positions past the end, inside surrogate pairs, reversed ranges, huge
insertions, binary — never crash it; every request is answered within a second; and afterwards its diagnostics are
those of a fresh open of the same text. The text is tracked here by the LSP rule, independently of the server's."""

import itertools
import time

import pytest
import pytest_lsp
from pytest_lsp import LanguageClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lsprotocol import types as lsp

from lsphelp import TINY, doc, pos, server_config, session

pytestmark = pytest.mark.asyncio(loop_scope="module")
_names = itertools.count()


def reference_apply(text: str, start, end, new: str) -> str:
    """The LSP rule, written from the spec: lines end at ``\\n``; a position past a line's end is its end, past the
    last line the text's end; a column inside a surrogate pair is the pair's start; a lone surrogate cannot be text
    and becomes U+FFFD."""
    new = new.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace") if any(0xD800 <= ord(c) < 0xE000 for c in new) else new
    lines = text.split("\n")

    def offset(line, character):
        if line >= len(lines):
            return len(text)
        units = lines[line].encode("utf-16-le", "surrogatepass")
        ch = min(character, len(units) // 2)
        while True:
            try:
                prefix = units[:ch * 2].decode("utf-16-le")
                break
            except UnicodeDecodeError:
                ch -= 1
        return sum(len(l) + 1 for l in lines[:line]) + len(prefix)

    a, b = offset(*start), offset(*end)
    a, b = min(a, b), max(a, b)
    return text[:a] + new + text[b:]


texts = st.one_of(
    st.sampled_from(["", ".", "Let q9 be xo1.", "\n## Layer 2\n", "\n", "0.5", "(", "--", " times ", "# ", "## Head\n",
                     "Let x be an input of rows by d.", "é", "😀", "\ud83d", "\r\n"]),
    st.text(max_size=12),
    st.binary(max_size=24).map(lambda b: b.decode("latin-1")),
    # Huge insertions: thousands of lines for the lexer, one enormous word for the parser. (Thousands of *errors*
    # would measure the test client's JSON decoding, not the server.)
    st.sampled_from(["-- a comment line\n" * 5000, "x" * 100_000, "Let q be 1.\n" * 300]),
)
lines = st.integers(0, 140)
cols = st.integers(0, 90)
edits = st.lists(st.tuples(lines, cols, lines, cols, texts, st.booleans()), min_size=1, max_size=12)


def normal(diags):
    return [(d.range, d.message, d.severity, d.code,
             [(r.location.range, r.message) for r in (d.related_information or [])]) for d in diags]


async def ask_everything(client, uri, line, character):
    """Every kind of request the editor makes while typing, each answered within a second."""
    p = pos((line, character))
    rng = lsp.Range(pos((0, 0)), pos((line + 5, 0)))
    calls = [
        client.text_document_hover_async(lsp.HoverParams(doc(uri), p)),
        client.text_document_definition_async(lsp.DefinitionParams(doc(uri), p)),
        client.text_document_completion_async(lsp.CompletionParams(doc(uri), p)),
        client.text_document_code_lens_async(lsp.CodeLensParams(doc(uri))),
        client.text_document_semantic_tokens_full_async(lsp.SemanticTokensParams(doc(uri))),
        client.text_document_inlay_hint_async(lsp.InlayHintParams(doc(uri), rng)),
        client.text_document_code_action_async(lsp.CodeActionParams(doc(uri), rng, lsp.CodeActionContext(diagnostics=[]))),
        client.text_document_document_symbol_async(lsp.DocumentSymbolParams(doc(uri))),
        client.text_document_formatting_async(lsp.DocumentFormattingParams(doc(uri), lsp.FormattingOptions(2, True))),
        client.workspace_execute_command_async(lsp.ExecuteCommandParams("streamed.goToRepresentative",
                                                                        [{"uri": uri, "position": {"line": line, "character": character}}])),
    ]
    names = ["hover", "definition", "completion", "codeLens", "semanticTokens", "inlayHint", "codeAction",
             "documentSymbol", "formatting", "goToRepresentative"]
    for name, call in zip(names, calls):
        # Timed, not cancelled: a cancelled request's late answer is an error inside pygls's client.
        t = time.perf_counter()
        await call
        took = time.perf_counter() - t
        assert took < 1.0, f"{name} took {took:.2f} s"


@pytest_lsp.fixture(config=server_config(), scope="module")
async def fuzz_client(lsp_client: LanguageClient, tmp_path_factory):
    """This module's own server: the fuzzer may leave it busy, and no other test shares it."""
    async for _ in session(lsp_client, tmp_path_factory, "fuzz"):
        yield


@settings(max_examples=6, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(sequence=edits)
async def test_random_edits_never_crash_the_server_and_end_where_a_fresh_open_would(fuzz_client, sequence):
    client = fuzz_client
    from lsphelp import Editor

    editor = Editor(client, client.root, f"fuzz{next(_names)}")
    uri = editor.open(TINY)
    text = TINY
    for sl, sc, el, ec, new, full in sequence:
        if full and len(new) < 1000:
            editor.edit(uri, [lsp.TextDocumentContentChangeWholeDocument(text=new + text)])
            text = reference_apply("", (0, 0), (0, 0), new + text)
        else:
            editor.replace(uri, (sl, sc), (el, ec), new)
            text = reference_apply(text, (sl, sc), (el, ec), new)
        await ask_everything(client, uri, sl, sc)
    await editor.analysed(uri, timeout=20)
    mine = normal(editor.diagnostics(uri))

    fresh = editor.open(text, f"fresh{next(_names)}.lgm")
    await editor.analysed(fresh, 1, timeout=20)
    assert mine == normal(editor.diagnostics(fresh))
    assert client.error is None
