"""``streamed kinds DOC [--json] [--checkpoint G]``: the layer kinds of a document, as an aligned table or JSON, and
every divergence with both places and the reason. A document with errors still shows the kinds of what could be read,
its errors on stderr as ``check`` prints them, and exits 1 (as ``check`` does: a script reading the kinds must not
take a broken document's for a whole one); 2 for bad input."""

from __future__ import annotations

from .common import add_storage_option, load_storage, plural, print_errors, read_document, table


def kinds_json(a) -> dict:
    from ..analysis.whole import position

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
    from ..analysis.whole import analyze, layer_ranges, position

    a = analyze(read_document(args.doc), load_storage(args.checkpoint, args.storage))
    if args.json:
        import json  # only for --json: not imported by every command's start

        print(json.dumps(kinds_json(a), indent=2))
        return print_errors(args.doc, a, "kinds", None) if a.errors else 0
    rows = [[k.name, str(len(k.layers)), layer_ranges(k.layers), str(k.representative)] for k in a.kinds]
    print(f"{args.doc}: {plural(len(a.programs.layers), 'layer')} in {plural(len(a.kinds), 'kind')}")
    if rows:
        print()
        print(table(rows, ["kind", "count", "layers", "first"]))
    if a.divergences:
        print()
        print(f"{plural(len(a.divergences), 'divergence')}:")
        for d in a.divergences:
            line, col = position(d.range)
            rline, rcol = position(d.representative_range)
            print(f"  {args.doc}:{line}:{col}: layer {d.layer} vs layer {d.representative} ({d.kind}, line "
                  f"{rline}:{rcol}): {d.why}")
    return print_errors(args.doc, a, "kinds", None) if a.errors else 0


def add_parser(sub) -> None:
    k = sub.add_parser("kinds", help="the layer kinds of a document and where layers diverge")
    k.add_argument("doc", metavar="DOC")
    k.add_argument("--json", action="store_true", help="print JSON")
    k.add_argument("--checkpoint", metavar="CKPT", help="a GGUF checkpoint whose storage decides the kinds")
    add_storage_option(k)
    k.set_defaults(run=cmd_kinds)
