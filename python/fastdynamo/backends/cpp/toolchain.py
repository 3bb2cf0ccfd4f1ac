"""The toolchain of this process: a compiler, its flags and the vector level, probed once.

:func:`toolchain` finds the compiler (:mod:`cxx`), the levels the CPU runs
(:mod:`isa`) and torch's OpenMP runtime (:mod:`openmp`), then builds one small probe
library with everything on; when that fails it finds out what the compiler refuses
(nothing at all: :class:`ToolchainUnavailable`; a level: the next one; OpenMP: kernels
without threads) and says so in :attr:`Toolchain.notes`. The answer, or the
ToolchainUnavailable, is kept for the process. ``FASTDYNAMO_CPP_ISA=avx512|avx2|none``
asks for one level instead of detecting it (tests use it); a level this CPU or compiler
cannot run raises ToolchainUnavailable, never a binary that dies of SIGILL.

Flags: ``-O3 -fPIC -std=c++17``, ``-fno-math-errno`` (``sqrtf`` inlines and
vectorises) and ``-fno-trapping-math`` (GCC may then compute both sides of a select, as
Clang does by default: a leaky ReLU loop vectorises at SSE2/AVX2 and ran 4-13x faster;
only floating-point exception flags, which nothing reads, can differ, never a value),
``-ffp-contract=off`` (GCC in ISO mode does not fuse ``a * b + c`` into an FMA but
Clang does: off, both round each operation as eager does; a kernel that wants an FMA
writes ``std::fma``), ``-fwrapv`` (signed integers wrap as ATen's do in practice, so
the optimiser may not assume an ``int64`` sum never overflows), never ``-ffast-math`` (NaN, infinities
and signed zeros stay IEEE); the level's ``-m`` flags; ``-fopenmp`` (or only
``-fopenmp-simd``, which keeps ``#pragma omp simd`` working without a runtime).
Linking is a second step: ``-shared``, on Linux ``-Wl,-z,defs`` (an unresolved symbol is
a link error with the compiler's message, not a dlopen failure), torch's OpenMP runtime.

>>> level_requested({"FASTDYNAMO_CPP_ISA": "avx2"}), level_requested({})
(<VectorLevel.AVX2: 'avx2'>, None)
"""
from __future__ import annotations

import logging
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Mapping

from . import toolchain_cache
from .cxx import Compiler, ToolchainUnavailable, find_compiler, trim
from .isa import (
    LEVELS,
    VectorLevel,
    cpuinfo_features,
    parse_probe_output,
    probe_source,
    supported_levels,
)
from .openmp import SIMD_ONLY, OpenMPFlags, openmp_flags, torch_runtime

logger = logging.getLogger("fastdynamo.backends.cpp")

ISA_VARIABLE = "FASTDYNAMO_CPP_ISA"
BASE_COMPILE_FLAGS = ("-O3", "-fPIC", "-std=c++17", "-fno-math-errno", "-fno-trapping-math", "-ffp-contract=off",
                      "-fwrapv")
# -z defs: GNU ld and lld; Apple's linker refuses undefined symbols by default.
_LINK_FLAGS_BY_PLATFORM = {"linux": ("-shared", "-Wl,-z,defs")}
_DEFAULT_LINK_FLAGS = ("-shared",)

# Compiled with everything the toolchain turns on: a threaded loop, a simd reduction
# (the two pragmas kernels use; the -O3 loops are vectorised at the level), after the
# level's macro checks.
_OPENMP_PROBE = """
extern "C" float openmp_probe(const float* __restrict__ x, float* __restrict__ out, long n, int threads) {
  #pragma omp parallel for num_threads(threads)
  for (long i = 0; i < n; ++i) out[i] = x[i] * 2.0f;
  float total = 0.0f;
  #pragma omp simd reduction(+: total)
  for (long i = 0; i < n; ++i) total += out[i];
  return total;
}
"""


