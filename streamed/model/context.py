"""What a model computes that depends on the context it runs at — one rule, read by the reference, the bundles'
executor and the manifest alike.

Of the settings the project models, llama.cpp chooses one by the context: Phi-3's LongRoPE factors
(``llama_model::get_rope_factors``: the long list when the context exceeds the original one). The others do not
depend on it — YaRN's ramp and attention factor are computed from the original context alone
(``ggml_rope_yarn_corr_dims(n_ctx_orig)``), Llama 3's divisors are stored, and a window is a window whatever the
context. The context is llama.cpp's, not the one asked for: ``llama_context`` rounds ``n_ctx`` up to a multiple of
256 (``GGML_PAD``), so a model asked to run at 100 positions with an original context of 128 runs at 256 and reads
the long factors.

Pure: numbers in, numbers out.
"""

from __future__ import annotations


def llama_cpp_context(ctx: int) -> int:
    """The context llama.cpp runs at when asked for ``ctx`` positions: ``GGML_PAD(n_ctx, 256)``, the next multiple of
    256 (one sequence, so also its ``n_ctx_seq``)."""
    return -(-int(ctx) // 256) * 256


def longrope_factors(context: int, original: float) -> str:
    """Which of LongRoPE's two lists a model run at ``context`` positions reads: ``long`` when the context llama.cpp
    runs at (``llama_cpp_context``) exceeds the original one, else ``short``. (transformers chooses by the sequence's
    length so far, so one sequence changes lists as it grows; a deployment has one context, and a bundle one table:
    llama.cpp's rule is the one a bundle can keep, and the one the checkpoints are run by.)"""
    return "long" if llama_cpp_context(context) > original else "short"
