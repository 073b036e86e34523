"""Kernel images: a kernel's machine code kept in the kernel cache in a form that loads without numba — a run whose
kernels all have their image never imports numba.

Why: numba's import is about 0.11–0.13 s of every process (its compiler's modules: typing, lowering, parfors …),
more than llama.cpp's whole load of a 1B-shaped checkpoint, for a run that compiles nothing: every kernel it calls
is machine code numba already made and cached. That code needs, to run, what numba's own cache loading gives it —
LLVM's linker (llvmlite), numba's C runtime (its extension modules ``_helperlib``, ``_dynfunc``, ``_nrt_python``:
allocation, reference counts, the Python wrapper's conversions), the reference-count functions numba compiles for
its runtime, and its threading layer (``omppool``, ``workqueue`` …: ``numba_parallel_for``) — and none of its
compiler. So when numba has compiled or loaded a kernel for some arguments, the kernel's object code (numba's cached
object, the whole of the kernel with every function it calls linked in), the names of its Python wrapper and of its
environments, and the environments' constants are written here as an image (``write``); a later process loads the
image (``load``): its object code added to an LLVM engine of its own, the environments' addresses set, the wrapper
made a Python function by numba's own ``_dynfunc.make_function`` — what numba does when it loads a cached kernel.

Invariants: an image is the machine code numba made for the kernel and the arguments' types (``describe``) it was
made for — what numba would have loaded from its cache — so a kernel computes the same from its image as from
numba. An image is used only where everything it was made with is the same (``target``: Python, numba, llvmlite,
the CPU numba compiled for) and every symbol its code refers to is known before it is linked (an unresolved symbol
aborts LLVM's linker, the process with it): where not, or where a file cannot be read, the kernel goes through numba
as before, and its image is written again. A kernel whose constants would need numba to be read back (a numba
object pickled) gets no image. ``STREAMED_KERNEL_IMAGES=0`` turns images off (every kernel through numba).

Only ELF object code (Linux) is read here (``_symbols``); elsewhere every kernel goes through numba.

I/O: reads and writes the ``images`` folder of the kernel cache; loads numba's extension modules (by their files, not
by importing numba) and starts its threading layer's threads.
"""

from __future__ import annotations

import ctypes
import hashlib
import importlib.machinery
import importlib.util
import os
import pickle
import struct
import sys
import threading
from pathlib import Path

import numpy as np

#: The format of an image file; a file of another is not read.
FORMAT = 1


def enabled() -> bool:
    """Whether kernels are loaded from (and written as) images: not where ``STREAMED_KERNEL_IMAGES=0``, nor off
    Linux (``_symbols`` reads ELF)."""
    return os.environ.get("STREAMED_KERNEL_IMAGES", "1") != "0" and sys.platform.startswith("linux")


def folder() -> Path:
    """``images`` in the kernel cache: ``NUMBA_CACHE_DIR``, which ``streamed/__init__.py`` — imported before any of
    its modules — set to the user's cache folder (``streamed.kernel_cache``) when the user did not."""
    return Path(os.environ["NUMBA_CACHE_DIR"]) / "images"


