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
import importlib
import inspect
import itertools
import os
import pickle
from pathlib import Path

import numpy as np
from llvmlite import ir

from . import images, sources
from .cpu import cores


def numba_module():
    """numba, imported (when a kernel is compiled, or loaded through numba's cache: not when every kernel a process
    calls comes from its image, ``images``), told of the threading layer the images started, if they did."""
    import numba

    images.LOADER.sync_numba()
    return numba


class _Later:
    """A module of numba's, imported when one of its attributes is first read — ``types`` and ``cgutils`` in the
    kernels' code generators, which run only when numba compiles."""

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, attr: str):
        numba_module()
        return getattr(importlib.import_module(self._name), attr)


types = _Later("numba.core.types")
cgutils = _Later("numba.core.cgutils")


class _NoImage(Exception):
    """A closure cell ``_cell`` keys only as numba does (pickled): its kernel gets no image."""


def _cell(value, free: bool = False):
    """What a kernel's closure cell holds, as it keys the kernel's cached machine code: a kernel, an intrinsic or a
    plain function (an ``on_threads`` worker) by its function's module, name, bytecode and cells; a constant as itself;
    an LLVM type by its text; anything else pickled, as numba keys it — or, ``free`` (an image's key, made without
    numba), ``_NoImage``.

    Why: numba keys a closure by its cells pickled, and a dispatcher (an intrinsic) pickles with an identifier drawn
    afresh in every process — a kernel a factory makes (one a type: ``blocks._rows_of``) that calls another kernel or
    intrinsic from its closure would be compiled again by every process, never found in the cache. The sources beside
    it are in the key too (``sources.digest``), so a function's name, bytecode and cells say what it compiles to."""
    if isinstance(value, (bool, int, float, str, bytes, type(None))):
        return value
    if isinstance(value, tuple):
        return tuple(_cell(v, free) for v in value)
    if isinstance(value, ir.Type):  # by its text: llvmlite caches that text on the object once code is made with it,
        return ("llvm type", str(value))  # so its pickle before and after differ
    f = getattr(value, "py_func", None) or getattr(value, "_defn", None)  # a kernel's function, an intrinsic's
    if f is None and inspect.isfunction(value):  # a plain function: an ``on_threads`` worker
        f = value
    if f is not None:
        return _function(f, free)
    if free:
        raise _NoImage
    from numba.core.serialize import dumps

    return hashlib.sha256(dumps(value)).hexdigest()


def _function(f, free: bool = False) -> tuple:
    return ("kernel", f.__module__, f.__qualname__, hashlib.sha256(f.__code__.co_code).hexdigest(),
            tuple(_cell(c.cell_contents, free) for c in f.__closure__ or ()))


_CACHE_CLASSES: tuple | None = None


