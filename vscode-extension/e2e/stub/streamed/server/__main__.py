"""Contract stub of `python -m streamed.server` (see e2e/stub/streamed/__init__.py)."""
from __future__ import annotations

import asyncio
import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlparse

from lsprotocol import types as t
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol
from pygls.protocol.language_server import lsp_method

TOKEN = re.compile(r"[A-Za-z0-9_]+|[^\sA-Za-z0-9_]")
HEADING = re.compile(r"^##\s*(\S+)(?:\s+(\d+))?")


@dataclass
class Tok:
    text: str
    line: int
    col: int


@dataclass
class Layer:
    n: int
    line: int
    toks: list[Tok] = field(default_factory=list)

    def digest(self) -> str:
        binders: dict[str, int] = {}
        for i, tk in enumerate(self.toks):
            if tk.text == "Let" and i + 1 < len(self.toks):
                binders.setdefault(self.toks[i + 1].text, len(binders))
        return hashlib.sha256(" ".join(f"#{binders[x.text]}" if x.text in binders else x.text for x in self.toks).encode()).hexdigest()

    def name(self) -> str:
        texts = [x.text for x in self.toks]
        n = "attention"
        if "window" in texts:
            n += f", window {texts[texts.index('window') + 1]}"
        return n


@dataclass
class Kind:
    name: str
    layers: list[Layer]


def parse(text: str) -> tuple[list[Layer], int | None]:
    layers: list[Layer] = []
    model_line = None
    cur: Layer | None = None
    for i, line in enumerate(text.split("\n")):
        m = HEADING.match(line)
        if m:
            cur = None
            if m.group(1) == "Layer" and m.group(2) is not None:
                cur = Layer(int(m.group(2)), i)
                layers.append(cur)
            if m.group(1) == "Model":
                model_line = i
            continue
        if line.startswith("#"):
            cur = None
            continue
        if cur is not None:
            code = line.split("--", 1)[0]
            for mt in TOKEN.finditer(code):
                cur.toks.append(Tok(mt.group(0), i, mt.start()))
    return layers, model_line


def kinds_of(layers: list[Layer]) -> list[Kind]:
    by: dict[str, Kind] = {}
    for la in layers:
        d = la.digest()
        if d not in by:
            by[d] = Kind(la.name(), [])
        by[d].layers.append(la)
    kinds = list(by.values())
    names = [k.name for k in kinds]
    for k in kinds:
        if names.count(k.name) > 1 and len(k.layers) < max(len(o.layers) for o in kinds if o.name == k.name):
            k.name = f"{k.name} (layer {k.layers[0].n})"
    return kinds


def uri_path(uri: str) -> Path:
    return Path(unquote(urlparse(uri).path))


class Proto(LanguageServerProtocol):
    @lsp_method(t.WORKSPACE_EXECUTE_COMMAND)
    def lsp_workspace__execute_command(self, params):  # remember the token: pygls hands commands only their args
        server.work_done_token = params.work_done_token
        return (yield from super().lsp_workspace__execute_command(params))


server = LanguageServer("streamed-stub", "0", protocol_cls=Proto)
server.work_done_token = None
analysed: dict[str, tuple[list[Layer], list[Kind], int | None]] = {}


def analyse(ls: LanguageServer, uri: str, version: int | None) -> None:
    doc = ls.workspace.get_text_document(uri)
    layers, model_line = parse(doc.source)
    kinds = kinds_of(layers)
    analysed[uri] = (layers, kinds, model_line)
    diags = []
    for k in kinds:
        if "(layer" not in k.name:
            continue
        base = k.name.split(" (layer")[0]
        big = max((o for o in kinds if o.name == base), key=lambda o: len(o.layers), default=None)
        if big is None:
            continue
        a, b = k.layers[0], big.layers[0]
        for i, (x, y) in enumerate(zip(a.toks, b.toks)):
            if x.text != y.text and not (re.search(r"\d", x.text) and re.sub(r"\d+$", "", x.text) == re.sub(r"\d+$", "", y.text)):
                diags.append(t.Diagnostic(
                    range=t.Range(t.Position(x.line, x.col), t.Position(x.line, x.col + len(x.text))),
                    severity=t.DiagnosticSeverity.Warning,
                    source="streamed",
                    code="divergence",
                    message=f"layer {a.n} diverges from {base} (layers {', '.join(str(la.n) for la in big.layers)}): '{x.text}' here, '{y.text}' in layer {b.n}",
                    related_information=[t.DiagnosticRelatedInformation(
                        location=t.Location(uri, t.Range(t.Position(y.line, y.col), t.Position(y.line, y.col + len(y.text)))),
                        message=f"'{y.text}' in layer {b.n}")],
                ))
                break
    ls.text_document_publish_diagnostics(t.PublishDiagnosticsParams(uri=uri, diagnostics=diags, version=version))
    ls.protocol.notify("streamed/analysisDone", {"uri": uri, "version": version, "kinds": len(kinds), "layers": len(layers), "rejects": 0})


@server.feature(t.TEXT_DOCUMENT_DID_OPEN)
def did_open(ls: LanguageServer, p: t.DidOpenTextDocumentParams):
    analyse(ls, p.text_document.uri, p.text_document.version)


@server.feature(t.TEXT_DOCUMENT_DID_CHANGE)
def did_change(ls: LanguageServer, p: t.DidChangeTextDocumentParams):
    analyse(ls, p.text_document.uri, p.text_document.version)


