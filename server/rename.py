"""Rename a name within its layer (every name is one program's: LANGUAGE §4), or a constant of ``## Model``
everywhere: its declaration and every use in every program (a program cannot bind a constant's name, so each use is
the constant's). The new name must be a name — a word that starts with a letter, not a word of the language, not a
constant — and not already bound where the renamed name is used."""

from __future__ import annotations

import re

from lsprotocol import types as lsp

from streamed.analysis.incremental import Spot, spot
from streamed.lang import ops as ops_table
from streamed.lang.syntax import SectionKind
from .convert import to_range
from .scheduler import Snapshot

NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*\Z")


class RenameError(ValueError):
    """A rename that cannot be done, in a sentence naming what the user asked for."""


def _constant_name(s: Spot, line: int, character: int):
    """The constant's name under the position in ``## Model``, or ``None``."""
    rel = line - s.base.line
    return next((c.name for c in s.section.constants if c.name.range.start.line <= rel <= c.name.range.end.line
                 and c.name.range.start.character <= character <= c.name.range.end.character), None)


def _target(snap: Snapshot, line: int, character: int):
    """The spot and the word under the position that can be renamed: a name bound in a program, or a constant (in
    ``## Model`` or where a program uses it)."""
    s = spot(snap.analysis, line, character)
    if s is not None and s.section.kind is SectionKind.MODEL and (name := _constant_name(s, line, character)) is not None:
        return s, name
    tok = s.token if s is not None else None
    if s is None or s.program is None or tok is None or not tok.is_word or tok.is_number:
        raise RenameError("only a name bound by `Let` in a program, or a constant of `## Model`, can be renamed here")
    if tok.text in ops_table.KEYWORDS:
        raise RenameError(f"`{tok.text}` is a word of the language: only a name bound by `Let` can be renamed")
    if tok.text not in s.program.bound_at and tok.text not in snap.analysis.programs.constants:
        raise RenameError(f"`{tok.text}` is not bound in {s.section.label}; rename it where it is bound")
    return s, tok


def prepare_rename(snap: Snapshot, line: int, character: int) -> lsp.PrepareRenamePlaceholder:
    s, word = _target(snap, line, character)
    return lsp.PrepareRenamePlaceholder(to_range(s.to_document(word.range)), word.text)


def _constant_edits(snap: Snapshot, old: str, new_name: str) -> list[lsp.TextEdit]:
    """Every place the constant ``old`` is written: its declaration and each program's uses of it — refused where a
    program already binds ``new_name``, which the renamed uses would then mean."""
    a = snap.analysis
    edits = []
    for section in a.document.sections:
        base = a.base_of(section)
        if section.kind is SectionKind.MODEL:
            edits += [lsp.TextEdit(to_range(base.range(c.name.range)), new_name) for c in section.constants if c.name.text == old]
            continue
        program = a.program_of(section)
        if program is None:
            continue
        uses = [t for t in section.tokens if t.text == old]
        if uses and new_name in program.bound_at:
            raise RenameError(f"`{new_name}` is already bound in {section.label}, which uses `{old}`")
        edits += [lsp.TextEdit(to_range(base.range(t.range)), new_name) for t in uses]
    return edits


def rename(snap: Snapshot, line: int, character: int, new_name: str) -> lsp.WorkspaceEdit:
    s, word = _target(snap, line, character)
    old = word.text
    if not NAME.match(new_name or ""):
        raise RenameError(f"`{new_name}` is not a name: a name is a word of letters, digits and `_` that starts with a letter")
    if new_name in ops_table.KEYWORDS:
        raise RenameError(f"`{new_name}` is a word of the language and cannot be bound")
    constants = snap.analysis.programs.constants
    if new_name != old and new_name in constants:
        raise RenameError(f"`{new_name}` is a constant of `## Model`")
    if old in constants and (s.program is None or old not in s.program.bound_at):
        edits = _constant_edits(snap, old, new_name)
    else:
        if new_name != old and new_name in s.program.bound_at:
            raise RenameError(f"`{new_name}` is already bound in {s.section.label}")
        edits = [lsp.TextEdit(to_range(s.to_document(t.range)), new_name) for t in s.section.tokens if t.text == old]
    return lsp.WorkspaceEdit(document_changes=[lsp.TextDocumentEdit(
        lsp.OptionalVersionedTextDocumentIdentifier(uri=snap.uri, version=snap.version), edits)])
