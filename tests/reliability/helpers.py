"""Shared helpers of the reliability tests: fresh processes and graph counting."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import child_python

import fastdynamo


def run_python(source: str, *, env: dict | None = None, stdin: str | None = None,
               timeout: float = 240) -> subprocess.CompletedProcess:
    """Runs ``source`` in a fresh interpreter (a crash there fails the test instead of
    killing the suite), importing the same fastdynamo as this process."""
    full_env = dict(os.environ)
    python_path = child_python.python_path()
    if python_path:
        full_env["PYTHONPATH"] = python_path
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-c", textwrap.dedent(source)], env=full_env,
                          input=stdin, capture_output=True, text=True, timeout=timeout)


def graph_count(fn, *args, backend: str = "eager") -> int:
    """How many graphs fastdynamo captures for ``fn(*args)`` (explain, fresh state)."""
    return fastdynamo.explain(fn, backend=backend)(*args).graph_count
