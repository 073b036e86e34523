"""Stage 4, lowering to the RDU. In: an ``Analysis`` (its kinds) and a ``Deployment``. Out: a ``StreamedModel`` — one
certified ``SpatialProgram`` per layer kind, an embed and a head, every layer bound to its kind, residency and an
estimate — or a ``StreamedReject`` naming the program and the statement; the bundle directory on disk.

Modules: ``deployment`` (what a bundle serves and how each program is cut), ``target`` (SpatialTarget from TOML),
``ir`` (the IR and its execution semantics), ``lower`` (one program through the passes), ``passes/`` (lift,
split_tp, fold_q8, tile, place, certify, one module each, and what they share), ``residency`` (where states and
weights live; the roofline estimate), ``streamed_model`` (the whole model per deployment: kinds lowered once, layers
bound by renaming), ``diagnose`` (rejects as diagnostics), ``manifests`` (the manifest as data), ``bundle`` (atomic
write and read of the bundle, validated by the JSON Schemas in ``schema/`` and held to its programs), ``synth``
(generated documents for tests and benchmarks). Imports ``analysis``, ``model`` and ``lang``; only ``bundle`` touches
files.
"""
