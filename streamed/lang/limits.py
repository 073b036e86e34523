"""The sizes ``streamed`` accepts, one constant each, checked where the input enters (the document, a config, a GGUF,
a target, a manifest) and bound alike by the command line and the language server. A limit exists so that bad or
hostile input is one clear message naming the limit — never a hang, a traceback or memory without end — and each is
set far above any real model (the figures say how far).
"""

#: The largest document read. A 64-layer model is about 125 KB, so 4 MB is thirty times any real model, and reading
#: more would only keep an editor waiting.
MAX_DOCUMENT_BYTES = 4 * 1024 * 1024

#: Layer numbers past this are refused outright: no model has them, and nothing sized by them is ever allocated.
MAX_LAYER = 1_000_000

#: How deep an expression may nest — parentheses, an operation's operands, operators inside one another. Real models
#: nest about 4 deep; every stage after the parser walks the tree recursively, so a bound here is what keeps 10,000
#: nested parentheses one diagnostic instead of a ``RecursionError``.
MAX_NESTING = 64
