"""``streamed check DOC [--json] [deployment options]``: every diagnostic of a document — syntax, semantics,
divergences, the checkpoint's bindings, and each kind's lowering reject for the deployment on the statement that
caused it — as ``path:line:col: severity: message`` or JSON; a document with none says ``path: no problems`` (a
silent success reads as a command that did nothing). Exit status 1 when any is an error; 2 for bad input."""

from __future__ import annotations

from .common import (
    add_deployment_options, add_storage_option, deployment_from, load_storage, load_target_or_fail, read_document,
)


def lowering_diagnostics(a, args) -> list:
    """Each kind's lowering reject for the deployment the options name (decode at ctx 4096 unless told), at the
    statement that caused it."""
    from ..spatial.diagnose import reject_diagnostics

    deployment = deployment_from(args)
    return reject_diagnostics(a, deployment, load_target_or_fail(getattr(args, "target", None)))


def cmd_check(args) -> int:
    from ..analysis.whole import analyze, position
    from ..lang.files import shown
    from ..lang.syntax import Severity

    a = analyze(read_document(args.doc), load_storage(args.checkpoint, args.storage))
    diagnostics = list(a.diagnostics)
    diagnostics += lowering_diagnostics(a, args)
    diagnostics.sort(key=lambda d: (d.range.start.offset, d.severity.value))
    if args.json:
        import json  # only for --json: not imported by every command's start

        print(json.dumps([{
            "line": d.range.start.line + 1, "column": d.range.start.character + 1,
            "end_line": d.range.end.line + 1, "end_column": d.range.end.character + 1,
            "severity": d.severity.value, "code": d.code, "message": d.message,
        } for d in diagnostics], indent=2))
    else:
        for d in diagnostics:
            line, col = position(d.range)
            print(f"{shown(args.doc)}:{line}:{col}: {d.severity.value}: {shown(d.message)}")
        if not diagnostics:
            print(f"{shown(args.doc)}: no problems")
    return 1 if any(d.severity is Severity.ERROR for d in diagnostics) else 0


def add_parser(sub) -> None:
    c = sub.add_parser("check", help="every diagnostic of a document; exit 1 on any error")
    c.add_argument("doc", metavar="DOC")
    c.add_argument("--json", action="store_true", help="print JSON")
    c.add_argument("--checkpoint", metavar="CKPT", help="a GGUF checkpoint whose storage decides the kinds")
    add_storage_option(c)
    d = c.add_argument_group("the deployment each kind's lowering is checked for (as `streamed lower` takes it)")
    add_deployment_options(d, ctx_help="KV-cache length (default 4096)")
    d.add_argument("--target", default=None, metavar="TARGET", help="sn50 (default), sn40l, or a .toml file")
    c.set_defaults(run=cmd_check)