@dataclass(frozen=True)
class Toolchain:
    """A compiler with the flags every kernel of this process is built with.

    ``openmp_runtime`` is the OpenMP runtime kernels link (torch's), or None when they
    get no threads; ``notes`` say what was left out and why.
    """

    compiler: Compiler
    isa: VectorLevel
    compile_flags: tuple[str, ...]
    link_flags: tuple[str, ...]
    openmp_runtime: str | None
    notes: tuple[str, ...] = ()

    @property
    def openmp(self) -> bool:
        """Whether ``#pragma omp parallel`` makes threads (``-fopenmp`` is on)."""
        return "-fopenmp" in self.compile_flags

    def key_parts(self) -> tuple[object, ...]:
        """What a binary depends on besides its source: compiler identity, level, flags."""
        return (*self.compiler.identity, self.isa.value, self.compile_flags, self.link_flags)

    def compile_shared(self, source: Path, output: Path) -> str | None:
        """Compile ``source`` and link it into ``output``; None, or what the failing step
        printed (its command line first)."""
        object_file = output.with_name(output.name + ".o")
        steps = ([*self.compile_flags, "-c", str(source), "-o", str(object_file)],
                 [str(object_file), "-o", str(output), *self.link_flags])
        try:
            for arguments in steps:
                failure = _run_step(self.compiler, arguments)
                if failure is not None:
                    return failure
            return None
        finally:
            object_file.unlink(missing_ok=True)


def _run_step(compiler: Compiler, arguments: list[str]) -> str | None:
    command = shlex.join([*compiler.command, *arguments])
    try:
        result = compiler.run(arguments)
    except (OSError, subprocess.SubprocessError) as err:
        return f"{command}\n{err}"
    return None if result.returncode == 0 else f"{command}\n{result.stderr or result.stdout}"


def assemble(compiler: Compiler, level: VectorLevel, openmp: OpenMPFlags) -> Toolchain:
    """The toolchain of ``compiler`` at ``level`` with ``openmp``, not probed (benchmarks
    build variants with it; :func:`toolchain` is the probed one)."""
    link = _LINK_FLAGS_BY_PLATFORM.get(sys.platform, _DEFAULT_LINK_FLAGS)
    return Toolchain(compiler, level, (*BASE_COMPILE_FLAGS, *LEVELS[level].flags, *openmp.compile),
                     (*link, *openmp.link), openmp.runtime)


def level_requested(environ: Mapping[str, str]) -> VectorLevel | None:
    """The level ``FASTDYNAMO_CPP_ISA`` asks for, or None (detect); ValueError if unknown."""
    value = environ.get(ISA_VARIABLE, "").strip().lower()
    if not value:
        return None
    try:
        return VectorLevel(value)
    except ValueError:
        known = "|".join(level.value for level in VectorLevel)
        raise ValueError(f"{ISA_VARIABLE}={value!r} is not one of {known}") from None


_LOCK = threading.Lock()
# The discovered toolchain, or the reason there is none (a str).
_CURRENT: Toolchain | str | None = None


def toolchain() -> Toolchain:
    """This process's toolchain, discovered on the first call (from ``os.environ``);
    raises ToolchainUnavailable, with the same reason each time and without probing
    again, when there is none."""
    global _CURRENT
    with _LOCK:
        if _CURRENT is None:
            try:
                _CURRENT = toolchain_cache.load(os.environ) or _discover_and_keep()
            except ToolchainUnavailable as err:
                _CURRENT = err.reason
        if isinstance(_CURRENT, str):
            # A new exception each time: re-raising one object grows its traceback.
            raise ToolchainUnavailable(_CURRENT)
        return _CURRENT


def _discover_and_keep() -> Toolchain:
    found = discover()
    toolchain_cache.store(os.environ, found)
    return found


def discover(environ: Mapping[str, str] = os.environ) -> Toolchain:
    """Probe the toolchain ``environ`` selects (no caching: see :func:`toolchain`)."""
    started = time.perf_counter()
    compiler = find_compiler(environ)
    requested = level_requested(environ)
    with tempfile.TemporaryDirectory(prefix="fastdynamo-probe-") as workdir:
        prober = _Prober(compiler, Path(workdir))
        features = cpu_features(compiler)
        levels = supported_levels(features)
        if requested is not None and requested not in levels:
            raise ToolchainUnavailable(
                f"{ISA_VARIABLE}={requested.value} asks for a level this CPU does not run "
                f"(it runs: {', '.join(level.value for level in levels)})")
        found = prober.choose([requested] if requested else levels, openmp_flags(torch_runtime()))
    logger.debug("C++ toolchain in %.3f s: %s, %s, flags %s | %s%s", time.perf_counter() - started,
                 compiler.path, found.isa.value, shlex.join(found.compile_flags),
                 shlex.join(found.link_flags), "".join(f"\n  {note}" for note in found.notes))
    return found


