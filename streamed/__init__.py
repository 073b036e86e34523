"""streamed: model programs in an English-like authoring language — layer kinds, divergences, SN50 bundles.

The core is pure and synchronous: ``lang`` parses, ``model`` checks programs and authors documents, ``kinds`` measures
which layers are one program, ``spatial`` lowers. Adapters (``cli``, ``server``) are thin.
"""

from .analysis import Analysis, analyze
from .kinds import LayerKind, layer_kinds, renaming, shape_digest
from .model.checkpoint import ALL_Q8, Storage

__all__ = ["Analysis", "analyze", "LayerKind", "layer_kinds", "renaming", "shape_digest", "Storage", "ALL_Q8"]
