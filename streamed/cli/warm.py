"""``streamed warm [--jobs N]``: compile the kernels every ``streamed run`` on this machine needs, now — the install
step for whoever scripts one (``make`` runs it after installing; a Dockerfile, a cluster's image). Without it the
first command run on a machine starts the same in the background (``streamed.numerics.ahead``).

Prints a line a job (its arithmetic, the kernels it compiled, its seconds) and a total. Exit status 0; 1 when a job
failed (its last line is printed); 2 for a bad option.
"""

from __future__ import annotations

import time

from .common import UserError, whole


def cmd_warm(args) -> int:
    from .. import kernel_cache
    from ..numerics import ahead

    if args.jobs is not None and args.jobs < 1:
        raise UserError(f"--jobs {args.jobs}: give at least 1")
    began = time.monotonic()
    jobs = ahead.every_job()
    print(f"streamed warm: compiling the kernels of {len(jobs)} small runs into {kernel_cache()}")

    def said(d) -> None:
        line = f"  {d.job.arithmetic:9} {d.job.group:9} {d.status} in {d.seconds:.1f} s"
        if d.status != "compiled":
            line += f": {d.said}"
        print(line, flush=True)

    results = ahead.compile_ahead(jobs, args.jobs, said=said)
    failed = [d for d in results if d.status == "failed"]
    print(f"streamed warm: {len(results) - len(failed)} of {len(results)} done in {time.monotonic() - began:.1f} s"
          + (f"; {len(failed)} failed" if failed else ""))
    return 1 if failed else 0


def add_parser(sub) -> None:
    w = sub.add_parser("warm", help="compile this machine's kernels now, ahead of the first run")
    w.add_argument("--jobs", type=whole("--jobs"), default=None, metavar="N",
                   help="how many small runs at once (default: the cores this process may use)")
    w.set_defaults(run=cmd_warm)
