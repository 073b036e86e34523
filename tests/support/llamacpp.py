"""llama.cpp, through ``llama-cpp-python``'s C API, as the outside implementation the oracle tests compare against.

``logits(path, tokens, prefill)`` loads a GGUF, evaluates ``tokens`` — the first ``prefill`` of them as one batch,
then one decode step per token — with an f32 KV cache, the full (unwindowed) cache kept for sliding layers, flash
attention off, and returns the logits of every position (``len(tokens) × vocab``, float32); ``tensors(…)`` also
every float32 tensor its graph computed, step by step. Nothing here compares: it only says what llama.cpp computes.
Importing this module fails when ``llama_cpp`` is not installed: a suite that needs the oracle cannot run without it,
and says so.

``BUILT`` is the kernel path of the llama.cpp under test, read from its own report (``llama_print_system_info``) and
this CPU's vendor as ``--arithmetic llama.cpp`` reads them (``streamed.numerics.cpu``): the path whose arithmetic the oracle holds
``streamed`` to bit for bit — or a ``cpu.Unemulated`` saying why no emulated path is it."""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

import llama_cpp as lc
import numpy as np

from streamed.numerics import cpu

REPORT = lc.llama_print_system_info().decode("utf-8", "replace")
BUILT = cpu.from_report(REPORT, "the llama.cpp under test")
if isinstance(BUILT, cpu.KernelPath) and not os.environ.get("STREAMED_ORACLE_BUILD"):
    # llama-cpp-python's own build is native (-march=native): its plain C loops are compiled as GCC tunes for this
    # CPU, as ``cpu.this_machine`` says of it; a build of ``llama_builds`` (STREAMED_ORACLE_BUILD) names instruction
    # sets only, tuned for no CPU.
    BUILT = cpu.native_tuning(BUILT, cpu.cpu_vendor(Path("/proc/cpuinfo").read_text(errors="replace")))


def built_path() -> cpu.KernelPath:
    """``BUILT``, or the test that asks for it is reported not testable here, with the reason (the build is one no
    emulated path computes as: an ARM host's, say) — the other tests of the module still run."""
    import pytest

    if isinstance(BUILT, cpu.KernelPath):
        return BUILT
    pytest.skip(f"not testable here: {BUILT}")

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


class _Tensor(ctypes.Structure):
    """``struct ggml_tensor`` (ggml.h of the vendored llama.cpp: 4 dims, 64 bytes of op params, 10 sources, a name of
    64): what the evaluation callback is handed."""

    _fields_ = [("type", ctypes.c_int), ("buffer", ctypes.c_void_p), ("ne", ctypes.c_int64 * 4),
                ("nb", ctypes.c_size_t * 4), ("op", ctypes.c_int), ("op_params", ctypes.c_int32 * 16),
                ("flags", ctypes.c_int32), ("src", ctypes.c_void_p * 10), ("view_src", ctypes.c_void_p),
                ("view_offs", ctypes.c_size_t), ("data", ctypes.c_void_p), ("name", ctypes.c_char * 64),
                ("extra", ctypes.c_void_p), ("padding", ctypes.c_char * 8)]


#: ``enum ggml_op`` values the oracle names (ggml.h of the vendored llama.cpp).
MUL_MAT, RESHAPE, ROPE = 29, 36, 48


def _array(t: _Tensor) -> np.ndarray:
    """A float32 tensor's values, copied, in numpy's order (``ne`` reversed), through its strides."""
    ne, nb = list(t.ne), list(t.nb)
    size = sum((n - 1) * b for n, b in zip(ne, nb)) + 4
    buf = (ctypes.c_char * size).from_address(t.data)
    return np.ndarray(tuple(reversed(ne)), np.float32, buf, strides=tuple(reversed(nb))).copy()


def logits(path: str | Path, tokens: list[int], prefill: int | None = None, threads: int = 2,
           mmap: bool = False) -> np.ndarray:
    return _evaluate(path, tokens, prefill, threads, mmap)[0]


