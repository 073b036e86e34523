"""The tree shows the pipeline, and imports flow one way through it.

The stages, bottom to top (ARCHITECTURE.md, "Imports flow one way"):

    lang < model < analysis < spatial < numerics < streamed_lsp (server/) < cli

A module may import its own stage and the stages below it, never one above — at module level or inside a function
(an import placed in a function to keep start-up fast still runs against the flow if it points upward). Imports are
read from each module's syntax tree, relative ones resolved, so neither a comment nor a string can fool the check,
and ``test_an_upward_import_is_caught`` plants one in a scratch tree to show that the check fails when it should.
"""

from __future__ import annotations

import ast
from pathlib import Path

from repo import ROOT

STAGES = ("lang", "model", "analysis", "spatial", "numerics", "streamed_lsp", "cli")


def stage_of(module: str) -> str | None:
    """The stage a dotted module name belongs to: ``streamed.spatial.lower`` → ``spatial``; ``streamed_lsp.hover`` →
    ``streamed_lsp``; the package root ``streamed`` (its lazy exports, its ``__main__``) counts as the top."""
    parts = module.split(".")
    if parts[0] == "streamed_lsp":
        return "streamed_lsp"
    if parts[0] != "streamed":
        return None
    if len(parts) == 1 or parts[1] == "__main__":
        return "cli"
    return parts[1] if parts[1] in STAGES else None


def modules(streamed_dir: Path, server_dir: Path | None) -> dict[str, Path]:
    """Every module of the two import packages: dotted name → file."""
    out = {}
    for package, folder in (("streamed", streamed_dir), ("streamed_lsp", server_dir)):
        if folder is None:
            continue
        for f in sorted(folder.rglob("*.py")):
            rel = f.relative_to(folder).with_suffix("").parts
            name = ".".join((package, *rel))
            out[name.removesuffix(".__init__")] = f
    return out


def imports(name: str, path: Path, known=frozenset()) -> list[tuple[int, str]]:
    """Each module ``path`` imports, with its line: ``import a.b``, ``from a import b`` (``a``, and ``a.b`` when that
    is one of the ``known`` modules: ``b`` is then a submodule), relative imports resolved against ``name``'s
    package."""
    tree = ast.parse(path.read_text("utf-8"), str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                origin = ".".join(base + ([node.module] if node.module else []))
            else:
                origin = node.module or ""
            found.append((node.lineno, origin))
            found += [(node.lineno, f"{origin}.{a.name}") for a in node.names if f"{origin}.{a.name}" in known]
    return found


def upward_imports(streamed_dir: Path, server_dir: Path | None = None) -> list[str]:
    """Every import that runs against the flow, as ``file:line: A (stage) imports B (stage above it)``."""
    mods = modules(streamed_dir, server_dir)
    bad = []
    for name, path in mods.items():
        mine = stage_of(name)
        if mine is None:
            continue
        for line, target in imports(name, path, mods.keys()):
            theirs = stage_of(target)
            if theirs is not None and STAGES.index(theirs) > STAGES.index(mine):
                bad.append(f"{path}:{line}: {name} ({mine}) imports {target} ({theirs}, above {mine})")
    return bad


def test_imports_flow_one_way_through_the_stages():
    assert upward_imports(ROOT / "streamed", ROOT / "server") == []


def test_an_upward_import_is_caught(tmp_path):
    core = tmp_path / "streamed"
    for pkg in ("lang", "spatial", "numerics"):
        (core / pkg).mkdir(parents=True)
        (core / pkg / "__init__.py").write_text("")
    (core / "__init__.py").write_text("")
    (core / "numerics" / "kernels.py").write_text("X = 1\n")
    (core / "spatial" / "lower.py").write_text("from ..lang import parser\n"  # down: fine
                                               "def f():\n"
                                               "    from ..numerics.kernels import X  # up, even inside a function\n"
                                               "    return X\n")
    (core / "lang" / "parser.py").write_text("import streamed.spatial.lower\n")  # up
    bad = upward_imports(core)
    assert len(bad) == 2
    assert any("streamed.spatial.lower (spatial) imports streamed.numerics.kernels (numerics" in b for b in bad)
    assert any(b.startswith(f"{core / 'lang' / 'parser.py'}:1: ") and "(spatial, above lang)" in b for b in bad)


def test_the_core_never_imports_the_lsp_libraries():
    offenders = []
    for name, path in modules(ROOT / "streamed", None).items():
        offenders += [f"{path}:{line}: {t}" for line, t in imports(name, path) if t.split(".")[0] in ("pygls", "lsprotocol")]
    assert offenders == []


def test_the_server_package_holds_the_server_and_imports_the_lsp_libraries():
    server = ROOT / "server"
    names = {f.stem for f in server.glob("*.py")}
    assert {"handlers", "scheduler", "commands", "diagnostics", "hover", "completion"} <= names
    users = [f for f in server.glob("*.py") if any(t.startswith(("pygls", "lsprotocol"))
                                                  for _, t in imports(f"streamed_lsp.{f.stem}", f))]
    assert users, "server/ should be the code that speaks LSP"


def test_the_core_is_its_stages_each_a_package_with_a_docstring():
    core = ROOT / "streamed"
    loose = sorted(f.name for f in core.glob("*.py"))
    assert loose == ["__init__.py", "__main__.py"]
    packages = sorted(d.name for d in core.iterdir() if (d / "__init__.py").exists())
    assert packages == sorted(s for s in STAGES if s != "streamed_lsp")
    for p in packages:
        doc = ast.get_docstring(ast.parse((core / p / "__init__.py").read_text("utf-8")))
        assert doc and len(doc.split()) >= 20, f"streamed/{p}/__init__.py should say what goes in and what comes out"


def test_no_module_is_named_after_its_package():
    for name in modules(ROOT / "streamed", ROOT / "server"):
        parts = name.split(".")
        assert len(parts) < 2 or parts[-1] != parts[-2], name
