"""The kernels' compiler: numba's ``njit`` with the machine code kept in the kernel cache (``kernel``), and loaded
from it without numba's compiler — numba's runtime included (``_runtime``).

Why: numba, before it loads an overload from its cache, "refreshes" its target context — imports and registers
every implementation its compiler knows (array math, linear algebra, typed containers, random generators, …), about
0.3 s of CPU and 10 MB in every process, more than a 1B-shaped model's attention in a 40-token prefill. Machine code
read from the cache calls none of them: it needs numba's runtime (NRT: the arrays it takes and makes), which is
initialised here, and the symbols of its own library, which loading links. A kernel that is compiled (an empty cache,
a signature not compiled before) still goes through numba's compiler, which refreshes the context itself
(``compile_extra``), so nothing is compiled against a context short of a registry.

The runtime, too, is machine code numba makes in every process: a small LLVM module (its reference counts and its
arrays' data pointer) put through LLVM's optimiser and code generator — 20–30 ms, and 20 MB of LLVM's code and heap
paged in, a tenth of a run's fixed memory. Those pages are touched for nothing when every kernel comes from the cache:
loading machine code needs only LLVM's linker. So the runtime's machine code is kept in the kernel cache too, under
what it was compiled for (numba's and llvmlite's versions, and the target numba's own cache keys its kernels by —
triple, CPU name, features), and loaded as numba loads a cached kernel's (``unserialize_library``).

Invariants: a kernel computes what numba compiled for it — the same machine code, whichever process compiled it; only
when numba's registries are loaded, and whether the runtime's machine code was compiled in this process or read, change
(``tests/cli/test_kernel_cache.py`` holds that a warm process loads no registry and compiles no runtime, and computes
the logits of a process that did both). A runtime copy that cannot be read is compiled again, and one that cannot be
written is only not kept. Processes compiling signatures of one kernel at once keep each its own entry, naming its own
machine code (``_Indexed``).
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import itertools
import os
import pickle
from pathlib import Path

import llvmlite
import numba
import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils, config
from numba.core.caching import FunctionCache, IndexDataCacheFile
from numba.core.compiler_lock import global_compiler_lock
from numba.core.runtime import nrtdynmod, rtsys
from numba.extending import intrinsic

from . import sources
from .cpu import cores


def _cell(value):
    """What a kernel's closure cell holds, as it keys the kernel's cached machine code: a kernel (a numba dispatcher), an
    intrinsic or a plain function (an ``on_threads`` worker) by its function's module, name, bytecode and cells; a
    constant as itself; an LLVM type by its text; anything else pickled, as numba keys it.

    Why: numba keys a closure by its cells pickled, and a dispatcher (an intrinsic) pickles with an identifier drawn
    afresh in every process — a kernel a factory makes (one a type: ``blocks._rows_of``) that calls another kernel or
    intrinsic from its closure would be compiled again by every process, never found in the cache. The sources beside
    it are in the key too (``sources.digest``), so a function's name, bytecode and cells say what it compiles to."""
    if isinstance(value, (bool, int, float, str, bytes, type(None))):
        return value
    if isinstance(value, tuple):
        return tuple(_cell(v) for v in value)
    if isinstance(value, ir.Type):  # by its text: llvmlite caches that text on the object once code is made with it,
        return ("llvm type", str(value))  # so its pickle before and after differ
    f = getattr(value, "py_func", None) or getattr(value, "_defn", None)  # a kernel's function, an intrinsic's
    if f is None and inspect.isfunction(value):  # a plain function: an ``on_threads`` worker
        f = value
    if f is not None:
        return ("kernel", f.__module__, f.__qualname__, hashlib.sha256(f.__code__.co_code).hexdigest(),
                tuple(_cell(c.cell_contents) for c in f.__closure__ or ()))
    from numba.core.serialize import dumps

    return hashlib.sha256(dumps(value)).hexdigest()


class _Loaded(FunctionCache):
    """A kernel's cache whose loads initialise only numba's runtime, not its compiler's registries (and start its
    threads: ``_threads``), and whose key holds the sources beside the kernel's module (``sources.digest``) and its
    closure's cells as ``_cell`` says."""

    def _index_key(self, sig, codegen):
        f = self._py_func
        cells = b"" if f.__closure__ is None else repr(tuple(_cell(c.cell_contents) for c in f.__closure__)).encode()
        return (sig, codegen.magic_tuple(), (hashlib.sha256(f.__code__.co_code).hexdigest(),
                                             hashlib.sha256(cells).hexdigest()),
                sources.digest(Path(f.__code__.co_filename).resolve().parent))

    def load_overload(self, sig, target_context):
        _runtime(target_context)
        _threads()
        with self._guard_against_spurious_io_errors():
            return self._load_overload(sig, target_context)