def tensors(path: str | Path, tokens: list[int], prefill: int | None = None,
            threads: int = 2) -> tuple[np.ndarray, list[dict[str, list[tuple[int, np.ndarray]]]]]:
    """``logits``, and every float32 tensor llama.cpp's graph computed at each step (the prefill, then each decode
    step): ``steps[s][name]`` is ``[(op, values), …]`` in the order computed (a name such as ``Qcur-0`` is given to
    the product, its reshape and its rotation alike; ``op`` tells them apart). Read through the scheduler's
    evaluation callback, which asks for every tensor: the graph then runs node by node, so ggml fuses no two nodes
    (an RMS norm and its ``mul``, which compute alike fused or not)."""
    return _evaluate(path, tokens, prefill, threads, False, capture=True)


def _evaluate(path, tokens, prefill, threads, mmap, capture: bool = False):
    _start()
    prefill = len(tokens) if prefill is None else prefill
    seen: list[dict[str, list[tuple[int, np.ndarray]]]] = [{}]

    @lc.ggml_backend_sched_eval_callback
    def look(tensor, ask, data):
        t = ctypes.cast(tensor, ctypes.POINTER(_Tensor)).contents
        if not ask and t.type == 0:  # GGML_TYPE_F32
            seen[-1].setdefault(t.name.decode(), []).append((t.op, _array(t)))
        return True

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
    if capture:
        cp.cb_eval = look
        cp.cb_eval_user_data = None
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
            seen.append({})
        return np.stack(rows), seen[:-1]
    finally:
        lc.llama_free(ctx)
        lc.llama_model_free(model)


def refusal(path: str | Path) -> str | None:
    """What llama.cpp's loader says of the file at ``path`` — its GGUF parser (``gguf_init_from_file``) and the
    model loader's check that every tensor's data lies within the file — or ``None`` when it takes it. Only the
    vocabulary is loaded (``vocab_only``): the file's layout, not the model's weights, is what is asked."""
    _start()
    _LOG.clear()
    mp = lc.llama_model_default_params()
    mp.n_gpu_layers = 0
    mp.vocab_only = True
    mp.use_mmap = True
    model = lc.llama_model_load_from_file(str(path).encode(), mp)
    if not model:  # every line it logged: the parser's reason does not say "error" itself
        return "; ".join(l.strip() for l in _LOG if l.strip()) or "refused"
    lc.llama_model_free(model)
    return None


def vec_dot_bf16(x: np.ndarray, y: np.ndarray) -> np.float32:
    """``ggml_vec_dot_bf16`` of the build under test (``libggml-cpu``, which exports it) over two rows of bf16 bits
    (``uint16``): the one-row BF16 product as that build's CPU computes it — under AVX512_BF16 its ``dpbf16``
    instruction itself, whose rounding and subnormals no graph of a model reaches at will."""
    import llama_cpp.llama_cpp as library

    dot = ctypes.CDLL(str(library._base_path / "libggml-cpu.so")).ggml_vec_dot_bf16
    dot.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_size_t,
                    ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    dot.restype = None
    x, y = np.ascontiguousarray(x, np.uint16), np.ascontiguousarray(y, np.uint16)
    assert x.shape == y.shape and x.ndim == 1
    s = np.zeros(1, np.float32)
    dot(len(x), s.ctypes.data, 0, x.ctypes.data, 0, y.ctypes.data, 0, 1)
    return s[0]


def repacked(path: str | Path) -> set[str]:
    """The stored types of the weights llama.cpp, loading ``path`` with its defaults (``use_extra_bufts``: ggml's
    extra buffer types), moves into a layout of its own — as its log says of each tensor it repacks (``repack tensor
    NAME with …``; ``amx repack tensor NAME of type …``)."""
    import re

    from gguf import GGUFReader

    _start()
    _LOG.clear()
    mp = lc.llama_model_default_params()
    mp.n_gpu_layers = 0
    mp.use_extra_bufts = True
    model = lc.llama_model_load_from_file(str(path).encode(), mp)
    if not model:
        raise LlamaCppError(f"llama.cpp could not load {path}: {_why()}")
    lc.llama_model_free(model)
    names = {m.group(1) for line in _LOG for m in [re.search(r"repack tensor (\S+)", line)] if m}
    stored = {t.name: t.tensor_type.name for t in GGUFReader(str(path)).tensors}
    return {stored[n] for n in names}
