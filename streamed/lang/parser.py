"""The parser: text to a ``Document`` of sections and statements, recovering after every bad sentence.

A document is cut into **chunks** at its heading lines (``chunks.cut``), and each chunk is parsed on its own against its own
``Source`` (its place in the document): the whole-document parse and the editor's incremental one parse a section
the same way. Recovery is by sentence: a program section is cut into statements at every terminating ``.`` before
anything is parsed, so a malformed statement yields exactly one diagnostic and the statements after it are parsed as
if it were not there. Nothing here raises on any input: the internal ``_Fail`` never escapes ``parse``.

**One parse per program up to names and numbers.** A layer's text is lexed, and its *shape* — the text with every
name it binds replaced by the order of its first appearance, whitespace and comments kept — is its identity up to
names; its *frame* is that with the digits of its numbers left out too (``shapes``). The first layer of each frame
is parsed; a later layer of the same frame (``shared``) takes that tree, renamed into its own names, numbers and
ranges when first read, instead of a parse. That is exact, not a guess: the parser reads a binder's spelling only to
ask whether it is a name and no word of the language, and a run of digits only as a piece of a number, so it shares
only when every binder of the layer is such a plain name and every number it writes one the parser accepts.

**Recovery costs a parse per shape, not per layer.** A broken layer is its shape's tree too (``broken_key``): a
later layer of its shape takes its tree and its diagnostics — each the same tokens' range, each message a template
over the binders (``_failures``: the failed statement parsed once more with every binder spelt as a mark, kept only
when filled with the layer's own binders it says what the parse said) filled with the layer's own. A message that
reads a binder's spelling otherwise than by quoting it whole — a guess at what was meant (``nearest``), a quotation
cut at 40 characters — is no template: that statement is parsed in each layer. So a document whose every layer has
the same errors parses each statement once, and diagnoses the rest at the cost of filling their messages and
numbering their places: such a layer's diagnostics are ``Filled``'s rows — offsets, lines, columns and a message,
its tokens placed from its shape's table, its lines the shape's — made into ``Diagnostic`` values only when read.

Invariant: every diagnostic's range lies inside the text, and every node's range covers exactly its tokens; a
shared layer's statements and diagnostics equal those a parse of its own text gives. No expression nests deeper than
``MAX_NESTING`` (the parser refuses it, so no later stage recurses as deep as the input).
"""

from __future__ import annotations

import difflib
import math
from bisect import bisect_right
import re
import threading
from dataclasses import dataclass, replace