def _cache_classes() -> tuple:
    """``(_Loaded, _Indexed, FunctionCache, IndexDataCacheFile)``: numba's kernel cache and its index file as a
    kernel's are kept (None where this numba's differ from what they rely on), and numba's own (numba imported)."""
    global _CACHE_CLASSES
    if _CACHE_CLASSES is not None:
        return _CACHE_CLASSES
    from numba.core.caching import FunctionCache, IndexDataCacheFile

    class _Loaded(FunctionCache):
        """A kernel's cache whose loads initialise only numba's runtime, not its compiler's registries (and start its
        threads: ``_threads``), and whose key holds the sources beside the kernel's module (``sources.digest``) and
        its closure's cells as ``_cell`` says."""

        def _index_key(self, sig, codegen):
            f = self._py_func
            cells = b"" if f.__closure__ is None else \
                repr(tuple(_cell(c.cell_contents) for c in f.__closure__)).encode()
            return (sig, codegen.magic_tuple(), (hashlib.sha256(f.__code__.co_code).hexdigest(),
                                                 hashlib.sha256(cells).hexdigest()),
                    sources.digest(Path(f.__code__.co_filename).resolve().parent))

        def load_overload(self, sig, target_context):
            _runtime(target_context)
            _threads()
            with self._guard_against_spurious_io_errors():
                return self._load_overload(sig, target_context)

    class _Indexed(IndexDataCacheFile):
        """A kernel's index in the kernel cache (its signatures, each the file of its machine code), written by one
        process at a time, an entry's machine code written before the entry; what is saved or loaded for a
        signature is kept (``reduced``) for the kernel's image (``images.write``).

        Why: numba reads the index, adds its entry, writes the index back, then the machine code — under the first
        file name the index it read left free. Two processes compiling two signatures of one kernel at once (the
        warm-up's jobs, side by side) each wrote the index the other had not seen: one entry lost, compiled again by
        every later run; both took the same file name, so the entry left could name the other signature's machine
        code. And a process reading between the two writes found an entry whose file still held code an older
        build had left there."""

        def save(self, key, data):
            self.__dict__.setdefault("reduced", {})[key[0]] = data
            with _one_at_a_time(self._index_path + ".lock"):
                overloads = self._load_index()
                name = overloads.get(key)
                if name is None:
                    taken = set(overloads.values())
                    name = next(n for n in map(self._data_name, itertools.count(1)) if n not in taken)
                self._save_data(name, data)
                overloads[key] = name
                self._save_index(overloads)

        def load(self, key):
            data = super().load(key)
            if data is not None:
                self.__dict__.setdefault("reduced", {})[key[0]] = data
            return data

    # Whether this numba's cache loads and indexes as these do (numba 0.60 … 0.69 do; pyproject.toml pins that
    # range): else numba's own loading, as numba made it.
    loads = all(hasattr(FunctionCache, n) for n in ("_load_overload", "_guard_against_spurious_io_errors"))
    indexes = all(hasattr(IndexDataCacheFile, n) for n in ("_load_index", "_save_index", "_save_data", "_data_name"))
    _CACHE_CLASSES = (_Loaded if loads else None, _Indexed if indexes else None, FunctionCache, IndexDataCacheFile)
    return _CACHE_CLASSES


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


class Arg:
    """An argument type a kernel is compiled for (``compiled``), said without numba: an array by its dtype, dimensions,
    layout and whether it may be read-only, or a scalar (``INT64``, ``BOOLEAN``); ``numba()`` is numba's type. One
    object a type (``array`` interns them), so that ``compiled`` looks a signature up by identities."""

    def __init__(self, kind: str, dtype: str, ndim: int = 0, layout: str = "", readonly: bool = False):
        self.kind, self.dtype, self.ndim, self.layout, self.readonly = kind, np.dtype(dtype), ndim, layout, readonly
        self.key = (kind, self.dtype.str, ndim, layout, readonly)

    def numba(self):
        from numba.np.numpy_support import from_dtype

        t = from_dtype(self.dtype)
        return types.Array(t, self.ndim, self.layout, readonly=self.readonly) if self.kind == "array" else t

    def accepts(self, value) -> bool:
        """Whether a call may pass ``value`` for this type, as numba's dispatcher converts: an array of this dtype
        and dimensions (C-contiguous for layout C, writeable unless read-only), or a scalar of its kind."""
        if self.kind == "array":
            return (isinstance(value, np.ndarray) and value.dtype == self.dtype and value.ndim == self.ndim
                    and (self.layout != "C" or value.flags.c_contiguous) and (self.readonly or value.flags.writeable))
        if self.dtype == np.bool_:
            return isinstance(value, (bool, np.bool_))
        return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))

    def __repr__(self):
        return f"Arg{self.key}"


_ARGS: dict[tuple, Arg] = {}


def array(dtype, ndim: int, layout: str, readonly: bool = False) -> Arg:
    """The array type ``Arg`` (interned)."""
    key = ("array", np.dtype(dtype).str, ndim, layout, readonly)
    if key not in _ARGS:
        _ARGS[key] = Arg("array", dtype, ndim, layout, readonly)
    return _ARGS[key]


INT64 = Arg("scalar", "int64")
BOOLEAN = Arg("scalar", "bool")


