"""Completion, quick fixes, rename and formatting, end to end."""

import pytest
from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcException

from lsphelp import DIVERGENT, TINY, doc, pos, position_of, request

pytestmark = pytest.mark.asyncio(loop_scope="module")


def apply(text: str, edits) -> str:
    """Apply LSP text edits (non-overlapping) to ``text``."""
    lines = text.split("\n")

    def off(p):
        return sum(len(l) + 1 for l in lines[:p.line]) + p.character

    for e in sorted(edits, key=lambda e: off(e.range.start), reverse=True):
        text = text[:off(e.range.start)] + e.new_text + text[off(e.range.end):]
    return text


async def send_all(editor, uri, text, new):
    lines = text.split("\n")
    editor.replace(uri, (0, 0), (len(lines), 0), new)
    return await editor.analysed(uri)


async def completions_after(editor, client, text: str, needle: str, after: str | None = None) -> dict:
    """The completion items, by label, offered just after the first ``needle`` (after ``after``) of ``text``."""
    uri = editor.open(text)
    await editor.analysed(uri)
    line, col = position_of(text, needle, after=after)
    got = await request(client.text_document_completion_async(lsp.CompletionParams(doc(uri), pos((line, col + len(needle))))))
    return {i.label: i for i in got.items}


async def test_completion_offers_operations_names_in_scope_and_constants(editor, client):
    labels = await completions_after(editor, client, TINY, "Let h1 be ")
    assert "attention" in labels and "latent attention" in labels and "rmsnorm" in labels
    assert labels["rmsnorm"].insert_text.startswith("rmsnorm of ${1:X} with ${2:G}")
    assert "xn1" in labels and "a1" in labels and "h1" not in labels and "hn1" not in labels
    assert "ffn" in labels and labels["ffn"].kind == lsp.CompletionItemKind.Constant


async def test_completion_after_a_pasted_megabyte_without_a_full_stop_answers_at_once(editor, client):
    import time

    text = TINY.replace("Let h1 be ", "Let h1 be " + "x" * 1_000_000 + " ", 1)
    uri = editor.open(text)
    await editor.analysed(uri)
    line, col = position_of(text, "Let h1 be ")
    start = time.perf_counter()
    got = await request(client.text_document_completion_async(
        lsp.CompletionParams(doc(uri), pos((line, col + len("Let h1 be ") + 1_000_001)))))
    assert time.perf_counter() - start < 2.0
    assert any(i.label == "rmsnorm" for i in got.items)


async def test_completion_after_a_comma_offers_the_operations_options(editor, client):
    text = TINY.replace("Let a1 be attention of q1 over Kc1 and Vc1 at pos, heads 4 sharing 2.",
                        "Let a1 be attention of q1 over Kc1 and Vc1 at pos, heads 4 sharing 2, ")
    uri = editor.open(text)
    await editor.analysed(uri)
    line, col = position_of(text, "sharing 2, ")
    got = await request(client.text_document_completion_async(lsp.CompletionParams(doc(uri), pos((line, col + len("sharing 2, "))))))
    labels = {i.label for i in got.items}
    assert {"window #W", "chunks of #C", "scale #F", "sinks $S"} <= labels
    assert "rmsnorm" not in labels


async def test_the_quick_fix_makes_a_diverging_layer_one_program_with_its_representative(editor, client):
    uri = editor.open(DIVERGENT)
    await editor.analysed(uri)
    w = next(d for d in editor.diagnostics(uri) if d.code == "divergence")
    actions = await request(client.text_document_code_action_async(lsp.CodeActionParams(
        doc(uri), w.range, lsp.CodeActionContext(diagnostics=[w]))))
    fix = next(a for a in actions if a.title == "make layer 4 one program with layer 0")
    edits = fix.edit.document_changes[0].edits
    assert [e.new_text for e in edits] == ["Let xn4 be rmsnorm of xo3 with g4, epsilon 0.00001."]
    fixed = apply(DIVERGENT, edits)
    done = await send_all(editor, uri, DIVERGENT, fixed)
    assert done.kinds == 1
    assert editor.diagnostics(uri) == []


