"""Compiled kernels on disk: ``<cache dir>/cpp/<key>.so``, loaded with ctypes.

The key hashes the source with everything the binary depends on (:data:`FORMAT_VERSION`,
the compiler's path and version line, every compile and link flag, the vector level;
:meth:`Toolchain.key_parts`), so a process with another compiler, level or torch (its
OpenMP runtime's path is a link flag) builds its own binary. The cache directory is the
kernel modules' (``$FASTDYNAMO_CACHE_DIR``, see :func:`cache_root`), under ``cpp/``.

The source is kept beside its binary as ``<key>.cpp`` (for debugging; a failed build
keeps it too). The binary is compiled under a private temporary name in the same
directory and renamed into place, so two processes building one source at once each
write a whole file, the last rename wins, and a process that loaded the other one keeps
its mapping. ``STATS`` counts ``compiles``, ``disk_hits`` and ``memory_hits``.

>>> parts = ("/usr/bin/g++-12", "g++ 12.2.0", "avx2", ("-O3",), ("-shared",))
>>> key = binary_key("int x;", parts)
>>> len(key), key == binary_key("int x;", parts), key == binary_key("int y;", parts)
(64, True, False)
"""
from __future__ import annotations

import collections
import ctypes
import logging
import os
import tempfile
import threading
import time
from pathlib import Path

# The Triton backend's cache directory rules (one environment variable for both).
from ..kernels.cache import cache_root, hash_key
from .cxx import trim
from .toolchain import Toolchain, toolchain

logger = logging.getLogger("fastdynamo.backends.cpp")

# Bump when the layout or meaning of a cached binary changes.
FORMAT_VERSION = 1

STATS: collections.Counter[str] = collections.Counter()
_LOADED: dict[str, ctypes.CDLL] = {}
_LOCK = threading.Lock()


class CompileError(RuntimeError):
    """The compiler rejected a source: ``stderr`` is its (trimmed) output, with the
    command line first, and ``source_path`` the kept copy of the source."""

    def __init__(self, stderr: str, source_path: Path):
        super().__init__(f"C++ compilation of {source_path} failed:\n{stderr}")
        self.stderr = stderr
        self.source_path = source_path


def binary_dir() -> Path:
    """Where binaries live: ``<cache root>/cpp``."""
    return cache_root() / "cpp"


def binary_key(source: str, key_parts: tuple[object, ...]) -> str:
    """The cache key of ``source`` built by a toolchain with ``key_parts``."""
    return hash_key(FORMAT_VERSION, *key_parts, source)


def binary_path(source: str, chain: Toolchain | None = None) -> Path:
    """Where ``source``'s binary is (or will be) for ``chain`` (default: this process's)."""
    chain = chain or toolchain()
    return binary_dir() / f"{binary_key(source, chain.key_parts())}.so"


def build(source: str, chain: Toolchain | None = None) -> Path:
    """The path of ``source``'s shared library, compiled unless it is on disk already;
    raises CompileError (the compiler's message) or ToolchainUnavailable."""
    chain = chain or toolchain()
    path = binary_path(source, chain)
    if path.exists():
        STATS["disk_hits"] += 1
        logger.debug("cache hit %s", path)
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    source_path = path.with_suffix(".cpp")
    _write_atomically(source_path, source)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".so")
    os.close(handle)
    started = time.perf_counter()
    try:
        failure = chain.compile_shared(source_path, Path(temporary))
        if failure is not None:
            raise CompileError(trim(failure), source_path)
        os.replace(temporary, path)
    finally:
        Path(temporary).unlink(missing_ok=True)
    STATS["compiles"] += 1
    logger.debug("compiled %s (%d lines) in %.3f s", path, source.count("\n") + 1, time.perf_counter() - started)
    return path


def load(source: str, chain: Toolchain | None = None) -> ctypes.CDLL:
    """``source``'s library loaded in this process (built if needed), once per key.

    Symbols are bound with RTLD_LOCAL (ctypes' default): kernels of two sources may
    define the same names.
    """
    chain = chain or toolchain()
    key = binary_key(source, chain.key_parts())
    with _LOCK:  # two threads asking for one kernel load it once
        library = _LOADED.get(key)
        if library is not None:
            STATS["memory_hits"] += 1
            return library
        library = ctypes.CDLL(str(build(source, chain)))
        _LOADED[key] = library
        return library


def clear_memory() -> None:
    """Forget loaded libraries (tests use it to force a disk lookup); they stay mapped."""
    with _LOCK:
        _LOADED.clear()


def _write_atomically(path: Path, text: str) -> None:
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=path.suffix)
    with os.fdopen(handle, "w") as file:
        file.write(text)
    os.replace(temporary, path)