class Kernel:
    """A kernel: ``py_func`` compiled by numba (``njit(cache=True, **options)``, its machine code kept in the kernel
    cache as ``_Loaded`` says) — or, where its image is kept (``images``), that machine code loaded without numba.
    Called as the function; numba's dispatcher (``dispatcher``) is made only when numba is needed: to compile, to load
    from numba's cache, or to type a call to this kernel from another kernel (``_numba_type_``).

    Invariant: a call computes what numba's dispatcher computes for the same arguments — the image of a signature is
    the machine code numba made for it, and a call is matched to an image by its arguments' types as numba types them
    (``images.describe``), or to a signature ``compiled`` names only where numba would convert them to it."""

    def __init__(self, py_func, options: dict):
        self.py_func = py_func
        self.options = options
        self.__name__, self.__qualname__, self.__module__ = py_func.__name__, py_func.__qualname__, py_func.__module__
        self.__doc__ = py_func.__doc__
        self._dispatcher = None
        self._calls: dict = {}  # a call's description → the function it runs
        self._signatures: set = set()  # the signatures ``compiled`` asked for
        self._identity = None

    @property
    def dispatcher(self):
        if self._dispatcher is None:
            from numba import njit

            numba_module()
            loaded, indexed, function_cache, index_file = _cache_classes()
            dispatcher = njit(cache=True, **self.options)(self.py_func)
            if type(dispatcher._cache) is function_cache and loaded is not None:
                dispatcher._cache.__class__ = loaded
                file = dispatcher._cache._cache_file
                if type(file) is index_file and indexed is not None and hasattr(file, "_index_path"):
                    file.__class__ = indexed
            self._dispatcher = dispatcher
        return self._dispatcher

    @property
    def _numba_type_(self):
        """How numba types this kernel where another kernel calls it: as its dispatcher."""
        return self.dispatcher._numba_type_

    @property
    def targetoptions(self):
        """The options numba's inlining pass reads of a kernel called from another (``inline="always"``), as it
        reads a dispatcher's."""
        return self.options

    def identity(self):
        """What the kernel's images are keyed by: its function (module, name, code, closure: ``_cell``) and the
        sources beside it (``sources.digest``); None where a closure cell can only be keyed as numba keys it."""
        if self._identity is None:
            try:
                self._identity = (_function(self.py_func, free=True),
                                  sources.digest(Path(self.py_func.__code__.co_filename).resolve().parent))
            except _NoImage:
                self._identity = False
        return self._identity or None

    def __call__(self, *args):
        call = images.describe(args)
        f = self._calls.get(call) if call is not None else None
        if f is None:
            f = self._resolve(call, args)
        return f(*args)

    def _resolve(self, call, args):
        identity = self.identity()
        if call is not None and identity is not None:
            f = images.load(identity, call)
            if f is not None:
                self._calls[call] = f
                return f
        d = self.dispatcher
        if call is None or identity is None:
            return d
        sig = tuple(d.typeof_pyval(a) for a in args)
        d.compile(sig)
        self._keep(identity, call, sig)
        self._calls[call] = d
        return d

    def _keep(self, identity, call, sig) -> None:
        """Write the image of ``sig`` (compiled or loaded by numba) under ``call``."""
        reduced = getattr(getattr(self.dispatcher._cache, "_cache_file", None), "reduced", {}).get(sig)
        if reduced is not None:
            images.write(identity, call, reduced, runtime_object())

    def signature(self, args: tuple[Arg, ...]):
        """The function ``compiled`` returns for ``args``."""
        identity = self.identity()
        if identity is not None:
            f = images.load(identity, ("signature", tuple(a.key for a in args)))
            if f is not None:
                self._signatures.add(tuple(a.key for a in args))
                return _Checked(f, args, self.__qualname__)
        d = _numba_signature(self.dispatcher, args)
        if identity is not None:
            self._keep(identity, ("signature", tuple(a.key for a in args)), tuple(a.numba() for a in args))
        self._signatures.add(tuple(a.key for a in args))
        return d

    @property
    def signatures(self) -> tuple:
        """The signatures this process runs the kernel for: those ``compiled`` named (from images or numba alike),
        and the descriptions of its other calls (``images.describe``)."""
        return tuple(self._signatures) + tuple(self._calls)


