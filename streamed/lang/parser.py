"""The parser: text to a ``Document`` of sections and statements, recovering after every bad sentence.

Recovery is by sentence: a program section is cut into statements at every terminating ``.`` before anything is
parsed, so a malformed statement yields exactly one diagnostic and the statements after it are parsed as if it were
not there. Nothing here raises on any input: the internal ``_Fail`` never escapes ``parse``.

Invariant: every diagnostic's range lies inside the text, and every node's range covers exactly its tokens.
"""

from __future__ import annotations

import difflib
import math
import re

from . import ops as ops_table
from .limits import MAX_LAYER, document_too_large
from .lexer import Line, Pos, Range, Token, decode, end_of, lex
from .syntax import (
    Binary,
    Call,
    CheckpointEntry,
    Constant,
    Declaration,
    Diagnostic,
    Document,
    Expr,
    Let,
    Name,
    Number,
    Return,
    Section,
    SectionKind,
    Set,
    Severity,
    Statement,
)

_NUMBER = re.compile(r"-?\d+(\.\d+)?([eE][-+]?\d+)?")
_NUMBER_PREFIX = re.compile(r"-?\d*\.?\d*([eE][-+]?\d*)?")
_CHECKPOINT = re.compile(
    r'^\s*(?P<name>[A-Za-z][A-Za-z0-9_]*(\{l\}[A-Za-z0-9_]*)?)\s+is\s+"(?P<tensor>[^"]*)"'
    r"(\s*,\s*columns\s+(?P<c0>\d+)\s+to\s+(?P<c1>\d+)(\s+of\s+every\s+(?P<every>\d+))?)?"
    r"(\s*,\s*rows\s+(?P<r0>\d+)\s+to\s+(?P<r1>\d+))?\s*\.\s*$"
)
_SECTIONS = {
    "model": SectionKind.MODEL,
    "checkpoint": SectionKind.CHECKPOINT,
    "embed": SectionKind.EMBED,
    "head": SectionKind.HEAD,
    "note": SectionKind.NOTE,
    "notes": SectionKind.NOTE,
}
PROGRAM_SECTIONS = (SectionKind.EMBED, SectionKind.LAYER, SectionKind.HEAD)


class _Fail(Exception):
    def __init__(self, range_: Range, message: str, replacement: str | None = None):
        super().__init__(message)
        self.range = range_
        self.message = message
        self.replacement = replacement


def _error(range_: Range, message: str, code: str = "syntax", replacement: str | None = None) -> Diagnostic:
    """An error diagnostic. ``replacement``: the text that would fix it in place of ``range_`` (the nearest
    spelling), carried in ``data`` so an editor offers it as a quick fix without reading the message."""
    return Diagnostic(range_, Severity.ERROR, message, code, data={"replacement": replacement} if replacement else None)


def _quote(t: Token | str) -> str:
    text = t.text if isinstance(t, Token) else t
    return f"`{text[:40]}{'…' if len(text) > 40 else ''}`"


def nearest(word: str, choices) -> str | None:
    """The choice a person most likely meant: the closest spelling, ties going to one that starts alike."""
    best, score = None, 0.6
    for c in choices:
        r = difflib.SequenceMatcher(None, word, c).ratio() + (0.05 if c[:1] == word[:1] else 0.0)
        if r > score:
            best, score = c, r
    return best


# ---- statements --------------------------------------------------------------------------------------------------


class _Statement:
    """A cursor over one statement's tokens (its final ``.`` excluded)."""

    def __init__(self, toks: list[Token], end: Range):
        self.toks = toks
        self.i = 0
        self.end = end  # the range of the terminating ``.``, or of the last token when unterminated

    def peek(self, k: int = 0) -> Token | None:
        j = self.i + k
        return self.toks[j] if j < len(self.toks) else None

    def at(self, *words: str) -> bool:
        return all((t := self.peek(k)) is not None and t.text == w for k, w in enumerate(words))

    def take(self) -> Token:
        t = self.peek()
        if t is None:
            raise _Fail(self.end, "the statement ends too early")
        self.i += 1
        return t

    def here(self) -> Range:
        t = self.peek()
        return t.range if t is not None else self.end

    def expect(self, word: str, context: str) -> Token:
        t = self.peek()
        if t is None or t.text != word:
            got = "the end of the statement" if t is None else _quote(t)
            raise _Fail(self.here(), f"expected `{word}` {context}, found {got}")
        self.i += 1
        return t

    def last(self) -> Token:
        return self.toks[self.i - 1]


