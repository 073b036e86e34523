"""``streamed serve``: start the language server on stdio."""

from __future__ import annotations


def _serve(args) -> int:
    import signal

    from streamed_lsp.handlers import main

    from .signals import STOPPING

    # A server ends as any process does when told to: its editor starts another. (The command line's handlers exist
    # to clean up a half-written bundle; the server writes bundles off its main thread, and a dead writer's
    # temporaries are removed by the next.)
    for s in STOPPING:
        if s != signal.SIGINT:
            signal.signal(s, signal.SIG_DFL)
    return main()


def add_parser(sub) -> None:
    s = sub.add_parser("serve", help="run the language server on stdio (for VS Code, Neovim, Helix, …)")
    s.add_argument("--stdio", action="store_true", help="talk LSP over stdin/stdout (the default and only transport)")
    s.set_defaults(run=_serve)
