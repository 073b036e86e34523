"""The compiled kernels are kept where the user can write (issue 33): a `streamed run` from an install nobody may
write to compiles its kernels once, into the user's cache folder, and the next run loads them instead of compiling
again — numba's own account of its cache (``NUMBA_DEBUG_CACHE``) says which it did."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from privileges import unprivileged
from repo import EXAMPLES, ROOT


def environment(home: Path, **more: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NUMBA_", "XDG_"))}
    return {**env, "HOME": str(home), "PYTHONDONTWRITEBYTECODE": "1", **more}


def read_only_install(folder: Path) -> Path:
    """A copy of the package no one may write to (``chmod -R a-w``), as a system or read-only install is."""
    site = folder / "site"
    shutil.copytree(ROOT / "streamed", site / "streamed", ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run(["chmod", "-R", "a-w", str(site)], check=True)
    return site


def tiny_run(site: Path, env: dict[str, str]) -> str:
    p = subprocess.run([*unprivileged(), sys.executable, "-m", "streamed", "run", str(EXAMPLES / "tiny-llama.lgm"),
                        "--tokens", "1,2,3"], cwd=site, env={**env, "NUMBA_DEBUG_CACHE": "1"},
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    return p.stdout


def test_a_read_only_install_compiles_its_kernels_once_into_the_user_cache_folder(tmp_path):
    site = read_only_install(tmp_path)
    env = environment(tmp_path / "home", XDG_CACHE_HOME=str(tmp_path / "cache"))
    try:
        first = tiny_run(site, env)
        assert "data saved to" in first, first
        cache = tmp_path / "cache" / "streamed" / "numba"
        kept = sorted(p.name for p in cache.rglob("*.nbc"))
        assert kept, f"nothing compiled was kept in {cache}"
        second = tiny_run(site, env)
        assert "data loaded from" in second and "data saved to" not in second, second
        assert sorted(p.name for p in cache.rglob("*.nbc")) == kept
        assert not list(site.rglob("__pycache__")), "something was written beside the package"
    finally:
        subprocess.run(["chmod", "-R", "u+w", str(site)], check=True)


def test_the_cache_folder_is_the_user_s_own_setting_then_xdg_then_home(tmp_path):
    def folder(**env: str) -> str:
        return subprocess.run([sys.executable, "-c", "import os, streamed; print(os.environ['NUMBA_CACHE_DIR'])"],
                              cwd=ROOT, env=environment(tmp_path / "home", **env), capture_output=True, text=True,
                              check=True).stdout.strip()

    assert folder(NUMBA_CACHE_DIR=str(tmp_path / "mine")) == str(tmp_path / "mine")
    assert folder(XDG_CACHE_HOME=str(tmp_path / "xdg")) == str(tmp_path / "xdg" / "streamed" / "numba")
    assert folder() == str(tmp_path / "home" / ".cache" / "streamed" / "numba")
