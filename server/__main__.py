"""``python -m streamed_lsp``: the language server on stdio (as ``streamed serve``)."""

import sys

from .handlers import main

if __name__ == "__main__":
    sys.exit(main())
