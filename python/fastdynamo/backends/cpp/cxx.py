"""Which C++ compiler to run, and who it is.

``$CXX`` if set (split like a shell word list, so ``CXX="ccache g++"`` works), else the
first of ``c++``, ``g++``, ``clang++`` on ``PATH``. Its identity (resolved path and the
first line of ``--version``) goes into every binary's cache key, so upgrading the
compiler or pointing ``$CXX`` elsewhere never reuses an old binary.

>>> family_of("Debian clang version 14.0.6"), family_of("g++ (Debian 12.2.0-14) 12.2.0")
(<CompilerFamily.CLANG: 'clang'>, <CompilerFamily.GNU: 'gnu'>)
"""
from __future__ import annotations

import enum
import os
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from typing import Mapping, Sequence

CANDIDATES = ("c++", "g++", "clang++")
# Seconds for `--version` and for one compiler run: generous, a cold disk or a loaded
# machine can make cc1plus slow, but a hung compiler must not hang the process.
VERSION_TIMEOUT = 30.0
COMPILE_TIMEOUT = 300.0


class ToolchainUnavailable(RuntimeError):
    """No working C++ toolchain: ``reason`` says why in one sentence (no compiler found,
    ``$CXX`` not executable, the probe compile failed, with the compiler's words)."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class CompilerFamily(enum.Enum):
    """Whose driver and OpenMP code generation: GCC's calls ``GOMP_*`` (libgomp),
    Clang's calls ``__kmpc_*`` (LLVM's libomp)."""

    GNU = "gnu"
    CLANG = "clang"


# First match in the `--version` line wins; anything else is driven like GCC.
_FAMILY_MARKERS = (("clang", CompilerFamily.CLANG),)


def family_of(version_line: str) -> CompilerFamily:
    """The family named by a compiler's ``--version`` first line."""
    lowered = version_line.lower()
    return next((family for marker, family in _FAMILY_MARKERS if marker in lowered), CompilerFamily.GNU)


@dataclass(frozen=True)
class Compiler:
    """A compiler to run: ``command`` is the argument list before the flags."""

    command: tuple[str, ...]
    path: str
    version: str
    family: CompilerFamily

    @property
    def identity(self) -> tuple[str, str]:
        """What a cache key needs to tell compilers apart: resolved path, version line."""
        return (self.path, self.version)

    def run(self, arguments: Sequence[str], cwd: str | None = None) -> subprocess.CompletedProcess[str]:
        """Run the compiler with ``arguments``; the result carries its stderr."""
        return subprocess.run([*self.command, *arguments], cwd=cwd, capture_output=True, text=True,
                              timeout=COMPILE_TIMEOUT, stdin=subprocess.DEVNULL)


def find_compiler(environ: Mapping[str, str] = os.environ) -> Compiler:
    """The compiler ``environ`` selects, with its identity; raises ToolchainUnavailable.

    Only finds and asks ``--version``: whether it compiles is :mod:`toolchain`'s probe.
    """
    command = _command(environ)
    path = shutil.which(command[0], path=environ.get("PATH"))
    if path is None:
        raise ToolchainUnavailable(f"$CXX is {environ['CXX']!r}, and {command[0]!r} is not an executable file")
    command = (path, *command[1:])
    version = _version_line(command)
    return Compiler(command, os.path.realpath(path), version, family_of(version))


def _command(environ: Mapping[str, str]) -> tuple[str, ...]:
    explicit = environ.get("CXX", "").strip()
    if explicit:
        return tuple(shlex.split(explicit))
    for name in CANDIDATES:
        if shutil.which(name, path=environ.get("PATH")):
            return (name,)
    raise ToolchainUnavailable(
        f"no C++ compiler found: $CXX is not set and none of {', '.join(CANDIDATES)} is on PATH "
        "(install g++ or clang++, or point $CXX at a compiler)")


def _version_line(command: tuple[str, ...]) -> str:
    try:
        result = subprocess.run([*command, "--version"], capture_output=True, text=True,
                                timeout=VERSION_TIMEOUT, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError) as err:
        raise ToolchainUnavailable(f"{shlex.join(command)} --version could not run: {err}") from err
    lines = result.stdout.strip().splitlines()
    if result.returncode != 0 or not lines:
        raise ToolchainUnavailable(f"{shlex.join(command)} --version failed (exit {result.returncode}): "
                                   f"{trim(result.stderr or result.stdout, 2)}")
    return lines[0].strip()


def trim(text: str, max_lines: int = 40) -> str:
    """The first ``max_lines`` lines of ``text``, with a note of how many were cut.

    >>> trim("a\\nb\\nc", 2)
    'a\\nb\\n... (1 more lines)'
    """
    lines = text.strip().splitlines()
    if len(lines) <= max_lines:
        return "\n".join(lines)
    return "\n".join([*lines[:max_lines], f"... ({len(lines) - max_lines} more lines)"])
