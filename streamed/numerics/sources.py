"""What the kernels are compiled from: a digest of the Python sources of ``streamed/numerics``, read once a process.

Why a digest of them all: numba keys a cached kernel by its own module's source alone, but a kernel's machine code is
also made by code generators of the modules beside it (``product.prefetch``, ``_address``, the dots intrinsics) and by
their constants (``ggml.COLUMNS``): a change there left the kernels of an unchanged module as they were compiled
before it, in every process after. With this digest in every kernel's key (``jit._Loaded``), a change to any of them
compiles the kernels again once. Why a module of its own, importing nothing of numba's: the warm-up's stamps are
keyed by it too (``ahead.key``), checked after every command, which must not pay numba's import — and the two keys
must change together: a stamp that outlived the kernels it stands for would keep the warm-up from compiling them.

I/O: reads the sources named.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path


@functools.lru_cache(maxsize=None)
def digest(folder: Path) -> str:
    """The sha256 of every ``*.py`` in ``folder``, in name order, each its name then its bytes."""
    h = hashlib.sha256()
    for path in sorted(folder.glob("*.py")):
        h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()
