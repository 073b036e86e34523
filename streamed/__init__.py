"""streamed: model programs in an English-like authoring language — layer kinds, divergences, SN50 bundles.

The packages are the stages of the pipeline, each importing only the stages before it:

    lang      text → syntax tree with ranges, and diagnostics
    model     syntax tree → programs (semantic checks); config.json / GGUF → specs → documents; checkpoint storage
    analysis  programs → layer kinds, divergences, the incremental analysis, repairs
    spatial   kinds → one certified SpatialProgram per kind, per deployment; residency; the bundle on disk
    numerics  what every operation computes; the reference interpreter and the bundle executor; verification
    cli       the ``streamed`` command (the language server is its own package, ``streamed_lsp``, in ``server/``)

The names below are loaded on first use (PEP 562), so ``import streamed`` — and the ``streamed`` command's start —
costs nothing until the core is needed, and an interrupt while the command starts is the command's to report.
"""

import os
import sys
from importlib import import_module
from pathlib import Path


def kernel_cache() -> Path:
    """Where numba keeps the compiled kernels (``numerics``): ``NUMBA_CACHE_DIR`` when the user set it, else
    ``streamed/numba`` in the platform's user cache folder — ``$XDG_CACHE_HOME`` (``~/.cache``) on Linux,
    ``~/Library/Caches`` on macOS, ``%LOCALAPPDATA%`` on Windows. Never beside the package: a system or read-only
    install cannot write there, and numba would compile every kernel again in every process."""
    if os.environ.get("NUMBA_CACHE_DIR"):
        return Path(os.environ["NUMBA_CACHE_DIR"])
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local"
    elif sys.platform == "darwin":
        base = Path.home() / "Library" / "Caches"
    else:
        base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "streamed" / "numba"


# ★ Every entry — the command line, the library, the language server — imports this package first, so this runs
# before numba is imported by any kernel module; numba reads its cache folder when a kernel is defined. A numba the
# embedding program imported earlier has read its configuration already: its setting is changed the same way.
os.environ.setdefault("NUMBA_CACHE_DIR", str(kernel_cache()))
if "numba.core.config" in sys.modules and not sys.modules["numba.core.config"].CACHE_DIR:
    sys.modules["numba.core.config"].CACHE_DIR = os.environ["NUMBA_CACHE_DIR"]

_EXPORTS = {
    "Analysis": ".analysis.whole", "analyze": ".analysis.whole",
    "LayerKind": ".analysis.kinds", "layer_kinds": ".analysis.kinds", "renaming": ".analysis.kinds",
    "shape_digest": ".analysis.kinds",
    "Storage": ".model.checkpoint", "ALL_Q8": ".model.checkpoint",
}

__all__ = list(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        value = getattr(import_module(_EXPORTS[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'streamed' has no attribute {name!r}")
