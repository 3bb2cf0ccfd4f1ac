"""On-disk cache of generated wrapper modules, keyed by a hash of the graph and its inputs.

Every kernel target generates a Python module per graph (the wrapper, with the Triton
kernels or the C++ translation unit in it). ``triton.jit`` reads kernel source through
``inspect``, so generated code must live in real files: each graph's module is written
once to ``<cache dir>/modules/<key>.py`` and imported from there. A later process that compiles the same graph (same code, input
metadata, options and versions) finds the file and skips tracing and code generation.
``STATS`` counts what happened, for tests and logs.

>>> import os, tempfile
>>> os.environ["FASTDYNAMO_CACHE_DIR"] = tempfile.mkdtemp()
>>> writes = STATS["writes"]
>>> module = load_or_build("k" * 64, lambda: "ANSWER = 42\\n")
>>> module.ANSWER, STATS["writes"] - writes, load_or_build("k" * 64, lambda: "").ANSWER
(42, 1, 42)
"""
from __future__ import annotations

import collections
import hashlib
import importlib.util
import logging
import os
import sys
import tempfile
from pathlib import Path
from types import ModuleType
from typing import Callable

logger = logging.getLogger("fastdynamo.backends.kernels")

STATS: collections.Counter = collections.Counter()
_LOADED: dict[str, ModuleType] = {}


def cache_root() -> Path:
    """``$FASTDYNAMO_CACHE_DIR``, else ``$XDG_CACHE_HOME/fastdynamo``, else ``~/.cache/fastdynamo``."""
    explicit = os.environ.get("FASTDYNAMO_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "fastdynamo"


def module_path(key: str) -> Path:
    return cache_root() / "modules" / f"{key}.py"


def hash_key(*parts: object) -> str:
    """A stable hex key of the textual form of ``parts``."""
    digest = hashlib.sha256()
    for part in parts:
        digest.update(repr(part).encode())
        digest.update(b"\0")
    return digest.hexdigest()


def load_or_build(key: str, build: Callable[[], str]) -> ModuleType:
    """The module for ``key``: from this process, from disk, or built, written and imported."""
    if key in _LOADED:
        STATS["memory_hits"] += 1
        return _LOADED[key]
    path = module_path(key)
    if path.exists():
        STATS["disk_hits"] += 1
        logger.debug("cache hit %s", path)
    else:
        source = build()
        STATS["codegen"] += 1
        _write_atomically(path, source)
        STATS["writes"] += 1
        logger.debug("wrote %s", path)
    module = _import(key, path)
    _LOADED[key] = module
    return module


def _write_atomically(path: Path, source: str) -> None:
    # Another process may compile the same graph at the same time: write a private file
    # and rename it into place, so a reader never sees half a module.
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".py")
    with os.fdopen(handle, "w") as file:
        file.write(source)
    os.replace(temporary, path)


# The files of the generated modules this process imported: their frames (a training
# graph's backward, which the autograd engine calls from whatever Python runs
# loss.backward()) are generated code, never user code to capture (convert_frame).
GENERATED_MODULE_FILES: set[str] = set()


def _import(key: str, path: Path) -> ModuleType:
    name = f"fastdynamo_generated_{key[:32]}"
    GENERATED_MODULE_FILES.add(str(path))
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path} is not an importable Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # inspect.getsource (triton.jit) looks modules up here
    spec.loader.exec_module(module)
    return module


def clear_memory() -> None:
    """Forget imported modules (tests use it to force a disk lookup)."""
    _LOADED.clear()