def _adjacent(a: Token, b: Token) -> bool:
    return a.end_offset == b.start_offset


def _number(s: _Statement) -> Number | None:
    """A number at the cursor, joining adjacent pieces (``0`` ``.`` ``125``; ``1e`` ``-`` ``6``; ``-`` ``1``)."""
    first = s.peek()
    if first is None:
        return None
    j = s.i
    text = ""
    last = first
    while j < len(s.toks):
        t = s.toks[j]
        if j > s.i and not _adjacent(last, t):
            break
        candidate = text + t.text
        if not _NUMBER_PREFIX.fullmatch(candidate):
            break
        text, last, j = candidate, t, j + 1
    # Give back a trailing piece that leaves no number (``3.`` before a statement's end cannot happen: the splitter
    # keeps only a ``.`` between digits inside a statement).
    while text and not _NUMBER.fullmatch(text) and j > s.i:
        j -= 1
        text = "".join(t.text for t in s.toks[s.i:j])
    if not text or not _NUMBER.fullmatch(text):
        return None
    rng = Range(first.range.start, s.toks[j - 1].range.end)
    value = float(text)
    if not math.isfinite(value) or abs(value) > 1e30:
        raise _Fail(rng, f"`{text[:40]}` is too large a number")
    s.i = j
    return Number(value, text, rng)


def _is_name(t: Token | None) -> bool:
    return t is not None and t.text[0].isascii() and t.text[0].isalpha() and t.is_word


def _name(s: _Statement, what: str) -> Name:
    t = s.peek()
    if not _is_name(t):
        got = "the end of the statement" if t is None else _quote(t)
        raise _Fail(s.here(), f"expected {what}, found {got}")
    s.i += 1
    return Name(t.text, t.range)


def _binder(s: _Statement) -> Name:
    t = s.peek()
    name = _name(s, "a name to bind")
    if name.text in ops_table.KEYWORDS:
        raise _Fail(t.range, f"`{name.text}` is a word of the language and cannot be bound; choose another name")
    return name


def _unknown_op(s: _Statement) -> None:
    """A run of words followed by ``of`` where an operand is expected is an operation this language lacks."""
    j = s.i
    while j < len(s.toks) and j - s.i < 4 and _is_name(s.toks[j]) and s.toks[j].text != "of":
        j += 1
    if j > s.i and j < len(s.toks) and s.toks[j].text == "of":
        words = " ".join(t.text for t in s.toks[s.i:j])
        rng = Range(s.toks[s.i].range.start, s.toks[j - 1].range.end)
        guess = nearest(words, ops_table.OPERATION_NAMES)
        hint = f"; did you mean `{guess}`?" if guess else f"; the operations are {', '.join(ops_table.OPERATION_NAMES)}"
        raise _Fail(rng, f"unknown operation `{words}`{hint}", guess)


def _atom(s: _Statement, before_of: bool = False) -> Expr:
    """An operand. ``before_of``: the pattern reads ``of`` next (``row T of E``), so a name before ``of`` is the
    operand, not an unknown operation."""
    t = s.peek()
    if t is None:
        raise _Fail(s.end, "expected a name, a number or `(`, found the end of the statement")
    if t.text == "(":
        s.take()
        inner = _expr(s)
        close = s.expect(")", "to close the `(`")
        return _with_range(inner, Range(t.range.start, close.range.end))
    if t.text[0].isdigit() or (t.text == "-" and s.peek(1) is not None and s.peek(1).text[0].isdigit()):
        n = _number(s)
        if n is None:
            raise _Fail(t.range, f"{_quote(t)} is not a number")
        return n
    if _is_name(t):
        if t.text in ops_table.OP_BY_FIRST_WORD and not (before_of and s.peek(1) is not None and s.peek(1).text == "of"):
            return _call(s)
        if not before_of:
            _unknown_op(s)
        if t.text in ops_table.KEYWORDS:
            raise _Fail(t.range, f"expected a name, a number or `(`, found the word {_quote(t)}")
        s.take()
        return Name(t.text, t.range)
    raise _Fail(t.range, f"expected a name, a number or `(`, found {_quote(t)}")


