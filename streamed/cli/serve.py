"""``streamed serve``: start the language server on stdio."""

from __future__ import annotations


def _serve(args) -> int:
    from streamed_lsp.handlers import main

    main()
    return 0


def add_parser(sub) -> None:
    s = sub.add_parser("serve", help="run the language server on stdio (for VS Code, Neovim, Helix, …)")
    s.add_argument("--stdio", action="store_true", help="talk LSP over stdin/stdout (the default and only transport)")
    s.set_defaults(run=_serve)
