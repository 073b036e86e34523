"""What every subcommand shares: the user's error, reading a document, the deployment options and the storage a
checkpoint gives. Nothing here analyses or lowers; it turns what the user typed into the core's values, or into one
``UserError`` naming what was typed."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path
from typing import BinaryIO, Callable

from ..spatial.deployment import MODES, Deployment, size_problem
from ..lang.files import display
from ..spatial.units import size


class UserError(Exception):
    """Bad input from the user: printed as ``streamed: <message>`` with exit status 2."""


def whole(option: str):
    """The argparse ``type`` of an option that takes a whole number: ASCII digits (a leading ``-`` allowed, which the
    option's own check then refuses), or one ``UserError`` naming what was typed — never argparse's usage and
    error, seven lines for ``--ctx 1e9``."""
    import re

    def read(text: str) -> int:
        if re.fullmatch(r"-?[0-9]{1,30}", text.strip()):
            return int(text)
        from ..lang.files import display, shown

        typed = shown(display(text)) if len(text) <= 40 else shown(display(text[:39])) + "…"
        raise UserError(f"{option} {typed}: not a whole number; give it in the digits 0-9 (as 4096)")

    read.__name__ = "whole number"  # what argparse would call the type
    return read


def read_document(path: str) -> bytes:
    """The bytes of the document at ``path`` — a regular file of at most ``MAX_DOCUMENT_BYTES``, its size checked
    before it is read (``lang.files``) — or ``UserError`` (exit 2) naming the path and why."""
    from ..lang.files import FileProblem, read_file
    from ..lang.limits import MAX_DOCUMENT_BYTES, document_too_large

    try:
        return read_file(path, MAX_DOCUMENT_BYTES, "a model program", document_too_large)
    except FileProblem as e:
        raise UserError(str(e)) from None


#: The sizes only some deployments read, and which.
SIZED_BY = {"chunk": ("prefill", "decode"), "batch": ("batched", "batched-tp"), "tp": ("tp", "batched-tp")}
#: The sizes a deployment reads only when given: a decode's chunk is the prefill it continues (none by default).
OPTIONAL = {("decode", "chunk")}


def add_deployment_options(p, *, mode: str | None = "decode", ctx: int | None = 4096, ctx_help: str | None = None,
                           sizes_help: dict | None = None) -> None:
    """``--mode --ctx --chunk --batch --tp`` on ``p`` (a parser or an argument group), with the defaults given."""
    sizes_help = sizes_help or {}
    p.add_argument("--mode", choices=MODES, default=mode, help="the deployment: forward|decode|prefill|batched|tp|"
                                                                 f"batched-tp (default {mode or 'decode'})")
    p.add_argument("--ctx", type=whole("--ctx"), default=ctx, metavar="N",
                   help=ctx_help or f"KV-cache length; the sequence for forward (default {ctx})")
    p.add_argument("--chunk", type=whole("--chunk"), metavar="N",
                   help=sizes_help.get("chunk", "prefill rows per step") + "; with --mode decode, the prefill chunk "
                   "whose state the decode continues (its windowed caches hold a chunk beyond the window)")
    p.add_argument("--batch", type=whole("--batch"), metavar="N",
                   help=sizes_help.get("batch", "sequences per batched step"))
    p.add_argument("--tp", type=whole("--tp"), metavar="N", help=sizes_help.get("tp", "tensor-parallel chips"))


def deployment_from(args, defaults: dict | None = None):
    """The deployment ``--mode``, ``--ctx``, ``--chunk``, ``--batch`` and ``--tp`` name, or ``UserError`` (exit 2)
    naming the option: a size that is not positive, one the mode needs and nobody gave (``defaults`` fills those), one
    the mode does not read (it would be silently ignored), or a prefill chunk longer than its context. A deployment
    that passes can still be refused by the model (heads that do not split over ``tp`` chips: exit 1)."""
    mode, defaults = args.mode, defaults or {}
    sizes: dict[str, int] = {}
    given = lambda flag: f"--{flag} {sizes[flag]}" + ("" if getattr(args, flag, None) is not None else " (the default)")
    for flag in ("ctx", "chunk", "batch", "tp"):
        value, readers = getattr(args, flag, None), SIZED_BY.get(flag)
        if readers is not None and mode not in readers:
            if value is not None and value != defaults.get(flag):
                raise UserError(f"--{flag} {value}: --mode {mode} does not read it (it sizes --mode "
                                f"{' and --mode '.join(readers)})")
            continue
        if value is None and (mode, flag) in OPTIONAL:
            continue
        if value is None:
            value = defaults.get(flag)
            if value is None:
                raise UserError(f"--mode {mode} needs --{flag} N")
        why = size_problem(flag, value, say_value=False)
        if why is not None:
            raise UserError(f"--{flag} {value}: {why}")
        sizes[flag] = value
    if sizes.get("chunk", 0) > sizes["ctx"]:
        raise UserError(f"{given('chunk')} is longer than {given('ctx')}: a prefill chunk is at most its context")
    return Deployment(mode, ctx=sizes["ctx"], chunk=sizes.get("chunk", 0), batch=sizes.get("batch", 1),
                      tp=sizes.get("tp", 1))


def add_storage_option(p) -> None:
    """``--storage``: the file type a document read with no checkpoint assumes its weights written as."""
    p.add_argument("--storage", choices=("q8_0", "f16", "bf16", "mxfp4_moe"), default=None,
                   help="without --checkpoint: assume the weights are what llama.cpp's quantizer writes for this file "
                        "type (default q8_0: routers kept F32, weights whose input features are not whole blocks F16)")


def load_storage(checkpoint: str | None, storage: str | None = None, parsed=None):
    """The storage a checkpoint gives; with none named, the storage assumed for the file type ``storage``
    (``--storage``; ``q8_0`` by default). Both named is bad input: a checkpoint's storage is read, not assumed.
    ``parsed``: the checkpoint already parsed (``open_checkpoint``), read rather than parsed again."""
    from ..model.checkpoint import FILE_TYPES, CheckpointError, Storage
    from ..model.storage import storage_of

    if checkpoint is not None and storage is not None:
        raise UserError(f"--storage {storage} names what to assume without a checkpoint, but --checkpoint "
                        f"{display(checkpoint)} is read: give one of them")
    try:
        read = storage_of(checkpoint, parsed)
    except CheckpointError as e:
        raise UserError(str(e)) from None
    return read if storage is None else Storage(assumed=FILE_TYPES[storage])


def open_checkpoint(checkpoint: str | None, storage: str | None = None):
    """For a command that reads the weights: the storage (``load_storage``) and the checkpoint parsed and mapped
    once (``model.gguf.Mapped``; ``None`` with no checkpoint), which the weights are then read from — one header
    parse and one mapping a run. Bad input as ``load_storage`` says it."""
    if checkpoint is None or storage is not None:
        return load_storage(checkpoint, storage), None
    from ..model.checkpoint import CheckpointError
    from ..model.gguf import mapped

    try:
        parsed = mapped(checkpoint)
    except CheckpointError as e:
        raise UserError(str(e)) from None
    return load_storage(checkpoint, None, parsed), parsed


def load_target_or_fail(target: str | None):
    """The target a ``--target`` names (a built-in's name or a TOML file), or ``UserError`` saying what is wrong."""
    from ..spatial.target import TargetError, load_target

    try:
        return load_target(target)
    except TargetError as e:
        raise UserError(str(e)) from None


def print_errors(path: str, a, command: str, done: str | None) -> int:
    """A document with errors: each error as ``check`` prints it (stderr), and the count — for a command that needs a
    document without (``done``: what it therefore did not do), or for ``kinds``, which shows what it could read
    (``done`` None). Returns exit status 1, the status of a document with errors whatever the command."""
    from ..analysis.whole import position
    from ..lang.files import shown

    for d in a.errors:
        line, col = position(d.range)
        print(f"{shown(path)}:{line}:{col}: error: {shown(d.message)}", file=sys.stderr)
    n = len(a.errors)
    then = f"so nothing was {done}" if done else "the kinds shown are of what could be read"
    print(f"streamed {command}: {path} has {n} error{'s' if n != 1 else ''}, {then}", file=sys.stderr)
    return 1


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'s' if n != 1 else ''}"


def table(rows: list[list[str]], header: list[str]) -> str:
    """Rows aligned under a header and a rule of dashes, with no trailing spaces."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    line = lambda r: "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip()
    return "\n".join([line(header), line(["-" * w for w in widths]), *map(line, rows)])


# ---- memory: what the machine has, and refusing a run that needs more ----------------------------------------------

#: The share of the memory available at the start that a run may plan to use (the rest: the interpreter, the page
#: cache's other tenants, numpy's temporaries).
MEMORY_SHARE = 0.8


def parse_bytes(text: str, flag: str = "--memory") -> int:
    """``4G``, ``512M``, ``1.5GB``, ``2000000000``: a size in bytes (powers of 1000, as ``units.size`` prints), or
    ``UserError`` naming ``flag`` and what was given."""
    t = text.strip().upper().removesuffix("B")
    scale = {"K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}.get(t[-1:], 1)
    try:
        value = float(t[:-1] if scale != 1 else t) * scale
    except ValueError:
        raise UserError(f"{flag} {text}: not a size (say 8G, 512M or a number of bytes)") from None
    if not value > 0 or value != value or value == float("inf"):
        raise UserError(f"{flag} {text}: must be a positive size")
    return int(value)


def available_memory() -> tuple[int, str]:
    """The bytes this process can still use and where the figure comes from: the kernel's ``MemAvailable``, or the
    room left under this process's cgroup limit where that is smaller (a container's)."""
    have, where = None, "MemAvailable in /proc/meminfo"
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                have = int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    room = _cgroup_room()
    if room is not None and (have is None or room < have):
        have, where = room, "the room under this process's cgroup memory limit"
    if have is None:
        import os

        have, where = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"), "the machine's physical memory"
    return have, where


def _cgroup_room() -> int | None:
    """``memory.max − memory.current`` of this process's cgroup (v2), or v1's limit less usage; ``None`` unlimited."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        base = Path("/sys/fs/cgroup")
        if parts[0] == "0" and parts[1] == "":
            folder = base / parts[2].lstrip("/")
            pairs = [(folder / "memory.max", folder / "memory.current")]
        elif "memory" in parts[1].split(","):
            folder = base / "memory" / parts[2].lstrip("/")
            pairs = [(folder / "memory.limit_in_bytes", folder / "memory.usage_in_bytes")]
        else:
            continue
        for limit_file, usage_file in pairs:
            try:
                limit, usage = limit_file.read_text().strip(), usage_file.read_text().strip()
            except OSError:
                continue
            if limit == "max" or not limit.isdigit() or int(limit) >= 1 << 60:
                return None
            return max(int(limit) - int(usage), 0)
    return None


