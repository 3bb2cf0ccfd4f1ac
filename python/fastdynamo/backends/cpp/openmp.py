"""How kernels link OpenMP so that the process keeps one runtime: the one torch loaded.

torch's Linux wheels ship their own ``libgomp.so.1`` in ``torch/lib`` and run ATen's
parallel loops on it. Two runtimes in one process each keep a thread pool (so twice
the threads fight for the cores), and ``omp_set_num_threads`` on one does not reach
the other. What was measured (``/proc/self/maps`` after loading each variant,
``readelf -V`` for the symbol versions), with g++ 12 and torch 2.15:

============================================  =========================================
link                                          result
============================================  =========================================
``-fopenmp`` (the system's libgomp)           one runtime only if torch is loaded first
                                              (same SONAME); loaded before torch, the
                                              system's wins and torch runs on it. The
                                              symbol versions come from GCC 12's libgomp:
                                              a kernel calling an OpenMP 5.1 function
                                              (OMP_5.1; torch's has 5.0) fails at dlopen
no libgomp at link (``-fopenmp`` at compile)  works only through torch's RTLD_GLOBAL
                                              libtorch_global_deps; before torch:
                                              ``undefined symbol``
torch's file, ``-Wl,-rpath`` to its folder    torch's runtime, loaded first or not;
(chosen)                                      versions checked against it at link
clang++ ``-fopenmp`` (LLVM's libomp)          a second runtime (libomp.so.5 beside
                                              torch's libgomp): Clang emits
                                              ``__kmpc_*`` calls, which libgomp lacks
============================================  =========================================

So the compile step gets ``-fopenmp`` and the link step, run separately without
``-fopenmp`` (the driver would add its own runtime: ``-lgomp`` for GCC, ``-lomp`` for
Clang), gets torch's runtime file and ``-Wl,-z,defs``: a kernel that needs a symbol
torch's runtime lacks, or Clang's ``__kmpc_*`` against torch's libgomp, fails to link
(the probe in :mod:`toolchain` then turns OpenMP off) instead of loading a second
runtime or failing at dlopen.

>>> is_openmp_runtime("libgomp.so.1"), is_openmp_runtime("libgomp-a34b3233.so.1"), is_openmp_runtime("libm.so.6")
(True, True, False)
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import torch

# GNU's, LLVM's and Intel's runtimes; wheels repaired by auditwheel carry a hash.
_RUNTIME_NAME = re.compile(r"^lib(gomp|omp|iomp5)([-.][0-9a-f]+)?\.(so|dylib)(\.[0-9]+)*$")
_MAPS = Path("/proc/self/maps")
TORCH_LIB = Path(torch.__file__).resolve().parent / "lib"


def is_openmp_runtime(file_name: str) -> bool:
    """Whether ``file_name`` is an OpenMP runtime library's file name."""
    return _RUNTIME_NAME.match(file_name) is not None


def loaded_runtimes(maps: Path = _MAPS) -> list[Path]:
    """The OpenMP runtimes mapped into this process (Linux), each once; [] elsewhere."""
    try:
        lines = maps.read_text().splitlines()
    except OSError:
        return []
    files = (Path(line.split(maxsplit=5)[5]) for line in lines if line.count(" ") >= 5 and "/" in line)
    return sorted({path for path in files if is_openmp_runtime(path.name)})


def torch_runtime() -> Path | None:
    """The OpenMP runtime torch uses: the mapped one (torch is imported, so it is loaded;
    torch's own folder first), else one shipped in ``torch/lib``; None if torch has none."""
    mapped = loaded_runtimes()
    ours = [path for path in mapped if path.parent == TORCH_LIB]
    if ours or mapped:
        return (ours or mapped)[0]
    shipped = sorted(path for path in TORCH_LIB.glob("lib*") if is_openmp_runtime(path.name))
    return shipped[0] if shipped else None


@dataclass(frozen=True)
class OpenMPFlags:
    """Flags for OpenMP kernels: ``compile`` for the compile step, ``link`` for the link."""

    compile: tuple[str, ...]
    link: tuple[str, ...]
    runtime: str | None


# Without a runtime `#pragma omp parallel` is ignored (kernels run on the calling
# thread), but `#pragma omp simd` still vectorises reductions without -ffast-math.
SIMD_ONLY = OpenMPFlags(("-fopenmp-simd",), (), None)


def openmp_flags(runtime: Path | None) -> OpenMPFlags:
    """Flags that link ``runtime`` (torch's), or the compiler's own runtime when torch
    has none (then there is nothing to share, and the process has only that one)."""
    if runtime is None:
        return OpenMPFlags(("-fopenmp",), ("-fopenmp",), None)
    return OpenMPFlags(("-fopenmp",), (str(runtime), f"-Wl,-rpath,{runtime.parent}"), str(runtime))