async def test_the_quick_fix_for_an_unknown_operation_is_the_nearest_spelling(editor, client):
    text = TINY.replace("Let hn2 be rmsnorm of", "Let hn2 be rmsnrom of")
    uri = editor.open(text)
    await editor.analysed(uri)
    err = next(d for d in editor.diagnostics(uri) if "rmsnrom" in d.message)
    actions = await request(client.text_document_code_action_async(lsp.CodeActionParams(
        doc(uri), err.range, lsp.CodeActionContext(diagnostics=[err]))))
    fix = next(a for a in actions if a.title == "change to `rmsnorm`")
    await send_all(editor, uri, text, apply(text, fix.edit.document_changes[0].edits))
    assert editor.diagnostics(uri) == []


def _layers(text: str) -> list[str]:
    return [l for l in text.split("\n") if l.startswith("## Layer")]


async def test_in_the_last_layer_a_refactoring_adds_the_next_layer_like_it_and_the_head_reads_it(editor, client):
    from streamed import analyze

    uri = editor.open(TINY)
    await editor.analysed(uri)
    inside = position_of(TINY, "Let h3 be")
    actions = await request(client.text_document_code_action_async(lsp.CodeActionParams(
        doc(uri), lsp.Range(pos(inside), pos(inside)), lsp.CodeActionContext(diagnostics=[]))))
    add = next(a for a in actions if a.title == "add layer 4, a copy of layer 3 renumbered")
    assert add.kind == lsp.CodeActionKind.Refactor
    grown = apply(TINY, add.edit.document_changes[0].edits)
    assert _layers(grown) == _layers(TINY) + ["## Layer 4"]
    # Layer 4 is layer 3 with every name it binds one layer on (an independent spelling of the rule: the digits of
    # the layer's own names, the input `xo2` → `xo3`), and the head reads `xo4`.
    l3 = TINY.split("## Layer 3", 1)[1].split("## Head")[0].strip()
    l4 = grown.split("## Layer 4", 1)[1].split("## Head")[0].strip()
    import re

    assert l4 == re.sub(r"\b([A-Za-z]+)3\b", r"\g<1>4", l3).replace("xo2", "xo3")
    assert "Let xo4 be an input of rows by d." in grown.split("## Head")[1]
    done = await send_all(editor, uri, TINY, grown)
    assert (done.layers, done.kinds) == (5, 1) and editor.diagnostics(uri) == []
    assert analyze(grown).kinds[0].layers == (0, 1, 2, 3, 4)
    # Elsewhere in the document it is not offered.
    early = position_of(grown, "Let h1 be")
    others = await request(client.text_document_code_action_async(lsp.CodeActionParams(
        doc(uri), lsp.Range(pos(early), pos(early)), lsp.CodeActionContext(diagnostics=[]))))
    assert not [a for a in others or [] if a.title.startswith("add layer")]


@pytest.mark.parametrize("typed", ["", "lay", "## L"])
async def test_a_completion_after_the_last_layer_is_the_next_layer_renumbered(editor, client, typed):
    from streamed import analyze

    line = position_of(TINY, "## Head")[0] - 1  # the blank line between the last layer and the head
    assert TINY.split("\n")[line] == ""
    text = "\n".join(l + typed if i == line else l for i, l in enumerate(TINY.split("\n")))
    uri = editor.open(text, f"{editor.test}-{len(typed)}.lgm")
    await editor.analysed(uri)
    got = await request(client.text_document_completion_async(lsp.CompletionParams(doc(uri), pos((line, len(typed))))))
    (item,) = got.items
    assert item.label == "## Layer 4" and item.detail == "a copy of layer 3, renumbered"
    grown = apply(text, [item.text_edit, *(item.additional_text_edits or [])])
    assert _layers(grown) == _layers(TINY) + ["## Layer 4"]
    a = analyze(grown)
    assert a.errors == [] and [k.layers for k in a.kinds] == [(0, 1, 2, 3, 4)]
    assert "\n\n## Layer 4\n" in grown and "Return xo4.\n\n## Head" in grown


