"""Neovim drives the real server with the configuration README.md gives — read from the README itself, so the
documented configuration is the tested one. Debian's Neovim (0.7) is what `make test` installs
(``tests/server/neovim-setup.sh``): diagnostics arrive, each layer's code lens names its kind, the lens goes to the
representative (the server's ``window/showDocument``), ``definition`` on a heading does too, and the lens on
``## Model`` lowers a bundle that records the file's SHA-256."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys

from lsphelp import DIVERGENT, ROOT

#: Waits inside Neovim (``vim.wait``), in milliseconds: bounds on a hang, not measurements.
DRIVER = r"""
local out = { steps = {} }
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
local function lenses()
  local got = {}
  for _, l in ipairs(vim.lsp.codelens.get(0)) do
    if l.command then table.insert(got, { line = l.range.start.line, title = l.command.title, command = l.command.command }) end
  end
  return got
end
local function at(line)  -- the cursor on a 0-based line's first column
  vim.api.nvim_win_set_cursor(0, { line + 1, 0 })
end
local function cursor() return vim.api.nvim_win_get_cursor(0)[1] - 1 end

vim.cmd("edit " .. vim.fn.fnameescape(DOC))
wait("the server attached", 60000, function() return #vim.lsp.buf_get_clients(0) > 0 end)
wait("the diagnostics", 60000, function() return #vim.diagnostic.get(0) > 0 end)
out.diagnostics = {}
for _, d in ipairs(vim.diagnostic.get(0)) do table.insert(out.diagnostics, { line = d.lnum, message = d.message, severity = d.severity }) end
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
at(MODEL); vim.lsp.codelens.run()
wait("the bundle", 60000, function() return vim.fn.filereadable(MANIFEST) == 1 end)
wait("the manifest shown", 20000, function() return vim.fn.bufnr(MANIFEST) ~= -1 end)
out.manifest_buffer = vim.fn.bufnr(MANIFEST)
finish(true)
"""


def readme_config(python: str) -> str:
    """The Lua block under README's **Neovim**, with the Python that has the server in place of its path."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("**Neovim**", 1)[1]
    block = re.search(r"```lua\n(.*?)```", section, re.S).group(1)
    assert "/path/to/.venv/bin/python" in block
    return block.replace("/path/to/.venv/bin/python", python)


def test_neovim_with_the_readme_configuration_gets_diagnostics_lenses_go_to_representative_and_a_bundle(tmp_path):
    nvim = shutil.which("nvim")
    assert nvim, "no `nvim`: `make test` installs Debian's (tests/server/neovim-setup.sh), or `apt-get install neovim`"
    work = tmp_path / "work"
    (work / ".git").mkdir(parents=True)
    doc = work / "model.lgm"
    doc.write_text(DIVERGENT)
    lines = DIVERGENT.split("\n")
    heading = lambda title: next(i for i, l in enumerate(lines) if l.startswith(title))  # noqa: E731
    init, driver, report = tmp_path / "init.lua", tmp_path / "driver.lua", tmp_path / "report.json"
    init.write_text(readme_config(sys.executable))
    manifest = work / "model.bundle" / "manifest.json"
    constants = {"REPORT": str(report), "DOC": str(doc), "MANIFEST": str(manifest), "LAYER0": heading("## Layer 0"),
                 "LAYER2": heading("## Layer 2"), "LAYER3": heading("## Layer 3"), "MODEL": heading("## Model")}
    driver.write_text("".join(f"local {k} = {json.dumps(v)}\n" for k, v in constants.items()) + DRIVER)
    home = tmp_path / "home"
    home.mkdir()
    env = {**os.environ, "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"),
           "XDG_DATA_HOME": str(home / ".data"), "XDG_STATE_HOME": str(home / ".state"), "XDG_CACHE_HOME": str(home / ".cache")}
    run = subprocess.run([nvim, "--headless", "-n", "-i", "NONE", "-u", str(init), "-c", f"luafile {driver}"],
                         cwd=work, env=env, capture_output=True, text=True, timeout=300)
    got = json.loads(report.read_text()) if report.exists() else {}
    assert run.returncode == 0 and "failed" not in got, (got, run.stdout[-2000:], run.stderr[-2000:])

    # One diagnostic: the divergence of layer 4, a warning on its epsilon's line.
    (d,) = got["diagnostics"]
    assert d["line"] == next(i for i, l in enumerate(lines) if "epsilon 0.001." in l)
    assert d["message"].startswith("layer 4 is not one program with layer 0 (attention)") and d["severity"] == 2
    # A lens on every layer heading names its kind; on layer 4 also the comparison; on ## Model the bundle.
    by_line: dict[int, list[str]] = {}
    for lens in got["lenses"]:
        by_line.setdefault(lens["line"], []).append(lens["title"])
    for layer in (0, 1, 2, 3, 5):
        assert by_line[heading(f"## Layer {layer}")] == ["attention (layer 0) · 5 layers · first: layer 0"]
    assert sorted(by_line[heading("## Layer 4")]) == ["Compare layer 4 with layer 0", "attention (layer 4) · 1 layer · first: layer 4"]
    assert by_line[heading("## Model")] == ["2 kinds · Lower SN50 bundle"]
    # The lens and definition both went to layer 0's heading; the lowering wrote the bundle of the saved text.
    assert got["lens_went_to"] == got["definition_went_to"] == heading("## Layer 0")
    data = json.loads(manifest.read_text())
    assert data["document"] == {"name": "model.lgm", "sha256": hashlib.sha256(doc.read_bytes()).hexdigest()}
    assert len(data["layers"]) == 6 and got["manifest_buffer"] > 0
