"""Fixtures of the C++ kernel tests: the test library of kernel_math_build.py, compiled once
per session for this machine's best ISA, for baseline x86-64 (no fma: the header's other
arithmetic), and, assembly only, for the vector ISA the machine lacks; with the compiler's
reports of which loops it vectorized."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from kernel_math_build import VECTOR_ISAS, KernelLibrary, finish, start_compile

_ISA_CPU_FLAGS = {
    "avx512": {"avx512f", "avx512dq", "avx512vl", "avx512bw", "fma", "f16c"},
    "avx2": {"avx2", "fma", "f16c"},
}


def host_isa() -> str:
    """The widest ISA of ISA_FLAGS this CPU runs (tests/cpp only run x86-64 code)."""
    flags: set[str] = set()
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("flags"):
            flags = set(line.split(":", 1)[1].split())
            break
    for isa in ("avx512", "avx2"):
        if _ISA_CPU_FLAGS[isa] <= flags:
            return isa
    return "baseline"


@dataclass(frozen=True)
class Builds:
    """``libraries``: ISA -> loaded library (host ISA and baseline); ``reports``: ISA ->
    g++'s -fopt-info-vec-optimized output, for every vector ISA."""

    host: str
    libraries: dict[str, KernelLibrary]
    reports: dict[str, str]


@pytest.fixture(scope="session")
def builds(tmp_path_factory: pytest.TempPathFactory) -> Builds:
    workdir = tmp_path_factory.mktemp("kernel-math")
    host = host_isa()
    jobs = {isa: start_compile(workdir, isa, shared=True) for isa in {host, "baseline"}}
    jobs.update({isa: start_compile(workdir, isa, shared=False)
                 for isa in VECTOR_ISAS - {host}})
    reports = {isa: finish(proc) for isa, (proc, _) in jobs.items()}
    libraries = {isa: KernelLibrary(out) for isa, (_, out) in jobs.items()
                 if out.suffix == ".so"}
    return Builds(host, libraries, {isa: reports[isa] for isa in VECTOR_ISAS})


@pytest.fixture(scope="session")
def lib(builds: Builds) -> KernelLibrary:
    """The library built for this machine's best ISA."""
    return builds.libraries[builds.host]
