"""Stage 2, what a document means and where documents come from. In: a ``Document``; a Hugging Face ``config.json``
or a GGUF checkpoint. Out: ``Programs`` (embed, one per layer, head: declarations and shapes with ``rows``/``ctx``
kept symbolic) with the semantic diagnostics; a ``ModelSpec`` and the document text the author writes for it; the
``Storage`` a checkpoint gives its tensors.

Modules: ``program`` (semantic checks of one program), ``links`` (every program checked, and the cross-section links),
``checkpoint`` (``## Checkpoint`` bindings and ``Storage``), ``storage`` (``storage_of``: the storage a named checkpoint
gives), ``spec`` (the architecture as data), ``hf`` (config.json with transformers' field semantics), ``gguf`` (GGUF
metadata and tensor storage), ``gguf_file`` (the GGUF container read, the file mapped), ``author`` (spec → text).
Reads files only in ``hf``/``gguf``/``gguf_file`` and ``storage.storage_of``, where it says so. Imports only ``lang``.
"""
