"""The ``streamed`` command line: a thin adapter that reads files, calls the core, and prints for people or JSON.

Exit status: 0 success; 1 the document has errors (``check``), a lowering is refused (``lower``) or a verification
fails (``verify``); 2 bad input (a file that cannot be read, a bad option, a corrupt checkpoint or config). Every
failure is one clear message on stderr that names what the user gave, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

try:
    from .analysis import Analysis, analyze, layer_ranges, position
    from .lang.syntax import Severity
    from .model.checkpoint import ALL_Q8, Storage
except KeyboardInterrupt:  # Ctrl-C while the command starts: the same one line as at any other moment
    print("streamed: interrupted", file=sys.stderr)
    raise SystemExit(130) from None


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


MODES = ("forward", "decode", "prefill", "batched", "tp", "batched-tp")
#: The sizes only some deployments read, and which.
SIZED_BY = {"chunk": ("prefill",), "batch": ("batched", "batched-tp"), "tp": ("tp", "batched-tp")}


def deployment_from(args, defaults: dict | None = None):
    """The deployment ``--mode``, ``--ctx``, ``--chunk``, ``--batch`` and ``--tp`` name, or ``UserError`` (exit 2)
    naming the option: a size that is not positive, one the mode needs and nobody gave (``defaults`` fills those), one
    the mode does not read (it would be silently ignored), or a prefill chunk longer than its context. A deployment
    that passes can still be refused by the model (heads that do not split over ``tp`` chips: exit 1)."""
    from .streamed import Deployment

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
        if value <= 0:
            raise UserError(f"--{flag} {value}: must be a positive number")
        sizes[flag] = value
    if mode == "prefill" and sizes["chunk"] > sizes["ctx"]:
        raise UserError(f"{given('chunk')} is longer than {given('ctx')}: a prefill chunk is at most its context")
    return Deployment(mode, ctx=sizes["ctx"], chunk=sizes.get("chunk", 0), batch=sizes.get("batch", 1),
                      tp=sizes.get("tp", 1))


def print_errors(path: str, a: Analysis, command: str, done: str) -> int:
    """A document with errors, for a command that needs one without: each error as ``check`` prints it (stderr), and
    the count. Returns exit status 1."""
    for d in a.errors:
        line, col = position(d.range)
        print(f"{path}:{line}:{col}: error: {d.message}", file=sys.stderr)
    n = len(a.errors)
    print(f"streamed {command}: {path} has {n} error{'s' if n != 1 else ''}, so nothing was {done}", file=sys.stderr)
    return 1


def load_storage(checkpoint: str | None) -> Storage:
    """The storage a checkpoint gives, or every q8 weight stored Q8_0 when none is named."""
    if checkpoint is None:
        return ALL_Q8
    from .model.gguf import CheckpointError, read_storage

    try:
        return read_storage(checkpoint)
    except CheckpointError as e:
        raise UserError(str(e)) from None


def _table(rows: list[list[str]], header: list[str]) -> str:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    line = lambda r: "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip()
    return "\n".join([line(header), line(["-" * w for w in widths]), *map(line, rows)])


def kinds_json(a: Analysis) -> dict:
    out = {
        "layers": len(a.programs.layers),
        "kinds": [{"name": k.name, "layers": list(k.layers), "representative": k.representative} for k in a.kinds],
        "divergences": [],
    }
    for d in a.divergences:
        line, col = position(d.range)
        rline, rcol = position(d.representative_range)
        out["divergences"].append({
            "layer": d.layer, "representative": d.representative, "line": line, "column": col,
            "representative_line": rline, "representative_column": rcol, "why": d.why,
        })
    return out


def cmd_kinds(args) -> int:
    a = analyze(read_document(args.doc), load_storage(args.checkpoint))
    if args.json:
        print(json.dumps(kinds_json(a), indent=2))
        return 0
    rows = [[k.name, str(len(k.layers)), layer_ranges(k.layers), str(k.representative)] for k in a.kinds]
    n = len(a.programs.layers)
    print(f"{args.doc}: {n} layer{'s' if n != 1 else ''} in {len(a.kinds)} kind{'s' if len(a.kinds) != 1 else ''}")
    if rows:
        print()
        print(_table(rows, ["kind", "count", "layers", "first"]))
    if a.divergences:
        print()
        print(f"{len(a.divergences)} divergence{'s' if len(a.divergences) != 1 else ''}:")
        for d in a.divergences:
            line, col = position(d.range)
            rline, rcol = position(d.representative_range)
            print(f"  {args.doc}:{line}:{col}: layer {d.layer} vs layer {d.representative} ({d.kind}, line {rline}:{rcol}): {d.why}")
    errors = len(a.errors)
    if errors:
        print()
        print(f"{errors} error{'s' if errors != 1 else ''}: run `streamed check {args.doc}` to see them")
    return 0


def cmd_check(args) -> int:
    a = analyze(read_document(args.doc), load_storage(args.checkpoint))
    diagnostics = list(a.diagnostics)
    if getattr(args, "lowering", True):
        diagnostics += lowering_diagnostics(a, args)
        diagnostics.sort(key=lambda d: (d.range.start.offset, d.severity.value))
    if args.json:
        print(json.dumps([{
            "line": d.range.start.line + 1, "column": d.range.start.character + 1,
            "end_line": d.range.end.line + 1, "end_column": d.range.end.character + 1,
            "severity": d.severity.value, "code": d.code, "message": d.message,
        } for d in diagnostics], indent=2))
    else:
        for d in diagnostics:
            line, col = position(d.range)
            print(f"{args.doc}:{line}:{col}: {d.severity.value}: {d.message}")
    return 1 if any(d.severity is Severity.ERROR for d in diagnostics) else 0


def lowering_diagnostics(a: Analysis, args) -> list:
    """Each kind's lowering reject for the deployment the options name (decode at ctx 4096 unless told), at the
    statement that caused it — once lowering exists in this build."""
    try:
        from .spatial.diagnose import reject_diagnostics
        from .spatial.target import TargetError, load_target
    except ImportError:
        return []
    deployment = deployment_from(args)
    try:
        target = load_target(getattr(args, "target", None))
    except TargetError as e:
        raise UserError(str(e)) from None
    return reject_diagnostics(a, deployment, target)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="streamed", description="Model programs: layer kinds, divergences, SN50 bundles.")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    k = sub.add_parser("kinds", help="the layer kinds of a document and where layers diverge")
    k.add_argument("doc", metavar="DOC")
    k.add_argument("--json", action="store_true", help="print JSON")
    k.add_argument("--checkpoint", metavar="CKPT", help="a GGUF checkpoint whose storage decides the kinds")
    k.set_defaults(run=cmd_kinds)

    c = sub.add_parser("check", help="every diagnostic of a document; exit 1 on any error")
    c.add_argument("doc", metavar="DOC")
    c.add_argument("--json", action="store_true", help="print JSON")
    c.add_argument("--checkpoint", metavar="CKPT", help="a GGUF checkpoint whose storage decides the kinds")
    d = c.add_argument_group("the deployment each kind's lowering is checked for (as `streamed lower` takes it)")
    d.add_argument("--mode", choices=MODES, default="decode", help="forward|decode|prefill|batched|tp|batched-tp "
                                                                    "(default decode)")
    d.add_argument("--ctx", type=int, default=4096, metavar="N", help="KV-cache length (default 4096)")
    d.add_argument("--chunk", type=int, metavar="N", help="prefill rows per step")
    d.add_argument("--batch", type=int, metavar="N", help="sequences per batched step")
    d.add_argument("--tp", type=int, metavar="N", help="tensor-parallel chips")
    d.add_argument("--target", default=None, metavar="TARGET", help="sn50 (default), sn40l, or a .toml file")
    c.set_defaults(run=cmd_check)

    for extend in _extensions():
        extend(sub)
    return p


def _extensions():
    """Subcommands that live beside their part of the core: each module offers ``add_commands(subparsers)``."""
    import importlib

    for module in ("streamed.model.cli", "streamed.spatial.cli", "streamed.verify_cli", "streamed.server.cli"):
        try:
            m = importlib.import_module(module)
        except ImportError as e:
            if e.name and module.startswith(e.name):
                continue
            raise
        yield m.add_commands


def main(argv: list[str] | None = None) -> int:
    try:
        parser = build_parser()  # imports every subcommand's module: Ctrl-C may land here too
        args = parser.parse_args(argv)
        if not getattr(args, "run", None):
            parser.print_help()
            return 2
        return args.run(args)
    except UserError as e:
        print(f"streamed: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("streamed: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