class _Prober:
    """Builds probe programs in ``workdir`` with candidate toolchains."""

    def __init__(self, compiler: Compiler, workdir: Path):
        self.compiler = compiler
        self.workdir = workdir
        self.builds = 0

    def candidate(self, level: VectorLevel, openmp: OpenMPFlags) -> Toolchain:
        return assemble(self.compiler, level, openmp)

    def failure(self, candidate: Toolchain) -> str | None:
        """None if ``candidate`` builds the probe library, else why not."""
        self.builds += 1
        source = self.workdir / f"probe{self.builds}.cpp"
        source.write_text(LEVELS[candidate.isa].probe() + _OPENMP_PROBE)
        return candidate.compile_shared(source, self.workdir / f"probe{self.builds}.so")

    def choose(self, levels: list[VectorLevel], openmp: OpenMPFlags) -> Toolchain:
        """The best of ``levels`` with ``openmp``; when the compiler refuses that, the
        best level it accepts, then OpenMP on it if it links, with notes saying why."""
        best = self.candidate(levels[0], openmp)
        first_failure = self.failure(best)
        if first_failure is None:
            return best  # the usual case: one probe
        notes = []
        for level in levels:
            plain = self.candidate(level, SIMD_ONLY)
            reason = self.failure(plain)
            if reason is None:
                break
            notes.append(f"{level.value} left out, the compiler refuses it: {trim(reason, 3)}")
        else:
            raise self.unavailable(levels[-1], reason or "")
        # `best` and `plain` differ only in OpenMP when the first level survived.
        openmp_failure = first_failure if level is levels[0] else self.failure(self.candidate(level, openmp))
        if openmp_failure is None:
            return replace(self.candidate(level, openmp), notes=tuple(notes))
        notes.append(f"OpenMP off, kernels run on the calling thread: {trim(openmp_failure, 6)}")
        return replace(plain, notes=tuple(notes))

    def unavailable(self, last: VectorLevel, reason: str) -> ToolchainUnavailable:
        """Why no level built: only ``last``, a level asked for, is refused, or even the
        baseline fails (then there is no toolchain at all)."""
        baseline = self.candidate(VectorLevel.NONE, SIMD_ONLY)
        if last is not VectorLevel.NONE:
            baseline_failure = self.failure(baseline)
            if baseline_failure is None:
                return ToolchainUnavailable(
                    f"{self.compiler.path} refuses the flags of {last.value} ({shlex.join(LEVELS[last].flags)}), "
                    f"asked for by {ISA_VARIABLE}: {trim(reason, 3)}")
            reason = baseline_failure
        return ToolchainUnavailable(f"{self.compiler.path} cannot build a shared library with "
                                    f"{shlex.join(baseline.compile_flags)}:\n{trim(reason)}")


def cpu_features(compiler: Compiler) -> frozenset[str]:
    """The CPU's features: ``/proc/cpuinfo``, else what a program built by ``compiler``
    asks the CPU (:func:`features_by_program`); none off x86 (the levels are x86's)."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return frozenset()
    features = cpuinfo_features()
    return features if features is not None else features_by_program(compiler)


def features_by_program(compiler: Compiler) -> frozenset[str]:
    """The features of :data:`isa.ALL_FEATURES` this CPU has, by building and running
    :func:`isa.probe_source`; none when it does not build or run."""
    with tempfile.TemporaryDirectory(prefix="fastdynamo-probe-") as workdir:
        source, program = Path(workdir, "cpu_features.cpp"), Path(workdir, "cpu_features")
        source.write_text(probe_source())
        failure = _run_step(compiler, ["-O1", str(source), "-o", str(program)])
        if failure is not None:
            logger.debug("CPU feature probe did not build, assuming no vector level:\n%s", failure)
            return frozenset()
        result = subprocess.run([str(program)], capture_output=True, text=True, timeout=30)
    return parse_probe_output(result.stdout) if result.returncode == 0 else frozenset()
