"""The sizes ``streamed`` accepts, one constant each, checked where the input enters (the document, a config, a GGUF,
a target, a manifest) and bound alike by the command line and the language server. A limit exists so that bad or
hostile input is one clear message naming the limit — never a hang, a traceback or memory without end — and each is
set far above any real model (the figures say how far).

``beyond(value, limit)`` is the one check: a size is a whole number from 1 to its limit, and the sentence it returns
(or ``None``) is what every reader says after naming the field.
"""

from __future__ import annotations

import math

#: The largest document read. A 64-layer model is about 125 KB, so 4 MB is thirty times any real model, and reading
#: more would only keep an editor waiting.
MAX_DOCUMENT_BYTES = 4 * 1024 * 1024

#: The largest ``config.json`` or target TOML read: real ones are a few kilobytes (a config with a label table, a few
#: hundred), so 16 MB is room for anything real while parsing stays far from the machine's memory.
MAX_CONFIG_BYTES = 16 * 1024 * 1024

#: The largest file of a bundle read (its manifest, a program): a manifest grows by about 1.6 KB a layer at the most
#: (batched tensor parallel; ``docs/performance.md``), so 65,535 layers are about 100 MB, and a program is far
#: smaller. A file past it is refused before it is read.
MAX_BUNDLE_FILE_BYTES = 128 * 1024 * 1024

#: The largest LSP message the language server reads: a document of ``MAX_DOCUMENT_BYTES`` sent whole, every byte of
#: it escaped as JSON's six-byte ``\u00XX`` (a client sends control characters so), and a megabyte for the rest of
#: the message. A longer message is skipped without being held, and its request answered.
MAX_MESSAGE_BYTES = 6 * MAX_DOCUMENT_BYTES + (1 << 20)

#: Layer numbers past this are refused outright, and so is a config or a GGUF of more layers: no published model has
#: more than a few hundred, a 4 MB document holds about 3,300 authored layers (1.2 KB each), and nothing sized by a
#: layer count is built before it is checked against this.
MAX_LAYER = 65_535

#: How deep an expression may nest — parentheses, an operation's operands, operators inside one another. Real models
#: nest about 4 deep; every stage after the parser walks the tree recursively, so a bound here is what keeps 10,000
#: nested parentheses one diagnostic instead of a ``RecursionError``.
MAX_NESTING = 64

#: The largest width a document, a config or a GGUF may give (hidden size, vocabulary, heads, experts, a window):
#: the largest real ones are vocabularies of about 262,000; 2²⁸ is a thousand times that — room for a test of a row
#: wider than any chip's SRAM — and sizes made of such widths are counted in Python's integers, never numpy's.
MAX_DIMENSION = 1 << 28

#: The longest context (KV cache, a prefill chunk, a forward sequence) a deployment may name: 2²⁴ tokens, past the
#: 10-million-token context of the longest published model.
MAX_CONTEXT = 1 << 24

#: The most sequences a batched deployment may serve in one step.
MAX_BATCH = 1 << 16

#: The most chips a tensor-parallel deployment may span, and the most compute or memory units a target may have.
MAX_UNITS = 1 << 20

#: The largest memory a target may have, in bytes (10¹⁸: an exabyte; an SN50 node has terabytes).
MAX_TARGET_BYTES = 10**18

#: The largest bandwidth (bytes/s) or peak (FLOP/s) a target may have: 10¹⁸, an exa-unit per second.
MAX_TARGET_RATE = 10**18

#: How deep a JSON file (a config, a manifest, a program) may nest: real ones nest four or five levels; past this the
#: reader would only spend the stack.
MAX_JSON_DEPTH = 64


def document_too_large(size: int) -> str | None:
    """The one message for a document of ``size`` bytes over ``MAX_DOCUMENT_BYTES`` (the command line's ``parse``
    and the editor's incremental analysis both refuse it in these words), or ``None``."""
    if size <= MAX_DOCUMENT_BYTES:
        return None
    # In bytes, both: a document of 4,220,998 bytes was "4.0 MB" beside a limit of "4 MB".
    return (f"the document is {size:,} bytes; streamed reads model programs up to {MAX_DOCUMENT_BYTES:,} bytes "
            f"({MAX_DOCUMENT_BYTES // 1048576} MiB; a 64-layer model is about 125 KB), so nothing else was checked")


def beyond(value, limit: int | float, *, minimum: int | float = 1, whole: bool = True, say_value: bool = True) -> str | None:
    """Why ``value`` is not a size from ``minimum`` to ``limit`` (a whole number unless ``whole`` is false), as the
    end of a sentence that names the field first — ``must be a whole number, not 1.5``, ``is 0; it must be at least
    1``, ``is 10,000,000,000, past the limit of 16,777,216`` — or ``None`` when it is one. ``say_value=False`` leaves
    the value out, for a message that has already shown it (``--ctx 0: must be at least 1``)."""
    kind = "a whole number" if whole else "a number"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        reason, saying = f"must be {kind}", "{reason}, not {value}"
    elif isinstance(value, float) and not math.isfinite(value):
        reason, saying = "must be a finite number", "{reason}, not {value}"
    elif not whole and isinstance(value, int) and abs(value) > 2**1023:
        reason, saying = "is too large for a 64-bit float", "is {value}, too large for a 64-bit float"
    elif whole and isinstance(value, float) and not value.is_integer():
        reason, saying = "must be a whole number", "{reason}, not {value}"
    elif value < minimum:
        reason, saying = f"must be at least {show(minimum)}", "is {value}; it {reason}"
    elif value > limit:
        reason, saying = f"is past the limit of {show(limit)}", "is {value}, past the limit of " + show(limit)
    else:
        return None
    return saying.format(reason=reason, value=show(value)) if say_value else reason


def show(v) -> str:
    """A value as a person reads it in a message: whole numbers with thousands separators (``268,435,457``, also when
    it is held as a float, never ``2.68435e+08``), an enormous one by its digit count, anything else briefly."""
    if isinstance(v, bool) or v is None:
        return {True: "true", False: "false", None: "null"}[v]
    if isinstance(v, int):
        digits = len(str(v)) if abs(v) < 10**4000 else None
        if digits is None or digits > 30:
            return f"a number of {digits or 'over 4000'} digits"
        return f"{v:,}"
    if isinstance(v, float):
        return f"{int(v):,}" if v.is_integer() and abs(v) < 1e30 else f"{v:g}"
    text = repr(v)
    return text if len(text) <= 40 else text[:39] + "…"
