"""The kernels' compiler: numba's ``njit`` with the machine code kept in the kernel cache (``kernel``), and loaded
from it without numba's compiler.

Why: numba, before it loads an overload from its cache, "refreshes" its target context — imports and registers
every implementation its compiler knows (array math, linear algebra, typed containers, random generators, …), about
0.3 s of CPU and 10 MB in every process, more than a 1B-shaped model's attention in a 40-token prefill. Machine code
read from the cache calls none of them: it needs numba's runtime (NRT: the arrays it takes and makes), which is
initialised here, and the symbols of its own library, which loading links. A kernel that is compiled (an empty cache,
a signature not compiled before) still goes through numba's compiler, which refreshes the context itself
(``compile_extra``), so nothing is compiled against a context short of a registry.

Invariant: a kernel computes what numba compiled for it — the same machine code, whichever process compiled it; only
when numba's registries are loaded changes (``tests/numerics/test_jit.py`` holds that a warm process loads none and
computes the same logits as one that loaded them all).
"""

from __future__ import annotations

from numba import njit
from numba.core.caching import FunctionCache
from numba.core.runtime import rtsys


class _Loaded(FunctionCache):
    """A kernel's cache whose loads initialise only numba's runtime, not its compiler's registries."""

    def load_overload(self, sig, target_context):
        rtsys.initialize(target_context)
        with self._guard_against_spurious_io_errors():
            return self._load_overload(sig, target_context)


#: Whether this numba's cache loads as ``_Loaded`` reads it (numba 0.60 … 0.69 do; pyproject.toml pins that range).
_LOADS = all(hasattr(FunctionCache, n) for n in ("_load_overload", "_guard_against_spurious_io_errors"))


def kernel(fn=None, /, **options):
    """``njit(cache=True, **options)``, loaded from the kernel cache as ``_Loaded`` says; ``@kernel`` or
    ``@kernel(parallel=True)``."""

    def make(f):
        dispatcher = njit(cache=True, **options)(f)
        if type(dispatcher._cache) is FunctionCache and _LOADS:  # else numba's own loading, as numba made it
            dispatcher._cache.__class__ = _Loaded
        return dispatcher

    return make if fn is None else make(fn)