def add_memory_option(p) -> None:
    p.add_argument("--memory", metavar="BYTES", default=None,
                   help=f"the memory this run may use (default {MEMORY_SHARE * 100:.0f}%% of what the machine has available); "
                        "a run that needs more is refused before it starts")


def memory_budget(args) -> tuple[int, str]:
    """The bytes a run may use and how that was decided: ``--memory``, else a share of what is available."""
    if args.memory is not None:
        return parse_bytes(args.memory), f"--memory {args.memory}"
    have, where = available_memory()
    return int(have * MEMORY_SHARE), f"{MEMORY_SHARE:.0%} of the {size(have)} available ({where})"


def refuse_unless_it_fits(command: str, doc: str, need, args) -> None:
    """``UserError`` (exit 2) naming the bytes ``need`` (a ``numerics.footprint.Footprint``) takes and the bytes the
    budget gives, when the first is larger — said before anything is read or made."""
    budget, how = memory_budget(args)
    if need.total > budget:
        raise UserError(f"{doc}: {command} needs {size(need.total)} of memory — weights {size(need.weights)} "
                        f"({need.values:,} values), "
                        f"caches and tables {size(need.states)}, one step's tensors and the logits "
                        f"{size(need.activations)} — and has {size(budget)} ({how})")


def add_arithmetic_option(p) -> None:
    p.add_argument("--arithmetic", default="exact", metavar="exact|llama.cpp[:PATH]",
                   help="exact float32 (default), or llama.cpp's CPU arithmetic (Q8_0, F16 and K-quant activations "
                        "quantised as ggml quantises them, every sum in ggml's order) as the llama.cpp build on "
                        "this machine computes it (its kernel path: what llama-cpp-python's build reports, else what "
                        "a native build compiles for this CPU), or on the path named: llama.cpp:avx2, "
                        "llama.cpp:avx512 (:nollamafile for a build without llamafile's tinyBLAS)")


