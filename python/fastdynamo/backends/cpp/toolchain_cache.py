"""The probed toolchain kept on disk: a process that finds it skips the compiler's
``--version`` and the probe build (0.1-0.25 s of every first compile).

The file ``<cache dir>/toolchain/<key>.json`` is keyed on everything the probe's
answer depends on, each read without running anything: the compiler command (``$CXX``
or the first of ``c++``, ``g++``, ``clang++`` on ``PATH``), the compiler binary's resolved
path and its size, modification time and inode (an upgrade changes them), the requested
vector level, the CPU's features (``/proc/cpuinfo``; without it nothing is kept) and
torch's OpenMP runtime. A probe that failed is not kept: it is probed again next time.

>>> key_of({"CXX": "/nonexistent/c++"}) is None
True
"""
from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import tempfile
from pathlib import Path
from typing import Mapping

from ..kernels.cache import cache_root
from .cxx import CANDIDATES, Compiler, CompilerFamily
from .isa import VectorLevel, cpuinfo_features
from .openmp import torch_runtime

FORMAT_VERSION = 1


def _command(environ: Mapping[str, str]) -> tuple[str, ...] | None:
    explicit = environ.get("CXX", "").strip()
    if explicit:
        return tuple(shlex.split(explicit))
    return next(((name,) for name in CANDIDATES if shutil.which(name, path=environ.get("PATH"))), None)


def key_of(environ: Mapping[str, str]) -> str | None:
    """The file key for this environment, or None when it cannot be told without probing."""
    command = _command(environ)
    path = shutil.which(command[0], path=environ.get("PATH")) if command else None
    features = cpuinfo_features()
    if path is None or features is None:
        return None
    real = os.path.realpath(path)
    stat = os.stat(real)
    parts = (FORMAT_VERSION, command, real, stat.st_size, stat.st_mtime_ns, stat.st_ino,
             environ.get("FASTDYNAMO_CPP_ISA"), sorted(features), str(torch_runtime()))
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:32]


def _path(key: str) -> Path:
    return cache_root() / "toolchain" / f"{key}.json"


def load(environ: Mapping[str, str]):
    """The kept toolchain for ``environ``, or None."""
    from .toolchain import Toolchain

    key = key_of(environ)
    if key is None or not _path(key).exists():
        return None
    try:
        data = json.loads(_path(key).read_text())
        compiler = Compiler(tuple(data["command"]), data["path"], data["version"], CompilerFamily(data["family"]))
        return Toolchain(compiler, VectorLevel(data["isa"]), tuple(data["compile_flags"]), tuple(data["link_flags"]),
                         data["openmp_runtime"], tuple(data["notes"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None  # unreadable or from another format: probe again


def store(environ: Mapping[str, str], found) -> None:
    """Keep ``found`` (a probed toolchain) for later processes; best effort."""
    key = key_of(environ)
    if key is None:
        return
    data = {"command": list(found.compiler.command), "path": found.compiler.path, "version": found.compiler.version,
            "family": found.compiler.family.value, "isa": found.isa.value, "compile_flags": list(found.compile_flags),
            "link_flags": list(found.link_flags), "openmp_runtime": found.openmp_runtime, "notes": list(found.notes)}
    path = _path(key)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
        with os.fdopen(handle, "w") as file:
            json.dump(data, file)
        os.replace(temporary, path)
    except OSError:
        pass
