"""What every subcommand shares: the user's error, reading a document, the deployment options and the storage a
checkpoint gives. Nothing here analyses or lowers; it turns what the user typed into the core's values, or into one
``UserError`` naming what was typed."""

from __future__ import annotations

import sys
from pathlib import Path

from ..spatial.deployment import MODES, Deployment, size_problem


class UserError(Exception):
    """Bad input from the user: printed as ``streamed: <message>`` with exit status 2."""


def read_document(path: str) -> bytes:
    p = Path(path)
    if not p.exists():
        raise UserError(f"{path}: no such file")
    if p.is_dir():
        raise UserError(f"{path}: is a directory, not a model program")
    try:
        return p.read_bytes()
    except OSError as e:
        raise UserError(f"{path}: cannot be read ({e.strerror})") from None


#: The sizes only some deployments read, and which.
SIZED_BY = {"chunk": ("prefill",), "batch": ("batched", "batched-tp"), "tp": ("tp", "batched-tp")}


def add_deployment_options(p, *, mode: str | None = "decode", ctx: int | None = 4096, ctx_help: str | None = None,
                           sizes_help: dict | None = None) -> None:
    """``--mode --ctx --chunk --batch --tp`` on ``p`` (a parser or an argument group), with the defaults given."""
    sizes_help = sizes_help or {}
    p.add_argument("--mode", choices=MODES, default=mode, help="the deployment: forward|decode|prefill|batched|tp|"
                                                                 f"batched-tp (default {mode or 'decode'})")
    p.add_argument("--ctx", type=int, default=ctx, metavar="N",
                   help=ctx_help or f"KV-cache length; the sequence for forward (default {ctx})")
    p.add_argument("--chunk", type=int, metavar="N", help=sizes_help.get("chunk", "prefill rows per step"))
    p.add_argument("--batch", type=int, metavar="N", help=sizes_help.get("batch", "sequences per batched step"))
    p.add_argument("--tp", type=int, metavar="N", help=sizes_help.get("tp", "tensor-parallel chips"))


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
        if value is None:
            value = defaults.get(flag)
            if value is None:
                raise UserError(f"--mode {mode} needs --{flag} N")
        why = size_problem(flag, value, say_value=False)
        if why is not None:
            raise UserError(f"--{flag} {value}: {why}")
        sizes[flag] = value
    if mode == "prefill" and sizes["chunk"] > sizes["ctx"]:
        raise UserError(f"{given('chunk')} is longer than {given('ctx')}: a prefill chunk is at most its context")
    return Deployment(mode, ctx=sizes["ctx"], chunk=sizes.get("chunk", 0), batch=sizes.get("batch", 1),
                      tp=sizes.get("tp", 1))


def load_storage(checkpoint: str | None):
    """The storage a checkpoint gives, or every q8 weight stored Q8_0 when none is named."""
    from ..model.checkpoint import CheckpointError
    from ..model.storage import storage_of

    try:
        return storage_of(checkpoint)
    except CheckpointError as e:
        raise UserError(str(e)) from None


def load_target_or_fail(target: str | None):
    """The target a ``--target`` names (a built-in's name or a TOML file), or ``UserError`` saying what is wrong."""
    from ..spatial.target import TargetError, load_target

    try:
        return load_target(target)
    except TargetError as e:
        raise UserError(str(e)) from None


def print_errors(path: str, a, command: str, done: str) -> int:
    """A document with errors, for a command that needs one without: each error as ``check`` prints it (stderr), and
    the count. Returns exit status 1."""
    from ..analysis.whole import position

    for d in a.errors:
        line, col = position(d.range)
        print(f"{path}:{line}:{col}: error: {d.message}", file=sys.stderr)
    n = len(a.errors)
    print(f"streamed {command}: {path} has {n} error{'s' if n != 1 else ''}, so nothing was {done}", file=sys.stderr)
    return 1


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'s' if n != 1 else ''}"


def table(rows: list[list[str]], header: list[str]) -> str:
    """Rows aligned under a header and a rule of dashes, with no trailing spaces."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    line = lambda r: "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip()
    return "\n".join([line(header), line(["-" * w for w in widths]), *map(line, rows)])