@server.feature(t.TEXT_DOCUMENT_CODE_LENS)
def code_lens(ls: LanguageServer, p: t.CodeLensParams):
    uri = p.text_document.uri
    if uri not in analysed:
        analyse(ls, uri, None)
    layers, kinds, model_line = analysed[uri]
    lenses = []
    for k in kinds:
        for la in k.layers:
            title = f"{k.name} · {len(k.layers)} layer{'s' if len(k.layers) != 1 else ''} · first: layer {k.layers[0].n}"
            lenses.append(t.CodeLens(
                range=t.Range(t.Position(la.line, 0), t.Position(la.line, 0)),
                command=t.Command(title=title, command="streamed.goToRepresentative", arguments=[{"uri": uri, "position": {"line": la.line, "character": 0}}])))
    if model_line is not None:
        lenses.append(t.CodeLens(
            range=t.Range(t.Position(model_line, 0), t.Position(model_line, 0)),
            command=t.Command(title=f"{len(kinds)} kinds · Lower SN50 bundle…", command="streamed.lowerBundle", arguments=[{"uri": uri}])))
    return lenses


def _kind_payload(kinds: list[Kind]):
    return [{"name": k.name, "layers": [la.n for la in k.layers], "representative": k.layers[0].n} for k in kinds]


@server.command("streamed.showKinds")
def show_kinds(ls: LanguageServer, arg: dict):
    uri = arg["uri"]
    if uri not in analysed:
        return []
    return _kind_payload(analysed[uri][1])


@server.command("streamed.goToRepresentative")
def go_to_rep(ls: LanguageServer, arg: dict):
    uri, pos = arg["uri"], arg["position"]
    layers, kinds, _ = analysed.get(uri, ([], [], None))
    for k in kinds:
        for la in k.layers:
            ends = [o.line for o in layers if o.line > la.line]
            if la.line <= pos["line"] < (min(ends) if ends else 1 << 30):
                rep = k.layers[0]
                if pos["line"] == la.line:
                    return {"uri": uri, "range": {"start": {"line": rep.line, "character": 0}, "end": {"line": rep.line, "character": 0}}}
                idx = next((i for i, x in enumerate(la.toks) if x.line > pos["line"] or (x.line == pos["line"] and x.col + len(x.text) > pos["character"])), 0)
                y = rep.toks[min(idx, len(rep.toks) - 1)]
                return {"uri": uri, "range": {"start": {"line": y.line, "character": y.col}, "end": {"line": y.line, "character": y.col + len(y.text)}}}
    return None


@server.command("streamed.lowerBundle")
async def lower_bundle(ls: LanguageServer, arg: dict):
    token = ls.work_done_token
    uri = arg["uri"]
    if uri not in analysed:
        analyse(ls, uri, None)
    layers, kinds, _ = analysed[uri]
    src = uri_path(uri)
    out = Path(arg.get("out") or src.with_suffix(".bundle"))
    if token is not None:
        ls.work_done_progress.begin(token, t.WorkDoneProgressBegin(title="Lowering", message="analysing", percentage=0, cancellable=True))
    for i, k in enumerate(kinds):
        await asyncio.sleep(0.4)
        if token is not None:
            ls.work_done_progress.report(token, t.WorkDoneProgressReport(message=f"lowering {k.name}", percentage=int(100 * (i + 1) / (len(kinds) + 1))))
    out.mkdir(parents=True, exist_ok=True)
    kind_index = {la.n: i for i, k in enumerate(kinds) for la in k.layers}
    manifest = {
        "format": "streamed-bundle/1", "mode": arg.get("mode", "decode"), "target": arg.get("target", "sn50"),
        "ctx": arg.get("ctx", 4096), "rows": 1, "batch": arg.get("batch", 1), "tp": arg.get("tp", 1),
        "programs": {"embed": "embed.json", "head": "head.json"},
        "kinds": [{"name": k.name, "representative": k.layers[0].n, "layers": [la.n for la in k.layers], "program": f"kind{i}.json",
                   "carried": [f"Kc{k.layers[0].n}", f"Vc{k.layers[0].n}"]} for i, k in enumerate(kinds)],
        "layers": [{"layer": la.n, "kind": kind_index[la.n], "tensors": {}} for la in layers],
        "residency": {"states": [{"name": f"{s}{la.n}", "layer": la.n, "tier": "sram" if la.n % 3 else "hbm", "bytes": 65536} for la in layers for s in ("Kc", "Vc")],
                      "sram_reserved": 1 << 20},
        "estimate": {"tokens_per_second": 1500.0, "step_seconds": 1 / 1500, "flops": 2.0e9},
        "source": str(src),
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2))
    if token is not None:
        ls.work_done_progress.end(token, t.WorkDoneProgressEnd(message="bundle written"))
    return {"manifest": str(out / "manifest.json"), "kinds": len(kinds), "layers": len(layers), "estimate": manifest["estimate"]}


@server.command("streamed.openManifest")
def open_manifest(ls: LanguageServer, arg: dict):
    p = Path(arg["bundle"]) if "bundle" in arg else uri_path(arg["uri"]).with_suffix(".bundle")
    m = p / "manifest.json"
    if not m.exists():
        raise ValueError(f"no bundle at {p}")
    return {"manifest": str(m), "summary": {}}


if __name__ == "__main__":
    server.start_io()