def _with_range(e: Expr, rng: Range) -> Expr:
    """A parenthesised expression keeps its node but takes the parentheses' range."""
    import dataclasses

    return dataclasses.replace(e, range=rng)


def _slot_number(s: _Statement, context: str, dims: bool = False) -> Name | Number:
    """A number or a constant; in a declaration's shape (``dims``) also the deployment words ``rows`` and ``ctx``."""
    n = _number(s)
    if n is not None:
        return n
    t = s.peek()
    if _is_name(t) and (t.text not in ops_table.KEYWORDS or (dims and t.text in ("rows", "ctx"))):
        s.take()
        return Name(t.text, t.range)
    got = "the end of the statement" if t is None else _quote(t)
    raise _Fail(s.here(), f"expected a number or a constant {context}, found {got}")


def _match(s: _Statement, pattern, op: ops_table.Op, args: list, numbers: list) -> None:
    for k, item in enumerate(pattern):
        if item[0] == "$":
            args.append((item[1:], _atom(s, before_of=k + 1 < len(pattern) and pattern[k + 1] == "of")))
        elif item[0] == "#":
            numbers.append((item[1:], _slot_number(s, f"for {item[1:]} in `{op.spelling}`")))
        else:
            t = s.peek()
            if t is None or t.text != item:
                got = "the end of the statement" if t is None else _quote(t)
                raise _Fail(s.here(), f"expected `{item}` in `{op.name}` ({op.spelling}), found {got}")
            s.take()


def _options(s: _Statement, op: ops_table.Op, start: Token, args: list, numbers: list) -> list[str]:
    """The options written after an operation's (or a table fill's) pattern, each introduced by a comma; their
    operands are appended to ``args`` and ``numbers``. Returns their keys in the order written."""
    options: list[str] = []
    while s.at(","):
        nxt = s.peek(1)
        fitting = [opt for opt in op.options
                   if all((t := s.peek(1 + k)) is not None and t.text == w for k, w in enumerate(opt.key.split()))]
        if not fitting:
            if nxt is not None and _is_name(nxt) and nxt.text not in ops_table.OP_BY_FIRST_WORD:
                known = ", ".join(dict.fromkeys(f"`{o.key}`" for o in op.options)) or "none"
                guess = nearest(nxt.text, [o.word for o in op.options])
                hint = f"; did you mean `{guess}`?" if guess else ""
                raise _Fail(nxt.range, f"`{nxt.text}` is not an option of `{op.name}` (its options: {known}){hint}", guess)
            break
        start_i, start_args, start_numbers = s.i, len(args), len(numbers)
        failure = None
        chosen = None
        for opt in sorted(fitting, key=lambda o: -len(o.pattern)):
            s.i = start_i + 1
            del args[start_args:], numbers[start_numbers:]
            try:
                _match(s, opt.pattern, op, args, numbers)
            except _Fail as f:
                failure = failure or f
                continue
            # A shorter form must not leave words of the longer one behind (``heads 4 sharing`` is not ``heads 4``).
            failure, chosen = None, opt
            break
        if failure is not None:
            raise failure
        # ★ The option read is the one that matched (``shared gate S`` after ``shared G2, U2 and D2``), not the
        # first whose leading words fit.
        if chosen.key in options:
            raise _Fail(nxt.range, f"the option `{chosen.key}` is given twice")
        options.append(chosen.key)
    for opt in op.options:
        if opt.required and opt.key not in options:
            raise _Fail(Range(start.range.start, s.last().range.end),
                        f"`{op.name}` needs `, {' '.join(opt.pattern)}` ({op.spelling})")
    return options


