"""streamed: model programs in an English-like authoring language — layer kinds, divergences, SN50 bundles.

The core is pure and synchronous: ``lang`` parses, ``model`` checks programs and authors documents, ``kinds`` measures
which layers are one program, ``spatial`` lowers. Adapters (``cli``, ``server``) are thin.

The names below are loaded on first use (PEP 562), so ``import streamed`` — and the ``streamed`` command's start —
costs nothing until the core is needed, and an interrupt while the command starts is the command's to report.
"""

from importlib import import_module

_EXPORTS = {
    "Analysis": ".analysis", "analyze": ".analysis",
    "LayerKind": ".kinds", "layer_kinds": ".kinds", "renaming": ".kinds", "shape_digest": ".kinds",
    "Storage": ".model.checkpoint", "ALL_Q8": ".model.checkpoint",
}

__all__ = list(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        value = getattr(import_module(_EXPORTS[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'streamed' has no attribute {name!r}")
