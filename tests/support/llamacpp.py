"""llama.cpp, through ``llama-cpp-python``'s C API, as the outside implementation the oracle tests compare against.

``logits(path, tokens, prefill)`` loads a GGUF, evaluates ``tokens`` — the first ``prefill`` of them as one batch,
then one decode step per token — with an f32 KV cache, the full (unwindowed) cache kept for sliding layers, flash
attention off, and returns the logits of every position (``len(tokens) × vocab``, float32). Nothing here compares:
it only says what llama.cpp computes. Importing this module fails when ``llama_cpp`` is not installed: a suite that
needs the oracle cannot run without it, and says so."""

from __future__ import annotations

import ctypes
from pathlib import Path

import llama_cpp as lc
import numpy as np

_LOG: list[str] = []


@lc.llama_log_callback
def _keep(level, text, data):  # module-level: llama.cpp holds the pointer for the process's life
    _LOG.append(text.decode("utf-8", "replace"))
    del _LOG[:-200]


_started = False


def _start() -> None:
    global _started
    if not _started:
        lc.llama_log_set(_keep, ctypes.c_void_p())
        lc.llama_backend_init()
        _started = True


def _why() -> str:
    """llama.cpp's last words (its log is kept, not printed): where a load or a decode stopped."""
    lines = [l.strip() for l in _LOG if l.strip()]
    errors = [l for l in lines if "error" in l.lower() or "failed" in l.lower()]
    return "; ".join((errors or lines)[-3:])


class LlamaCppError(Exception):
    """llama.cpp refused the file or a batch: what it was given and where it stopped."""


def logits(path: str | Path, tokens: list[int], prefill: int | None = None, threads: int = 2,
           mmap: bool = False) -> np.ndarray:
    _start()
    prefill = len(tokens) if prefill is None else prefill
    mp = lc.llama_model_default_params()
    mp.n_gpu_layers = 0
    mp.use_mmap = mmap
    # The plain CPU kernels, never an "extra buffer type" (AMX, repacked Q8_0): on a CPU with AMX, llama.cpp built
    # with -march=native repacks Q8_0 weights for AMX tiles and crashed (SIGSEGV) in the first Q8_0 product on this
    # project's machines; and the oracle's arithmetic (docs/oracle.md) is that of ggml's vec_dot kernels.
    mp.use_extra_bufts = False
    model = lc.llama_model_load_from_file(str(path).encode(), mp)
    if not model:
        raise LlamaCppError(f"llama.cpp could not load {path}: {_why()}")
    cp = lc.llama_context_default_params()
    cp.n_ctx = max(len(tokens), 8)
    cp.n_batch = cp.n_ubatch = max(prefill, 1)
    cp.n_seq_max = 1
    cp.n_threads = cp.n_threads_batch = threads
    cp.type_k = cp.type_v = lc.GGML_TYPE_F32
    cp.flash_attn_type = lc.LLAMA_FLASH_ATTN_TYPE_DISABLED
    cp.swa_full = True
    cp.no_perf = True
    ctx = lc.llama_init_from_model(model, cp)
    if not ctx:
        lc.llama_model_free(model)
        raise LlamaCppError(f"llama.cpp could not make a context for {path}: {_why()}")
    try:
        vocab = lc.llama_vocab_n_tokens(lc.llama_model_get_vocab(model))
        rows: list[np.ndarray] = []
        batches = [tokens[:prefill]] + [[t] for t in tokens[prefill:]]
        pos = 0
        for chunk in batches:
            if not chunk:
                continue
            batch = lc.llama_batch_init(len(chunk), 0, 1)
            try:
                batch.n_tokens = len(chunk)
                for i, t in enumerate(chunk):
                    batch.token[i] = int(t)
                    batch.pos[i] = pos + i
                    batch.n_seq_id[i] = 1
                    batch.seq_id[i][0] = 0
                    batch.logits[i] = 1
                rc = lc.llama_decode(ctx, batch)
                if rc != 0:
                    raise LlamaCppError(f"llama_decode returned {rc} at positions {pos}…{pos + len(chunk) - 1}: {_why()}")
                for i in range(len(chunk)):
                    ptr = lc.llama_get_logits_ith(ctx, i)
                    rows.append(np.ctypeslib.as_array(ptr, shape=(vocab,)).astype(np.float32).copy())
            finally:
                lc.llama_batch_free(batch)
            pos += len(chunk)
        return np.stack(rows)
    finally:
        lc.llama_free(ctx)
        lc.llama_model_free(model)
