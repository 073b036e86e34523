"""Neovim drives the real server with the configuration README.md gives (``editors.readme_config``). Debian's Neovim
(0.7) is what `make test` installs (``tests/server/neovim-setup.sh``): diagnostics arrive, each layer's code lens
names its kind, the lens goes to the representative (the server's ``window/showDocument``), ``definition`` on a
heading does too, the kinds command answers, hover describes a weight, formatting mends a line's spacing, the lens on
``## Model`` refuses unsaved text in a sentence without a JSON-RPC code, and once saved lowers a bundle that records
the file's SHA-256 and shows its manifest."""

from __future__ import annotations

import hashlib
import json
import shutil
import sys

from editors import Workspace, readme_config
from repo import DIVERGENT

#: The line of layer 5 written with untidy spacing on disk; formatting mends it.
TIDY = "Let h5 be xo4 plus a5 times Wo5."
UNTIDY = "Let h5 be xo4  plus a5 times Wo5 ."

#: Waits inside Neovim (``vim.wait``), in milliseconds: bounds on a hang, not measurements. Each waits for a state.
DRIVER = r"""
local out = { steps = {}, notified = {} }
local function finish(ok)
  local f = io.open(REPORT, "w"); f:write(vim.fn.json_encode(out)); f:close()
  vim.cmd(ok and "qall!" or "cquit!")
end
local function wait(what, ms, cond)
  if not vim.wait(ms, cond, 50) then
    out.failed = "timed out waiting for " .. what
    finish(false)
  end
  table.insert(out.steps, what)
end
vim.notify = function(message) table.insert(out.notified, message) end
local function lenses()
  local got = {}
  for _, l in ipairs(vim.lsp.codelens.get(0)) do
    if l.command then table.insert(got, { line = l.range.start.line, title = l.command.title, command = l.command.command }) end
  end
  return got
end
local function at(line, col)  -- the cursor on a 0-based line and column
  vim.api.nvim_win_set_cursor(0, { line + 1, col or 0 })
end
local function cursor() return vim.api.nvim_win_get_cursor(0)[1] - 1 end
local function notified(text)
  for _, m in ipairs(out.notified) do if m:find(text, 1, true) then return true end end
  return false
end

vim.cmd("edit " .. vim.fn.fnameescape(DOC))
local buf = vim.api.nvim_get_current_buf()
wait("the server attached", 60000, function() return #vim.lsp.buf_get_clients(0) > 0 end)
local client = vim.lsp.buf_get_clients(0)[next(vim.lsp.buf_get_clients(0))]
wait("the diagnostics", 60000, function() return #vim.diagnostic.get(buf) > 0 end)
out.diagnostics = {}
for _, d in ipairs(vim.diagnostic.get(buf)) do table.insert(out.diagnostics, { line = d.lnum, message = d.message, severity = d.severity }) end
wait("the code lenses", 60000, function()
  vim.lsp.codelens.refresh()
  vim.wait(200)
  for _, l in ipairs(lenses()) do if l.title:find("first: layer", 1, true) then return true end end
  return false
end)
out.lenses = lenses()
at(LAYER2); vim.lsp.codelens.run()
wait("the lens to go to the representative", 20000, function() return cursor() == LAYER0 end)
out.lens_went_to = cursor()
at(LAYER3); vim.lsp.buf.definition()
wait("definition to go to the representative", 20000, function() return cursor() == LAYER0 end)
out.definition_went_to = cursor()
local uri = vim.uri_from_bufnr(buf)
local kinds = client.request_sync("workspace/executeCommand", { command = "streamed.showKinds", arguments = { { uri = uri } } }, 20000, buf)
out.kinds = kinds and kinds.result
at(WEIGHT_LINE, WEIGHT_COLUMN)
local hover = vim.lsp.buf_request_sync(buf, "textDocument/hover", vim.lsp.util.make_position_params(), 20000)
for _, r in pairs(hover or {}) do out.hover = r.result and r.result.contents and r.result.contents.value end
vim.lsp.buf.formatting_sync(nil, 20000)
out.formatted = vim.api.nvim_buf_get_lines(buf, UNTIDY_LINE, UNTIDY_LINE + 1, false)[1]
at(MODEL); vim.lsp.codelens.run()
wait("the refusal of unsaved text", 20000, function() return notified("not saved") end)
vim.cmd("write")
at(MODEL); vim.lsp.codelens.run()
wait("the bundle", 60000, function() return vim.fn.filereadable(MANIFEST) == 1 end)
wait("the manifest shown", 20000, function() return vim.api.nvim_buf_get_name(0) == MANIFEST end)
finish(true)
"""