class _Checked:
    """A kernel's function from its image for the signature ``args`` (``compiled``), called only with arguments numba's
    dispatcher would convert to it — else ``TypeError``, as numba's: the machine code reads an array as the type it
    was compiled for, whatever it is given. Which arguments are accepted depends only on their description
    (``images.describe``: dtype, dimensions, layout, writeable), so each description is checked once."""

    __slots__ = ("f", "args", "name", "seen")

    def __init__(self, f, args, name):
        self.f, self.args, self.name, self.seen = f, args, name, set()

    def __call__(self, *values):
        call = images.describe(values)
        if call not in self.seen:
            if len(values) != len(self.args) or not all(a.accepts(v) for a, v in zip(self.args, values)):
                raise TypeError(f"kernel {self.name}: no signature for these arguments (compiled for {self.args})")
            if call is not None:
                self.seen.add(call)
        return self.f(*values)


def kernel(fn=None, /, **options):
    """A ``Kernel`` of ``fn``: ``@kernel`` or ``@kernel(error_model="numpy")`` (any option ``njit`` takes)."""

    def make(f):
        return Kernel(f, options)

    return make if fn is None else make(fn)


_COMPILED: dict[tuple[int, ...], object] = {}


def compiled(k: Kernel, *args: Arg):
    """The kernel ``k`` for the signature ``args`` — the most general of the arrays a run passes (any layout,
    read-only), so every call converts to it and no other specialisation is made: a memory-mapped weight and a seeded
    one, a view and a whole tensor, share one machine code, compiled once per machine into the kernel cache (and
    loaded from it, or from its image, after) — what a warm-up on a small model compiles is what a real-size run
    uses.

    Looked up by the objects' identities (``Arg``s are interned; the entry holds the kernel, so no identity is
    reused): hashing the types themselves was 7 µs of every product's call — a decode step makes 113."""
    key = (id(k), *map(id, args))
    f = _COMPILED.get(key)
    if f is None:
        f = _COMPILED[key] = k.signature(args) if isinstance(k, Kernel) else _numba_signature(k, args)
        _HELD.append(k)
    return f


def _numba_signature(dispatcher, args: tuple[Arg, ...]):
    """A numba dispatcher (not a ``Kernel``: one a test makes) compiled for ``args`` and for those alone."""
    argtypes = tuple(a.numba() for a in args)
    dispatcher.disable_compile(False)
    dispatcher.compile(argtypes)
    dispatcher.disable_compile()  # a call then converts its arrays to a signature compiled, never compiles another
    return dispatcher


_HELD: list = []


def _runtime(context) -> None:
    """Initialise numba's runtime for ``context``, its machine code read from the kernel cache (``_kept_runtime``)
    rather than compiled; once a process, as ``rtsys.initialize`` itself is."""
    from numba.core.compiler_lock import global_compiler_lock
    from numba.core.runtime import nrtdynmod, rtsys

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
    import llvmlite
    from numba.core import config

    if not config.CACHE_DIR:
        return None
    made_for = (numba_module().__version__, llvmlite.__version__, context.codegen().magic_tuple())
    return Path(config.CACHE_DIR) / "runtime" / f"{hashlib.sha256(repr(made_for).encode()).hexdigest()[:32]}.nrt"


_RUNTIME_OBJECT: bytes | None = None


def runtime_object() -> bytes | None:
    """The object code of numba's runtime functions as this process compiled or read it (``_kept_runtime``), or None
    before."""
    return _RUNTIME_OBJECT


def _kept_runtime(context):
    """``nrtdynmod.compile_nrt_functions``, its result kept: the library of the runtime's functions, read from
    ``_runtime_file`` when a process compiled it for this target before, else compiled (as numba does) and kept."""
    global _RUNTIME_OBJECT
    from numba.core.runtime import nrtdynmod

    kept = _runtime_file(context)
    if kept is not None:
        try:
            state = pickle.loads(kept.read_bytes())
            library = context.codegen().unserialize_library(state)
            _RUNTIME_OBJECT = state[2][0]
            return library
        except Exception:  # absent, unreadable, or not this numba's: compiled below, and written again
            pass
    module, library = nrtdynmod.create_nrt_module(context)
    library.enable_object_caching()  # so that its machine code can be serialised, as a cached kernel's is
    library.add_ir_module(module)
    library.finalize()
    state = library.serialize_using_object_code()
    _RUNTIME_OBJECT = state[2][0]
    if kept is not None:
        images.keep(kept, pickle.dumps(state))
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


