"""Shared helpers of the reliability tests: fresh processes and graph counting."""
from __future__ import annotations

import os
import site
import subprocess
import sys
import textwrap
from pathlib import Path

import fastdynamo

# The directory holding the fastdynamo under test: python/ for an in-place build,
# site-packages when installed (then nothing is added: it must not move ahead of the
# standard library, and a source tree without a built extension must not shadow it).
_PACKAGE_PARENT = Path(fastdynamo.__file__).resolve().parent.parent
_INSTALLED = {Path(p).resolve() for p in [*site.getsitepackages(), site.getusersitepackages()]}


def run_python(source: str, *, env: dict | None = None, stdin: str | None = None,
               timeout: float = 240) -> subprocess.CompletedProcess:
    """Runs ``source`` in a fresh interpreter (a crash there fails the test instead of
    killing the suite), importing the same fastdynamo as this process."""
    full_env = dict(os.environ)
    if _PACKAGE_PARENT not in _INSTALLED:
        full_env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(_PACKAGE_PARENT), full_env.get("PYTHONPATH", "")) if p)
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-c", textwrap.dedent(source)], env=full_env,
                          input=stdin, capture_output=True, text=True, timeout=timeout)


def graph_count(fn, *args, backend: str = "eager") -> int:
    """How many graphs fastdynamo captures for ``fn(*args)`` (explain, fresh state)."""
    return fastdynamo.explain(fn, backend=backend)(*args).graph_count
