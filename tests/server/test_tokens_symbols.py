"""Semantic tokens (full and delta), document symbols and folding, end to end."""

import pytest
from lsprotocol import types as lsp

from lsphelp import DIVERGENT, TINY, doc, position_of, request

pytestmark = pytest.mark.asyncio(loop_scope="module")


def decode(data, legend):
    out, line, col = {}, 0, 0
    for i in range(0, len(data), 5):
        dl, dc, n, t, m = data[i:i + 5]
        line += dl
        col = col + dc if dl == 0 else dc
        mods = {legend.token_modifiers[b] for b in range(len(legend.token_modifiers)) if m >> b & 1}
        out[(line, col)] = (n, legend.token_types[t], mods)
    return out


@pytest.fixture
def token_legend(client):
    from streamed_lsp.semantic_tokens import LEGEND

    return LEGEND


async def test_semantic_tokens_mark_binders_weights_q8_states_operations_constants_and_numbers(editor, client, token_legend):
    uri = editor.open(TINY)
    await editor.analysed(uri)
    got = await request(client.text_document_semantic_tokens_full_async(lsp.SemanticTokensParams(doc(uri))))
    toks = decode(got.data, token_legend)
    assert toks[position_of(TINY, "Wq1")] == (3, "parameter", {"declaration", "q8"})
    assert toks[position_of(TINY, "g1 be")] == (2, "parameter", {"declaration"})
    assert toks[position_of(TINY, "Kc1")][1] == "property"
    assert toks[position_of(TINY, "rmsnorm", after="## Layer 1")][1] == "function"
    assert toks[position_of(TINY, "attention", after="## Layer 1")][1] == "function"
    assert toks[position_of(TINY, "d", after="Let g1 be a weight of ")][1] == "enumMember"
    assert toks[position_of(TINY, "64", after="Let Wq1")] == (2, "number", set())
    assert toks[position_of(TINY, "xn1 be")] == (3, "variable", {"declaration"})


async def test_the_words_of_a_checkpoint_tensor_name_are_not_coloured_as_the_language_s(editor, client, token_legend):
    uri = editor.open(TINY)
    await editor.analysed(uri)
    got = await request(client.text_document_semantic_tokens_full_async(lsp.SemanticTokensParams(doc(uri))))
    toks = decode(got.data, token_legend)
    line, col = position_of(TINY, '"blk.{l}.attn_q.weight"')
    inside = [k for k in toks if k[0] == line and k[1] >= col]
    assert inside == [], [toks[k] for k in inside]
    # (the same word outside a string still is one: a declaration's role)
    assert toks[position_of(TINY, "weight", after="Let Wq1 be a q8 ")][1] == "type"


async def test_semantic_token_deltas_rebuild_the_new_full_encoding(editor, client):
    uri = editor.open(TINY)
    await editor.analysed(uri)
    first = await request(client.text_document_semantic_tokens_full_async(lsp.SemanticTokensParams(doc(uri))))
    line, col = position_of(TINY, "Let xn2 be")
    editor.replace(uri, (line, 0), (line, 0), "Let extra2 be 64.\n")
    delta = await request(client.text_document_semantic_tokens_full_delta_async(
        lsp.SemanticTokensDeltaParams(doc(uri), previous_result_id=first.result_id)))
    data = list(first.data)
    for e in sorted(delta.edits, key=lambda e: -e.start):
        data[e.start:e.start + e.delete_count] = list(e.data or [])
    full = await request(client.text_document_semantic_tokens_full_async(lsp.SemanticTokensParams(doc(uri))))
    assert data == list(full.data) and data != list(first.data)
    assert sum(len(e.data or []) for e in delta.edits) < len(full.data) // 4


async def test_document_symbols_are_the_sections_in_document_order_each_layer_with_its_kind_as_detail(editor, client):
    uri = editor.open(DIVERGENT)
    await editor.analysed(uri)
    syms = await request(client.text_document_document_symbol_async(lsp.DocumentSymbolParams(doc(uri))))
    names = [s.name for s in syms]
    assert names == ["Model", "Checkpoint", "Embed", "Layer 0", "Layer 1", "Layer 2", "Layer 3", "Layer 4", "Layer 5", "Head"]
    assert [s.detail for s in syms[3:9]] == ["attention (layer 0)"] * 4 + ["attention (layer 4)", "attention (layer 0)"]
    assert {c.name for c in syms[0].children} == {"d", "vocab", "ffn"}
    # Each symbol spans its own section and no other: in document order, never overlapping, so the breadcrumb of a
    # line in layer 4 is layer 4 (and sticky scroll shows its heading).
    lines = DIVERGENT.split("\n")
    for s in syms:
        assert lines[s.range.start.line].startswith(f"## {s.name}"), s.name
    for a, b in zip(syms, syms[1:]):
        assert (a.range.end.line, a.range.end.character) <= (b.range.start.line, b.range.start.character)
    inside = position_of(DIVERGENT, "Let Wk4 be")[0]
    assert [s.name for s in syms if s.range.start.line <= inside <= s.range.end.line] == ["Layer 4"]


async def test_a_layer_s_detail_says_its_kind_once_and_a_note_that_adds_to_it(editor, client):
    text = DIVERGENT.replace("## Layer 0\n", "## Layer 0: attention\n").replace("## Layer 1\n", "## Layer 1: the second\n")
    uri = editor.open(text)
    await editor.analysed(uri)
    syms = await request(client.text_document_document_symbol_async(lsp.DocumentSymbolParams(doc(uri))))
    details = {s.name: s.detail for s in syms}
    assert details["Layer 0"] == "attention (layer 0)" and details["Layer 1"] == "attention (layer 0) — the second"


async def test_each_section_folds(editor, client):
    uri = editor.open(TINY)
    await editor.analysed(uri)
    folds = await request(client.text_document_folding_range_async(lsp.FoldingRangeParams(doc(uri))))
    starts = {f.start_line: f.end_line for f in folds}
    l1, l2 = position_of(TINY, "## Layer 1")[0], position_of(TINY, "## Layer 2")[0]
    assert starts[l1] == l2 - 2  # the blank line before the next heading stays outside
    assert len(folds) == 9  # title comment, Model, Checkpoint, Embed, 4 layers, Head
