"""The storage a named checkpoint gives: ``storage_of``, the one place a checkpoint file is read for its storage.

It sits above both ``checkpoint`` (the bindings, ``Storage`` and ``CheckpointError``, which read no file) and
``gguf`` (the reader, which makes a ``Storage``), so that neither imports the other's way round. No checkpoint named
is ``ALL_Q8`` without loading the reader: numpy and the ``gguf`` package load only when a file is named.
"""

from __future__ import annotations

from .checkpoint import ALL_Q8, Storage


def storage_of(checkpoint: str | None, parsed=None) -> Storage:
    """The storage the GGUF at ``checkpoint`` gives (this reads the file, or ``parsed``: the file already parsed,
    ``gguf.mapped(checkpoint)``), or ``ALL_Q8`` — every weight declared ``q8`` stored Q8_0 — when none is named. A
    file that cannot be used is a ``CheckpointError`` naming it."""
    if checkpoint is None:
        return ALL_Q8
    from .gguf import read_storage  # numpy and the gguf package only when a checkpoint is named

    return read_storage(checkpoint, parsed)
