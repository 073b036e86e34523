"""Hover and inlay hints, end to end."""

import pytest
from lsprotocol import types as lsp

from lsphelp import DIVERGENT, TINY, doc, pos, position_of, request

pytestmark = pytest.mark.asyncio(loop_scope="module")
LAYER_1 = TINY.split("## Layer 1")[1].split("## Layer 2")[0]


async def hover_at(client, uri, at):
    return await request(client.text_document_hover_async(lsp.HoverParams(doc(uri), pos(at))))


async def test_hover_on_a_header_shows_the_kind_its_members_and_digest(editor, client):
    uri = editor.open(DIVERGENT)
    await editor.analysed(uri)
    h = await hover_at(client, uri, position_of(DIVERGENT, "Layer 2"))
    text = h.contents.value
    assert "attention (layer 0)" in text and "0-3, 5" in text and "digest" in text
    h4 = await hover_at(client, uri, position_of(DIVERGENT, "Layer 4"))
    assert "diverges from" in h4.contents.value


async def test_hover_on_a_weight_shows_role_shape_storage_and_tensor(editor, client):
    uri = editor.open(TINY)
    await editor.analysed(uri)
    h = await hover_at(client, uri, position_of(TINY, "Wq1", after="Let q1 be"))
    text = h.contents.value
    assert "q8 weight" in text and "64×64" in text and "Q8_0" in text and "blk.1.attn_q.weight" in text


async def test_hover_on_a_computed_name_keeps_rows_symbolic(editor, client):
    uri = editor.open(TINY)
    await editor.analysed(uri)
    h = await hover_at(client, uri, position_of(TINY, "q1", after="Let a1 be attention of"))
    assert "rows×64" in h.contents.value and "computed" in h.contents.value
    k = await hover_at(client, uri, position_of(TINY, "Kc1", after="Let a1 be"))
    assert "state" in k.contents.value and "ctx×32" in k.contents.value


async def test_hover_on_an_operation_shows_its_definition(editor, client):
    uri = editor.open(TINY)
    await editor.analysed(uri)
    h = await hover_at(client, uri, position_of(TINY, "attention", after="Let a1 be"))
    assert "attention of $Q over $K and $V at $P" in h.contents.value and "heads" in h.contents.value
    t = await hover_at(client, uri, position_of(TINY, "times", after="Let h1 be"))
    assert "matrix product" in t.contents.value


async def test_inlay_hints_show_the_shape_of_each_bound_name(editor, client):
    uri = editor.open(TINY)
    await editor.analysed(uri)
    start, end = position_of(TINY, "## Layer 1"), position_of(TINY, "## Layer 2")
    hints = await request(client.text_document_inlay_hint_async(lsp.InlayHintParams(doc(uri), lsp.Range(pos(start), pos(end)))))
    by_pos = {(h.position.line, h.position.character): h.label for h in hints}
    line, col = position_of(TINY, "q1 be rope")
    assert by_pos[(line, col + 2)] == ": rows×64"
    assert all(start[0] <= h.position.line <= end[0] for h in hints)
    assert len(hints) == LAYER_1.count("Let ")  # every Let of layer 1 binds a name with a known shape


async def test_inlay_hints_keep_an_aligned_be_column_aligned(editor, client):
    import re

    # Layer 1 written with its `be` lined up in one column (the names padded with spaces).
    head, rest = TINY.split("## Layer 1", 1)
    body, tail = rest.split("## Layer 2", 1)
    body = re.sub(r"^Let (\w+) be ", lambda m: f"Let {m.group(1):<6} be ", body, flags=re.M)
    text = head + "## Layer 1" + body + "## Layer 2" + tail
    uri = editor.open(text)
    await editor.analysed(uri)
    start, end = position_of(text, "## Layer 1"), position_of(text, "## Layer 2")
    hints = await request(client.text_document_inlay_hint_async(lsp.InlayHintParams(doc(uri), lsp.Range(pos(start), pos(end)))))
    lines = text.split("\n")
    shown = {}
    for h in hints:
        line = lines[h.position.line]
        be = line.index(" be ", h.position.character) + 1
        # Where `be` stands once the hint is drawn: its column plus the hint's width (every hint is padded alike).
        shown[h.position.line] = be + len(h.label)
    lets = [i for i in range(start[0], end[0]) if lines[i].startswith("Let ")]
    assert sorted(shown) == lets  # every Let of the column has a hint (a blank one where the shape is unknown)
    assert len(set(shown.values())) == 1, shown
    assert {h.label.rstrip() for h in hints} >= {": rows×64", ": 64"}
    # In the same document, an unaligned layer's hints are not padded.
    l2, l3 = position_of(text, "## Layer 2"), position_of(text, "## Layer 3")
    plain = await request(client.text_document_inlay_hint_async(lsp.InlayHintParams(doc(uri), lsp.Range(pos(l2), pos(l3)))))
    assert all(h.label == h.label.rstrip() for h in plain) and plain


async def test_hover_explains_the_operations_gemma_2_phi_3_and_starcoder2_are_written_with(editor, client):
    from repo import example

    for name, needle, after, says in (
            ("small-gemma2", "soft cap", "Let capped be", "C·tanh(x/C)"),
            ("small-phi3", "columns", "Let qp0", "one part of a fused product"),
            ("small-starcoder2", "layernorm", "Let xn0", "Layer norm per row")):
        text = example(name)
        uri = editor.open(text)
        await editor.analysed(uri)
        h = await hover_at(client, uri, position_of(text, needle, after=after))
        assert h is not None and says in h.contents.value, (name, h)


async def test_hover_on_experts_names_the_quotient_gate_and_the_option_it_needs(editor, client):
    from repo import example

    text = example("qwen3-next-80b-a3b")
    uri = editor.open(text)
    await editor.analysed(uri)
    h = await hover_at(client, uri, position_of(text, "experts", after="Let fo0"))
    assert "- `, quotient gate` (with `shared gate`) — the shared gate's σ(g) computed as silu(g)/g" in h.contents.value