async def test_inside_a_layer_completion_offers_no_new_layer(editor, client):
    uri = editor.open(TINY)
    await editor.analysed(uri)
    line, col = position_of(TINY, "Let h1 be ")
    got = await request(client.text_document_completion_async(lsp.CompletionParams(doc(uri), pos((line, 0)))))
    assert not [i for i in got.items if i.label.startswith("## Layer")]
    # … nor on a blank line inside the last layer.
    line = position_of(TINY, "Let h3 be")[0]
    text = "\n".join(l if i != line else "\n" + l for i, l in enumerate(TINY.split("\n")))
    uri = editor.open(text, f"{editor.test}-blank.lgm")
    await editor.analysed(uri)
    got = await request(client.text_document_completion_async(lsp.CompletionParams(doc(uri), pos((line, 0)))))
    assert not [i for i in got.items if i.label.startswith("## Layer")]


async def test_rename_changes_a_name_within_its_layer_only(editor, client):
    uri = editor.open(TINY)
    await editor.analysed(uri)
    at = pos(position_of(TINY, "hn1", after="Let f1 be"))
    prep = await request(client.text_document_prepare_rename_async(lsp.PrepareRenameParams(doc(uri), at)))
    assert prep.placeholder == "hn1"
    edit = await request(client.text_document_rename_async(lsp.RenameParams(doc(uri), at, "norm1")))
    edits = edit.document_changes[0].edits
    assert len(edits) == 3  # bound once, read twice
    renamed = apply(TINY, edits)
    assert "hn1" not in renamed and renamed.count("norm1") == 3 and "hn2" in renamed
    done = await send_all(editor, uri, TINY, renamed)
    assert done.kinds == 1 and editor.diagnostics(uri) == []


@pytest.mark.parametrize("new, says", [("Let", "word of the language"), ("2x", "is not a name"),
                                       ("ffn", "constant"), ("h1", "already bound in layer 1")])
async def test_rename_to_something_that_is_not_a_free_name_is_refused_with_a_reason(editor, client, new, says):
    uri = editor.open(TINY)
    await editor.analysed(uri)
    at = pos(position_of(TINY, "hn1", after="Let f1 be"))
    with pytest.raises(JsonRpcException, match=says):
        await request(client.text_document_rename_async(lsp.RenameParams(doc(uri), at, new)))


@pytest.mark.parametrize("where", ["Let d be 64.", "Let g2 be a weight of d."])
async def test_rename_of_a_model_constant_renames_it_everywhere_it_is_used(editor, client, where):
    import re

    uri = editor.open(TINY)
    await editor.analysed(uri)
    line, col = position_of(TINY, where)
    at = pos((line, col + where.index(" d") + 1))
    prep = await request(client.text_document_prepare_rename_async(lsp.PrepareRenameParams(doc(uri), at)))
    assert prep.placeholder == "d"
    edit = await request(client.text_document_rename_async(lsp.RenameParams(doc(uri), at, "width")))
    renamed = apply(TINY, edit.document_changes[0].edits)
    # Every `d` of the program text was the constant (its declaration and each shape that reads it); comments are
    # the author's prose and stay as written.
    code = lambda text: "\n".join(l.split("--")[0] for l in text.split("\n"))  # noqa: E731
    assert len(edit.document_changes[0].edits) == len(re.findall(r"\bd\b", code(TINY)))
    assert not re.search(r"\bd\b", code(renamed)) and "Let width be 64." in renamed and "a weight of width." in renamed
    done = await send_all(editor, uri, TINY, renamed)
    assert done.kinds == 1 and editor.diagnostics(uri) == []


async def test_rename_of_a_constant_to_a_name_a_program_binds_is_refused(editor, client):
    uri = editor.open(TINY)
    await editor.analysed(uri)
    line, col = position_of(TINY, "Let d be 64.")
    with pytest.raises(JsonRpcException, match="`pos` is already bound in layer 0, which uses `d`"):
        await request(client.text_document_rename_async(lsp.RenameParams(doc(uri), pos((line, col + 4)), "pos")))


