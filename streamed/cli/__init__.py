"""The ``streamed`` command line: one argparse application over the core, one thin module per subcommand
(``author``, ``kinds``, ``check``, ``lower``, ``show``, ``verify``, ``run``, ``warm``, ``serve``); ``common`` holds
what they share.

Each subcommand reads files, calls the core, and prints for people or JSON. Exit status: 0 success; 1 the document
has errors (``check``), a lowering is refused (``lower``) or a verification fails (``verify``); 2 bad input (a file
that cannot be read, a bad option, a corrupt checkpoint or config); 128 + N when signal N stopped it (130 for Ctrl-C,
143 for SIGTERM), after removing whatever it was writing (``signals``). Every failure is one clear message on stderr
that names what the user gave, never a traceback.

Start-up is kept cheap: this package imports only argparse and the subcommand modules, and those import the core
inside the command they run, so ``streamed --help`` and ``streamed serve`` load no lowering.
"""

from __future__ import annotations

import os
import sys

# Only what handling an interrupt needs is imported before ``main`` installs the handlers: a Ctrl-C that lands while
# the command starts is then a one-line message too — even one that lands while this import runs. (One that lands
# earlier, while the interpreter itself starts or looks this package up, is Python's to report: no code of ours runs.)
try:
    from .signals import SIGNALS, Stopped
except KeyboardInterrupt:
    sys.stderr.write("streamed: interrupted\n")
    raise SystemExit(130) from None

#: The subcommand modules, in the order ``--help`` lists them.
SUBCOMMANDS = ("author", "kinds", "check", "lower", "show", "verify", "run", "warm", "serve")


def build_parser():
    import argparse
    from importlib import import_module

    p = argparse.ArgumentParser(prog="streamed", description="Model programs: layer kinds, divergences, SN50 bundles.")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    for name in SUBCOMMANDS:
        import_module(f"{__name__}.{name}").add_parser(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    # A path the user typed may hold bytes that are not UTF-8 ($'doc\xff.lgm'): it is printed back as those bytes.
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="surrogateescape")
    # The handlers are installed inside the ``try``: a signal that lands while they are being installed (or
    # restored) is a ``Stopped`` like any other, said in one line.
    try:
        with SIGNALS.installed():
            status = _command(argv)
    except Stopped as e:
        print("streamed: interrupted" if e.name == "SIGINT" else f"streamed: stopped by {e.name}", file=sys.stderr)
        return e.status
    except KeyboardInterrupt:
        print("streamed: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    if SIGNALS.held is not None:
        import signal

        print(f"streamed: {signal.Signals(SIGNALS.held).name} came while the bundle was put in place; it was "
              f"finished first, and is whole", file=sys.stderr)
    return status


def _command(argv: list[str] | None) -> int:
    """Run the subcommand ``argv`` names; a ``UserError`` is its one line and exit status 2."""
    from .common import UserError

    args = None
    try:
        parser = build_parser()  # imports every subcommand's module: a signal may land here too
        args = parser.parse_args(argv)
        if not getattr(args, "run", None):
            parser.print_help()
            return 2
        status = args.run(args)
    except UserError as e:
        print(f"streamed: {e}", file=sys.stderr)
        status = 2
    if args is not None and args.command != "warm":  # once a command has ended: the machine's kernels, if need be
        _compile_ahead()
    return status


def _compile_ahead() -> None:
    """Start the background warm-up (``numerics.ahead.start``) where the machine's kernels are not all compiled yet:
    after the command, so that it never shares the machine with the command that started it (a first run compiles
    its own kernels as it goes). A few file reads when they are."""
    from ..numerics.ahead import start

    start()


def program() -> None:
    """The ``streamed`` command (the console script, and ``python -m streamed``): ``main``, then the process ends
    with its status without tearing the interpreter down.

    Why: a run's interpreter takes 0.2 s to come down — numba's compiled code and LLVM's engine freed, its threads
    stopped, every module's objects collected, the checkpoint's mapping undone — a tenth of a 1B-shaped prefill, for
    what the operating system does anyway when the process ends. Nothing is lost by it: every file a command writes
    is whole and closed before ``main`` returns (a bundle is put in place by rename), and the output is flushed here.
    Only a command that started Ray (``--cluster``) ends the ordinary way: Ray's exit handler stops the local
    cluster it started. ``main`` itself returns, for the library and the tests."""
    status = main()
    if "ray" in sys.modules:
        sys.exit(status)
    try:
        sys.stdout.flush()
    except (BrokenPipeError, ValueError):  # a reader that went away, or a stream closed: nothing more to say
        pass
    try:
        sys.stderr.flush()
    except (BrokenPipeError, ValueError):
        pass
    os._exit(status or 0)


if __name__ == "__main__":
    program()