def _version(package: str) -> str | None:
    """``package``'s version file's digest (its ``_version.py``, which numba's and llvmlite's builds write), found
    without importing the package — ``importlib.metadata`` alone is 8 ms of a process."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    try:
        return hashlib.sha256(Path(spec.submodule_search_locations[0], "_version.py").read_bytes()).hexdigest()[:16]
    except OSError:
        return None


_TARGET: tuple | None = None


def target() -> tuple:
    """What an image's machine code depends on beyond the kernel: Python's version, numba's and llvmlite's, and the
    CPU numba compiles for as numba's code generator names it (``NUMBA_CPU_NAME`` and ``NUMBA_CPU_FEATURES`` where
    set, else the host's name and features) — numba's own cache key (its ``magic_tuple``), read without numba."""
    global _TARGET
    if _TARGET is None:
        import llvmlite.binding as ll

        name = os.environ.get("NUMBA_CPU_NAME") or None
        features = os.environ.get("NUMBA_CPU_FEATURES")
        if features is None and str(name).lower() == "generic":
            features = ""
        _TARGET = (FORMAT, sys.version_info[:3], _version("numba"), _version("llvmlite"), ll.get_process_triple(),
                   name or ll.get_host_cpu_name(),
                   features if features is not None else ll.get_host_cpu_features().flatten())
    return _TARGET


_BOOL, _INT, _FLOAT = (("s", np.dtype(t).str) for t in (np.bool_, np.int64, np.float64))
#: The dtypes an array may have for its kernel to have images (not structured, no objects, native byte order), each
#: with its name (``dtype.str``), as they are met.
_PLAIN: dict = {}


def describe(args: tuple):
    """The arguments' types as numba types them for a call (``typeof``), as a plain tuple — an array by its dtype,
    dimensions, layout (C, F or A, as numba maps it: C where it is C-contiguous) and whether it is writeable (numba's
    type of an unaligned array is an aligned one's); a Python or NumPy scalar by its dtype (Python's int within
    int64, float and bool typed as NumPy's); a tuple by its items; ``None`` — or None where an argument is of another
    kind (its kernel then goes through numba). Two calls with the same description are the same numba signature.

    Called on every kernel call (a decode step makes some hundreds): an array's flags are read as one integer (C-,
    F-contiguous and writeable: ``NPY_ARRAY_*`` bits 0x1, 0x2, 0x400, F dropped where C is set)."""
    out = []
    for a in args:
        if isinstance(a, np.ndarray):
            name = _PLAIN.get(a.dtype)
            if name is None:
                t = a.dtype
                if t.fields is not None or t.hasobject or not t.isnative:
                    return None
                name = _PLAIN[t] = t.str
            n = a.flags.num
            out.append((name, a.ndim, (n & 0x401) | (0 if n & 1 else n & 2)))
        elif a is None:
            out.append("n")
        elif isinstance(a, bool):  # numba types a Python scalar as the NumPy scalar of its kind
            out.append(_BOOL)
        elif isinstance(a, int):
            if not -(1 << 63) <= a < (1 << 63):
                return None
            out.append(_INT)
        elif isinstance(a, float):
            out.append(_FLOAT)
        elif isinstance(a, tuple):
            inner = describe(a)
            if inner is None:
                return None
            out.append(("t", inner))
        elif isinstance(a, np.generic) and a.dtype.fields is None and not a.dtype.hasobject:
            out.append(("s", a.dtype.str))
        else:
            return None
    return tuple(out)


def key(identity, call) -> str:
    """The file name of the image of the kernel ``identity`` (its module, name, code and closure, ``jit``) for
    ``call`` (``describe``'s, or a signature ``jit.compiled`` names), made for ``target()``."""
    return hashlib.sha256(repr((target(), identity, call)).encode()).hexdigest()[:40]


# ---- object code: the symbols it defines and needs --------------------------------------------------------------

def _symbols(obj: bytes) -> tuple[set[str], set[str], set[str]] | None:
    """The global symbols an ELF64 little-endian relocatable object defines strongly, defines weakly, and refers to
    without defining — or None where ``obj`` is not one."""
    if obj[:4] != b"\x7fELF" or obj[4] != 2 or obj[5] != 1:
        return None
    shoff, = struct.unpack_from("<Q", obj, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", obj, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", obj, shoff + i * shentsize) for i in range(shnum)]
    strong, weak, undefined = set(), set(), set()
    for s in sections:
        if s[1] != 2:  # SHT_SYMTAB
            continue
        strtab = sections[s[6]]
        names = obj[strtab[4]:strtab[4] + strtab[5]]
        for off in range(s[4], s[4] + s[5], s[9]):
            st_name, st_info, _, st_shndx, _, _ = struct.unpack_from("<IBBHQQ", obj, off)
            bind = st_info >> 4
            if bind == 0 or not st_name:  # local
                continue
            name = names[st_name:names.index(b"\0", st_name)].decode()
            if st_shndx == 0:
                undefined.add(name)
            elif bind == 2 or st_shndx == 0xFFF2:  # weak, or common (an environment's pointer: one for all)
                weak.add(name)
            else:
                strong.add(name)
    return strong, weak, undefined - strong - weak