async def test_rename_on_a_word_of_the_language_is_refused(editor, client):
    uri = editor.open(TINY)
    await editor.analysed(uri)
    with pytest.raises(JsonRpcException, match="only a name bound by `Let`"):
        await request(client.text_document_prepare_rename_async(lsp.PrepareRenameParams(doc(uri), pos(position_of(TINY, "rmsnorm", after="## Layer 1")))))


async def test_formatting_normalises_statement_spacing_and_keeps_the_program(editor, client):
    messy = TINY.replace("Let h1 be xo0 plus a1 times Wo1.", "Let   h1 be xo0  plus a1 times Wo1 .   ").replace(
        "Let a1 be attention of q1 over Kc1 and Vc1 at pos, heads 4 sharing 2.",
        "Let a1 be attention of q1 over Kc1 and Vc1 at pos , heads 4 sharing 2.  -- grouped")
    uri = editor.open(messy)
    await editor.analysed(uri)
    edits = await request(client.text_document_formatting_async(lsp.DocumentFormattingParams(doc(uri), lsp.FormattingOptions(2, True))))
    formatted = apply(messy, edits)
    assert formatted == TINY.replace("heads 4 sharing 2.\nLet h1", "heads 4 sharing 2.  -- grouped\nLet h1")
    assert len(edits) == 2


async def test_formatting_aligns_every_be_of_a_program_written_aligned(editor, client):
    # Two bindings share a padded column: the layer is written aligned, so every `be` of it goes one space past its
    # longest binder (`Rcos1`), as `streamed author` writes; the other layers are left as they are.
    aligned = TINY.replace("Let g1 be a weight of d.", "Let g1    be a weight of  d.").replace("Let Wq1 be", "Let Wq1   be")
    uri = editor.open(aligned)
    await editor.analysed(uri)
    edits = await request(client.text_document_formatting_async(lsp.DocumentFormattingParams(doc(uri), lsp.FormattingOptions(2, True))))
    layer1 = apply(aligned, edits).split("## Layer 1\n")[1].split("\n\n")[0].split("\n")
    lets = [l for l in layer1 if l.startswith("Let ")]
    assert lets and all(l.index(" be ") == len("Let Rcos1") for l in lets)
    assert "Let g1    be a weight of d." in lets and apply(aligned, edits).split("## Layer 1")[0] == aligned.split("## Layer 1")[0]


async def test_formatting_closes_up_a_lone_padded_be(editor, client):
    padded = TINY.replace("Let h1 be xo0 plus", "Let h1     be xo0 plus")
    uri = editor.open(padded)
    await editor.analysed(uri)
    edits = await request(client.text_document_formatting_async(lsp.DocumentFormattingParams(doc(uri), lsp.FormattingOptions(2, True))))
    assert apply(padded, edits) == TINY


async def test_formatting_leaves_an_authored_program_as_written(editor, client):
    from lsphelp import ROOT

    authored = (ROOT / "examples" / "qwen3.8.lgm").read_text()
    uri = editor.open(authored)
    await editor.analysed(uri)
    edits = await request(client.text_document_formatting_async(lsp.DocumentFormattingParams(doc(uri), lsp.FormattingOptions(2, True))))
    assert edits in ([], None) or apply(authored, edits) == authored


async def test_completion_offers_the_new_operations_and_attention_s_soft_cap(editor, client):
    labels = await completions_after(editor, client, TINY, "Let h1 be ")
    assert {"layernorm", "soft cap", "columns"} <= set(labels)
    assert labels["columns"].insert_text == "columns ${1:A} to ${2:B} of ${3:X}"
    typing = TINY.replace("at pos, heads 4 sharing 2.", "at pos, heads 4 sharing 2, ", 2)
    assert "soft cap #L" in await completions_after(editor, client, typing, "sharing 2, ", after="Let a1 be attention")