def _call(s: _Statement) -> Call:
    start = s.peek()
    candidates = ops_table.OP_BY_FIRST_WORD[start.text]
    op = None
    for o in candidates:
        if all((t := s.peek(k)) is not None and t.text == w for k, w in enumerate(o.words)):
            op = o
            break
    if op is None:
        # The first word is an operation's, the rest is not: name what was meant.
        o = candidates[0]
        raise _Fail(start.range, f"`{start.text}` starts the operation `{o.spelling}`")
    args: list = []
    numbers: list = []
    _match(s, op.pattern, op, args, numbers)
    op_end = s.last()
    options = _options(s, op, start, args, numbers)
    rng = Range(start.range.start, s.last().range.end)
    return Call(op.name, tuple(args), tuple(numbers), tuple(options), rng, Range(start.range.start, op_end.range.end))


def _term(s: _Statement) -> Expr:
    left = _atom(s)
    while True:
        t = s.peek()
        if t is None:
            return left
        if t.text == "times":
            s.take()
            right = _atom(s)
            left = Binary("times", left, right, Range.cover(left.range, right.range), t.range)
        elif t.text == "multiplied":
            s.take()
            s.expect("by", "after `multiplied`")
            right = _atom(s)
            left = Binary("multiplied", left, right, Range.cover(left.range, right.range), Range.cover(t.range, s.toks[s.i - 2].range))
        elif t.text == "scaled":
            s.take()
            s.expect("by", "after `scaled`")
            right = _slot_number(s, "after `scaled by`")
            left = Binary("scaled", left, right, Range.cover(left.range, right.range), t.range)
        else:
            return left


def _expr(s: _Statement) -> Expr:
    left = _term(s)
    while s.peek() is not None and s.peek().text in ("plus", "minus"):
        t = s.take()
        right = _term(s)
        left = Binary(t.text, left, right, Range.cover(left.range, right.range), t.range)
    return left


def _declaration(s: _Statement) -> Declaration:
    article = s.take()  # `a` or `an`
    t = s.peek()
    if t is not None and t.text in ("token", "position"):
        s.take()
        return Declaration(t.text, False, (), None, Range(article.range.start, t.range.end))
    q8 = False
    if s.at("q8"):
        s.take()
        q8 = True
    role = s.peek()
    if role is None or role.text not in ops_table.ROLES:
        got = "the end of the statement" if role is None else _quote(role)
        guess = nearest(role.text, ops_table.ROLES + ("token", "position")) if role is not None else None
        hint = f"; did you mean `{guess}`?" if guess else ""
        raise _Fail(s.here(), f"expected a role (weight, input, state, table, token or position), found {got}{hint}")
    s.take()
    if q8 and role.text != "weight":
        raise _Fail(role.range, f"only a weight can be `q8`, not a {role.text}")
    s.expect("of", f"after `{role.text}` (e.g. `a {role.text} of d by 64`)")
    dims = [_slot_number(s, "as a dimension", dims=True)]
    while s.at("by"):
        s.take()
        dims.append(_slot_number(s, "as a dimension", dims=True))
    if len(dims) > 3:
        raise _Fail(dims[3].range, "a tensor has at most three dimensions")
    fill = None
    if s.at(","):
        s.take()
        kind = s.peek()
        if kind is None or kind.text not in ops_table.FILL_BY_FIRST_WORD:
            raise _Fail(s.here(), "expected `cosines of base B` or `sines of base B` after the table's shape")
        if role.text != "table":
            raise _Fail(kind.range, f"only a table says how the host fills it, not a {role.text}")
        op = ops_table.FILL_BY_FIRST_WORD[kind.text]
        args: list = []
        numbers: list = []
        _match(s, op.pattern, op, args, numbers)
        op_end = s.last()
        options = _options(s, op, kind, args, numbers)
        fill = Call(op.name, (), tuple(numbers), tuple(options), Range(kind.range.start, s.last().range.end),
                    Range(kind.range.start, op_end.range.end))
    return Declaration(role.text, q8, tuple(dims), fill, Range(article.range.start, s.last().range.end))


