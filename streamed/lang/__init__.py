"""The language front end: lexer, parser with sentence-level recovery, syntax tree, and semantic checks."""

from .lexer import Pos, Range, Token, tokens
from .parser import parse
from .syntax import Diagnostic, Document, Section, SectionKind, Severity

__all__ = ["Pos", "Range", "Token", "tokens", "parse", "Diagnostic", "Document", "Section", "SectionKind", "Severity"]
