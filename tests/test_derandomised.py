"""Every property-based test runs derandomised (issue 21): a bug that one run's examples find, every run's find — CI
runs the suite once, so a test whose examples change from run to run catches some bugs on some runs only. The
profile is ``tests/conftest.py``'s; a test's own ``@settings`` inherits it, and none may turn it off."""

from __future__ import annotations

import ast
import importlib.util

from hypothesis import settings

from repo import ROOT


def test_the_suite_runs_hypothesis_derandomised_with_no_example_database():
    assert settings.default.derandomize is True
    assert settings.default.database is None


def test_a_tests_own_settings_inherit_derandomised_examples():
    """A test that sets only its example count and deadline (``tests/numerics/test_q8.py``) runs derandomised."""
    spec = importlib.util.spec_from_file_location("q8_tests", ROOT / "tests" / "numerics" / "test_q8.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    given = [f for f in vars(module).values() if callable(f) and hasattr(f, "hypothesis")]
    assert given
    for f in given:
        assert f._hypothesis_internal_use_settings.derandomize is True, f.__name__


def test_no_test_turns_derandomisation_off_or_loads_another_profile():
    """Read from every test module's syntax tree: no ``derandomize=False``, no ``database=…`` but None, no profile
    loaded but conftest's."""
    found = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call):
                continue
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if name == "load_profile" and path.name != "conftest.py":
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: loads another profile")
            for kw in node.keywords if name in ("settings", "register_profile") else ():
                if kw.arg == "derandomize" and not (isinstance(kw.value, ast.Constant) and kw.value.value is True):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}: derandomize={ast.unparse(kw.value)}")
                if kw.arg == "database" and not (isinstance(kw.value, ast.Constant) and kw.value.value is None):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}: database={ast.unparse(kw.value)}")
    assert found == []