#: Whether this numba's cache loads as ``_Loaded`` reads it (numba 0.60 … 0.69 do; pyproject.toml pins that range).
_LOADS = all(hasattr(FunctionCache, n) for n in ("_load_overload", "_guard_against_spurious_io_errors"))


@contextlib.contextmanager
def _one_at_a_time(path: str):
    """Hold an exclusive lock on the file ``path`` (made if absent) while the block runs: other processes wait. Where
    there is no ``fcntl`` (Windows) or the file cannot be made, the block runs unlocked."""
    try:
        import fcntl

        held = open(path, "ab")
    except (ImportError, OSError):
        yield
        return
    with held:
        fcntl.flock(held, fcntl.LOCK_EX)  # released when the file is closed
        yield


class _Indexed(IndexDataCacheFile):
    """A kernel's index in the kernel cache (its signatures, each the file of its machine code), written by one process
    at a time, an entry's machine code written before the entry.

    Why: numba reads the index, adds its entry, writes the index back, then the machine code — under the first file
    name the index it read left free. Two processes compiling two signatures of one kernel at once (the warm-up's
    jobs, side by side) each wrote the index the other had not seen: one entry lost, compiled again by every later
    run; both took the same file name, so the entry left could name the other signature's machine code. And a process
    reading between the two writes found an entry whose file still held code an older build had left there."""

    def save(self, key, data):
        with _one_at_a_time(self._index_path + ".lock"):
            overloads = self._load_index()
            name = overloads.get(key)
            if name is None:
                taken = set(overloads.values())
                name = next(n for n in map(self._data_name, itertools.count(1)) if n not in taken)
            self._save_data(name, data)
            overloads[key] = name
            self._save_index(overloads)


#: Whether this numba's index is written as ``_Indexed`` writes it.
_INDEXES = all(hasattr(IndexDataCacheFile, n) for n in ("_load_index", "_save_index", "_save_data", "_data_name"))


def kernel(fn=None, /, **options):
    """``njit(cache=True, **options)``, loaded from the kernel cache as ``_Loaded`` says; ``@kernel`` or
    ``@kernel(error_model="numpy")`` (any option ``njit`` takes)."""

    def make(f):
        dispatcher = njit(cache=True, **options)(f)
        if type(dispatcher._cache) is FunctionCache and _LOADS:  # else numba's own loading, as numba made it
            dispatcher._cache.__class__ = _Loaded
            indexed = dispatcher._cache._cache_file
            if type(indexed) is IndexDataCacheFile and _INDEXES and hasattr(indexed, "_index_path"):
                indexed.__class__ = _Indexed
        return dispatcher

    return make if fn is None else make(fn)


_COMPILED: dict[tuple[int, ...], tuple] = {}


def compiled(dispatcher, *argtypes):
    """``dispatcher`` (a ``kernel``) compiled for ``argtypes`` — the most general of the arrays a run passes (any
    layout, read-only), so every call converts to it and no other specialisation is made: a memory-mapped weight and a
    seeded one, a view and a whole tensor, share one machine code, compiled once per machine into the kernel cache
    (and loaded from it after) — what a warm-up on a small model compiles is what a real-size run uses.

    Looked up by the objects' identities (numba's types are interned; the entry holds them, so no identity is
    reused): hashing the types themselves, recursively, was 7 µs of every product's call — a decode step makes 113."""
    key = (id(dispatcher), *map(id, argtypes))
    if key not in _COMPILED:
        dispatcher.disable_compile(False)
        dispatcher.compile(argtypes)
        dispatcher.disable_compile()  # a call then converts its arrays to a signature compiled, never compiles another
        _COMPILED[key] = (dispatcher, argtypes)
    return dispatcher


def _runtime(context) -> None:
    """Initialise numba's runtime for ``context``, its machine code read from the kernel cache (``_kept_runtime``)
    rather than compiled; once a process, as ``rtsys.initialize`` itself is."""
    if getattr(rtsys, "_init", False):
        return
    with global_compiler_lock:  # re-entrant: ``rtsys.initialize`` takes it too
        compile_runtime = nrtdynmod.compile_nrt_functions
        nrtdynmod.compile_nrt_functions = _kept_runtime
        try:
            rtsys.initialize(context)
        finally:
            nrtdynmod.compile_nrt_functions = compile_runtime


