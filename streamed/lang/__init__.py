"""Stage 1, the front end. In: the text of a document (``str`` or bytes of any encoding). Out: a ``Document`` — its
sections and statements as a frozen syntax tree whose every node carries its range — and the syntax diagnostics.
``parse`` is total: any input gives a ``Document``, never an exception.

Modules: ``lexer`` (token tables; positions — (line, UTF-16 column) and byte offset — made when asked for),
``ops`` (the operation table: every spelling, slot and option, written once), ``chunks`` (the document cut at
its headings; where a heading is), ``syntax`` (the tree and ``Diagnostic``; a shared layer's tree renamed),
``shapes`` (a layer's shape and frame: its text up to names, and up to names and numbers), ``parser`` (statements,
sentence-level recovery; one parse per frame), ``limits`` (the accepted sizes). Imports nothing else of the
project.
"""

from .lexer import Pos, Range, Token, tokens
from .parser import parse
from .syntax import Diagnostic, Document, Section, SectionKind, Severity

__all__ = ["Pos", "Range", "Token", "tokens", "parse", "Diagnostic", "Document", "Section", "SectionKind", "Severity"]
