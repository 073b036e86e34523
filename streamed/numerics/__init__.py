"""Stage 5, what the programs compute. In: the document's ``Programs``, weights (a GGUF through the document's
bindings, or seeded), and a ``StreamedModel`` or a bundle read from disk. Out: the tensors each computes, and the
comparison that certifies the lowering.

Modules: ``kernels`` (every operation once, as its math, float32), ``q8`` (Q8_0, bit-exact with ``gguf.quants``),
``weights`` (reading and seeding weights by declared name), ``reference`` (interprets the document), ``execute``
(walks the bundle's serialised IR, never the source), ``verify`` (runs both, compares tensor by tensor). Imports
``spatial``, ``analysis``, ``model`` and ``lang``.
"""
