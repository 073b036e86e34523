"""Running a command as a user is held to file modes: under root (CI), without the capabilities that bypass them
(``setpriv``, util-linux)."""

from __future__ import annotations

import os
import shutil


def unprivileged() -> list[str]:
    """A prefix that runs a command subject to file modes, as a user is."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    assert setpriv, "the permission tests need util-linux's setpriv to drop root's override of file modes"
    return [setpriv, "--bounding-set=-dac_override,-dac_read_search,-fowner"]
