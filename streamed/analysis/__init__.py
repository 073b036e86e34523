"""Stage 3, the measurement. In: ``Programs`` and the ``Storage`` of a checkpoint. Out: an ``Analysis`` — the layer
kinds (digest groups, names, representatives), the renamings between layers, the divergences, every diagnostic —
from the whole text (``whole.analyze``) or recomputing only the sections an edit touched (``incremental``, the
language server's path, with the same answer); and the text of repairs (``repair``).

Modules: ``kinds`` (tokens, binders, shape digest, renaming, layer kinds, rebind, divergences), ``whole``,
``text`` (the editor's document as chunks, and the LSP edit rule), ``places`` (a chunk's ranges placed in the
document; what is at an editor position), ``incremental``, ``repair``. Imports ``model`` and ``lang``.
"""
