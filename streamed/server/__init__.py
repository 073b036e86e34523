"""The language server: a thin pygls adapter over ``streamed``.

``server.py`` is a list of small handlers; each capability is its own module that converts LSP positions to the core's
(line, UTF-16 column) and back and calls ``streamed``; ``scheduler.py`` debounces edits behind a generation counter and
swaps in immutable per-document snapshots. Nothing here decides what a program means: that is the core's.
"""
