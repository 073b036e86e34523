"""The lexer's ranges and the parser's sentence-level recovery."""

from __future__ import annotations


import pytest

from streamed.lang import parse, tokens
from streamed.lang.lexer import lex
from streamed.lang.limits import MAX_NESTING
from streamed.lang.syntax import Binary, Call, Declaration, Let, SectionKind, Set

from repo import EXAMPLES

EXAMPLE = EXAMPLES / "tiny-llama.lgm"


def test_tokens_are_runs_of_word_characters_and_single_other_characters():
    assert tokens("Let q0 be (xn0 times Wq0). -- a comment") == ["Let", "q0", "be", "(", "xn0", "times", "Wq0", ")", "."]
    assert tokens("scaled by 0.125.") == ["scaled", "by", "0", ".", "125", "."]


def test_every_token_carries_its_utf16_column_and_byte_offset():
    text = "é😀 Let x0\nbe 𝔸 y."
    data = text.encode("utf-8")
    for line in lex(text):
        units = line.text.encode("utf-16-le")
        for t in line.tokens:
            assert data[t.start_offset:t.end_offset].decode() == t.text
            assert units[2 * t.start_character:2 * t.end_character].decode("utf-16-le") == t.text
    first = lex(text)[0].tokens
    assert [t.start_character for t in first] == [0, 1, 4, 8]  # the emoji is two UTF-16 units


def test_comments_belong_to_no_program():
    doc = parse("# T\n## Layer 0\nLet x be an input of rows by 4. -- Let y be x.\nReturn x.\n")
    assert [t.text for t in doc.layers[0].tokens].count("Let") == 1


def test_expressions_follow_the_documented_precedence():
    doc = parse("# T\n## Layer 0\nLet h0 be x plus a0 times Wo0.\nLet f0 be silu of g0 multiplied by u0.\n")
    h, f = doc.layers[0].statements
    assert isinstance(h.value, Binary) and h.value.op == "plus" and h.value.right.op == "times"
    assert f.value.op == "multiplied" and isinstance(f.value.left, Call) and f.value.left.op == "silu"


def test_operations_read_their_slots_and_options():
    doc = parse("# T\n## Layer 0\nLet a0 be attention of q0 over Kc0 and Vc0 at pos, heads 8 sharing 2, window 512, scale 0.0625.\n")
    call = doc.layers[0].statements[0].value
    assert call.op == "attention"
    assert [s for s, _ in call.args] == ["Q", "K", "V", "P"]
    assert {s: n.value for s, n in call.numbers} == {"H": 8, "G": 2, "W": 512, "F": 0.0625}
    assert call.options == ("heads", "window", "scale")


def test_declarations_read_role_storage_shape_and_fill():
    doc = parse("# T\n## Layer 0\nLet Wq0 be a q8 weight of d by 64.\nLet Rcos1 be a table of ctx by 8, cosines of base 10000.\nLet pos be a position.\n")
    w, t, p = (s.value for s in doc.layers[0].statements)
    assert isinstance(w, Declaration) and w.q8 and w.role == "weight" and [d.text for d in w.dims] == ["d", "64"]
    assert t.fill.op == "cosines" and t.fill.number("B").value == 10000
    assert p.role == "position"


def test_every_node_carries_the_range_of_its_text():
    text = "# T\n## Layer 0\nSet row pos of Kc0 to xn0 times Wk0.\n"
    st = parse(text).layers[0].statements[0]
    assert isinstance(st, Set)
    data = text.encode()
    assert data[st.value.range.start.offset:st.value.range.end.offset] == b"xn0 times Wk0"
    assert data[st.range.start.offset:st.range.end.offset] == b"Set row pos of Kc0 to xn0 times Wk0."


def test_a_malformed_statement_yields_one_diagnostic_and_the_rest_is_still_read():
    text = "# T\n## Layer 0\nLet a be b plus.\nLet c be (d times.\nLet e be f times g.\nSet h.\nReturn e.\n"
    doc = parse(text)
    lines = sorted(d.range.start.line + 1 for d in doc.diagnostics)
    assert lines == [3, 4, 6]
    statements = doc.layers[0].statements
    assert [type(s).__name__ for s in statements] == ["Let", "Return"]
    assert statements[0].name.text == "e"