def _statement(toks: list[Token], end: Range, index: int) -> Statement:
    s = _Statement(toks, end)
    first = s.peek()
    rng = Range(first.range.start, end.end)
    if first.text == "Let":
        s.take()
        name = _binder(s)
        s.expect("be", f"after `Let {name.text}`")
        if s.at("a") or s.at("an"):
            value = _declaration(s)
        else:
            value = _expr(s)
        stmt: Statement = Let(name, value, rng, index)
    elif first.text == "Set":
        s.take()
        row = None
        if s.at("row"):
            s.take()
            row = _atom(s, before_of=True)
            s.expect("of", "after `Set row P`")
        target = _name(s, "the state to set")
        s.expect("to", f"after `Set {'row … of ' if row else ''}{target.text}`")
        stmt = Set(target, row, _expr(s), rng, index)
    elif first.text == "Return":
        s.take()
        stmt = Return(_name(s, "the name to return"), rng, index)
    else:
        guess = nearest(first.text, ("Let", "Set", "Return"))
        hint = f"; did you mean `{guess}`?" if guess and guess != first.text else ""
        raise _Fail(first.range, f"a statement starts with `Let`, `Set` or `Return`, not {_quote(first)}{hint}")
    extra = s.peek()
    if extra is not None:
        raise _Fail(Range(extra.range.start, toks[-1].range.end), f"unexpected {_quote(extra)} after the end of the statement")
    return stmt


def _is_decimal_point(toks: list[Token], i: int) -> bool:
    """Whether the ``.`` at ``i`` sits between two digit runs with no space: part of a number, not a full stop."""
    if i == 0 or i + 1 >= len(toks):
        return False
    a, b = toks[i - 1], toks[i + 1]
    return a.text[-1].isdigit() and b.text[0].isdigit() and _adjacent(a, toks[i]) and _adjacent(toks[i], b)


def split_statements(toks: list[Token]) -> list[tuple[int, int, bool]]:
    """Each statement's token span ``(first, end)`` — the ``.`` included — and whether it ends with a full stop."""
    spans = []
    start = 0
    for i, t in enumerate(toks):
        if t.text == "." and not _is_decimal_point(toks, i):
            spans.append((start, i + 1, True))
            start = i + 1
    if start < len(toks):
        spans.append((start, len(toks), False))
    return spans


def _program(toks: list[Token], diagnostics: list[Diagnostic]) -> tuple[tuple[Statement, ...], tuple[tuple[int, int], ...]]:
    statements: list[Statement] = []
    spans: list[tuple[int, int]] = []
    for a, b, closed in split_statements(toks):
        body = toks[a:b - 1] if closed else toks[a:b]
        end = toks[b - 1].range
        if not closed:
            diagnostics.append(_error(Range(toks[a].range.start, end.end), "this statement does not end with `.`"))
            continue
        if not body:
            diagnostics.append(_error(end, "a `.` with no statement before it"))
            continue
        try:
            stmt = _statement(body, end, len(statements))
        except _Fail as f:
            diagnostics.append(_error(f.range, f.message, replacement=f.replacement))
            continue
        statements.append(stmt)
        spans.append((a, b))
    return tuple(statements), tuple(spans)


def _model(toks: list[Token], diagnostics: list[Diagnostic]) -> tuple[Constant, ...]:
    out = []
    for a, b, closed in split_statements(toks):
        body = toks[a:b - 1] if closed else toks[a:b]
        rng = Range(toks[a].range.start, toks[b - 1].range.end)
        if not closed:
            diagnostics.append(_error(rng, "this statement does not end with `.`"))
            continue
        s = _Statement(body, toks[b - 1].range)
        try:
            s.expect("Let", "to start a constant (`Let d be 2048.`)")
            name = _binder(s)
            s.expect("be", f"after `Let {name.text}`")
            value = _number(s)
            if value is None:
                raise _Fail(s.here(), f"a constant of `## Model` is a number: `Let {name.text} be 2048.`")
            if s.peek() is not None:
                raise _Fail(s.here(), f"unexpected {_quote(s.peek())} after the end of the statement")
        except _Fail as f:
            diagnostics.append(_error(f.range, f.message))
            continue
        out.append(Constant(name, value, rng))
    return tuple(out)