def _runtime_file(context) -> Path | None:
    """Where the runtime's machine code for ``context``'s target is kept: ``runtime/<digest>.nrt`` in the kernel
    cache, the digest of numba's and llvmlite's versions and the target (``magic_tuple``); None without a cache."""
    if not config.CACHE_DIR:
        return None
    made_for = (numba.__version__, llvmlite.__version__, context.codegen().magic_tuple())
    return Path(config.CACHE_DIR) / "runtime" / f"{hashlib.sha256(repr(made_for).encode()).hexdigest()[:32]}.nrt"


def _kept_runtime(context):
    """``nrtdynmod.compile_nrt_functions``, its result kept: the library of the runtime's functions, read from
    ``_runtime_file`` when a process compiled it for this target before, else compiled (as numba does) and kept."""
    kept = _runtime_file(context)
    if kept is not None:
        try:
            return context.codegen().unserialize_library(pickle.loads(kept.read_bytes()))
        except Exception:  # absent, unreadable, or not this numba's: compiled below, and written again
            pass
    module, library = nrtdynmod.create_nrt_module(context)
    library.enable_object_caching()  # so that its machine code can be serialised, as a cached kernel's is
    library.add_ir_module(module)
    library.finalize()
    if kept is not None:
        try:
            kept.parent.mkdir(parents=True, exist_ok=True)
            temporary = kept.with_name(f"{kept.name}.{os.getpid()}")
            temporary.write_bytes(pickle.dumps(library.serialize_using_object_code()))
            os.replace(temporary, kept)
        except OSError:
            pass
    return library


#: How long the threads of numba's OpenMP layer spin for the next parallel kernel before they sleep, in libgomp's
#: pauses (``GOMP_SPINCOUNT``), unless the user's environment says how they wait (``OMP_WAIT_POLICY``,
#: ``GOMP_SPINCOUNT``): on a machine with a core free for each of the run's threads, libgomp's own count (milliseconds,
#: longer than the Python between two kernels of a step); on a busy one, some tens of microseconds (``_threads``).
SPIN_IDLE, SPIN_BUSY = "300000", "3000"
#: The count ``_threads`` chose for this process (None before numba's threads start, or when the user's environment
#: decided).
SPIN_CHOSEN: str | None = None


def spin_count(others: int, cores: int, threads: int) -> str:
    """The spin count for a run of ``threads`` threads on ``cores`` cores while ``others`` other tasks are runnable:
    ``SPIN_IDLE`` when they all fit (``others + threads ≤ cores``), else ``SPIN_BUSY``."""
    return SPIN_IDLE if others + threads <= cores else SPIN_BUSY


