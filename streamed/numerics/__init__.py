"""Stage 5, what the programs compute. In: the document's ``Programs``, weights (a GGUF through the document's
bindings, or seeded), and a ``StreamedModel`` or a bundle read from disk. Out: the tensors each computes, and the
comparison that certifies the lowering.

Modules: ``kernels`` (every operation once, as its math, float32), ``product`` (the one product, in a fixed order of
arithmetic; what enters it in llama.cpp's arithmetic), ``q8`` (Q8_0, bit-exact with ``gguf.quants``; a Q8_0 weight as
the file's own blocks), ``weights`` (reading — where they are — and seeding weights by declared name), ``footprint``
(what a run holds, counted before it starts), ``reference`` (interprets the document), ``execute`` (walks the
bundle's serialised IR, never the source), ``verify`` (runs both, compares tensor by tensor), ``run`` (one sequence's
logits). Imports ``spatial``, ``analysis``, ``model`` and ``lang``.
"""
