"""Opt-in logs: ``FASTDYNAMO_LOGS=graph,guards,bytecode,recompiles,breaks,dynamic``.

``dynamic`` says which dimension became symbolic and why (automatic dynamic, a mark,
``dynamic=True``), which sizes were specialised, and when a frame fell back to static
shapes.

Each enabled kind prints to stderr with a ``[fastdynamo:<kind>]`` header. Change the
set at runtime with :func:`set_logs`.

>>> set_logs("graph")
>>> enabled("graph"), enabled("guards")
(True, False)
>>> set_logs("")
"""
from __future__ import annotations

import os
import sys

KINDS = ("graph", "guards", "bytecode", "recompiles", "breaks", "dynamic")
_enabled: set[str] = set()


def set_logs(spec: str) -> None:
    """Enable the comma-separated kinds in ``spec`` (``all`` enables every kind)."""
    kinds = {k.strip() for k in spec.split(",") if k.strip()}
    if "all" in kinds:
        kinds = set(KINDS)
    unknown = kinds - set(KINDS)
    if unknown:
        raise ValueError(f"unknown log kinds {sorted(unknown)}; known: {', '.join(KINDS)}")
    _enabled.clear()
    _enabled.update(kinds)


def enabled(kind: str) -> bool:
    return kind in _enabled


def emit(kind: str, title: str, body: str = "") -> None:
    """Print one log record if ``kind`` is enabled."""
    if kind not in _enabled:
        return
    text = f"[fastdynamo:{kind}] {title}\n"
    if body:
        text += body.rstrip("\n") + "\n"
    sys.stderr.write(text)


try:
    set_logs(os.environ.get("FASTDYNAMO_LOGS", ""))
except ValueError as _err:  # a typo in the environment must not break import
    sys.stderr.write(f"[fastdynamo] FASTDYNAMO_LOGS ignored: {_err}\n")