from . import ops as ops_table
from .limits import MAX_LAYER, MAX_NESTING, document_too_large
from .chunks import cut, first_line, heading_line, heading_ranges
from .lexer import BOM, COMMENT, Pos, Range, Source, Table, decode, pieces, table, texts_of, utf8_length
from .shapes import LARGEST, broken_key, same_numerals, shape_of
from .syntax import (
    Binary,
    Call,
    CheckpointEntry,
    Constant,
    Declaration,
    Diagnostic,
    Document,
    Expr,
    Filled,
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


def _quote(text: str) -> str:
    if _TEMPLATING.on and _MARK in text:
        raise _Spelling  # its length decides where it is cut
    return f"`{text[:40]}{'…' if len(text) > 40 else ''}`"


def nearest(word: str, choices) -> str | None:
    """The choice a person most likely meant: the closest spelling, ties going to one that starts alike."""
    if _TEMPLATING.on and _MARK in word:
        raise _Spelling  # the guess depends on the spelling
    best, score = None, 0.6
    for c in choices:
        r = difflib.SequenceMatcher(None, word, c).ratio() + (0.05 if c[:1] == word[:1] else 0.0)
        if r > score:
            best, score = c, r
    return best


def _is_name(text: str | None) -> bool:
    return text is not None and text[0].isascii() and text[0].isalpha()


# ---- statements --------------------------------------------------------------------------------------------------


class _Statement:
    """A cursor over one statement's tokens in its section's table (its final ``.`` excluded)."""

    __slots__ = ("t", "texts", "i", "stop", "end")

    def __init__(self, t: Table, first: int, stop: int, end: int):
        self.t = t
        self.texts = t.texts
        self.i = first
        self.stop = stop  # one past the statement's last token (its ``.`` excluded)
        self.end = end  # the index of the terminating ``.``, or of the last token when unterminated

    def peek(self, k: int = 0) -> str | None:
        j = self.i + k
        return self.texts[j] if j < self.stop else None

    def at(self, *words: str) -> bool:
        i, texts = self.i, self.texts
        if i + len(words) > self.stop:
            return False
        return all(texts[i + k] == w for k, w in enumerate(words))

    def end_range(self) -> Range:
        return self.t.token_range(self.end)

    def take(self) -> int:
        if self.i >= self.stop:
            raise _Fail(self.end_range(), "the statement ends too early")
        self.i += 1
        return self.i - 1

    def here(self) -> Range:
        return self.t.token_range(self.i) if self.i < self.stop else self.end_range()

    def got(self) -> str:
        """What is at the cursor, quoted as a message says it."""
        return "the end of the statement" if self.i >= self.stop else _quote(self.texts[self.i])

    def expect(self, word: str, context: str) -> int:
        if self.i >= self.stop or self.texts[self.i] != word:
            raise _Fail(self.here(), f"expected `{word}` {context}, found {self.got()}")
        self.i += 1
        return self.i - 1

    def range(self, a: int, b: int) -> Range:
        return self.t.range(a, b)


def _number(s: _Statement) -> Number | None:
    """A number at the cursor, joining adjacent pieces (``0`` ``.`` ``125``; ``1e`` ``-`` ``6``; ``-`` ``1``)."""
    first = s.i
    if first >= s.stop:
        return None
    texts, t = s.texts, s.t
    j = first
    text = ""
    while j < s.stop:
        if j > first and not t.adjacent(j - 1):
            break
        candidate = text + texts[j]
        if not _NUMBER_PREFIX.fullmatch(candidate):
            break
        text, j = candidate, j + 1
    # Give back a trailing piece that leaves no number (``3.`` before a statement's end cannot happen: the splitter
    # keeps only a ``.`` between digits inside a statement).
    while text and not _NUMBER.fullmatch(text) and j > first:
        j -= 1
        text = "".join(texts[first:j])
    if not text or not _NUMBER.fullmatch(text):
        return None
    rng = s.range(first, j - 1)
    value = float(text)
    if not math.isfinite(value) or abs(value) > LARGEST:
        raise _Fail(rng, f"`{text[:40]}` is too large a number")
    s.i = j
    return Number(value, text, rng)


def _name(s: _Statement, what: str) -> Name:
    t = s.peek()
    if not _is_name(t):
        raise _Fail(s.here(), f"expected {what}, found {s.got()}")
    s.i += 1
    return Name(t, s.t.token_range(s.i - 1))


def _binder(s: _Statement) -> Name:
    name = _name(s, "a name to bind")
    if name.text in ops_table.KEYWORDS:
        raise _Fail(name.range, f"`{name.text}` is a word of the language and cannot be bound; choose another name")
    return name


def _unknown_op(s: _Statement) -> None:
    """A run of words followed by ``of`` where an operand is expected is an operation this language lacks."""
    texts = s.texts
    j = s.i
    while j < s.stop and j - s.i < 4 and _is_name(texts[j]) and texts[j] != "of":
        j += 1
    if j > s.i and j < s.stop and texts[j] == "of":
        words = " ".join(texts[s.i:j])
        rng = s.range(s.i, j - 1)
        guess = nearest(words, ops_table.OPERATION_NAMES)
        hint = f"; did you mean `{guess}`?" if guess else f"; the operations are {', '.join(ops_table.OPERATION_NAMES)}"
        raise _Fail(rng, f"unknown operation `{words}`{hint}", guess)


def _too_deep(rng: Range) -> _Fail:
    return _Fail(rng, f"this expression nests more than {MAX_NESTING} deep (parentheses, operations and operators "
                      f"inside one another); streamed reads at most {MAX_NESTING} levels — name a part with `Let`")


def _atom(s: _Statement, level: int, before_of: bool = False) -> tuple[Expr, int]:
    """An operand and its depth. ``before_of``: the pattern reads ``of`` next (``row T of E``), so a name before
    ``of`` is the operand, not an unknown operation. ``level``: how deep the parser already is (parentheses and
    operations around this operand), refused past ``MAX_NESTING`` before it recurses further."""
    t = s.peek()
    if t is None:
        raise _Fail(s.end_range(), "expected a name, a number or `(`, found the end of the statement")
    if level > MAX_NESTING:
        raise _too_deep(s.here())
    if t == "(":
        open_ = s.take()
        inner, depth = _expr(s, level + 1)
        close = s.expect(")", "to close the `(`")
        return replace(inner, range=s.range(open_, close)), depth
    if t[0].isdigit() or (t == "-" and (n := s.peek(1)) is not None and n[0].isdigit()):
        n = _number(s)
        if n is None:
            raise _Fail(s.here(), f"{_quote(t)} is not a number")
        return n, 0
    if _is_name(t):
        if t in ops_table.OP_BY_FIRST_WORD and not (before_of and s.peek(1) == "of"):
            return _call(s, level)
        if not before_of:
            _unknown_op(s)
        if t in ops_table.KEYWORDS:
            raise _Fail(s.here(), f"expected a name, a number or `(`, found the word {_quote(t)}")
        s.i += 1
        return Name(t, s.t.token_range(s.i - 1)), 0
    raise _Fail(s.here(), f"expected a name, a number or `(`, found {_quote(t)}")


def _slot_number(s: _Statement, context: str, dims: bool = False) -> Name | Number:
    """A number or a constant; in a declaration's shape (``dims``) also the deployment words ``rows`` and ``ctx``."""
    n = _number(s)
    if n is not None:
        return n
    t = s.peek()
    if _is_name(t) and (t not in ops_table.KEYWORDS or (dims and t in ("rows", "ctx"))):
        s.i += 1
        return Name(t, s.t.token_range(s.i - 1))
    raise _Fail(s.here(), f"expected a number or a constant {context}, found {s.got()}")


def _match(s: _Statement, pattern, op: ops_table.Op, args: list, numbers: list, level: int) -> int:
    depth = 0
    for k, item in enumerate(pattern):
        if item[0] == "$":
            e, d = _atom(s, level, before_of=k + 1 < len(pattern) and pattern[k + 1] == "of")
            args.append((item[1:], e))
            depth = max(depth, d)
        elif item.startswith("#*"):
            # A list: one number or constant, then every number that follows it (LongRoPE's factors).
            numbers.append((item[2:], _slot_number(s, f"for {item[2:]} in `{op.spelling}`")))
            while (n := _number(s)) is not None:
                numbers.append((item[2:], n))
        elif item[0] == "#":
            numbers.append((item[1:], _slot_number(s, f"for {item[1:]} in `{op.spelling}`")))
        else:
            if s.peek() != item:
                raise _Fail(s.here(), f"expected `{item}` in `{op.name}` ({op.spelling}), found {s.got()}")
            s.i += 1
    return depth


def _options(s: _Statement, op: ops_table.Op, start: int, args: list, numbers: list, level: int) -> tuple[list[str], int]:
    """The options written after an operation's (or a table fill's) pattern, each introduced by a comma; their
    operands are appended to ``args`` and ``numbers``. Returns their keys in the order written, and how deep their
    operands nest. ``start``: the token the operation (or fill) starts at."""
    options: list[str] = []
    depth = 0
    while s.peek() == ",":
        nxt_i = s.i + 1
        nxt = s.peek(1)
        fitting = [opt for opt in op.options if s.at(",", *opt.key.split())]
        if not fitting:
            if nxt is not None and _is_name(nxt) and nxt not in ops_table.OP_BY_FIRST_WORD:
                known = ", ".join(dict.fromkeys(f"`{o.key}`" for o in op.options)) or "none"
                guess = nearest(nxt, [o.word for o in op.options])
                hint = f"; did you mean `{guess}`?" if guess else ""
                raise _Fail(s.t.token_range(nxt_i), f"`{nxt}` is not an option of `{op.name}` (its options: {known}){hint}", guess)
            break
        start_i, start_args, start_numbers = s.i, len(args), len(numbers)
        failure = None
        chosen = None
        for opt in sorted(fitting, key=lambda o: -len(o.pattern)):
            s.i = start_i + 1
            del args[start_args:], numbers[start_numbers:]
            try:
                d = _match(s, opt.pattern, op, args, numbers, level)
            except _Fail as f:
                failure = failure or f
                continue
            # A shorter form must not leave words of the longer one behind (``heads 4 sharing`` is not ``heads 4``).
            failure, chosen = None, opt
            depth = max(depth, d)
            break
        if failure is not None:
            raise failure
        # ★ The option read is the one that matched (``shared gate S`` after ``shared G2, U2 and D2``), not the
        # first whose leading words fit.
        if chosen.key in options:
            raise _Fail(s.t.token_range(nxt_i), f"the option `{chosen.key}` is given twice")
        options.append(chosen.key)
    for opt in op.options:
        if opt.required and opt.key not in options:
            raise _Fail(s.range(start, s.i - 1), f"`{op.name}` needs `, {' '.join(opt.pattern)}` ({op.spelling})")
        if opt.needs and opt.key in options and opt.needs not in options:
            raise _Fail(s.range(start, s.i - 1), f"`{opt.key}` means nothing without `{opt.needs}`: it says how "
                                                 f"that option computes")
    return options, depth


def _call(s: _Statement, level: int) -> tuple[Call, int]:
    start = s.i
    word = s.texts[start]
    candidates = ops_table.OP_BY_FIRST_WORD[word]
    op = next((o for o in candidates if s.at(*o.words)), None)
    if op is None:
        # The first word is an operation's, the rest is not: name what was meant.
        raise _Fail(s.here(), f"`{word}` starts the operation `{candidates[0].spelling}`")
    args: list = []
    numbers: list = []
    depth = _match(s, op.pattern, op, args, numbers, level + 1)
    op_end = s.i - 1
    options, more = _options(s, op, start, args, numbers, level + 1)
    depth = max(depth, more)
    rng = s.range(start, s.i - 1)
    if depth + 1 > MAX_NESTING:
        raise _too_deep(rng)
    return Call(op.name, tuple(args), tuple(numbers), tuple(options), rng, s.range(start, op_end)), depth + 1


def _binary(op: str, left: Expr, dl: int, right: Expr, dr: int, op_range: Range) -> tuple[Binary, int]:
    depth = max(dl, dr) + 1
    node = Binary(op, left, right, Range.cover(left.range, right.range), op_range)
    if depth > MAX_NESTING:
        raise _too_deep(node.range)
    return node, depth


def _term(s: _Statement, level: int) -> tuple[Expr, int]:
    left, dl = _atom(s, level)
    while True:
        t = s.peek()
        if t == "times":
            at = s.take()
            right, dr = _atom(s, level)
            left, dl = _binary("times", left, dl, right, dr, s.t.token_range(at))
        elif t == "multiplied":
            at = s.take()
            by = s.expect("by", "after `multiplied`")
            right, dr = _atom(s, level)
            left, dl = _binary("multiplied", left, dl, right, dr, s.range(at, by))
        elif t == "scaled":
            at = s.take()
            s.expect("by", "after `scaled`")
            right = _slot_number(s, "after `scaled by`")
            left, dl = _binary("scaled", left, dl, right, 0, s.t.token_range(at))
        else:
            return left, dl


def _expr(s: _Statement, level: int = 0) -> tuple[Expr, int]:
    left, dl = _term(s, level)
    while (t := s.peek()) == "plus" or t == "minus":
        at = s.take()
        right, dr = _term(s, level)
        left, dl = _binary(t, left, dl, right, dr, s.t.token_range(at))
    _misspelt_operator(s)
    return left, dl


def _misspelt_operator(s: _Statement) -> None:
    """After an operand nothing but a word of the language or punctuation follows: a name there that is spelt like
    an operator (``a timse b``) is that operator mistyped — said so, with the spelling meant, before the parser
    reports what it expected instead (``expected `)` to close the `(`, found `timse```)."""
    t = s.peek()
    if t is None or not _is_name(t) or t in ops_table.KEYWORDS:
        return
    guess = nearest(t, ops_table.BINARY_WORDS)
    if guess is not None:
        raise _Fail(s.here(), f"`{t}` is not a word of the language; did you mean `{guess}`?", guess)


def _declaration(s: _Statement) -> Declaration:
    article = s.take()  # `a` or `an`
    t = s.peek()
    if t == "token" or t == "position":
        s.take()
        return Declaration(t, False, (), None, s.range(article, s.i - 1))
    q8 = False
    if s.peek() == "q8":
        s.take()
        q8 = True
    role = s.peek()
    if role is None or role not in ops_table.ROLES:
        guess = nearest(role, ops_table.ROLES + ("token", "position")) if role is not None else None
        hint = f"; did you mean `{guess}`?" if guess else ""
        raise _Fail(s.here(), f"expected a role (weight, input, state, table, token or position), found {s.got()}{hint}")
    role_i = s.take()
    if q8 and role != "weight":
        raise _Fail(s.t.token_range(role_i), f"only a weight can be `q8`, not a {role}")
    s.expect("of", f"after `{role}` (e.g. `a {role} of d by 64`)")
    dims = [_slot_number(s, "as a dimension", dims=True)]
    while s.peek() == "by":
        s.take()
        dims.append(_slot_number(s, "as a dimension", dims=True))
    if len(dims) > 3:
        raise _Fail(dims[3].range, "a tensor has at most three dimensions")
    fill = None
    if s.peek() == ",":
        s.take()
        kind = s.peek()
        if kind is None or kind not in ops_table.FILL_BY_FIRST_WORD:
            raise _Fail(s.here(), "expected `cosines of base B` or `sines of base B` after the table's shape")
        if role != "table":
            raise _Fail(s.here(), f"only a table says how the host fills it, not a {role}")
        op = ops_table.FILL_BY_FIRST_WORD[kind]
        kind_i = s.i
        numbers: list = []
        _match(s, op.pattern, op, [], numbers, 0)
        op_end = s.i - 1
        options, _ = _options(s, op, kind_i, [], numbers, 0)
        fill = Call(op.name, (), tuple(numbers), tuple(options), s.range(kind_i, s.i - 1), s.range(kind_i, op_end))
    return Declaration(role, q8, tuple(dims), fill, s.range(article, s.i - 1))


def _statement(s: _Statement, index: int) -> Statement:
    first = s.peek()
    rng = s.range(s.i, s.end)
    if first == "Let":
        s.take()
        name = _binder(s)
        s.expect("be", f"after `Let {name.text}`")
        if s.peek() == "a" or s.peek() == "an":
            value = _declaration(s)
        else:
            value = _expr(s)[0]
        stmt: Statement = Let(name, value, rng, index)
    elif first == "Set":
        s.take()
        row = None
        if s.peek() == "row":
            s.take()
            row = _atom(s, 0, before_of=True)[0]
            s.expect("of", "after `Set row P`")
        target = _name(s, "the state to set")
        s.expect("to", f"after `Set {'row … of ' if row else ''}{target.text}`")
        stmt = Set(target, row, _expr(s)[0], rng, index)
    elif first == "Return":
        s.take()
        stmt = Return(_name(s, "the name to return"), rng, index)
    else:
        guess = nearest(first, ("Let", "Set", "Return"))
        hint = f"; did you mean `{guess}`?" if guess and guess != first else ""
        raise _Fail(s.here(), f"a statement starts with `Let`, `Set` or `Return`, not {_quote(first)}{hint}")
    if s.i < s.stop:
        raise _Fail(s.range(s.i, s.stop - 1), f"unexpected {_quote(s.texts[s.i])} after the end of the statement")
    return stmt


def _is_decimal_point(t: Table, i: int) -> bool:
    """Whether the ``.`` at ``i`` sits between two digit runs with no space: part of a number, not a full stop."""
    texts = t.texts
    if i == 0 or i + 1 >= len(texts):
        return False
    return texts[i - 1][-1].isdigit() and texts[i + 1][0].isdigit() and t.adjacent(i - 1) and t.adjacent(i)


def split_statements(t: Table) -> list[tuple[int, int, bool]]:
    """Each statement's token span ``(first, end)`` — the ``.`` included — and whether it ends with a full stop."""
    spans = []
    start = 0
    texts = t.texts
    i = -1
    index = texts.index
    while True:
        try:
            i = index(".", i + 1)
        except ValueError:
            break
        if not _is_decimal_point(t, i):
            spans.append((start, i + 1, True))
            start = i + 1
    if start < len(texts):
        spans.append((start, len(texts), False))
    return spans


def _program(t: Table, diagnostics: list[Diagnostic], failed: list | None = None) -> tuple[tuple[Statement, ...], tuple[tuple[int, int], ...]]:
    """The statements of a program and their spans; what does not parse is a diagnostic. ``failed``: each
    statement that did not parse as ``(first, end, index)`` (``index``: how many parsed before it), in the order of
    its diagnostic."""
    statements: list[Statement] = []
    spans: list[tuple[int, int]] = []
    for a, b, closed in split_statements(t):
        if not closed:
            diagnostics.append(_error(t.range(a, b - 1), "this statement does not end with `.`"))
        elif a == b - 1:
            diagnostics.append(_error(t.token_range(b - 1), "a `.` with no statement before it"))
        else:
            try:
                stmt = _statement(_Statement(t, a, b - 1, b - 1), len(statements))
            except _Fail as f:
                diagnostics.append(_error(f.range, f.message, replacement=f.replacement))
            else:
                statements.append(stmt)
                spans.append((a, b))
                continue
        if failed is not None:
            failed.append((a, b, len(statements)))
    return tuple(statements), tuple(spans)


# ---- a broken program's diagnostics, for the other layers of its shape --------------------------------------------

#: A binder's mark in a template parse: a plain name to every rule of the parser (a letter first, no word of the
#: language), and a character no token holds (tokens and comments hold no line end) to find it again in a message.
_MARK = "\r"
_MARKED = re.compile("Z\r(\\d+)\r")


class _Spelling(Exception):
    """A template parse read a binder's spelling (a guess at what was meant, a quotation cut at its length)."""


class _Templating(threading.local):
    on = False


_TEMPLATING = _Templating()


@dataclass(frozen=True, slots=True)
class _Failure:
    """A statement of a broken program that does not parse: its span, how many statements parsed before it, the
    tokens its diagnostic's range runs over and the lines they lie on (relative to the chunk: the same in every layer
    of the shape), and that diagnostic's message and replacement as format strings over the program's binders
    (``str.format(*names)``); ``message`` is ``None`` when what it says depends on a binder's spelling otherwise than
    by quoting it whole — that statement is parsed again in each layer."""

    first: int
    end: int
    index: int
    at: tuple[int, int, int, int] | None = None  # first token, last token, their lines
    message: str | None = None
    replacement: str | None = None


def _template(text: str | None) -> str | None:
    """``text`` as a format string over the binders (each mark ``Z\\rK\\r`` made ``{K}``)."""
    if text is None:
        return None
    return _MARKED.sub(r"{\1}", text.replace("{", "{{").replace("}", "}}"))


def _failures(section: Section, failed: list) -> tuple[_Failure, ...]:
    """What ``section`` (a broken layer) says of each statement that does not parse, as templates: each such
    statement parsed again with every binder spelt as its mark (once per shape, not per layer), kept only when the
    template filled with this layer's own binders says exactly what its parse said."""
    t, names = section.table, section.shape.names
    marks = {n: f"Z\r{k}\r" for k, n in enumerate(names)}
    marked = Table(t.source, [marks.get(x, x) for x in t.texts], t.first, t.stop)
    marked._starts, marked._ends, marked._comments = t.starts, t.ends, t.comments
    starts, ends = section.token_index
    body = section.diagnostics[len(section.diagnostics) - len(failed):]
    out = []
    _TEMPLATING.on = True
    try:
        for (a, b, index), d in zip(failed, body):
            at = (starts.get(d.range.start.offset), ends.get(d.range.end.offset),
                  d.range.start.line - t.source.line, d.range.end.line - t.source.line)
            message = replacement = None
            if None in at:
                at = None  # not at token boundaries (none is): each layer of the shape is parsed on its own
            elif a == b - 1 or t.texts[b - 1] != ".":  # a lone `.` or an unterminated statement: quotes nothing
                message = _template(d.message)
            else:
                try:
                    _statement(_Statement(marked, a, b - 1, b - 1), index)
                except _Fail as f:
                    message, replacement = _template(f.message), _template(f.replacement)
                    said = (d.data or {}).get("replacement")
                    if message.format(*names) != d.message or (replacement and replacement.format(*names)) != said:
                        message = replacement = None
                except _Spelling:
                    pass
            out.append(_Failure(a, b, index, at, message, replacement))
    finally:
        _TEMPLATING.on = False
    return tuple(out)


def _shared_failures(rep: Section, to: Section) -> list | None:
    """The diagnostics the body of ``to`` — a layer of ``rep``'s shape, ``rep`` broken — gives, from ``rep``'s
    templates: each range the same tokens of ``to``, each message filled with ``to``'s binders — as ``Filled``'s rows
    when every one is a template, else as diagnostics, a statement whose message depends on a spelling parsed in
    ``to``. ``None`` — ``to`` is parsed on its own — if such a statement parses there after all, or a range of
    ``rep``'s is not at token boundaries (neither happens: the parser reads a binder's spelling only in a guess or a
    cut, and every range it makes runs from a token's start to a token's end)."""
    known = rep.broken
    if isinstance(known, list):
        known = rep.broken = _failures(rep, known)
    if any(f.at is None for f in known):
        return None
    names = to.shape.names
    t = to.table
    if all(f.message is not None for f in known):
        # Placed from ``rep``'s table: this layer's every token is placed only if something later reads them.
        return [(*at, f.message.format(*names), f.replacement and f.replacement.format(*names))
                for f, at in zip(known, t.places([f.at for f in known]))]
    out = []
    for f in known:
        if f.message is not None:
            out.append(Filled.diagnostic((*t.places([f.at])[0], f.message.format(*names),
                                          f.replacement and f.replacement.format(*names))))
            continue
        try:
            _statement(_Statement(t, f.first, f.end - 1, f.end - 1), f.index)
        except _Fail as fail:
            out.append(_error(fail.range, fail.message, replacement=fail.replacement))
        else:
            return None
    return out


def _model(t: Table, diagnostics: list[Diagnostic]) -> tuple[Constant, ...]:
    out = []
    for a, b, closed in split_statements(t):
        rng = t.range(a, b - 1)
        if not closed:
            diagnostics.append(_error(rng, "this statement does not end with `.`"))
            continue
        s = _Statement(t, a, b - 1, b - 1)
        try:
            s.expect("Let", "to start a constant (`Let d be 2048.`)")
            name = _binder(s)
            s.expect("be", f"after `Let {name.text}`")
            value = _number(s)
            if value is None:
                raise _Fail(s.here(), f"a constant of `## Model` is a number: `Let {name.text} be 2048.`")
            if s.peek() is not None:
                raise _Fail(s.here(), f"unexpected {s.got()} after the end of the statement")
        except _Fail as f:
            diagnostics.append(_error(f.range, f.message))
            continue
        out.append(Constant(name, value, rng))
    return tuple(out)


def _lines_of(t: Table) -> list[tuple[int, int, int]]:
    """``(line, first token, last token)`` of each line of ``t`` that has tokens (line relative to the source)."""
    out = []
    starts = t.source.starts
    k = 0
    n = len(t.texts)
    while k < n:
        line = bisect_right(starts, t.starts[k]) - 1
        stop = starts[line + 1] if line + 1 < len(starts) else len(t.source.text)
        j = k
        while j + 1 < n and t.starts[j + 1] < stop:
            j += 1
        out.append((line, k, j))
        k = j + 1
    return out


def _checkpoint(t: Table, diagnostics: list[Diagnostic]) -> tuple[CheckpointEntry, ...]:
    out = []
    src = t.source
    for line, a, b in _lines_of(t):
        code = src.text[src.starts[line]:src.line_stop(line)].split(COMMENT, 1)[0]
        rng = t.range(a, b)
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


# ---- sections ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ChunkParse:
    """One chunk parsed: its section (``None`` for text before the first heading), its heading level, and the
    parser's diagnostics, all against the chunk's ``Source``."""

    section: Section | None
    level: int
    diagnostics: tuple[Diagnostic, ...]


def parse_chunk(text: str, line: int = 0, offset: int = 0, shared: dict | None = None) -> ChunkParse:
    """Parse one chunk placed at document ``line`` and byte ``offset``, exactly as ``parse`` parses it within a whole
    document. ``shared``: frames already parsed (``Shape.frame`` → section), so a layer of a known frame is renamed,
    not parsed; this parse adds its own when it is clean."""
    src = Source(text, line, offset)
    first_stop, body_start = first_line(text)
    h = heading_line(text[:first_stop])
    diags: list[Diagnostic] = []
    if h is None:
        whole = table(src, 1 if text.startswith(BOM) else 0)  # only the document's first chunk can start with one
        if whole.texts:
            diags.append(_error(whole.range(0, len(whole.texts) - 1),
                                "text before the first heading belongs to no section; start with `# Title`"))
        return ChunkParse(None, 0, tuple(diags))
    level, head_text, _ = h
    if level == 1:
        heading, full, _ = heading_ranges(src)
        body = table(src, body_start)
        if body.texts:
            diags.append(_error(body.range(0, len(body.texts) - 1), "text under the title belongs to no program; put it in `## Note` or a `--` comment"))
        section = Section(SectionKind.TITLE, heading, head_text, None, None, full, diagnostics=tuple(diags))
        return ChunkParse(section, 1, tuple(diags))
    section = _section(src, head_text, body_start, diags, shared)
    return ChunkParse(section, 2, section.diagnostics if type(section.diagnostics) is Filled else tuple(diags))


def _layer_index(words: list[str], name: str) -> int | None | str:
    """The layer number a heading's words give, or the reason there is none."""
    if len(words) == 2 and words[1].isascii() and words[1].isdigit():
        index = int(words[1]) if len(words[1]) <= 7 else MAX_LAYER + 1
        if index > MAX_LAYER:
            return f"layer {words[1][:12]}{'…' if len(words[1]) > 12 else ''} is past any model's depth (at most {MAX_LAYER})"
        return index
    return f"a layer heading reads `## Layer N`, not `## {name.strip()[:40]}`"


def _section(src: Source, head_text: str, body_start: int, diagnostics: list[Diagnostic], shared: dict | None) -> Section:
    name, _, note = head_text.partition(":")
    words = name.split()
    note = note.strip() or None
    key = words[0].lower() if words else ""
    if key == "layer":
        index = _layer_index(words, name)
        placed = None
        if isinstance(index, str):
            placed = heading_ranges(src)
            heading, _, index_range = placed
            diagnostics.append(_error(index_range if index_range is not None and "past" in index else heading, index))
            index = None
        body_text = src.text[body_start:]
        parts = pieces(body_text)
        texts = texts_of(parts, body_text)
        shape = shape_of(texts, parts)
        rep = shared.get(shape.frame) if shared is not None and shape.key is not None else None
        if rep is not None and rep.shape.key != shape.key and not same_numerals(rep, texts):
            rep = None  # a number this layer writes is one the parser refuses: its own parse says so
        if rep is None and shared is not None and shape.key is not None:
            rep = shared.get(broken_key(shape))
        if rep is not None:
            # One program up to names (and numbers) with a layer already parsed: its tree, renamed when first read;
            # a broken one's diagnostics, renamed now.
            body = table(src, body_start, parts=parts, placed=False, texts=texts, like=rep.table)
            heading, full, index_range = placed or (None, None, None)
            section = Section(SectionKind.LAYER, heading, head_text, index, note, full, body, None, None,
                              index_range=index_range, shape=shape, shared_from=rep)
            mine = _shared_failures(rep, section) if rep.broken is not None else []
            if mine and type(mine[0]) is tuple:  # every one a template: rows, made into diagnostics when read
                section.diagnostics = Filled(tuple(diagnostics), mine)
                return section
            if mine is not None:
                diagnostics += mine
                section.diagnostics = tuple(diagnostics)
                return section
        heading, full, index_range = placed or heading_ranges(src)
        body = table(src, body_start, parts=parts, texts=texts)
        mine = []
        failed: list = []
        statements, spans = _program(body, mine, failed)
        diagnostics += mine
        section = Section(SectionKind.LAYER, heading, head_text, index, note, full, body, statements, spans,
                          index_range=index_range, shape=shape, diagnostics=tuple(diagnostics))
        if shared is not None and shape.key is not None:
            if not mine:
                shared[shape.frame] = section
            else:
                # A broken layer is its shape's tree too, what its failed statements say kept as templates (made
                # when a second layer of its shape asks): recovery costs a parse per shape, not per layer.
                section.broken = failed
                shared[broken_key(shape)] = section
        return section
    heading, full, _ = heading_ranges(src)
    body = table(src, body_start)
    kind = _SECTIONS.get(key) if len(words) == 1 else None
    if kind is None and key == "note":
        kind = SectionKind.NOTE
    if kind is None:
        guess = nearest(words[0] if words else "", ["Model", "Checkpoint", "Embed", "Layer", "Head", "Note"])
        hint = f"; did you mean `## {guess}`?" if guess else ""
        diagnostics.append(_error(heading, f"unknown section `## {head_text[:40]}`: sections are Model, Checkpoint, Embed, Layer N, Head and Note{hint}"))
        return Section(SectionKind.UNKNOWN, heading, head_text, None, note, full, body, diagnostics=tuple(diagnostics))
    if kind in (SectionKind.EMBED, SectionKind.HEAD):
        statements, spans = _program(body, diagnostics)
        return Section(kind, heading, head_text, None, note, full, body, statements, spans, diagnostics=tuple(diagnostics))
    if kind is SectionKind.MODEL:
        constants = _model(body, diagnostics)
        return Section(kind, heading, head_text, None, note, full, body, constants=constants, diagnostics=tuple(diagnostics))
    if kind is SectionKind.CHECKPOINT:
        entries = _checkpoint(body, diagnostics)
        return Section(kind, heading, head_text, None, note, full, body, entries=entries, diagnostics=tuple(diagnostics))
    return Section(kind, heading, head_text, None, note, full, table(src, len(src.text)))


# ---- the document ------------------------------------------------------------------------------------------------


def parse(source: str | bytes, shared: dict | None = None, share: bool = True) -> Document:
    """Parse a whole document. Never raises; everything wrong is a diagnostic. ``shared``: see ``parse_chunk``
    (a fresh one per document unless the caller keeps one); ``share=False`` parses every layer on its own (what
    the shared parse is tested against)."""
    text, replaced = decode(source)
    size = len(source) if isinstance(source, bytes) else utf8_length(text) if text.isascii() else len(text.encode("utf-8", errors="replace"))
    too_large = document_too_large(size)
    if too_large is not None:
        return Document(text, None, (), (_error(Range(Pos(0, 0, 0), Pos(0, 0, 0)), too_large, "size"),))
    diagnostics: list[Diagnostic] = []
    if replaced:
        diagnostics.append(_error(Range(Pos(0, 0, 0), Pos(0, 0, 0)), "the file is not valid UTF-8; invalid bytes were replaced by �"))
    shared = ({} if shared is None else shared) if share else None
    title = None
    sections: list[Section] = []
    for c in cut(text):
        p = parse_chunk(c.text, c.line, c.offset, shared)
        if p.section is None:
            diagnostics += p.diagnostics
            continue
        if p.level == 1:
            if title is None and not sections:
                title = p.section.title
            else:
                diagnostics.append(_error(p.section.heading, "only the first heading is a `# Title`; sections are `## Model`, `## Layer N`, …"))
        diagnostics += p.diagnostics
        sections.append(p.section)
    if title is None:
        diagnostics.append(_error(Range(Pos(0, 0, 0), Pos(0, 0, 0)), "the document has no `# Title` first line"))
    return Document(text, title, tuple(sections), tuple(diagnostics))

