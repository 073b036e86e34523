"""A warm run does not import numba (issue 33): every kernel it calls is loaded from its image in the kernel cache
(``streamed/numerics/images.py``) — numba's machine code, linked by llvmlite — and computes what numba's dispatcher
computes; an image that cannot be used sends its kernel through numba, which writes it again."""

from __future__ import annotations

import json
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from repo import EXAMPLES, ROOT
from repo import NUMBA_EXTENSIONS as EXTENSIONS
from repo import own_environment as environment

#: A ``streamed`` command in a process that says, after it, which of numba's modules it imported.
PROBE = """
import json, sys
from streamed.cli import main
assert main(json.loads(sys.argv[1])) == 0
print(json.dumps(sorted(m for m in sys.modules if m == "numba" or m.startswith("numba."))))
"""



def run(env: dict, saved: Path, arithmetic: str = "exact", tokens: str = "5,17,3,9,200,41") -> set[str]:
    argv = ["run", str(EXAMPLES / "tiny-llama.lgm"), "--tokens", tokens, "--prefill", "4", "--arithmetic",
            arithmetic, "--save", str(saved)]
    p = subprocess.run([sys.executable, "-c", PROBE, json.dumps(argv)], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=900)
    assert p.returncode == 0, p.stderr[-3000:]
    return set(json.loads(p.stdout.rstrip().splitlines()[-1]))


def same(a: Path, b: Path) -> bool:
    with np.load(a) as x, np.load(b) as y:
        return np.array_equal(x["logits"], y["logits"])


@pytest.fixture(scope="module")
def warm(tmp_path_factory):
    """A kernel cache of its own, made by one run in each arithmetic (numba compiles, and writes the images)."""
    home = tmp_path_factory.mktemp("images")
    env = {**environment(home / "home"), "NUMBA_CACHE_DIR": str(home / "cache")}
    for arithmetic in ("exact", "llama.cpp:avx2"):
        assert "numba" in run(env, home / f"first-{arithmetic}.npz", arithmetic)
    return home, env


@pytest.mark.parametrize("arithmetic", ["exact", "llama.cpp:avx2"])
def test_a_warm_run_imports_no_numba_and_computes_numba_s_logits(warm, tmp_path, arithmetic):
    home, env = warm
    imported = run(env, tmp_path / "images.npz", arithmetic)
    assert imported <= EXTENSIONS, f"a warm run imported {sorted(imported - EXTENSIONS)}"
    assert run({**env, "STREAMED_KERNEL_IMAGES": "0"}, tmp_path / "numba.npz", arithmetic) >= {"numba"}
    assert same(tmp_path / "images.npz", tmp_path / "numba.npz")
    assert same(tmp_path / "images.npz", home / f"first-{arithmetic}.npz")


def test_an_image_that_cannot_be_read_or_linked_sends_its_kernel_through_numba_which_writes_it_again(warm, tmp_path):
    """A damaged image, and one that needs a symbol nothing defines (linking it would abort the process), are not
    used: the run imports numba for those kernels, computes the same logits, and leaves a usable image behind."""
    home, env = warm
    cache = tmp_path / "cache"
    shutil.copytree(home / "cache", cache)
    env = {**env, "NUMBA_CACHE_DIR": str(cache)}
    kept = sorted(p for p in (cache / "images").iterdir() if not p.name.startswith("runtime"))
    assert len(kept) >= 4
    for i, path in enumerate(kept):
        if i % 2:
            image = pickle.loads(path.read_bytes())
            strong, weak, undefined = image["symbols"]
            image["symbols"] = (strong, weak, undefined | {"streamed_no_such_symbol"})
            path.write_bytes(pickle.dumps(image))
        else:
            path.write_bytes(path.read_bytes()[:100])

    for arithmetic in ("exact", "llama.cpp:avx2"):
        assert "numba" in run(env, tmp_path / f"mended-{arithmetic}.npz", arithmetic)
        assert same(tmp_path / f"mended-{arithmetic}.npz", home / f"first-{arithmetic}.npz")
    for path in kept:
        image = pickle.loads(path.read_bytes())
        assert "streamed_no_such_symbol" not in image["symbols"][2], path.name
    for arithmetic in ("exact", "llama.cpp:avx2"):
        assert run(env, tmp_path / f"again-{arithmetic}.npz", arithmetic) <= EXTENSIONS


