"""A layer's shape — its text up to the names it binds — and its frame — its text up to its names and its numerals:
what decides whether a layer is parsed or takes another's tree.

Two layers of one **shape** are one text up to a one-to-one renaming of binders; a layer of a known shape is renamed,
not parsed, and its program is the known one renamed, not checked. Two layers of one **frame** are one text up to
that renaming and the digits of their numbers (``1e-5`` and ``3e-5``, ``by 4096`` and ``by 8192``, ``sharing 8`` and
``sharing 4``): the parser reads the two alike — a piece of a numeral is read only by the number rule, which asks of
a piece what kind of piece it is, never which digits it has — so a layer of a known frame takes that tree too, its
numbers read from its own digits (``syntax.Renaming``), when each of them is a number the parser accepts. Its program is checked
on its own (a width decides shapes), but nothing is parsed: a model whose every layer is its own kind because of
one number — an epsilon, a width, a grouping — is parsed once per frame.

Invariant: a layer that takes a tree by its shape or its frame has exactly the statements its own parse gives
(tested against ``parse(share=False)``).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from . import ops as ops_table
from .lexer import NUMERAL
from .syntax import Section

#: Binders the parser reads exactly as it reads any other: names (a letter first) that are no word of the language.
_PLAIN_NAMES = re.compile(r"(?:[A-Za-z][A-Za-z0-9_]*(?: |\Z))*")
#: A binder's mark in a shape's key: tokens and comments hold no line end, so ``\r`` never starts one of them.
_MARKS = tuple(f"\r{i}" for i in range(512))
#: A piece of a numeral (``lexer.NUMERAL``), in a key's tokens (one a line). The parser reads every piece of one
#: class — digits (``4096``, the ``5`` of ``1e-5``), digits and an exponent's mark (``1e``), or both and the exponent's
#: digits (``1e5``) — alike: it asks of a piece only what the class says, whether it starts and ends with a digit and
#: what the number rule's pattern makes of it; so a frame keeps the class and leaves out the digits.
_PIECES = re.compile(f"^(?:{NUMERAL.pattern})$", re.M)


#: The largest number the parser accepts (``parser._number``).
LARGEST = 1e30


def _class(m: re.Match) -> str:
    text = m.group(0)
    return "\r" if text.isdigit() else "\rx" if text[-1].isdigit() else "\re"


@dataclass(frozen=True, slots=True)
class Shape:
    """A program's text up to the names it binds. ``names``: its binders (every token after ``Let``) in the order of
    their first ``Let``. ``key``: its tokens (comments included) with each binder replaced by its index in ``names``,
    and the whitespace between them — two programs with equal keys are one text up to a one-to-one renaming of
    binders (the binder at each index of one to the binder at that index of the other), token for token, space for
    space; ``None`` when a binder is not a plain name (a word of the language, a number, a character), whose
    spelling the parser reads, so that the layer is parsed on its own. ``frame``: the key with every piece of a
    numeral replaced by the mark of its class (the key itself when it has none)."""

    names: tuple[str, ...]
    key: tuple[str, str] | None
    frame: tuple[str, str] | None = None


def broken_key(shape: Shape) -> tuple:
    """Where a broken layer of ``shape`` is kept for the other layers of its shape (``parser``): beside the clean
    layers kept by frame, under a key no frame is."""
    return (*shape.key, "broken")


def let_binders(texts) -> tuple[str, ...]:
    """Every token that follows a ``Let`` token (LANGUAGE §7), once each, in the order of their first ``Let``."""
    out: list[str] = []
    i = -1
    index = texts.index
    try:
        while True:
            i = index("Let", i + 1)
            out.append(texts[i + 1])
    except (ValueError, IndexError):
        pass
    return tuple(dict.fromkeys(out))


def shape_of(texts, parts) -> Shape:
    """The shape of a program whose ``pieces`` are ``parts`` and token texts ``texts``."""
    names = let_binders(texts)
    if not (ops_table.KEYWORDS.isdisjoint(names) and _PLAIN_NAMES.fullmatch(" ".join(names)) is not None):
        return Shape(names, None)
    marks = dict(zip(names, _MARKS if len(names) <= len(_MARKS) else (f"\r{i}" for i in range(len(names)))))
    odd = parts[1::2]
    # Tokens joined by a line end (none holds one); the whitespace between them joined by NUL (none is one).
    words = "\n".join(map(marks.get, odd, odd))
    key = (words, "\x00".join(parts[::2]))
    framed = _PIECES.sub(_class, words)
    return Shape(names, key, key if framed == words else (framed, key[1]))


def same_numerals(rep: Section, texts) -> bool:
    """Whether a layer of ``rep``'s frame whose token texts are ``texts`` reads as ``rep`` does but for the values
    of its numbers: its digits differ from ``rep``'s only inside ``rep``'s numbers, and each number it writes
    otherwise is one the parser accepts (finite, at most ``LARGEST``). (Their frames being one, they differ only in
    numeral pieces, class for class, and in binders.)"""
    found, loose = rep.number_tokens
    mine = rep.texts
    if any(texts[k] != mine[k] for k in loose):
        return False
    for a, b, text in found:
        new = texts[a] if a == b else "".join(texts[a:b + 1])
        if new != text:
            try:
                value = float(new)
            except ValueError:
                return False
            if not math.isfinite(value) or abs(value) > LARGEST:
                return False
    return True
