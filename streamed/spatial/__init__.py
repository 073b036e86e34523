"""Lowering to the RDU: targets, the spatial IR, the passes that lower one program, and residency over a deployment.

Modules: ``target`` (SpatialTarget from TOML), ``ir`` (the IR and its execution semantics), ``lower`` (the passes:
lift, fold Q8, shared tables, tensor parallel, place, certify), ``residency`` (where states and weights live, and the
roofline estimate), ``diagnose`` (rejects as diagnostics), ``cli`` (``streamed lower``).
"""
