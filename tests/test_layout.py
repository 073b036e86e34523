"""The tree shows the pipeline, and imports flow one way through it.

The stages, bottom to top (ARCHITECTURE.md, "Imports flow one way"):

    lang < model < analysis < spatial < numerics < cluster < streamed_lsp (server/) < cli

A module may import its own stage and the stages below it, never one above — at module level or inside a function
(an import placed in a function to keep start-up fast still runs against the flow if it points upward). Within a
stage, no two modules import each other, directly or round a longer circle: a function-local import counts, because
it runs the circle all the same, only later. Imports are read from each module's syntax tree, relative ones
resolved, so neither a comment nor a string can fool the checks, and ``test_an_upward_import_is_caught`` and
``test_an_import_circle_is_caught_even_inside_a_function`` plant one in a scratch tree to show that each check fails
when it should.
"""

from __future__ import annotations

import ast
import os
import subprocess
from pathlib import Path

from repo import ROOT

STAGES = ("lang", "model", "analysis", "spatial", "numerics", "cluster", "streamed_lsp", "cli")


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
    """Each module ``path`` imports, with its line: ``import a.b``, ``from a import b`` (``a.b`` when that is one of
    the ``known`` modules: ``b`` is then a submodule; ``a`` for the names that are not), relative imports resolved
    against ``name``'s package. So ``from . import ops`` in ``streamed.lang.parser`` imports ``streamed.lang.ops``,
    not the package whose ``__init__`` imports the parser."""
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
            submodules = [f"{origin}.{a.name}" for a in node.names if f"{origin}.{a.name}" in known]
            if len(submodules) < len(node.names):
                found.append((node.lineno, origin))
            found += [(node.lineno, s) for s in submodules]
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


def import_circles(streamed_dir: Path, server_dir: Path | None = None) -> list[str]:
    """Every circle of imports between modules (each strongly connected set of them, Tarjan's algorithm), as one
    circle through its first module by name: ``a → b → a (a.py:3, b.py:7)``, the line of each import on the way."""
    mods = modules(streamed_dir, server_dir)
    graph: dict[str, dict[str, int]] = {name: {} for name in mods}
    for name, path in mods.items():
        for line, target in imports(name, path, mods.keys()):
            if target in mods and target != name:
                graph[name].setdefault(target, line)
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles = []

    def visit(v: str) -> None:
        order[v] = low[v] = len(order)
        stack.append(v)
        for w in graph[v]:
            if w not in order:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], order[w])
        if low[v] == order[v]:
            members = {v}
            while stack[-1] != v:
                members.add(stack.pop())
            stack.pop()
            if len(members) > 1:
                circles.append(members)

    for v in sorted(graph):
        if v not in order:
            visit(v)
    out = []
    for members in circles:
        start = min(members)
        paths = {start: [start]}
        queue = [start]
        while queue:  # the shortest way round, within the circle's modules
            v = queue.pop(0)
            for w in sorted(graph[v]):
                if w == start:
                    path = paths[v] + [start]
                    queue = []
                    break
                if w in members and w not in paths:
                    paths[w] = paths[v] + [w]
                    queue.append(w)
        where = ", ".join(f"{mods[a]}:{graph[a][b]}" for a, b in zip(path, path[1:]))
        out.append(f"{' → '.join(path)} ({where})")
    return sorted(out)


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


def test_no_modules_import_each_other_round_a_circle():
    assert import_circles(ROOT / "streamed", ROOT / "server") == []


def test_an_import_circle_is_caught_even_inside_a_function(tmp_path):
    core = tmp_path / "streamed"
    for pkg in ("lang", "model"):
        (core / pkg).mkdir(parents=True)
        (core / pkg / "__init__.py").write_text("")
    (core / "__init__.py").write_text("")
    (core / "model" / "checkpoint.py").write_text("def storage_of(path):\n"
                                                  "    from .gguf import read  # a circle, even inside a function\n"
                                                  "    return read(path)\n")
    (core / "model" / "gguf.py").write_text("from .checkpoint import storage_of\n")
    (core / "model" / "spec.py").write_text("from . import checkpoint\n")  # one way: no circle
    (core / "lang" / "lexer.py").write_text("import streamed.lang.syntax\n")  # round three modules
    (core / "lang" / "syntax.py").write_text("from ..lang import parser\n")
    (core / "lang" / "parser.py").write_text("from .lexer import X\n")
    found = import_circles(core)
    assert found == [
        f"streamed.lang.lexer → streamed.lang.syntax → streamed.lang.parser → streamed.lang.lexer "
        f"({core / 'lang' / 'lexer.py'}:1, {core / 'lang' / 'syntax.py'}:1, {core / 'lang' / 'parser.py'}:1)",
        f"streamed.model.checkpoint → streamed.model.gguf → streamed.model.checkpoint "
        f"({core / 'model' / 'checkpoint.py'}:2, {core / 'model' / 'gguf.py'}:1)",
    ]


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


def test_the_repository_tracks_no_link_that_leads_outside_it():
    """A link committed by mistake (a worktree's `.venv` pointing at another checkout's) makes every clone's
    `make` find an environment that is not its own — or a link that loops, where `make` cannot build one."""
    listed = subprocess.run(["git", "ls-files", "-s", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    links = {}  # each tracked link's name and target, as committed
    for entry in filter(None, listed.split(b"\0")):
        mode, blob, _, name = entry.decode().replace("\t", " ", 1).split(" ", 3)
        if mode == "120000":
            links[name] = subprocess.run(["git", "cat-file", "blob", blob], cwd=ROOT, capture_output=True,
                                         check=True, text=True).stdout

    def leaves(name: str, target: str) -> bool:
        path = os.path.normpath(os.path.join(os.path.dirname(name), target))
        return os.path.isabs(target) or path == ".." or path.startswith(".." + os.sep)

    outside = [f"{name} → {target}" for name, target in links.items() if leaves(name, target)]
    assert not outside, outside
    assert ".venv" not in links
