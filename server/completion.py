"""Completion: operations (as snippets with their slots) and, after a comma inside an operation, its option words;
the names bound so far in the program; the ``## Model`` constants; the words of a declaration."""

from __future__ import annotations

import re

from lsprotocol import types as lsp

from streamed.analysis.incremental import spot
from streamed.analysis.text import offset_at
from streamed.lang import ops as ops_table
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


def completions(snap: Snapshot, line: int, character: int) -> lsp.CompletionList:
    a = snap.analysis
    text = a.text
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
