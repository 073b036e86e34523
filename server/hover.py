"""Hover: on a layer header its kind, members and digest; on a name its role, shape (``rows`` and ``ctx`` kept
symbolic), whether it is q8 and how the checkpoint stores it, and its checkpoint tensor; on an operation word the
operation's definition from the operation table."""

from __future__ import annotations

from lsprotocol import types as lsp

from streamed.analysis.whole import layer_ranges
from streamed.analysis.incremental import IncrementalAnalysis, Spot, spot
from streamed.analysis.kinds import stored_as
from streamed.lang import ops as ops_table
from streamed.lang.syntax import SectionKind
from streamed.model.checkpoint import bind
from streamed.model.program import show
from .convert import to_range
from .scheduler import Snapshot

BINARY = {
    "times": "`X times W` — matrix product `X[r,k]·W[k,n]`; over a `q8` weight stored Q8_0, read on chip as int8 planes and block scales.",
    "plus": "`X plus Y` — elementwise sum; a vector broadcasts over rows.",
    "minus": "`X minus Y` — elementwise difference; a vector broadcasts over rows.",
    "multiplied": "`X multiplied by Y` — elementwise product; a vector broadcasts over rows.",
    "scaled": "`X scaled by F` — `F·X`; F a number or a constant.",
}


def operation_at(section, i: int) -> ops_table.Op | None:
    """The operation whose leading words include token ``i`` of ``section`` (``latent attention`` on either word)."""
    toks = section.tokens
    w = toks[i].text
    if w == "row" and i > 0 and toks[i - 1].text == "Set":
        return None  # ``Set row P of S``: a statement's words, not the lookup
    for op in ops_table.OPS:
        words = op.words
        for k, word in enumerate(words):
            if word != w or word == "of":
                continue
            lo = i - k
            if lo >= 0 and lo + len(words) <= len(toks) and [t.text for t in toks[lo:lo + len(words)]] == list(words):
                return op
    return None


def describe_name(a: IncrementalAnalysis, s: Spot, name: str) -> str | None:
    p = s.program
    if p is not None and (name in p.decls or name in p.shapes):
        decl = p.decls.get(name)
        shape = p.shapes.get(name)
        lines = [f"**{name}** — " + (f"{'q8 ' if decl and decl.q8 else ''}{decl.role}" if decl else "computed") + f" of {p.label}"]
        lines.append(f"shape: `{show(shape)}`" + ("  (`rows` and `ctx` are bound by the deployment)" if shape and any(isinstance(d, str) for d in shape) else ""))
        if decl is not None and decl.role == "weight":
            ref = bind(a.programs.document.checkpoint, name)
            stored = stored_as(a.programs, name, decl.q8, a.storage)
            lines.append(f"q8: {'yes' if decl.q8 else 'no'}; stored: {stored} ({a.storage.source})")
            if ref is not None:
                part = ""
                if ref.columns:
                    part += f", columns {ref.columns[0]} to {ref.columns[1]}" + (f" of every {ref.columns[2]}" if ref.columns[2] else "")
                if ref.rows:
                    part += f", rows {ref.rows[0]} to {ref.rows[1]}"
                lines.append(f"checkpoint tensor: `{ref.tensor}`{part}")
            elif a.programs.document.checkpoint:
                lines.append("checkpoint tensor: none — no `## Checkpoint` entry binds it")
            else:
                lines.append("checkpoint tensor: none (no `## Checkpoint` section: seeded weights)")
        if decl is not None and decl.fill is not None:
            scaling = "".join(f", {k} {v:g}" if isinstance(v, float) else f", {k} {v}" for k, v in
                              (decl.fill[2] if len(decl.fill) > 2 else ()))
            lines.append(f"filled by the host: {decl.fill[0]} of base {decl.fill[1]:g}{scaling}")
        if name == p.input:
            lines.append("the hidden state this program receives")
        if name == p.output:
            lines.append("the program's output")
        if name in p.carried:
            lines.append("carried from step to step")
        return "  \n".join(lines)
    if name in a.programs.constants:
        return f"**{name}** — constant of `## Model`: {a.programs.constants[name]:g}"
    return None


def describe_heading(a: IncrementalAnalysis, s: Spot) -> str | None:
    if s.section.kind is not SectionKind.LAYER or s.program is None:
        return None
    k = a.kind_of(s.section.index)
    if k is None:
        return None
    n = len(k.layers)
    text = [f"**{k.name}** — {n} layer{'s' if n != 1 else ''}: {layer_ranges(k.layers)}",
            f"representative: layer {k.representative}", f"digest: `{k.digest[:16]}…`"]
    d = a.divergence_of(s.section.index)
    if d is not None:
        text.append(f"diverges from `{d.kind}` (layer {d.representative}): {d.why}")
    return "  \n".join(text)


def hover(snap: Snapshot, line: int, character: int) -> lsp.Hover | None:
    a = snap.analysis
    s = spot(a, line, character)
    if s is None:
        return None
    if s.on_heading:
        text = describe_heading(a, s)
        rng = s.to_document(s.section.heading)
    else:
        tok = s.token
        if tok is None or not tok.is_word:
            return None
        rng = s.to_document(tok.range)
        op = operation_at(s.section, s.token_index)
        if op is not None:
            opts = "".join(f"\n- `, {' '.join(o.pattern)}`{' (required)' if o.required else ''}"
                           f"{f' (with `{o.needs}`)' if o.needs else ''} — {o.doc}" for o in op.options)
            text = f"**{op.name}** — `{' '.join(op.pattern)}`\n\n{op.doc}" + (f"\n\nOptions:{opts}" if opts else "")
        elif tok.text in BINARY:
            text = BINARY[tok.text]
        elif tok.is_number:
            text = None
        else:
            text = describe_name(a, s, tok.text)
    if not text:
        return None
    return lsp.Hover(lsp.MarkupContent(lsp.MarkupKind.Markdown, text), to_range(rng))