def test_a_statement_without_its_full_stop_is_reported_where_it_is():
    doc = parse("# T\n## Layer 0\nLet a be b\n\n## Head\nReturn a.\n")
    (d,) = doc.diagnostics
    assert d.range.start.line == 2 and "does not end with `.`" in d.message


def test_an_unknown_operation_suggests_the_nearest_spelling():
    doc = parse("# T\n## Layer 0\nLet xn0 be rsmnorm of x with g0.\n")
    (d,) = doc.diagnostics
    assert "unknown operation `rsmnorm`" in d.message and "did you mean `rmsnorm`?" in d.message
    assert (d.range.start.character, d.range.end.character) == (11, 18)


@pytest.mark.parametrize("written, meant", [("(xn0 timse Wq0)", "times"), ("h0 plsu a0", "plus"),
                                             ("a0 multipled by b0", "multiplied")])
def test_a_mistyped_operator_is_named_with_the_word_meant(written, meant):
    text = f"# T\n## Layer 0\nLet q0 be {written}.\n"
    (d,) = parse(text).diagnostics
    typo = written.strip("(").split()[1]
    assert d.message == f"`{typo}` is not a word of the language; did you mean `{meant}`?"
    assert (d.range.start.character, d.range.end.character) == (text.split("\n")[2].index(typo), text.split("\n")[2].index(typo) + len(typo))
    assert d.data == {"replacement": meant}


def test_an_unknown_option_names_the_operations_options():
    doc = parse("# T\n## Layer 0\nLet a0 be attention of q over K and V at p, heads 4 sharing 2, windwo 5.\n")
    (d,) = doc.diagnostics
    assert "`windwo` is not an option of `attention`" in d.message and "did you mean `window`?" in d.message


def test_an_option_that_says_how_another_computes_is_an_error_without_it_placed_on_the_call():
    call = "experts of x with router R, top 2, using G, U and D, shared G2, U2 and D2, quotient gate"
    text = f"# T\n## Layer 0\nLet e0 be {call}.\n"
    (d,) = parse(text).diagnostics
    assert d.message == "`quotient gate` means nothing without `shared gate`: it says how that option computes"
    assert (d.range.start.line, d.range.start.character, d.range.end.character) == (2, 10, 10 + len(call))
    gated = parse(f"# T\n## Layer 0\nLet e0 be {call.replace('quotient', 'shared gate S, quotient')}.\n")
    assert gated.diagnostics == ()
    (let,) = gated.layers[0].statements
    assert let.value.options[-2:] == ("shared gate", "quotient gate")


def test_a_layer_note_after_a_colon_is_not_part_of_the_program():
    doc = parse("# T\n## Layer 3: global attention\nReturn x.\n")
    layer = doc.layers[0]
    assert layer.index == 3 and layer.note == "global attention"
    assert [t.text for t in layer.tokens] == ["Return", "x", "."]


def test_the_example_parses_into_its_sections_without_a_diagnostic():
    doc = parse(EXAMPLE.read_text())
    assert doc.diagnostics == ()
    kinds = [s.kind for s in doc.sections]
    assert kinds[:4] == [SectionKind.TITLE, SectionKind.MODEL, SectionKind.CHECKPOINT, SectionKind.EMBED]
    assert kinds[-1] is SectionKind.HEAD and [s.index for s in doc.layers] == list(range(len(doc.layers)))
    assert doc.constants["d"] > 0
    assert any(e.pattern == "Wq{l}" for e in doc.checkpoint)


def test_numbers_join_their_decimal_point_and_exponent():
    doc = parse("# T\n## Model\nLet eps be 1e-6.\nLet s be 0.125.\nLet n be 3.\n")
    assert doc.constants == {"eps": 1e-6, "s": 0.125, "n": 3}


def test_checkpoint_entries_read_their_tensor_and_slices():
    doc = parse('# T\n## Checkpoint\nWqg{l} is "blk.{l}.attn_q.weight", columns 64 to 128 of every 128.\nWkr{l} is "x", rows 0 to 32.\nbad line\n')
    first = doc.checkpoint[0]
    assert (first.pattern, first.tensor, first.columns) == ("Wqg{l}", "blk.{l}.attn_q.weight", (64, 128, 128))
    assert len(doc.diagnostics) == 2  # `{l}` on one side only, and a line that is no entry


# ---- input the parser must not trust: nesting, byte-order marks, old line ends -------------------------------------


def _only(doc) -> str:
    (d,) = doc.diagnostics
    return d.message


def test_ten_thousand_nested_parentheses_are_one_diagnostic_naming_the_limit():
    text = "# T\n## Layer 0\nLet y be " + "(" * 10_000 + "b" + ")" * 10_000 + ".\nReturn y.\n"
    doc = parse(text)
    assert f"at most {MAX_NESTING} levels" in _only(doc)
    assert [type(st).__name__ for st in doc.layers[0].statements] == ["Return"]  # the rest is still read


def test_a_chain_of_operators_deeper_than_the_limit_is_one_diagnostic():
    doc = parse("# T\n## Layer 0\nLet y be b" + " plus b" * 10_000 + ".\n")
    assert f"at most {MAX_NESTING} levels" in _only(doc)


def test_operations_applied_deeper_than_the_limit_are_one_diagnostic():
    doc = parse("# T\n## Layer 0\nLet y be " + "silu of " * 5_000 + "b.\n")
    assert f"at most {MAX_NESTING} levels" in _only(doc)


def test_an_expression_as_deep_as_the_limit_is_read():
    doc = parse("# T\n## Layer 0\nLet y be " + "(" * MAX_NESTING + "b" + ")" * MAX_NESTING + " plus b.\n")
    assert doc.diagnostics == () and doc.layers[0].statements[0].value.op == "plus"


def test_a_byte_order_mark_opening_the_document_is_not_a_token():
    plain = EXAMPLE.read_text()
    marked = "\ufeff" + plain
    doc = parse(marked.encode("utf-8"))
    assert doc.title == parse(plain).title and doc.diagnostics == ()
    # Ranges address the text as given: the first line's columns count the mark, later lines are as they were.
    heading = doc.sections[0].heading
    assert (heading.start.character, heading.start.offset) == (1, 3)
    assert doc.layers[0].tokens == parse(plain).layers[0].tokens[:0] + tuple(
        t._replace(start_offset=t.start_offset + 3, end_offset=t.end_offset + 3) for t in parse(plain).layers[0].tokens)


def test_carriage_returns_alone_end_lines_as_newlines_do():
    plain = EXAMPLE.read_text()
    old_mac = plain.replace("\n", "\r")
    a, b = parse(plain), parse(old_mac)
    assert b.diagnostics == () and [s.title for s in b.sections] == [s.title for s in a.sections]
    # One character either way: every range is the same.
    assert [s.range for s in b.sections] == [s.range for s in a.sections]
    assert [st.range for st in b.layers[2].statements] == [st.range for st in a.layers[2].statements]


def test_crlf_line_ends_keep_lines_and_columns():
    plain = EXAMPLE.read_text()
    a, b = parse(plain), parse(plain.replace("\n", "\r\n"))
    assert b.diagnostics == ()
    strip = lambda r: (r.start.line, r.start.character, r.end.line, r.end.character)  # noqa: E731
    assert [strip(t.range) for t in b.layers[1].tokens] == [strip(t.range) for t in a.layers[1].tokens]


# ---- a layer of a shape already parsed is renamed, not parsed ------------------------------------------------------


def test_a_layer_whose_text_is_another_layers_up_to_names_shares_its_parse_and_equals_its_own_parse():
    doc, alone = parse(EXAMPLE.read_text()), parse(EXAMPLE.read_text(), share=False)
    layers = doc.layers
    assert layers[0].shared_from is None and all(s.shared_from is layers[0] for s in layers[1:])
    assert [s.statements for s in layers] == [s.statements for s in alone.layers]


def test_a_layer_binding_a_word_of_the_language_is_parsed_on_its_own():
    text = EXAMPLE.read_text()
    a = text.index("## Layer 2")
    b = text.index("## ", a + 3)
    clash = text[:a] + text[a:b].replace("xn2", "silu") + text[b:]
    doc = parse(clash)
    assert doc.layers[2].shared_from is None
    assert any("`silu` is a word of the language" in d.message for d in doc.diagnostics)


# ---- a layer of a frame already parsed: one text up to names and numbers ---------------------------------------------


def _layers_but_for_numbers(values: list[str], option: str = "epsilon") -> str:
    """Layers whose texts differ only in their names and in the number written after ``option``."""
    from builders import document

    return document([dict(eps=v) for v in values]) if option == "epsilon" else document([dict(window=v) for v in values])


def test_a_layer_differing_only_in_its_numbers_takes_its_frames_tree_and_equals_its_own_parse():
    text = _layers_but_for_numbers(["1e-5", "2e-5", "0.00003", "4E-5", "1e-5", "15e-7"])
    doc, alone = parse(text), parse(text, share=False)
    layers = doc.layers
    # `0.00003` is written in another form (digits, a point, digits), so its layer is parsed on its own.
    assert [s.shared_from for s in layers] == [None, layers[0], None, layers[0], layers[0], layers[0]]
    assert [s.statements for s in layers] == [s.statements for s in alone.layers]
    # Each reads its own number: the value of `epsilon` in its first norm.
    eps = [next(st.value.number("E") for st in s.statements if isinstance(st, Let) and isinstance(st.value, Call)
                and st.value.op == "rmsnorm") for s in layers]
    assert [(e.text, e.value) for e in eps] == [("1e-5", 1e-5), ("2e-5", 2e-5), ("0.00003", 3e-5), ("4E-5", 4e-5),
                                                ("1e-5", 1e-5), ("15e-7", 15e-7)]
    assert doc.diagnostics == alone.diagnostics == ()


def test_a_number_the_parser_refuses_is_not_read_through_another_layers_tree():
    # `1e+5` and `1e+99` are one frame, but the second is past the largest number a document may write.
    text = _layers_but_for_numbers(["1e+5", "2e+5", "1e+99"])
    doc, alone = parse(text), parse(text, share=False)
    assert doc.layers[1].shared_from is doc.layers[0] and doc.layers[2].shared_from is None
    assert doc.diagnostics == alone.diagnostics and len(doc.diagnostics) == 1
    assert "`1e+99` is too large a number" in doc.diagnostics[0].message


def test_a_number_written_in_another_form_is_another_frame():
    # `15` is a run of digits, `1e5` digits and an exponent: the number rule reads them otherwise, so the layers are
    # parsed apart — and both as their own texts say.
    text = _layers_but_for_numbers(["15", "1e5", "16"])
    doc, alone = parse(text), parse(text, share=False)
    assert doc.layers[1].shared_from is None and doc.layers[2].shared_from is doc.layers[0]
    assert [s.statements for s in doc.layers] == [s.statements for s in alone.layers]


def test_a_layer_read_through_another_is_placed_token_for_token_as_its_own_text_is():
    from builders import document

    text = document([dict(eps=f"{l + 1}e-6", window=512 + l) for l in range(12)])
    text = "\n".join(line + ("  -- a note" if line.startswith("Let h") else "") for line in text.split("\n"))
    doc, alone = parse(text), parse(text, share=False)
    assert sum(s.shared_from is not None for s in doc.layers) == 11
    for a, b in zip(doc.layers, alone.layers):
        assert (a.table.starts, a.table.ends, a.table.comments) == (b.table.starts, b.table.ends, b.table.comments)
        assert a.tokens == b.tokens


def test_a_layer_read_from_another_layers_parse_places_each_token_where_its_text_is():
    """A layer parsed from another's tree (its numbers and names spelled otherwise) answers a token's range and
    whether two tokens touch without placing all its tokens — each range holding the token's text as written."""
    from builders import document

    text = document([dict(eps="1e-5"), dict(eps="123e-17"), dict(eps="45e-7")]).replace("## Layer 1", "## Layer 1: é")
    data = text.encode()
    for section in [s for s in parse(text).sections if s.index in (1, 2)]:
        t = section.table
        assert section.shared_from is not None and t._starts is None  # read from layer 0's parse, not yet placed
        for i in range(len(t.texts)):
            r = t.range(i, i)
            assert data[r.start.offset:r.end.offset].decode() == t.texts[i]
            assert text.splitlines()[r.start.line][r.start.character:r.end.character] == t.texts[i]
        e = t.texts.index("epsilon") + 1
        assert [t.adjacent(k) for k in range(e - 1, e + 2)] == [False, True, True]  # `epsilon 123e-17`, as written
        assert t._starts is None


def _broken_alike(layers: int, *errors: tuple[str, str]) -> str:
    """``layers`` layers alike but for their names, each with the same errors (``(pattern, replacement)``: the first
    match in each layer's text replaced, ``re.sub``) — one broken shape."""
    import re

    from builders import document

    parts = document(layers).split("\n## ")
    for k, p in enumerate(parts):
        if p.startswith("Layer "):
            for old, new in errors:
                p = re.sub(old, new, p, count=1)
            parts[k] = p
    return "\n## ".join(parts)


def _counting_statements(monkeypatch) -> list[int]:
    """Counts every statement the parser parses (``parser._statement``: a sentence read token by token)."""
    import streamed.lang.parser as parser

    count = [0]
    real = parser._statement

    def counted(s, index):
        count[0] += 1
        return real(s, index)

    monkeypatch.setattr(parser, "_statement", counted)
    return count


ERRORS = ((" be an input", " bee an input"), (" times ", " timse "), ("rmsnorm of", "rmsnrom of"), ("by d\\.\n", "by d\n"))


def test_layers_broken_alike_have_their_statements_parsed_once_however_many_layers_there_are(monkeypatch):
    """Error recovery costs a parse per broken shape, not per broken layer: a model whose every layer carries the same
    errors (a `Let` misspelt everywhere) parses as many statements at 32 layers as at 4 — each other layer's
    diagnostics are the first's, renamed and placed — and says exactly what parsing every layer on its own says."""
    count = _counting_statements(monkeypatch)
    parsed = []
    for layers in (4, 8, 32):
        text = _broken_alike(layers, *ERRORS)
        count[0] = 0
        doc = parse(text)
        parsed.append(count[0])
        alone = parse(text, share=False)
        assert len(alone.diagnostics) == 3 * layers  # each layer's three (the full stop left out joins two statements)
        assert doc.diagnostics == alone.diagnostics
    assert parsed[0] == parsed[1] == parsed[2]
    assert doc.layers[0].shared_from is None and all(s.shared_from is doc.layers[0] for s in doc.layers[1:])


def test_a_broken_layers_message_that_depends_on_a_names_spelling_is_its_own(monkeypatch):
    """What the parser guesses a misspelt word meant reads a name's spelling, and so does a quotation cut at 40
    characters: those statements are parsed in each layer, so each says its own, while the others are still read
    from the first layer — the statements parsed grow by those alone."""
    count = _counting_statements(monkeypatch)
    spelt = (
        (r"be attention of qr(\d+)", r"be Kc\1 of qr\1"),  # "unknown operation `Kc3`; did you mean …": a guess from a name
        (r"plus a(\d+) times", r"plus a\1"),  # "unexpected `Wo3…`": a name quoted, cut past 40 characters
    )
    parsed = []
    for layers in (4, 8):
        text = _broken_alike(layers, *ERRORS, *spelt).replace("Wo", "W" + "o" * 40)
        count[0] = 0
        doc = parse(text)
        parsed.append(count[0])
        assert doc.diagnostics == parse(text, share=False).diagnostics
        assert len(doc.diagnostics) == 5 * layers
        assert len({d.message for d in doc.diagnostics if "unknown operation `Kc" in d.message}) == layers
        cut = [d.message for d in doc.diagnostics if d.message.startswith("unexpected `Wooo")]
        assert len(cut) == layers and all(m == f"unexpected `W{'o' * 39}…` after the end of the statement" for m in cut)
        assert all(s.shared_from is doc.layers[0] for s in doc.layers[1:])
    assert parsed[1] - parsed[0] == 4 * 2  # two statements in each of the four more layers


def test_an_analysis_of_layers_broken_alike_parses_each_shape_once_and_says_what_the_whole_analysis_says():
    from streamed.analysis.incremental import IncrementalAnalyzer
    from streamed.analysis.whole import analyze

    text = _broken_alike(24, *ERRORS)
    a = IncrementalAnalyzer()
    got = a.analyze(text)
    assert got.diagnostics == analyze(text).diagnostics and len(got.diagnostics) == 3 * 24
    assert a.parsed == 5  # the title, the model, the embed, the head and layer 0: every other layer is layer 0's shape
    # An edit in one layer reads its statements from the others' shape, and moves nothing but the lines after it.
    edited = text.replace("## Layer 7\n", "## Layer 7\n-- a comment\n")
    assert a.analyze(edited).diagnostics == analyze(edited).diagnostics
