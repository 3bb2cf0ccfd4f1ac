"""Shared helpers of the reliability tests: fresh processes and graph counting."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import fastdynamo

PYTHON_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                          "python")


def run_python(source: str, *, env: dict | None = None, stdin: str | None = None,
               timeout: float = 240) -> subprocess.CompletedProcess:
    """Runs ``source`` in a fresh interpreter (a crash there fails the test instead of
    killing the suite); the package under test comes first on the path."""
    full_env = dict(os.environ)
    full_env["PYTHONPATH"] = PYTHON_DIR + os.pathsep + full_env.get("PYTHONPATH", "")
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-c", textwrap.dedent(source)], env=full_env,
                          input=stdin, capture_output=True, text=True, timeout=timeout)


def graph_count(fn, *args, backend: str = "eager") -> int:
    """How many graphs fastdynamo captures for ``fn(*args)`` (explain, fresh state)."""
    return fastdynamo.explain(fn, backend=backend)(*args).graph_count
