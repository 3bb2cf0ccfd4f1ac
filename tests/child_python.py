"""Where a child Python process finds the fastdynamo under test (shared by
``tests/conftest.py``'s ``subprocess_env`` and ``tests/reliability/helpers.py``)."""
from __future__ import annotations

import os
import site
from pathlib import Path

import fastdynamo

PACKAGE_PARENT = Path(fastdynamo.__file__).resolve().parents[1]


def python_path() -> str:
    """PYTHONPATH for a child that imports the fastdynamo under test: the in-place
    package's parent first; nothing added for an installed one (site-packages is on the
    child's path already, and must not move ahead of the standard library)."""
    inherited = os.environ.get("PYTHONPATH", "")
    installed = {Path(p).resolve() for p in [*site.getsitepackages(), site.getusersitepackages()]}
    if PACKAGE_PARENT in installed:
        return inherited
    return os.pathsep.join(p for p in (str(PACKAGE_PARENT), inherited) if p)
