"""Compiling the kernels ahead of a first run: what every ``streamed run`` of this machine will need, compiled into
the kernel cache by small runs made for it (``every_job``), several at once, before (or beside) the first real one.

Why: numba compiles a kernel the first time a process calls it, and keeps the machine code in the kernel cache
(``streamed.kernel_cache``). With an empty cache a run compiles everything it calls, one kernel after another: a
1B-shaped Q8_0 prefill in llama.cpp's arithmetic pays about 8 s for it (attention's kernels 2–4 s, the Q8_0 product
1–2 s), a Q4_K_M file's about 11 s (docs/performance.md). A ``pip install`` runs none of our code, so nothing
can compile at install; what can be done is ``streamed warm``, an install step for whoever scripts one (``make``
runs it), and the same in the background once any command on a machine has ended, or the language server has
started (``start``). A run that is itself the first compiles its own kernels as it goes, as numba does, alone on the
machine: measured on two cores, compiling them first as small runs side by side was no faster (each small run pays a
process's start and the kernels the others share) and 4–5 s slower in the exact arithmetic, and the warm-up beside
the run made it 1–5 s slower; after it ends, the warm-up compiles the rest.

The jobs: each a ``streamed run`` of a small document over a small checkpoint written here (d 256: whole K-quant
super-blocks), prefilling 8 tokens and decoding one, in one arithmetic. ``attention`` has no product (norms, rope,
attention, silu, the element-wise ops); each other is products alone, over weights of one group of storage types
(``GROUPS``), so that the jobs can run at once. A kernel is the same machine code whichever process compiled it
(``jit``): a job's kernels are the run's own, loaded from the cache (a product's kernel is compiled for the most
general of the arrays a run passes, ``jit.compiled``; attention's for the arrays every run makes).
``tests/cli/test_ahead.py`` holds that after ``streamed warm`` a run of another model, of every file type people
download, compiles no kernel.

The stamps: a file a job in the kernel cache (``stamp``), in a folder named by the digest of what the kernels are
compiled from — this package's numerics sources, numba's and llvmlite's versions, Python's, and the CPU (``key``) —
written when the job has run. Without them all (a new machine, a new version, a cache removed) a command starts the
background warm-up; with them, nothing is done (``done``: a few file reads, no numba). ``STREAMED_COMPILE_AHEAD=0``
turns all of it off (the runs then compile as they go, as numba does).

I/O: this module writes (the jobs' documents and checkpoints in a temporary folder; the stamps, the lock and the
background warm-up's log in the kernel cache) and starts processes (the jobs; the background warm-up).
"""

from __future__ import annotations

import functools
import hashlib
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from . import cpu, sources

# ``subprocess``, ``tempfile`` and ``time`` are imported where a job starts: every command checks ``done`` (a few
# file reads), and only a machine not done starts anything.

#: The environment variable that turns compiling ahead off (``0``).
ENV = "STREAMED_COMPILE_AHEAD"
#: The arithmetics a run computes in (``--arithmetic``), each compiled by jobs of its own.
ARITHMETICS = ("exact", "llama.cpp")
#: The storage types a product job's weights are kept in: one job a group, each group's types sharing kernels or
#: small enough to compile together. ``attention`` has no product.
GROUPS: dict[str, tuple[str, ...]] = {
    "attention": (),
    "q8_0": ("Q8_0",),
    "float": ("F32", "F16"),
    "bf16": ("BF16",),
    "legacy": ("Q4_0", "Q4_1", "Q5_0", "Q5_1"),
    "k": ("Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"),
    "mxfp4": ("MXFP4",),
}
#: The order jobs start in, the longest first (numba's compile events, an empty cache, measured while the products
#: were parallel loops: llama.cpp's K-quant product 11 s, its float product 6 s a storage, attention 5–7 s), so that
#: the longest is not left for last.
ORDER = ("k", "float", "attention", "bf16", "legacy", "q8_0", "mxfp4")
#: The width of the jobs' models: a whole K-quant super-block (256 values) a row.
WIDTH = 256
#: What a job runs: a prefill of 8 tokens (the product kernels' paths for several rows), then a decode step (one row).
TOKENS, PREFILL = "1,2,3,4,5,6,7,8,9", "8"


@dataclass(frozen=True)
class Job:
    """One small run: ``group``'s kernels (``GROUPS``) in ``arithmetic``."""

    arithmetic: str
    group: str

    @property
    def name(self) -> str:
        return f"{self.arithmetic} {self.group}"


@dataclass(frozen=True)
class Done:
    """What a job did: ``status`` ``compiled``, ``refused`` (this machine has no such arithmetic: llama.cpp's on a
    CPU it is not emulated for — nothing to compile) or ``failed``; its wall seconds; the last line it wrote."""

    job: Job
    status: str
    seconds: float
    said: str = ""