def _checkpoint(lines: list[Line], diagnostics: list[Diagnostic]) -> tuple[CheckpointEntry, ...]:
    out = []
    for line in lines:
        if not line.tokens:
            continue
        code = line.text.split("--", 1)[0]
        rng = Range(line.tokens[0].range.start, line.tokens[-1].range.end)
        m = _CHECKPOINT.match(code)
        if m is None:
            diagnostics.append(_error(rng, 'a checkpoint entry reads `Wq{l} is "blk.{l}.attn_q.weight".` '
                                           '(optionally `, columns A to B [of every N]` or `, rows A to B`)'))
            continue
        name, tensor = m.group("name"), m.group("tensor")
        if ("{l}" in name) != ("{l}" in tensor):
            diagnostics.append(_error(rng, f"`{name}` and \"{tensor}\" must both use `{{l}}` or neither"))
            continue
        cols = None
        if m.group("c0") is not None:
            every = int(m.group("every")) if m.group("every") else None
            cols = (int(m.group("c0")), int(m.group("c1")), every)
            if cols[0] >= cols[1] or (every is not None and cols[1] > every):
                diagnostics.append(_error(rng, f"`columns {cols[0]} to {cols[1]}` is an empty or impossible range"))
                continue
        rows = None
        if m.group("r0") is not None:
            rows = (int(m.group("r0")), int(m.group("r1")))
            if rows[0] >= rows[1]:
                diagnostics.append(_error(rng, f"`rows {rows[0]} to {rows[1]}` is an empty range"))
                continue
        out.append(CheckpointEntry(name, tensor, cols, rows, rng))
    return tuple(out)


def _heading(line: Line) -> tuple[int, str] | None:
    """``(level, title)`` when the line is a heading (``#`` or ``##`` first)."""
    toks = line.tokens
    if not toks or toks[0].text != "#":
        return None
    level = 1
    if len(toks) > 1 and toks[1].text == "#" and _adjacent(toks[0], toks[1]):
        level = 2
    start = toks[level - 1].range.end.character
    text = line.text if line.comment is None else line.text[: line.comment.start.character]
    # UTF-16 columns and str indices differ only for astral characters; headings are short — recompute via encode.
    prefix_units = 0
    idx = 0
    while idx < len(text) and prefix_units < start:
        prefix_units += 2 if ord(text[idx]) > 0xFFFF else 1
        idx += 1
    return level, text[idx:].strip()