# ---- writing ----------------------------------------------------------------------------------------------------

def keep(path: Path, data: bytes) -> bool:
    """Write ``data`` to ``path`` in the kernel cache whole or not at all (a temporary file of this process and
    thread, renamed): a reader never sees a file cut short. False, and nothing written, where the folder cannot be
    written (a read-only cache is used as it is). Every file kept beside numba's is written so (images, the runtime
    ``jit._kept_runtime`` keeps, llama.cpp's report ``cpu.llama_cpp_report`` keeps)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}")
        temporary.write_bytes(data)
        os.replace(temporary, path)
        return True
    except OSError:
        return False


def _save(path: Path, payload: dict) -> None:
    keep(path, pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL))


def _numba_free(value) -> bytes | None:
    """``value`` pickled, or None where reading it back would import numba (or it cannot be pickled)."""
    try:
        data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:
        return None
    return None if b"numba" in data else data


def write(identity, call, reduced, runtime: bytes | None) -> None:
    """Keep the image of the kernel ``identity`` for ``call``, from ``reduced`` (what numba's cache keeps of the
    compiled kernel: ``CompileResult._reduce``'s tuple), with the runtime it needs (``write_runtime``: ``runtime``,
    the object code of numba's runtime functions as this process has them, ``jit.runtime_object``). Nothing is
    written for a kernel whose code is not ELF object code, that numba runs in object mode or re-initialises on
    load, or whose constants need numba to be read."""
    if not enabled():
        return
    try:
        libdata, fndesc, env, _, objectmode, lifted, _, reload_init, referenced_envs = reduced
        _, kind, (obj, _) = libdata
        if kind != "object" or objectmode or lifted or reload_init:
            return
        symbols = _symbols(obj)
        envs = [(e.env_name, _numba_free(list(e.consts)), e.globals.get("__name__")) for e in referenced_envs]
        if env.env_name not in {n for n, _, _ in envs}:
            envs.append((env.env_name, _numba_free(list(env.consts)), env.globals.get("__name__")))
    except Exception:  # another numba's layout: no image
        return
    if symbols is None or any(c is None for _, c, _ in envs) or not write_runtime(runtime):
        return
    _save(folder() / f"{key(identity, call)}.img",
          {"format": FORMAT, "target": target(), "object": obj, "symbols": symbols,
           "wrapper": fndesc.llvm_cpython_wrapper_name, "env": env.env_name, "envs": envs,
           "qualname": fndesc.qualname, "module": fndesc.modname})


def _runtime_path() -> Path:
    return folder() / f"runtime-{key('runtime', None)}.img"


_RUNTIME_KEPT = False


def write_runtime(obj: bytes | None) -> bool:
    """Keep what an image needs besides itself, once a process (numba imported): numba's runtime functions' object
    code ``obj``, the C math functions numba binds by name (``INTR_MATH``), and the threading layer numba started —
    True when it is kept (or was already)."""
    global _RUNTIME_KEPT
    if _RUNTIME_KEPT:
        return True
    from numba.core import intrinsics
    from numba.np.ufunc import parallel

    layer = getattr(parallel, "_threading_layer", None)
    if obj is None or layer not in _LAYERS:
        return False
    symbols = _symbols(obj)
    if symbols is None:
        return False
    path = _runtime_path()
    if not path.exists():
        _save(path, {"format": FORMAT, "target": target(), "object": obj, "symbols": symbols,
                     "math": sorted(intrinsics.INTR_MATH), "layer": layer})
    _RUNTIME_KEPT = True
    return True


# ---- loading ----------------------------------------------------------------------------------------------------

#: numba's threading layers: the extension module of each, within ``numba/np/ufunc``.
_LAYERS = {"omp": "omppool", "tbb": "tbbpool", "workqueue": "workqueue"}


def _read(path: Path) -> dict | None:
    try:
        payload = pickle.loads(path.read_bytes())
    except Exception:  # absent, cut short, or not ours
        return None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT or payload.get("target") != target():
        return None
    return payload


class _Loader:
    """The process's LLVM engine for images, numba's extension modules and symbols registered as numba registers them
    (``numba.core.base._load_global_helpers``, ``externals``, ``rtsys.initialize``), and its threading layer
    started (``parallel._launch_threads``) — each once, on the first image loaded."""

    def __init__(self):
        self.lock = threading.RLock()
        self.ready: bool | None = None  # None: not tried yet; False: cannot load images here
        self.engine = None
        self.defined: set[str] = set()
        self.kept: list = []  # what the loaded code refers to, kept alive for the process
        self.layer = None  # the threading layer started here (its extension module), or None
        self.threads = 0
        self.spin = self.count = self.numba_threads = None  # how threads are started: ``configure``

    def configure(self, spin, count, numba_threads) -> None:
        """How the loader starts threads: ``spin()``, the spin count libgomp is told (``jit.spin``), ``count()``, how
        many (``jit.num_threads``), and ``numba_threads()``, numba's own started and counted (``jit._threads``) —
        given by ``jit``, which imports this module."""
        self.spin, self.count, self.numba_threads = spin, count, numba_threads

    def _extension(self, numba_dir: Path, dotted: str):
        """numba's extension module ``dotted`` — the one numba loaded, if it is imported, else loaded from its file
        and registered under its name, so that a numba imported later finds it and does not load a second copy."""
        if dotted in sys.modules:
            return sys.modules[dotted]
        parts = dotted.split(".")[1:]
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = numba_dir.joinpath(*parts[:-1], parts[-1] + suffix)
            if path.exists():
                spec = importlib.util.spec_from_file_location(dotted, path)
                module = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(module)
                sys.modules[dotted] = module
                return module
        raise ImportError(f"no {dotted} in {numba_dir}")

    def _setup(self) -> bool:
        import builtins

        import llvmlite.binding as ll

        runtime = _read(_runtime_path())
        spec = importlib.util.find_spec("numba")
        if runtime is None or spec is None or not spec.submodule_search_locations:
            return False
        numba_dir = Path(spec.submodule_search_locations[0])
        helper = self._extension(numba_dir, "numba._helperlib")
        dynfunc = self._extension(numba_dir, "numba._dynfunc")
        nrt = self._extension(numba_dir, "numba.core.runtime._nrt_python")
        ll.add_symbol("_Py_NoneStruct", id(None))
        for helpers in (helper.c_helpers, dynfunc.c_helpers):
            for name, address in helpers.items():
                ll.add_symbol("numba_" + name, address)
        for obj in builtins.__dict__.values():
            if isinstance(obj, type) and issubclass(obj, BaseException):
                ll.add_symbol(f"PyExc_{obj.__name__}", id(obj))
        for name in runtime["math"]:
            if name in helper.c_helpers:
                ll.add_symbol(name, helper.c_helpers[name])
        for name, address in nrt.c_helpers.items():
            ll.add_symbol(name if name.startswith("_") else "NRT_" + name, address)
        ll.initialize_native_target()
        ll.initialize_native_asmprinter()
        tm = ll.Target.from_default_triple().create_target_machine(jit=True)
        self.engine = ll.create_mcjit_compiler(ll.parse_assembly(""), tm)
        self.dynfunc = dynfunc
        self.numba_dir = numba_dir
        self.layer_name = runtime["layer"]
        self.threads = self.start_threads()  # before any code is linked: the kernels call numba_parallel_for
        return self._add(runtime)

    def _resolvable(self, name: str) -> bool:
        import llvmlite.binding as ll

        if name in self.defined or ll.address_of_symbol(name):
            return True
        try:
            getattr(_PROCESS, name)
            return True
        except AttributeError:
            return False

    def _add(self, image: dict) -> bool:
        """Link ``image``'s object code into the engine, unless a symbol it needs is unknown or one it defines is
        defined already (LLVM's linker would abort the process on either)."""
        import llvmlite.binding as ll

        strong, weak, undefined = image["symbols"]
        if strong & self.defined or not all(self._resolvable(n) for n in undefined):
            return False
        self.engine.add_object_file(ll.ObjectFileRef.from_data(image["object"]))
        self.engine.finalize_object()
        self.defined |= strong | weak
        return True

    def start_threads(self) -> int:
        """Start the threading layer the images were made with, ``NUMBA_NUM_THREADS`` threads (``count()``), libgomp
        told to spin as ``spin()`` says (None: as the user's environment says); the number of threads. Where numba's
        threading module is imported, numba starts them (if it has not), as it would."""
        if "numba.np.ufunc.parallel" in sys.modules:
            return self.numba_threads()
        import llvmlite.binding as ll

        self.threads = self.count()
        spin = self.spin()
        if spin is not None:
            os.environ["GOMP_SPINCOUNT"] = spin
        try:
            lib = self._extension(self.numba_dir, f"numba.np.ufunc.{_LAYERS[self.layer_name]}")
        finally:
            if spin is not None:
                del os.environ["GOMP_SPINCOUNT"]
        for name in ("parallel_for", "do_scheduling_signed", "do_scheduling_unsigned", "allocate_sched",
                     "deallocate_sched", "get_num_threads", "set_num_threads", "get_thread_id",
                     "set_parallel_chunksize", "get_parallel_chunksize", "get_sched_size"):
            ll.add_symbol("numba_parallel_for" if name == "parallel_for" else name, getattr(lib, name))
        ctypes.CFUNCTYPE(None, ctypes.c_int)(lib.launch_threads)(self.threads)
        ctypes.CFUNCTYPE(None, ctypes.c_int)(lib.set_num_threads)(self.threads)
        self.layer = lib
        return self.threads

    def sync_numba(self) -> None:
        """Tell a numba imported after this process started the threading layer itself that it is started (its
        ``_launch_threads`` would start a second)."""
        if self.layer is None:
            return
        from numba.np.ufunc import parallel

        if not parallel._is_initialized:
            parallel._load_threading_functions(self.layer)
            parallel._threading_layer = self.layer_name
            parallel._is_initialized = True

    def prepare(self) -> bool:
        """Whether images can be loaded in this process: the loader set up (``_setup``), once."""
        with self.lock:
            if self.ready is None:
                try:
                    self.ready = self._setup()
                except Exception:
                    self.ready = False
            return self.ready

    def started(self) -> int | None:
        """The threads the loader started (or numba had), or None where images cannot be loaded here."""
        return self.threads if self.prepare() else None

    def load(self, name: str):
        """The Python function of the image ``name``, or None."""
        with self.lock:
            if not self.prepare():
                return None
            image = _read(folder() / f"{name}.img")
            if image is None:
                return None
            if image["wrapper"] not in self.defined and not self._add(image):
                return None
            envs = {}
            for env_name, consts, module in image["envs"]:
                env = self.dynfunc.Environment({"__name__": module})
                env.consts[:] = pickle.loads(consts)
                address = self.engine.get_global_value_address(env_name)
                if address:
                    (ctypes.c_void_p * 1).from_address(address)[0] = ctypes.c_void_p(id(env))
                envs[env_name] = env
            self.kept.append(envs)
            address = self.engine.get_function_address(image["wrapper"])
            if not address or image["env"] not in envs:
                return None
            import types as pytypes

            return self.dynfunc.make_function(pytypes.ModuleType(image["module"]), image["qualname"].split(".")[-1],
                                              f"compiled wrapper for {image['qualname']!r}", address,
                                              envs[image["env"]], (self.engine,))


_PROCESS = ctypes.CDLL(None)
LOADER = _Loader()


def load(identity, call):
    """The kernel ``identity``'s function for ``call`` from its image, or None (no image, images off, or one that
    cannot be used here)."""
    if not enabled():
        return None
    return LOADER.load(key(identity, call))