def enabled() -> bool:
    return os.environ.get(ENV, "1").strip() != "0"


def every_job() -> list[Job]:
    """Every job of every arithmetic, the longest first in each round."""
    return [Job(a, g) for g in ORDER for a in reversed(ARITHMETICS)]


# ---- the stamps ----------------------------------------------------------------------------------------------------


def _version_file(package: str) -> bytes:
    """The bytes of ``package``'s ``_version.py`` (numba's, llvmlite's), found without importing it (importing numba
    is a tenth of a second, which a ``streamed kinds`` does not pay); empty when absent."""
    from importlib.util import find_spec

    try:
        spec = find_spec(package)
        folder = Path(next(iter(spec.submodule_search_locations)))
        return (folder / "_version.py").read_bytes()
    except (AttributeError, ImportError, OSError, StopIteration, TypeError, ValueError):
        return b""


@functools.lru_cache(maxsize=None)
def key() -> str:
    """The digest of what the kernels in the cache are compiled from: the sources beside this module (every kernel's
    and its code generators'), numba's and llvmlite's versions, Python's, and this CPU (its name, architecture and
    flags: numba compiles for the host's features)."""
    digest = hashlib.sha256(sources.digest(Path(__file__).resolve().parent).encode())
    for package in ("numba", "llvmlite"):
        digest.update(_version_file(package) + b"\0")
    flags, name, machine = cpu.this_host()
    digest.update(repr((sys.version_info[:2], name, machine, sorted(flags))).encode())
    return digest.hexdigest()[:32]


def _folder() -> Path:
    """``ahead`` in the kernel cache: ``NUMBA_CACHE_DIR``, which ``streamed/__init__.py`` — imported before any of
    its modules — set to the user's cache folder (``streamed.kernel_cache``) when the user did not."""
    return Path(os.environ["NUMBA_CACHE_DIR"]) / "ahead"


def stamp(job: Job) -> Path:
    """The file whose presence says ``job`` ran for this ``key`` (``ahead/<key>/`` in the kernel cache)."""
    return _folder() / key() / job.name.replace(":", "_").replace(" ", "-")


def stamped(job: Job) -> bool:
    try:
        return stamp(job).is_file()
    except OSError:
        return False


def failed(job: Job) -> Path:
    """The file that says ``job`` failed here for this ``key`` (its last line): the background warm-up does not try
    it again — a job that fails fails in every process, and every command would start it again — ``streamed warm``
    does, and removes it when the job runs."""
    path = stamp(job)
    return path.with_name(path.name + ".failed")  # not with_suffix: "llama.cpp-k" has a dot of its own


def done() -> bool:
    """Whether every job of every arithmetic was run on this machine for this ``key`` (ran, or failed and said so):
    a stat or two a job, no numba."""
    return all(stamped(j) or failed(j).is_file() for j in every_job())


# ---- the jobs -------------------------------------------------------------------------------------------------------

_HEADER = """# compiling ahead: {title}
-- A run made to compile kernels (streamed.numerics.ahead), not a model.

## Model
Let d be {d}.
Let vocab be {d}.

## Checkpoint
Emb is "token_embd.weight".
g{{l}} is "blk.{{l}}.attn_norm.weight".
gf is "output_norm.weight".
{bindings}
## Embed
Let tok be a token.
Let Emb be a weight of vocab by d.
Let x be row tok of Emb.
Return x.

## Layer 0
Let x be an input of rows by d.
Let pos be a position.
Let g0 be a weight of d.
"""

_ATTENTION = """Let Kc0 be a state of ctx by d.
Let Vc0 be a state of ctx by d.
Let Rcos1 be a table of ctx by 32, cosines of base 10000.
Let Rsin1 be a table of ctx by 32, sines of base 10000.
Let xn0 be rmsnorm of x with g0, epsilon 1e-5.
Let q0 be rope of xn0 at pos with Rcos1 and Rsin1, heads 4, interleaved.
Set row pos of Kc0 to rope of xn0 at pos with Rcos1 and Rsin1, heads 4, interleaved.
Set row pos of Vc0 to xn0.
Let a0 be attention of q0 over Kc0 and Vc0 at pos, heads 4 sharing 4.
Let h0 be x plus a0.
Let f0 be silu of h0 multiplied by xn0.
Let y0 be h0 plus f0.
Return y0.
"""

_HEAD = """
## Head
Let y0 be an input of rows by d.
Let gf be a weight of d.
Let xf be rmsnorm of y0 with gf, epsilon 1e-5.
Let next be index of the largest of xf.
Return next.
"""