def parse(source: str | bytes) -> Document:
    """Parse a whole document. Never raises; everything wrong is a diagnostic."""
    text, replaced = decode(source)
    size = len(source) if isinstance(source, bytes) else len(text.encode("utf-8", errors="replace"))
    too_large = document_too_large(size)
    if too_large is not None:
        return Document(text, None, (), (_error(Range(Pos(0, 0, 0), Pos(0, 0, 0)), too_large, "size"),))
    lines = lex(text)
    diagnostics: list[Diagnostic] = []
    if replaced:
        diagnostics.append(_error(Range(Pos(0, 0, 0), Pos(0, 0, 0)), "the file is not valid UTF-8; invalid bytes were replaced by �"))

    # Cut into sections at headings.
    cuts: list[tuple[int, int, str]] = []  # (line number, level, title)
    for line in lines:
        h = _heading(line)
        if h is not None:
            cuts.append((line.number, h[0], h[1]))
    title = None
    sections: list[Section] = []
    bounds = [(n, lv, t) for n, lv, t in cuts]
    if not bounds or bounds[0][0] > 0:
        first_end = bounds[0][0] if bounds else len(lines)
        pre = [ln for ln in lines[:first_end] if ln.tokens]
        if pre:
            rng = Range(pre[0].tokens[0].range.start, pre[-1].tokens[-1].range.end)
            diagnostics.append(_error(rng, "text before the first heading belongs to no section; start with `# Title`"))
    for k, (n, level, head_text) in enumerate(bounds):
        stop = bounds[k + 1][0] if k + 1 < len(bounds) else len(lines)
        line = lines[n]
        heading = Range(line.tokens[0].range.start, Pos(n, len(line.text.encode("utf-16-le")) // 2, line.offset + len(line.text.encode("utf-8"))))
        body = lines[n + 1:stop]
        last = body[-1] if body else line
        full = Range(heading.start, Pos(last.number, len(last.text.encode("utf-16-le")) // 2, last.offset + len(last.text.encode("utf-8"))))
        if level == 1:
            if title is None and not sections:
                title = head_text
            else:
                diagnostics.append(_error(heading, "only the first heading is a `# Title`; sections are `## Model`, `## Layer N`, …"))
            sections.append(Section(SectionKind.TITLE, heading, head_text, None, None, full))
            _stray(body, diagnostics, "the title")
            continue
        sections.append(_section(head_text, line, heading, body, full, diagnostics))
    if title is None:
        diagnostics.append(_error(Range(Pos(0, 0, 0), Pos(0, 0, 0)), "the document has no `# Title` first line"))
    doc = Document(text, title, tuple(sections), tuple(diagnostics))
    return doc


def _stray(body: list[Line], diagnostics: list[Diagnostic], where: str) -> None:
    toks = [t for ln in body for t in ln.tokens]
    if toks:
        diagnostics.append(_error(Range(toks[0].range.start, toks[-1].range.end), f"text under {where} belongs to no program; put it in `## Note` or a `--` comment"))


def _section(head_text: str, line: Line, heading: Range, body: list[Line], full: Range, diagnostics: list[Diagnostic]) -> Section:
    name, _, note = head_text.partition(":")
    words = name.split()
    note = note.strip() or None
    key = words[0].lower() if words else ""
    toks = [t for ln in body for t in ln.tokens]
    if key == "layer":
        index = None
        num_tok = next((t for t in line.tokens[2:] if t.text[0].isdigit()), None)
        index_range = num_tok.range if num_tok else None
        if len(words) == 2 and words[1].isdigit():
            index = int(words[1]) if len(words[1]) <= 7 else MAX_LAYER + 1
            if index > MAX_LAYER:
                diagnostics.append(_error(index_range or heading, f"layer {words[1][:12]}{'…' if len(words[1]) > 12 else ''} is past any model's depth (at most {MAX_LAYER})"))
                index = None
        else:
            diagnostics.append(_error(heading, f"a layer heading reads `## Layer N`, not `## {name.strip()[:40]}`"))
        statements, spans = _program(toks, diagnostics)
        return Section(SectionKind.LAYER, heading, head_text, index, note, full, tuple(toks), statements, spans, index_range=index_range)
    kind = _SECTIONS.get(key) if len(words) == 1 else None
    if kind is None and key == "note":
        kind = SectionKind.NOTE
    if kind is None:
        guess = nearest(words[0] if words else "", ["Model", "Checkpoint", "Embed", "Layer", "Head", "Note"])
        hint = f"; did you mean `## {guess}`?" if guess else ""
        diagnostics.append(_error(heading, f"unknown section `## {head_text[:40]}`: sections are Model, Checkpoint, Embed, Layer N, Head and Note{hint}"))
        return Section(SectionKind.UNKNOWN, heading, head_text, None, note, full, tuple(toks))
    if kind in (SectionKind.EMBED, SectionKind.HEAD):
        statements, spans = _program(toks, diagnostics)
        return Section(kind, heading, head_text, None, note, full, tuple(toks), statements, spans)
    if kind is SectionKind.MODEL:
        return Section(kind, heading, head_text, None, note, full, tuple(toks), constants=_model(toks, diagnostics))
    if kind is SectionKind.CHECKPOINT:
        return Section(kind, heading, head_text, None, note, full, tuple(toks), entries=_checkpoint(body, diagnostics))
    return Section(kind, heading, head_text, None, note, full)