def test_neovim_with_the_readme_configuration_gets_every_answer_and_a_bundle_shown(tmp_path):
    nvim = shutil.which("nvim")
    assert nvim, "no `nvim`: `make test` installs Debian's (tests/server/neovim-setup.sh), or `apt-get install neovim`"
    ws = Workspace.make(tmp_path)
    ws.doc.write_text(DIVERGENT.replace(TIDY, UNTIDY))
    init, driver = tmp_path / "init.lua", tmp_path / "driver.lua"
    init.write_text(readme_config("Neovim", "lua", sys.executable))
    weight_line = ws.line_with("Set row pos of Kc0 to rope of (xn0 times Wk0)")
    constants = {"REPORT": str(ws.report), "DOC": str(ws.doc), "MANIFEST": str(ws.manifest),
                 "LAYER0": ws.heading("## Layer 0"), "LAYER2": ws.heading("## Layer 2"), "LAYER3": ws.heading("## Layer 3"),
                 "MODEL": ws.heading("## Model"), "UNTIDY_LINE": ws.line_with(TIDY),
                 "WEIGHT_LINE": weight_line, "WEIGHT_COLUMN": DIVERGENT.split("\n")[weight_line].index("Wk0")}
    driver.write_text("".join(f"local {k} = {json.dumps(v)}\n" for k, v in constants.items()) + DRIVER)
    home = ws.home
    env = {"XDG_CONFIG_HOME": str(home / ".config"), "XDG_DATA_HOME": str(home / ".data"),
           "XDG_STATE_HOME": str(home / ".state"), "XDG_CACHE_HOME": str(home / ".cache")}
    run, got = ws.run([nvim, "--headless", "-n", "-i", "NONE", "-u", str(init), "-c", f"luafile {driver}"], env)
    assert run.returncode == 0 and "failed" not in got, (got, run.stdout[-2000:], run.stderr[-2000:])

    # One diagnostic: the divergence of layer 4, a warning on its epsilon's line.
    (d,) = got["diagnostics"]
    assert d["line"] == ws.line_with("epsilon 0.001.")
    assert d["message"].startswith("layer 4 is not one program with layer 0 (attention)") and d["severity"] == 2
    # A lens on every layer heading names its kind; on layer 4 also the comparison; on ## Model the bundle.
    by_line: dict[int, list[str]] = {}
    for lens in got["lenses"]:
        by_line.setdefault(lens["line"], []).append(lens["title"])
    for layer in (0, 1, 2, 3, 5):
        assert by_line[ws.heading(f"## Layer {layer}")] == ["attention (layer 0) · 5 layers · first: layer 0"]
    assert sorted(by_line[ws.heading("## Layer 4")]) == ["Compare layer 4 with layer 0", "attention (layer 4) · 1 layer · first: layer 4"]
    assert by_line[ws.heading("## Model")] == ["2 kinds · Lower SN50 bundle"]
    # The lens and definition both went to layer 0's heading; the kinds command answered both kinds.
    assert got["lens_went_to"] == got["definition_went_to"] == ws.heading("## Layer 0")
    assert sorted((k["representative"], k["layers"]) for k in got["kinds"]) == [(0, [0, 1, 2, 3, 5]), (4, [4])]
    # Hover on the weight: its role, shape and checkpoint tensor; formatting mended the untidy line.
    assert "q8 weight" in got["hover"] and "64×32" in got["hover"] and "blk.0.attn_k.weight" in got["hover"]
    assert got["formatted"] == TIDY
    # The lowering of unsaved text was refused in the server's sentence, with no JSON-RPC code in it.
    (refused,) = [m for m in got["notified"] if "not saved" in m]
    assert refused.startswith("streamed: model.lgm has changes that are not saved") and "-326" not in refused
    # Once saved, the bundle of the saved (formatted) text, its manifest the buffer shown.
    data = json.loads(ws.manifest.read_text())
    assert TIDY in ws.doc.read_text()
    assert data["document"] == {"name": "model.lgm", "sha256": hashlib.sha256(ws.doc.read_bytes()).hexdigest()}
    assert len(data["layers"]) == 6