CALLER = """
import numpy as np
from streamed.numerics import jit, product
f = jit.compiled(product._KERNEL, product.ACTIVATIONS, product.WEIGHTS[np.dtype(np.float32)], jit.INT64, jit.INT64,
                 product.ACTIVATIONS)
print(type(f).__name__)
x = np.zeros((1, 2, 32), np.float64)
w = np.zeros((1, 4, 32), np.float32)
try:
    f(x, w, 1, 1, np.zeros((1, 2, 4), np.float32))
except TypeError as e:
    print("TypeError:", e)
"""


def test_a_kernel_from_its_image_refuses_arguments_numba_would_not_convert(warm):
    """The machine code reads an array as the type it was compiled for, whatever it is given: a float64 array where
    the product takes float32 activations is refused, as numba's dispatcher refuses it, never read."""
    _, env = warm
    p = subprocess.run([sys.executable, "-c", CALLER], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    kind, refused = p.stdout.splitlines()
    assert kind == "_Checked", "the product was not loaded from its image"
    assert refused.startswith("TypeError: kernel _kernel: no signature for these arguments"), refused


def test_two_calls_have_one_description_exactly_when_numba_types_them_alike():
    """``images.describe`` says, without numba, what numba's ``typeof`` says of a call's arguments: an image is
    found for a call only if it is the machine code numba would run for it."""
    import numba

    from streamed.numerics.images import describe

    base = np.arange(24, dtype=np.float32).reshape(4, 6)
    frozen = base.copy()
    frozen.flags.writeable = False
    unaligned = np.zeros(25, np.uint8)[1:].view(np.float32)  # writeable, one-dimensional, contiguous: as base[0]
    values = [base, base.T, base[:, ::2], base[:2], frozen, unaligned, base.astype(np.float64), base.astype(np.int8),
              base[0], np.zeros((1, 1), np.float32), np.zeros(0, np.float32), 3, -2 ** 62, 2.5, True, False,
              np.float32(1), np.int64(2), np.int32(2), np.bool_(True), (1, 2), (1, 2.0), (base, 1)]
    for a in values:
        for b in values:
            assert (describe((a,)) == describe((b,))) == (numba.typeof(a) == numba.typeof(b)), (a, b)
    assert describe(([1, 2],)) is None and describe((2 ** 64,)) is None and describe((1j,)) is None


def test_an_image_s_symbols_are_its_object_code_s(warm):
    """The symbols an image defines and needs, read from its ELF object code, are what pyelftools reads there: a
    symbol missing from them would be linked unchecked, and an unresolved one aborts LLVM's linker."""
    from io import BytesIO

    from elftools.elf.elffile import ELFFile

    home, _ = warm
    images = sorted((home / "cache" / "images").iterdir())
    assert images
    for path in images:
        image = pickle.loads(path.read_bytes())
        elf = ELFFile(BytesIO(image["object"]))
        strong, weak, undefined = set(), set(), set()
        for symbol in elf.get_section_by_name(".symtab").iter_symbols():
            bind, index = symbol["st_info"]["bind"], symbol["st_shndx"]
            if bind == "STB_LOCAL" or not symbol.name:
                continue
            if index == "SHN_UNDEF":
                undefined.add(symbol.name)
            elif bind == "STB_WEAK" or index == "SHN_COMMON":
                weak.add(symbol.name)
            else:
                strong.add(symbol.name)
        assert image["symbols"] == (strong, weak, undefined - strong - weak), path.name