def _slug(qtype: str) -> str:
    return qtype.lower()


def document(group: str) -> str:
    """The job's model program: attention's layer, or a chain of products — one over a weight of each of the group's
    types, each normalised before the next (so the values stay finite whatever the weights)."""
    types = GROUPS[group]
    bindings = "".join(f'W{_slug(t)}{{l}} is "blk.{{l}}.w_{_slug(t)}.weight".\n' for t in types)
    text = _HEADER.format(title=group, d=WIDTH, bindings=bindings)
    if not types:
        return text + _ATTENTION + _HEAD
    last = "x"
    for i, t in enumerate(types):
        text += f"Let W{_slug(t)}0 be a q8 weight of d by d.\n"
    for i, t in enumerate(types):
        text += f"Let p{i} be {last} times W{_slug(t)}0.\nLet z{i} be rmsnorm of p{i} with g0, epsilon 1e-5.\n"
        last = f"z{i}"
    return text + f"Let y0 be {last} plus x.\nReturn y0.\n" + _HEAD


def checkpoint(group: str, path: Path) -> Path:
    """The job's checkpoint at ``path``: its norms float32, its embedding and weights stored as the group's types (the
    embedding as the first: a row looked up in blocks is a kernel too). The values are random and small; the blocks'
    bytes of the types ``gguf`` cannot quantise are random below 64, so every fp16 scale is finite."""
    import numpy as np
    from gguf import GGMLQuantizationType, GGUFWriter
    from gguf.constants import GGML_QUANT_SIZES
    from gguf.quants import quantize

    rng = np.random.default_rng(0)
    w = GGUFWriter(str(path), "llama")
    w.add_uint32("llama.block_count", 1)
    w.add_uint32("llama.embedding_length", WIDTH)
    w.add_uint32("general.alignment", 32)

    def add(name: str, qtype: str) -> None:
        kind = GGMLQuantizationType[qtype]
        values = rng.normal(0.0, 0.05, (WIDTH, WIDTH)).astype(np.float32)
        if kind == GGMLQuantizationType.F32:
            w.add_tensor(name, values)
            return
        if kind == GGMLQuantizationType.F16:
            w.add_tensor(name, values.astype(np.float16))
            return
        try:
            raw = quantize(values, kind)
        except NotImplementedError:
            per, nbytes = GGML_QUANT_SIZES[kind]
            raw = rng.integers(0, 64, (WIDTH, WIDTH // per * nbytes), dtype=np.uint8)
        w.add_tensor(name, raw, raw_dtype=kind)

    types = GROUPS[group]
    add("token_embd.weight", types[0] if types else "F32")
    for name in ("blk.0.attn_norm.weight", "output_norm.weight"):
        w.add_tensor(name, np.ones(WIDTH, np.float32))
    for t in types:
        add(f"blk.0.w_{_slug(t)}.weight", t)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def _argv(job: Job, folder: Path) -> list[str]:
    doc, ckpt = folder / f"{job.group}.lgm", folder / f"{job.group}.gguf"
    if not doc.exists():
        checkpoint(job.group, ckpt)
        doc.write_text(document(job.group), encoding="utf-8")
    return [sys.executable, "-m", "streamed", "run", str(doc), "--checkpoint", str(ckpt), "--tokens", TOKENS,
            "--prefill", PREFILL, "--arithmetic", job.arithmetic]


def compile_ahead(jobs: list[Job], workers: int | None = None, *, nice: int = 0, said=None) -> list[Done]:
    """Run ``jobs``, at most ``workers`` at once (default: this process's cores), each a process of its own at
    niceness ``nice``; ``said(done)`` after each ends. Stamps each that did not fail (``stamp``). A job refused for
    its arithmetic (exit 2: llama.cpp's on a CPU it is not emulated for) has nothing to compile; any other failure
    is reported, never raised: a run goes on, compiling as it goes. An interrupt (or any error) here leaves no job
    running."""
    import subprocess
    import tempfile
    import time

    if workers is None:
        workers = cpu.cores()
    env = {**os.environ, ENV: "0"}  # a job's own run is not to compile ahead again
    results: list[Done] = []
    running: dict = {}  # process → (job, when it started, its stderr's file)
    with tempfile.TemporaryDirectory(prefix="streamed-ahead-") as tmp:
        folder, waiting = Path(tmp), list(jobs)
        try:
            while waiting or running:
                while waiting and len(running) < max(1, workers):
                    job = waiting.pop(0)
                    err = folder / f"{job.arithmetic}-{job.group}.err"
                    try:
                        argv = _argv(job, folder)
                        with open(err, "wb") as sink:  # a file, not a pipe: a job that says much never blocks
                            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                                    stderr=sink, env=env, preexec_fn=_niced(nice))
                    except (OSError, ValueError) as e:
                        results.append(Done(job, "failed", 0.0, str(e)))
                        said and said(results[-1])
                        continue
                    running[proc] = (job, time.monotonic(), err)
                finished = next((p for p in running if p.poll() is not None), None)
                if finished is None:
                    time.sleep(0.02)
                    continue
                job, started, err = running.pop(finished)
                last = next((l for l in reversed(err.read_text(errors="replace").splitlines()) if l.strip()), "")
                refused = finished.returncode == 2 and job.arithmetic != "exact"
                results.append(Done(job, "compiled" if finished.returncode == 0 else "refused" if refused else
                                    "failed", time.monotonic() - started, last))
                said and said(results[-1])
        finally:
            for proc in running:
                proc.kill()
                proc.wait()
    for d in results:
        try:
            stamp(d.job).parent.mkdir(parents=True, exist_ok=True)
            if d.status == "failed":
                failed(d.job).write_text(d.said + "\n")
            else:
                stamp(d.job).write_text(f"{d.status} in {d.seconds:.1f} s\n")
                failed(d.job).unlink(missing_ok=True)
        except OSError:  # a cache that cannot be written: the job's kernels were not kept either
            pass
    return results


def _niced(nice: int):
    """What a job's process runs before it starts: lowering its priority by ``nice`` (POSIX; elsewhere nothing)."""
    if not nice or os.name != "posix":
        return None
    return lambda: os.nice(nice)


# ---- in the background -----------------------------------------------------------------------------------------------

#: How much lower than the command that starts it the background warm-up runs (``nice``): it takes what is idle.
NICE = 10


def start() -> bool:
    """Start the background warm-up (every job not stamped, at ``NICE``) unless it is off (``ENV``), done, or not
    possible here (no ``fcntl``: the lock that keeps it one a machine); True when a process was started. It runs in a
    session of its own, its output in ``warm-up.log`` in the kernel cache's ``ahead`` folder, and ends by itself: a
    second one started meanwhile finds the first's lock taken and ends at once (``_background``). Never raises: a
    warm-up that cannot start leaves the runs to compile as they go."""
    if not enabled() or done():
        return False
    try:
        import fcntl  # noqa: F401  (POSIX only)
        import subprocess

        folder = _folder()
        folder.mkdir(parents=True, exist_ok=True)
        with open(folder / "warm-up.log", "ab") as log:
            subprocess.Popen([sys.executable, "-m", "streamed.numerics.ahead"],
                             stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
                             preexec_fn=_niced(NICE), close_fds=True)
        return True
    except (ImportError, OSError, ValueError):
        return False


def _background() -> int:
    """The background warm-up's process: every job not run yet (nor failed here), one at a time less than the cores
    (a core left for whatever the user runs), under a lock so that one runs a machine; each job stamped as it ends."""
    import fcntl
    import time

    folder = _folder()
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / f"{key()}.lock", "ab") as lock:  # not truncated: a holder's pid stays while others try
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return 0  # another warm-up holds it
        lock.truncate(0)
        lock.write(str(os.getpid()).encode())  # who holds it (``running``): the leader of its session
        lock.flush()
        if done():
            return 0
        free = cpu.cores()
        began = time.monotonic()
        print(f"{time.strftime('%Y-%m-%d %H:%M:%S')} compiling ahead ({key()}), {max(1, free - 1)} at once",
              flush=True)
        results = compile_ahead([j for j in every_job() if not stamped(j) and not failed(j).is_file()],
                                max(1, free - 1),
                                said=lambda d: print(f"  {d.job.name}: {d.status}, {d.seconds:.1f} s"
                                                     f"{'  ' + d.said if d.status == 'failed' else ''}", flush=True))
        broken = sum(d.status == "failed" for d in results)
        print(f"  {'done' if not broken else f'{broken} failed'} in {time.monotonic() - began:.1f} s", flush=True)
        return 1 if broken else 0


def running() -> int | None:
    """The process id of the background warm-up running now for this ``key`` (the leader of its session: its jobs
    are in its process group), or None — read from its lock, which it holds while it runs."""
    try:
        import fcntl

        with open(_folder() / f"{key()}.lock", "rb") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except OSError:
                text = lock.read().decode(errors="replace").strip()
                return int(text) if text.isdigit() else None
            fcntl.flock(lock, fcntl.LOCK_UN)
            return None
    except (ImportError, OSError):
        return None


if __name__ == "__main__":
    sys.exit(_background())