def arithmetic_of(args):
    """The ``product.Arithmetic`` that ``--arithmetic`` names, with how its kernel path was chosen (``None`` for
    exact), or ``UserError`` (exit 2): a name that is no arithmetic, or a machine whose llama.cpp computes in a path
    not emulated (``cpu.Unemulated``: the build and the paths there are)."""
    from ..numerics.cpu import PATHS, Unemulated, this_machine
    from ..numerics.product import EXACT, llama_cpp

    text = args.arithmetic.strip()
    if text == "exact":
        return EXACT, None
    name, colon, path = text.partition(":")
    if name != "llama.cpp" or (colon and path.lower() not in PATHS):
        raise UserError(f"--arithmetic {text}: not an arithmetic; say exact, llama.cpp (this machine's kernel path) "
                        f"or llama.cpp:PATH with PATH one of {', '.join(PATHS)}")
    chosen = this_machine(path or None)
    if isinstance(chosen, Unemulated):
        raise UserError(str(chosen))
    return llama_cpp(chosen.path), chosen.source


def arithmetic_line(arithmetic, source) -> str:
    """``arithmetic: llama.cpp:avx2 — x86-64 AVX2 + FMA + F16C, 8 float32 lanes (the llama.cpp build's report)``."""
    if source is None:
        return f"arithmetic: {arithmetic.label}"
    return f"arithmetic: {arithmetic.label} — {arithmetic.path.described} ({source})"


