"""The language server, ``streamed_lsp``: a thin pygls adapter over ``streamed`` (installed from ``server/`` under this
import name; the only code of the project that imports pygls or lsprotocol).

``handlers`` is a list of small handlers; each capability is its own module that converts LSP positions to the core's
(line, UTF-16 column) and back and calls ``streamed``; ``scheduler`` debounces edits behind a generation counter and
swaps in immutable per-document snapshots; ``commands`` runs the workspace commands. Nothing here decides what a
program means: that is the core's. Start it with ``streamed serve`` or ``python -m streamed_lsp`` (stdio).
"""