def num_threads() -> int:
    """The threads numba's threading layer runs: ``NUMBA_NUM_THREADS`` where set, else the cores this process may run
    on — numba's own default (``config.NUMBA_NUM_THREADS``), read without numba."""
    try:
        return max(1, int(os.environ.get("NUMBA_NUM_THREADS") or 0)) if os.environ.get("NUMBA_NUM_THREADS") \
            else cores()
    except ValueError:
        return cores()


def spin() -> str | None:
    """The ``GOMP_SPINCOUNT`` a run's threads are started with (``_threads``), or None where the user's environment
    says how they wait (``OMP_WAIT_POLICY``, ``GOMP_SPINCOUNT``)."""
    global SPIN_CHOSEN
    if "OMP_WAIT_POLICY" in os.environ or "GOMP_SPINCOUNT" in os.environ:
        return None
    others = runnable_others()
    SPIN_CHOSEN = SPIN_BUSY if others is None else spin_count(others, cores(), num_threads())
    return SPIN_CHOSEN


def _numba_threads() -> int:
    """numba's threads, started as ``_threads`` says (if they are not), counted."""
    _threads()
    return numba_module().get_num_threads()


images.LOADER.configure(spin, num_threads, _numba_threads)


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
    from numba.np.ufunc import parallel

    numba_module()  # told of threads the images started, if they did
    if parallel._is_initialized:
        return
    chosen = spin()
    if chosen is None:
        parallel._launch_threads()
        return
    os.environ["GOMP_SPINCOUNT"] = chosen
    try:
        parallel._launch_threads()
    finally:
        del os.environ["GOMP_SPINCOUNT"]


_THREADS: int | None = None


def threading_layer() -> str:
    """The threading layer a run's threads are numba's of (``omp``, ``tbb``, ``workqueue``): the one the images'
    loader started (``images``), else the one numba started."""
    if images.LOADER.layer is not None:
        return images.LOADER.layer_name
    return numba_module().threading_layer()


def threads() -> int:
    """How many threads a parallel kernel runs on (``NUMBA_NUM_THREADS``, the cores), the threads started first as
    ``_threads`` says — by the images' loader where it can load images (``images``), else by numba. Read once a
    process (asking numba is tens of microseconds, and a decode step asks a hundred times); a kernel run
    ``on_threads(worker)(threads(), …)``, its tasks taken by ``claim``, computes the same whatever thread runs it."""
    global _THREADS
    if _THREADS is None:
        started = images.LOADER.started() if images.enabled() else None
        _THREADS = _numba_threads() if started is None else started
    return _THREADS


class _Intrinsic:
    """An intrinsic (numba's ``numba.extending.intrinsic``) made when numba first types a call to it: defining one
    needs numba, calling a kernel from its image does not. Typed as the intrinsic it stands for (``_numba_type_``)."""

    def __init__(self, defn, options: dict):
        self._defn = defn
        self.options = options
        self.__name__ = defn.__name__
        self._type = None

    @property
    def _numba_type_(self):
        if self._type is None:
            from numba.core.typing.templates import builtin_registry
            from numba.extending import intrinsic as make

            real = make(**self.options)(self._defn) if self.options else make(self._defn)
            self._real = real
            self._type = next(t for v, t in reversed(builtin_registry.globals) if v is real)
        return self._type


def intrinsic(fn=None, /, **options):
    """``numba.extending.intrinsic``, made when numba first needs it (``_Intrinsic``): ``@intrinsic`` or
    ``@intrinsic(prefer_literal=True)``."""

    def make(f):
        return _Intrinsic(f, options)

    return make if fn is None else make(fn)


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
