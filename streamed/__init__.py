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

from importlib import import_module

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
