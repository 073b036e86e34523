"""What the tests of other editors (``test_neovim.py``, ``test_emacs.py``) share: the configuration README.md gives
for an editor — read from the README itself, so the documented configuration is the tested one — and a workspace
holding the divergent six-layer document, with a private home so no user configuration is read."""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from repo import DIVERGENT, ROOT


def readme_config(editor: str, language: str, python: str) -> str:
    """The ``language`` code block under README's **``editor``**, with the Python that has the server in place of its
    path."""
    section = (ROOT / "README.md").read_text().split(f"**{editor}**", 1)[1]
    block = re.search(rf"```{language}\n(.*?)```", section, re.S).group(1)
    assert "/path/to/.venv/bin/python" in block
    return block.replace("/path/to/.venv/bin/python", python)


@dataclass(frozen=True)
class Workspace:
    """A git-rooted folder with ``model.lgm`` (``DIVERGENT``: layer 4 diverges), its bundle's manifest path, a home
    of its own, and the file ``report.json`` the editor's driver writes."""

    root: Path
    doc: Path
    manifest: Path
    home: Path
    report: Path

    @staticmethod
    def make(tmp_path: Path) -> "Workspace":
        root = tmp_path / "work"
        (root / ".git").mkdir(parents=True)
        doc = root / "model.lgm"
        doc.write_text(DIVERGENT)
        home = tmp_path / "home"
        home.mkdir()
        return Workspace(root, doc, root / "model.bundle" / "manifest.json", home, tmp_path / "report.json")

    @staticmethod
    def heading(title: str) -> int:
        """The 0-based line of the heading that starts ``title`` in the document."""
        return next(i for i, l in enumerate(DIVERGENT.split("\n")) if l.startswith(title))

    @staticmethod
    def line_with(text: str) -> int:
        return next(i for i, l in enumerate(DIVERGENT.split("\n")) if text in l)

    def run(self, argv: list[str], env: dict[str, str] | None = None) -> tuple[subprocess.CompletedProcess, dict]:
        """The editor run headless in the workspace (bounded: a hang fails the test), and the driver's report."""
        import json

        run = subprocess.run(argv, cwd=self.root, env={**os.environ, "HOME": str(self.home), **(env or {})},
                             capture_output=True, text=True, timeout=300)
        return run, (json.loads(self.report.read_text()) if self.report.exists() else {})
