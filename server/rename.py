"""Rename a name within its layer (every name is one program's: LANGUAGE §4). The new name must be a name — a word
that starts with a letter, not a word of the language, not a constant, not already bound in that program."""

from __future__ import annotations

import re

from lsprotocol import types as lsp

from streamed.analysis.incremental import Spot, spot
from streamed.lang import ops as ops_table
from .convert import to_range
from .scheduler import Snapshot

NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*\Z")


class RenameError(ValueError):
    """A rename that cannot be done, in a sentence naming what the user asked for."""


def _target(snap: Snapshot, line: int, character: int) -> Spot:
    s = spot(snap.analysis, line, character)
    tok = s.token if s is not None else None
    if s is None or s.program is None or tok is None or not tok.is_word or tok.is_number:
        raise RenameError("only a name bound by `Let` in a program can be renamed here")
    if tok.text in ops_table.KEYWORDS:
        raise RenameError(f"`{tok.text}` is a word of the language: only a name bound by `Let` can be renamed")
    if tok.text not in s.program.bound_at:
        raise RenameError(f"`{tok.text}` is not bound in {s.section.label}; rename it where it is bound")
    return s


def prepare_rename(snap: Snapshot, line: int, character: int) -> lsp.PrepareRenamePlaceholder:
    s = _target(snap, line, character)
    return lsp.PrepareRenamePlaceholder(to_range(s.to_document(s.token.range)), s.token.text)


def rename(snap: Snapshot, line: int, character: int, new_name: str) -> lsp.WorkspaceEdit:
    s = _target(snap, line, character)
    old = s.token.text
    if not NAME.match(new_name or ""):
        raise RenameError(f"`{new_name}` is not a name: a name is a word of letters, digits and `_` that starts with a letter")
    if new_name in ops_table.KEYWORDS:
        raise RenameError(f"`{new_name}` is a word of the language and cannot be bound")
    if new_name in snap.analysis.programs.constants:
        raise RenameError(f"`{new_name}` is a constant of `## Model`")
    if new_name != old and new_name in s.program.bound_at:
        raise RenameError(f"`{new_name}` is already bound in {s.section.label}")
    edits = [lsp.TextEdit(to_range(s.to_document(t.range)), new_name) for t in s.section.tokens if t.text == old]
    return lsp.WorkspaceEdit(document_changes=[lsp.TextDocumentEdit(
        lsp.OptionalVersionedTextDocumentIdentifier(uri=snap.uri, version=snap.version), edits)])