def refuse_unwritable(path: str, shown: str, example: str) -> None:
    """``UserError`` where a file cannot be written at ``path`` — a folder there, or no folder for it — named as the
    user gave it (``shown``), with an ``example`` of what to give; checked before any work, so nothing is computed
    for a file that cannot be kept."""
    target = Path(path)
    if target.is_dir():
        raise UserError(f"{shown}: is a directory; give the file to write ({example})")
    if not target.parent.exists() and str(target.parent) not in ("", "."):
        raise UserError(f"{shown}: its folder {target.parent} does not exist")


def write_atomically(path: str, content: str | Callable[[BinaryIO], None]) -> None:
    """Write ``content`` to ``path`` so that a reader sees the old file or the whole new one, never a part: a text
    (UTF-8, ``\\n`` line ends), or a function writing the bytes to the binary file it is given.

    The file ends as a plain write would leave it: an existing file keeps its mode, a new one gets the umask's
    (``mkstemp`` makes its file private, 0600), and a path that is a symbolic link is written where the link points,
    the link kept."""
    target = Path(os.path.realpath(path)) if os.path.islink(path) else Path(path)
    directory = target.parent if str(target.parent) else Path(".")
    try:
        mode = stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        mode = 0o666 & ~_umask()
    import tempfile  # here, not at the top: every command imports this module to list its options

    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=directory)
    try:
        if isinstance(content, str):
            with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
                f.write(content)
                os.fchmod(f.fileno(), mode)
        else:
            with os.fdopen(fd, "wb") as f:
                content(f)
                os.fchmod(f.fileno(), mode)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _umask() -> int:
    """The process's umask (read by setting it, so set back at once)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask
