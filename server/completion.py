"""Completion: operations (as snippets with their slots) and, after a comma inside an operation, its option words;
the names bound so far in the program; the ``## Model`` constants; the words of a declaration. On a line of its own
after the last layer (blank, or ``##``, ``## Lay``, ``layer`` typed so far): the next layer, a copy of the last one
renumbered, with the head made to read it (``code_actions.next_layer``)."""

from __future__ import annotations

import re

from lsprotocol import types as lsp

from streamed.analysis.incremental import spot
from streamed.analysis.text import offset_at
from streamed.lang import ops as ops_table
from streamed.lang.syntax import SectionKind
from .code_actions import next_layer
from .scheduler import Snapshot

def _snippet(pattern: tuple[str, ...]) -> str:
    out, n = [], 0
    for item in pattern:
        if item[0] in "$#":
            n += 1
            out.append(f"${{{n}:{item[1:]}}}")
        else:
            out.append(item)
    return " ".join(out).replace(" ,", ",")


#: How much of the statement before the cursor completion reads: more than any real statement, and a bound that
#: keeps a pasted megabyte without a full stop from making each keystroke's completion slow.
_CONTEXT = 4096
_WORD_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_"


def _statement_so_far(text: str, line: int, character: int) -> str:
    """The current statement's text up to the cursor: back to the previous full stop or heading (at most
    ``_CONTEXT`` characters)."""
    end = offset_at(text, line, character)
    lo = max(0, end - _CONTEXT)
    start = max(text.rfind(".", lo, end), text.rfind("\n#", lo, end), lo - 1)
    return text[start + 1:end]


def names_in_scope(section, line: int, character: int) -> list[str]:
    """The names bound by the statements before the one the (section-relative) position is in."""
    toks = section.tokens
    before = [i for i, t in enumerate(toks) if (t.range.end.line, t.range.end.character) <= (line, character)]
    current = len(section.spans)
    if before:
        last = before[-1]
        at = section.statement_at(last)
        if at is not None and not (toks[last].text == "." and section.spans[at][1] == last + 1):
            current = at
        elif at is not None:
            current = at + 1
        else:
            current = next((i for i, (a, b) in enumerate(section.spans) if a > last), len(section.spans))
    else:
        current = 0
    from streamed.lang.syntax import Let

    return [st.name.text for st in section.statements[:current] if isinstance(st, Let)]


_LAYER_PREFIX = re.compile(r"\s*(#{0,2}\s*[A-Za-z]*)")


def _new_layer_item(snap: Snapshot, line: int, character: int) -> lsp.CompletionItem | None:
    """The next layer, offered on a line after the last layer's text and before the next section, holding at most
    a heading's or a word's beginning before the cursor."""
    a = snap.analysis
    lines = a.text.split("\n", line + 2)
    if line >= len(lines):
        return None
    typed = lines[line][:character]
    m = _LAYER_PREFIX.fullmatch(typed)
    if m is None or (m.group(1) and not ("## layer".startswith(m.group(1).lower()) or "layer".startswith(m.group(1).lower()))):
        return None
    made = next_layer(snap, line)
    if made is None:
        return None
    layer, last, text, head = made
    if line <= last.end.line:
        return None
    sections = a.document.sections
    i = max(k for k, s in enumerate(sections) if s.kind is SectionKind.LAYER)
    # (a heading being typed on this line is a section of no kind yet: the next section is the first real one)
    after = next((s for s in sections[i + 1:] if s.kind is not SectionKind.UNKNOWN), None)
    if after is not None and line >= a.to_document(after, after.heading).start.line:
        return None
    body = text.lstrip("\r\n")
    if line > 0 and lines[line - 1].strip():
        body = "\n" + body  # a blank line before the heading
    if line + 1 < len(lines) and lines[line + 1].strip():
        body += "\n"  # … and one after the section
    typed_word = m.group(1).strip()
    return lsp.CompletionItem(
        f"## Layer {layer.index}", kind=lsp.CompletionItemKind.Snippet, detail=f"a copy of layer {layer.index - 1}, renumbered",
        documentation=lsp.MarkupContent(lsp.MarkupKind.Markdown, f"```\n{body.strip()}\n```"),
        filter_text=f"## Layer {layer.index}" if typed_word.startswith("#") else f"layer {layer.index}",
        sort_text="0", preselect=True,
        text_edit=lsp.TextEdit(lsp.Range(lsp.Position(line, 0), lsp.Position(line, character)), body),
        insert_text_format=lsp.InsertTextFormat.PlainText, additional_text_edits=head or None)


def completions(snap: Snapshot, line: int, character: int) -> lsp.CompletionList:
    a = snap.analysis
    text = a.text
    layer = _new_layer_item(snap, line, character)
    if layer is not None:
        return lsp.CompletionList(is_incomplete=False, items=[layer])
    before = _statement_so_far(text, line, character)
    items: list[lsp.CompletionItem] = []
    stripped = before.rstrip(_WORD_CHARS).rstrip()  # linear, where a `[…]*$` regex is quadratic on a long run
    words = re.findall(r"[A-Za-z0-9_]+", before)
    if stripped.endswith(","):
        # An option of the operation this statement applies.
        for op in ops_table.OPS:
            if all(w in words for w in op.words if w != "of"):
                for o in op.options:
                    items.append(lsp.CompletionItem(" ".join(o.pattern), kind=lsp.CompletionItemKind.Property, detail=op.name,
                                                    documentation=o.doc or None, insert_text=_snippet(o.pattern),
                                                    insert_text_format=lsp.InsertTextFormat.Snippet))
        if items:
            return lsp.CompletionList(is_incomplete=False, items=items)
    if re.search(r"\bLet\s*$", stripped):  # a binder goes here: the author names it
        return lsp.CompletionList(is_incomplete=False, items=[])
    for op in ops_table.OPS:
        items.append(lsp.CompletionItem(" ".join(op.words[:-1] if op.words[-1] == "of" else op.words), kind=lsp.CompletionItemKind.Function,
                                        detail=" ".join(op.pattern), documentation=op.doc,
                                        insert_text=_snippet(op.pattern), insert_text_format=lsp.InsertTextFormat.Snippet))
    for w in ops_table.BINARY_WORDS:
        items.append(lsp.CompletionItem(w if w not in ("multiplied", "scaled") else f"{w} by", kind=lsp.CompletionItemKind.Operator))
    s = spot(a, line, character)
    if s is not None and s.program is not None:
        for name in names_in_scope(s.section, line - s.base.line, character):
            decl = s.program.decls.get(name)
            items.append(lsp.CompletionItem(name, kind=lsp.CompletionItemKind.Variable,
                                            detail=(f"{'q8 ' if decl and decl.q8 else ''}{decl.role}" if decl else "bound")))
    for name, value in a.programs.constants.items():
        items.append(lsp.CompletionItem(name, kind=lsp.CompletionItemKind.Constant, detail=f"= {value:g}"))
    for w in ("Let", "Set", "Return", "be", "a", "an", "q8", "weight", "input", "state", "table", "token", "position", "rows", "ctx", "by", "of"):
        items.append(lsp.CompletionItem(w, kind=lsp.CompletionItemKind.Keyword))
    return lsp.CompletionList(is_incomplete=False, items=items)