def runnable_others(reads: int = 3) -> int | None:
    """How many tasks other than the reading thread are runnable on this machine now: the median of ``reads`` readings
    of ``procs_running`` (``/proc/stat``, the kernel's count of runnable threads, the reader included) less one, half
    a millisecond apart — one reading may catch a moment's process. None where ``/proc/stat`` cannot be read (not
    Linux)."""
    import time

    seen = []
    for i in range(reads):
        try:
            with open("/proc/stat", "rb") as f:
                line = next(x for x in f if x.startswith(b"procs_running "))
            seen.append(int(line.split()[1]) - 1)
        except (OSError, StopIteration, ValueError):
            return None
        if i + 1 < reads:
            time.sleep(0.0005)
    return sorted(seen)[len(seen) // 2]


def _threads() -> None:
    """Start numba's threading layer, its OpenMP threads spinning as ``spin_count`` says for this machine as it is
    now; once a process.

    Why: libgomp's threads, told nothing, spin 300,000 pauses (milliseconds) at every end of a parallel kernel before
    they sleep. A run launches hundreds of kernels a step with Python between them, so a thread that finished its
    share spins through the rest of the step — the fastest way on a machine with a core for each thread (a sleeping
    thread is woken by the next kernel, and a virtual machine's idle CPU is woken by its hypervisor: on an Intel KVM
    host a 1B Q8_0 decode took 7.7–8.0 s spinning 3,000 pauses where it took 6.5–6.7 spinning 300,000), and the
    slowest on a busy one: the spinning thread takes the core the other thread's work, or another process, was
    waiting for (beside two busy processes, 15–17 s against 33–40 s; docs/performance.md). So a run looks once, when
    its threads start, at what else is runnable (``runnable_others``) and spins long only where its threads fit;
    where ``/proc/stat`` cannot tell, briefly. libgomp reads its environment once, when it is loaded (which this
    does): the setting is made for that moment only and taken back, so the processes a run starts get the user's
    environment as it was. Where libgomp was loaded before (an embedding program's own OpenMP), its choice stands."""
    global SPIN_CHOSEN
    from numba.np.ufunc import parallel

    if parallel._is_initialized:
        return
    if "OMP_WAIT_POLICY" in os.environ or "GOMP_SPINCOUNT" in os.environ:
        parallel._launch_threads()
        return
    others = runnable_others()
    SPIN_CHOSEN = SPIN_BUSY if others is None else spin_count(others, cores(), config.NUMBA_NUM_THREADS)
    os.environ["GOMP_SPINCOUNT"] = SPIN_CHOSEN
    try:
        parallel._launch_threads()
    finally:
        del os.environ["GOMP_SPINCOUNT"]


_THREADS: int | None = None


def threads() -> int:
    """How many threads a parallel kernel runs on (``numba.get_num_threads``: ``NUMBA_NUM_THREADS``, the cores), numba's
    threads started first as ``_threads`` says — asking numba starts them, told nothing, if none is yet. Read once a
    process (asking numba is tens of microseconds, and a decode step asks a hundred times); a kernel run
    ``on_threads(worker)(threads(), …)``, its tasks taken by ``claim``, computes the same whatever numba runs it on."""
    global _THREADS
    if _THREADS is None:
        _threads()
        _THREADS = numba.get_num_threads()
    return _THREADS


@intrinsic
def claim(typingctx, counter):
    """``claim(counter)``: adds one to ``counter[0]`` (an int64 array) atomically and returns what it held — the next
    task of a parallel kernel's dynamic schedule, each task taken by exactly one thread.

    Why: numba's parallel loops (its OpenMP and workqueue layers alike) give each thread an equal range of the
    iterations, fixed before it starts; a thread slowed by anything — another process on its core, a virtual CPU
    the hypervisor lent away for a moment — holds every other at the loop's end. Threads that take the next task as
    they become free (an ``on_threads`` worker: ``while (i := claim(taken)) < tasks: …``) finish together whatever
    slowed one of them, as ggml's own matrix products do (``current_chunk``, an atomic counter). Which thread
    computes a task changes nothing in what it computes."""
    if not (isinstance(counter, types.Array) and counter.dtype == types.int64):
        return None

    def codegen(context, builder, signature, args):
        data = context.make_array(signature.args[0])(context, builder, args[0]).data
        return builder.atomic_rmw("add", data, context.get_constant(types.int64, 1), "monotonic")

    return types.int64(counter), codegen


def on_threads(worker):
    """An intrinsic ``run(nthreads, operands)``: ``worker(*operands, taken)`` called once on each of ``nthreads`` of
    numba's threads at once (its threading layer's ``parallel_for``, as a ``prange`` loop's body is run), returning
    when all have returned. ``worker`` is a plain function compiled as a subroutine of the kernel that calls ``run``
    (typed for ``operands``, a tuple, and ``taken``); it shares its work out itself, each thread taking the next task
    as it is free (``claim(taken)``: ``taken``, an int64 array of one element made zero for the call and shared by
    its threads), so how many threads run it, and which, changes nothing in what it computes.

    Why not ``prange``: numba compiles a parallel loop through its parfor passes — the kernel typed and lowered, the
    loop's body outlined into a function of its own, typed, lowered and optimised again with every kernel it calls
    linked in, a gufunc wrapper and a scheduler call built around it: 2.2–2.4 s of a cold first run for the Q8_0
    product, where the same body compiled as a subroutine takes about 0.9 s, and the same again for every type's
    product and dequantiser. A body that schedules its own tasks needs none of that machinery, only the threads.

    Invariants: ``worker``'s exceptions are not raised (a parallel region cannot raise, as in a ``prange`` body);
    the operands are borrowed for the call, as a ``prange`` body borrows the kernel's arrays. The GIL is released
    while the threads run (as numba's parallel loops release it): an array a worker makes is allocated through
    Python's raw allocator, whose hooks (``tracemalloc``'s) take the GIL — held by the waiting caller, they would
    never return."""

    @intrinsic
    def run(typingctx, nthreads, operands):
        if not (isinstance(nthreads, types.Integer) and isinstance(operands, types.BaseTuple)):
            return None

        def codegen(context, builder, signature, args):
            _threads()  # registers ``numba_parallel_for`` with LLVM, so that the kernel can be linked
            count, operands_ = args
            counter = types.Array(types.int64, 1, "C")
            taken = context.compile_internal(builder, lambda: np.zeros(1, np.int64), counter(), [])
            argtypes = (*signature.args[1], counter)
            packed = context.make_tuple(builder, types.Tuple(argtypes),
                                        [builder.extract_value(operands_, i) for i in range(len(argtypes) - 1)]
                                        + [taken])
            done = context.compile_subroutine(builder, worker, types.void(*argtypes))
            byte = ir.IntType(8).as_pointer()
            intp = context.get_value_type(types.intp)
            module = builder.module
            body = ir.Function(module, ir.FunctionType(ir.VoidType(), [byte.as_pointer(), intp.as_pointer(),
                                                                      intp.as_pointer(), byte]),
                               name=module.get_unique_name(f"on_threads.{worker.__name__}"))
            body.linkage = "internal"
            inner = ir.IRBuilder(body.append_basic_block())
            values = inner.load(inner.bitcast(body.args[3], packed.type.as_pointer()))
            context.call_internal_no_propagate(inner, done.fndesc, types.void(*argtypes),
                                               [inner.extract_value(values, i) for i in range(len(argtypes))])
            inner.ret_void()
            parallel_for = cgutils.get_or_insert_function(
                module, ir.FunctionType(ir.VoidType(), [byte] * 5 + [intp] * 3), "numba_parallel_for")
            threads_ = builder.sext(count, intp) if count.type != intp else count
            dims = cgutils.alloca_once_value(builder, threads_)  # one iteration a thread, no inner dimension
            steps = cgutils.alloca_once_value(builder, ir.Constant(intp, 0))
            data = cgutils.alloca_once_value(builder, packed)
            python = context.get_python_api(builder)
            gil = python.gil_ensure()  # then released while the threads run, as numba's parallel loops do
            state = python.save_thread()
            builder.call(parallel_for, [builder.bitcast(body, byte), builder.bitcast(steps, byte),
                                        builder.bitcast(dims, byte), builder.bitcast(steps, byte),
                                        builder.bitcast(data, byte), ir.Constant(intp, 0), ir.Constant(intp, 0),
                                        threads_])
            python.restore_thread(state)
            python.gil_release(gil)
            context.nrt.decref(builder, counter, taken)
            return context.get_dummy_value()

        return types.void(nthreads, operands), codegen

    return run
_POOL = None
#: The multiply-adds below which ``in_threads`` runs work on the calling thread alone: 2²⁷, about 10 ms of a thread's
#: attention. On a machine with a core for each of numba's threads, the pool's thread shares a core with numba's, which
#: spins for the next product (``_threads``): a 1B-shaped layer's attention took as long on two threads as on one at
#: 140 and 200 rows (110 and 210 million by this count), less on one at 40 and 100, less on two at 600 (whole 1B
#: prefills, in-process, the host of 2026-12-04's figures in docs/performance.md).
SERIAL = 1 << 27


def in_threads(tasks: int, work, size: int) -> None:
    """``work(first, last)`` over ``0 … tasks − 1`` cut into one contiguous range per thread numba runs
    (``numba.get_num_threads``: ``NUMBA_NUM_THREADS``, the cores), the first on the calling thread, the rest on a pool
    kept for the process; returns when all are done, raising the first error. ``work`` calls a ``nogil`` kernel, so
    the ranges run at once. ``size``: the work's multiply-adds, about; below ``SERIAL`` it all runs on the calling
    thread — such work gains nothing from a second thread (a decode step's attention over 40 cells and 32 heads took
    0.5 ms a call either way, in-process medians of 400 calls), and the pool's thread would be a third beside numba's
    two, which spin for the next product meanwhile (``_threads``).

    Why not numba's ``prange``: a parallel loop's body is outlined and compiled on its own, with every kernel it calls
    linked in and compiled again — for attention, seconds of a cold first run (``_attend``) — where a serial kernel
    is compiled once. A range a thread is a task a thread, as ``prange``'s static schedule gives. Why not
    ``on_threads``: its worker is compiled as a subroutine, optimised in a library of its own and again in the
    kernel's, where a kernel run here is optimised once — attention as an ``on_threads`` worker compiled in 2.5–3.1
    s where ``_attend`` took 1.5–1.6 (numba's compile events, a cold 1B prefill, alternating); its 16 calls a prefill
    step gain nothing measurable from numba's threads, while a product's 113 calls a step do."""
    global _POOL
    count = 1 if size < SERIAL else max(1, min(tasks, threads()))
    per = -(-tasks // count)
    cuts = [(i * per, min(tasks, (i + 1) * per)) for i in range(count) if i * per < tasks]
    if len(cuts) == 1:
        work(0, tasks)
        return
    if _POOL is None:
        from concurrent.futures import ThreadPoolExecutor

        _POOL = ThreadPoolExecutor(max_workers=max(1, threads() - 1), thread_name_prefix="streamed-kernel")
    rest = [_POOL.submit(work, *cut) for cut in cuts[1:]]
    work(*cuts[0])
    for done in rest:
        done.result()
