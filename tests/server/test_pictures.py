"""``streamed.pictures`` end to end: the manifest view's pictures come from the server, drawn from the bundle the
document was lowered to — with each chip region's statement at its line in the document as the editor holds it,
even after edits moved it — and a bundle outside the workspace is refused as ``openManifest`` refuses it."""

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcInvalidParams

from lsphelp import TINY, request

pytestmark = pytest.mark.asyncio(loop_scope="module")
SVG = "{http://www.w3.org/2000/svg}"


async def run(client, command, *args, timeout=30.0):
    return await request(client.workspace_execute_command_async(lsp.ExecuteCommandParams(command, list(args))), timeout)


async def test_the_pictures_of_a_lowered_document_name_each_statement_at_its_line_after_edits(editor, client):
    uri = editor.open(TINY)
    await editor.analysed(uri)
    # Lines above the layers — with characters of several bytes — move every statement down after the analysis
    # was first made: the lines the bundle records are the edited document's.
    added = "-- Ünïcödé × notes — before the model\n-- and a second line\n"
    version = editor.replace(uri, (0, 0), (0, 0), added)
    await editor.analysed(uri, version)
    text = added + TINY
    Path(uri.removeprefix("file://")).write_text(text)
    got = await run(client, "streamed.lowerBundle", {"uri": uri, "mode": "decode", "ctx": 256})
    manifest = json.loads(Path(got["manifest"]).read_text())
    assert manifest["estimate"]["sweep"]["batch"][0]["batch"] == 1 and "ctx" in manifest["estimate"]["sweep"]
    lines = text.splitlines()
    for name, statements in manifest["statements"].items():
        assert statements, name
        for s in statements:
            assert " ".join(lines[s["line"] - 1].split("--")[0].split()) in s["text"], (name, s)

    drawn = await run(client, "streamed.pictures", {"bundle": str(Path(got["manifest"]).parent)})
    assert drawn["manifest"] == got["manifest"]
    assert [c["program"] for c in drawn["chip"]] == ["embed", *(k["name"] for k in manifest["kinds"]), "head"]
    chip = ET.fromstring(drawn["chip"][1]["svg"])
    regions = [g for g in chip.iter(f"{SVG}g") if g.get("data-line")]
    assert regions and all(lines[int(g.get("data-line")) - 1].split("--")[0].strip().rstrip(".") in
                           g.findtext(f"{SVG}title") for g in regions)
    tiers = [row["tier"].split(" ")[0] for row in drawn["memory"]["spec"]["data"]["values"] if row["part"] == "free"]
    assert tiers == ["SRAM", "HBM", "DDR"]
    assert drawn["roofline"]["point"]["tokens_per_second"] == manifest["estimate"]["tokens_per_second"]
    by_uri = await run(client, "streamed.pictures", {"uri": uri})
    assert by_uri["chip"] == drawn["chip"]
    # Drawn for a narrow panel: every chip as wide as the panel, the memory's bars and labels within it.
    narrow = await run(client, "streamed.pictures", {"uri": uri, "width": 320})
    assert all(ET.fromstring(c["svg"]).get("width") == "320" for c in narrow["chip"])
    assert narrow["memory"]["spec"]["width"] < drawn["memory"]["spec"]["width"]


async def test_pictures_of_a_bundle_outside_the_workspace_or_missing_are_refused_in_a_sentence(editor, client):
    with pytest.raises(JsonRpcInvalidParams, match="will not read /nonexistent/x.bundle"):
        await run(client, "streamed.pictures", {"bundle": "/nonexistent/x.bundle"})
    with pytest.raises(JsonRpcInvalidParams, match="no manifest at"):
        await run(client, "streamed.pictures", {"bundle": str(client.root / "none.bundle")})
    with pytest.raises(JsonRpcInvalidParams, match="takes an object like"):
        await run(client, "streamed.pictures", "x.bundle")
    with pytest.raises(JsonRpcInvalidParams, match="`width` is the panel's width in pixels, from 200 to 8000, not 'wide'"):
        await run(client, "streamed.pictures", {"bundle": "/nonexistent/x.bundle", "width": "wide"})
