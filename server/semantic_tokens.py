"""Semantic tokens (full and delta): binders, weights (modifier ``q8``), states, operations, constants, numbers.

Each section's tokens are classified once per section text (cached) in section-relative lines; a request shifts them
by each section's base and encodes them. Deltas are one edit: the common prefix and suffix of the two encodings."""

from __future__ import annotations

from lsprotocol import types as lsp

from streamed.lang import ops as ops_table
from streamed.lang.syntax import SectionKind
from .scheduler import Snapshot

TOKEN_TYPES = ["variable", "parameter", "property", "function", "enumMember", "number", "keyword", "type"]
TOKEN_MODIFIERS = ["declaration", "q8", "readonly"]
LEGEND = lsp.SemanticTokensLegend(token_types=TOKEN_TYPES, token_modifiers=TOKEN_MODIFIERS)
_T = {t: i for i, t in enumerate(TOKEN_TYPES)}
DECLARATION, Q8, READONLY = 1, 2, 4
_OP_WORDS = frozenset(w for o in ops_table.OPS for w in o.words if w != "of") | set(ops_table.BINARY_WORDS)
_ROLES = frozenset(ops_table.ROLES) | {"token", "position"}


def classify(section, program, constants: frozenset) -> list[tuple[int, int, int, int, int]]:
    """``(line, column, length, type, modifiers)`` of each token of a section, lines relative to the section."""
    out = []
    decls = program.decls if program is not None else {}
    bound = set(program.shapes) if program is not None else set()
    toks = section.tokens
    quoted = False  # inside a `## Checkpoint` string: a tensor's name, whose words are not the language's
    for i, t in enumerate(toks):
        w = t.text
        if w == '"':
            quoted = not quoted
            continue
        if quoted:
            continue
        after_let = i > 0 and toks[i - 1].text == "Let"
        if t.is_number:
            typ, mods = "number", 0
        elif not t.is_word:
            continue
        elif w in decls:
            d = decls[w]
            typ = "parameter" if d.role == "weight" else "property" if d.role == "state" else "variable"
            mods = (Q8 if d.q8 else 0) | (DECLARATION if after_let else 0)
        elif w in bound:
            typ, mods = "variable", DECLARATION if after_let else 0
        elif w in constants:
            typ, mods = "enumMember", READONLY | (DECLARATION if after_let else 0)
        elif section.kind is SectionKind.MODEL and after_let:
            typ, mods = "enumMember", READONLY | DECLARATION
        elif w in _OP_WORDS:
            typ, mods = "function", 0
        elif w in _ROLES:
            typ, mods = "type", 0
        elif w in ops_table.KEYWORDS:
            typ, mods = "keyword", 0
        else:
            continue
        r = t.range
        out.append((r.start.line, r.start.character, r.end.character - r.start.character, _T[typ], mods))
    return out


def tokens_of(snap: Snapshot, cache: dict) -> list[int]:
    """The encoded tokens of a snapshot; ``cache`` (section text, constants) → classified rows is pruned to what
    this snapshot used."""
    a = snap.analysis
    constants = frozenset(a.programs.constants)
    used = {}
    rows: list[tuple[int, int, int, int, int]] = []
    for section, base, text in zip(a.document.sections, a.bases, a.chunk_texts):
        key = (text, constants)
        got = cache.get(key)
        if got is None or got[0] is not section:
            got = (section, classify(section, a.program_of(section), constants))
        used[key] = got
        dl = base.line
        rows.extend((l + dl, c, n, t, m) for l, c, n, t, m in got[1])
    data: list[int] = []
    pl = pc = 0
    for l, c, n, t, m in rows:
        data += (l - pl, c - pc if l == pl else c, n, t, m)
        pl, pc = l, c
    cache.clear()
    cache.update(used)
    return data


class TokenHistory:
    """The last encoding sent per document, so a delta request can be answered as one edit."""

    def __init__(self):
        self._last: dict[str, tuple[str, list[int]]] = {}
        self._cache: dict[str, dict] = {}
        self._n = 0

    def full(self, snap: Snapshot) -> lsp.SemanticTokens:
        data = tokens_of(snap, self._cache.setdefault(snap.uri, {}))
        self._n += 1
        rid = f"{snap.generation}.{self._n}"
        self._last[snap.uri] = (rid, data)
        return lsp.SemanticTokens(data=data, result_id=rid)

    def delta(self, snap: Snapshot, previous: str) -> lsp.SemanticTokens | lsp.SemanticTokensDelta:
        last = self._last.get(snap.uri)
        if last is None or last[0] != previous:
            return self.full(snap)
        old = last[1]
        new = tokens_of(snap, self._cache.setdefault(snap.uri, {}))
        self._n += 1
        rid = f"{snap.generation}.{self._n}"
        self._last[snap.uri] = (rid, new)
        p = 0
        while p < len(old) and p < len(new) and old[p] == new[p]:
            p += 1
        s = 0
        while s < len(old) - p and s < len(new) - p and old[-1 - s] == new[-1 - s]:
            s += 1
        edits = [] if old == new else [lsp.SemanticTokensEdit(start=p, delete_count=len(old) - p - s, data=new[p:len(new) - s])]
        return lsp.SemanticTokensDelta(edits=edits, result_id=rid)

    def forget(self, uri: str) -> None:
        self._last.pop(uri, None)
        self._cache.pop(uri, None)
