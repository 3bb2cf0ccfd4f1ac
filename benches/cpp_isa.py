"""Which vector level C++ kernels default to: the same loops built at each level, timed
at one thread, with eager torch (one thread) as the baseline in the same run.

    PYTHONPATH=python python benches/cpp_isa.py [--quick] [--cxx clang++]

Two loops, each over 10^3 .. 10^7 float32 elements, timed inside the library
(CLOCK_MONOTONIC, best of several batches, so no ctypes call cost is counted):
  pointwise  out = leaky_relu(a * b + c): a fused loop, ``#pragma omp simd``, __restrict__
  rowsum     out[r] = sum of row r of a (rows of 1000): ``#pragma omp simd reduction``
Variants: the toolchain's flags with the level ``none`` (SSE2), ``avx2``, ``avx512``
with ``-mprefer-vector-width=256`` and with ``=512`` (GCC 12's and Clang 14's default for
``-mavx512f`` without ``-mtune``). Also prints the one-time cost of compiling a ~100-line
kernel translation unit with and without OpenMP.
"""
from __future__ import annotations

import argparse
import ctypes
import os
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))

import torch  # noqa: E402

from fastdynamo.backends.cpp import binary_cache  # noqa: E402
from fastdynamo.backends.cpp.isa import VectorLevel  # noqa: E402
from fastdynamo.backends.cpp.openmp import SIMD_ONLY  # noqa: E402
from fastdynamo.backends.cpp.toolchain import Toolchain, assemble, discover  # noqa: E402

SOURCE = r"""
#include <time.h>
static double now() { timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }

__attribute__((noinline)) static void pointwise(const float* __restrict__ a, const float* __restrict__ b,
                                                const float* __restrict__ c, float* __restrict__ out, long n) {
  #pragma omp simd
  for (long i = 0; i < n; ++i) { float y = a[i] * b[i] + c[i]; out[i] = y > 0.0f ? y : 0.01f * y; }
}

__attribute__((noinline)) static void rowsum(const float* __restrict__ a, float* __restrict__ out, long rows, long cols) {
  for (long r = 0; r < rows; ++r) {
    float acc = 0.0f;
    #pragma omp simd reduction(+: acc)
    for (long k = 0; k < cols; ++k) acc += a[r * cols + k];
    out[r] = acc;
  }
}

// Seconds per call: the best of `batches` batches of `reps` calls.
extern "C" double time_pointwise(const float* a, const float* b, const float* c, float* out, long n,
                                 long reps, int batches) {
  double best = 1e30;
  for (int s = 0; s < batches; ++s) {
    double t = now();
    for (long r = 0; r < reps; ++r) pointwise(a, b, c, out, n);
    t = (now() - t) / reps;
    best = t < best ? t : best;
  }
  return best;
}

extern "C" double time_rowsum(const float* a, float* out, long rows, long cols, long reps, int batches) {
  double best = 1e30;
  for (int s = 0; s < batches; ++s) {
    double t = now();
    for (long r = 0; r < reps; ++r) rowsum(a, out, rows, cols);
    t = (now() - t) / reps;
    best = t < best ? t : best;
  }
  return best;
}
"""

COLS = 1000


def variants(base: Toolchain) -> dict[str, Toolchain]:
    """The toolchains to compare: ``base``'s compiler at each level, one thread (no
    OpenMP runtime; ``#pragma omp simd`` still applies)."""
    def at(level: VectorLevel, width: str | None = None) -> Toolchain:
        chain = assemble(base.compiler, level, SIMD_ONLY)
        flags = [flag for flag in chain.compile_flags if not flag.startswith("-mprefer-vector-width")]
        return replace(chain, compile_flags=(*flags, *([f"-mprefer-vector-width={width}"] if width else [])))

    found = {"none": at(VectorLevel.NONE), "avx2": at(VectorLevel.AVX2)}
    if base.isa is VectorLevel.AVX512:
        found["avx512/256"] = at(VectorLevel.AVX512, "256")
        found["avx512/512"] = at(VectorLevel.AVX512, "512")
    return found


def reps_for(elements: int) -> int:
    return max(3, 30_000_000 // max(elements, 1))


def pointer(tensor: torch.Tensor) -> ctypes.c_void_p:
    return ctypes.c_void_p(tensor.data_ptr())


def eager_seconds(fn, elements: int, batches: int) -> float:
    reps = max(3, reps_for(elements) // 10)
    best = float("inf")
    for _ in range(batches):
        started = time.perf_counter()
        for _ in range(reps):
            fn()
        best = min(best, (time.perf_counter() - started) / reps)
    return best


def loops(elements: int, batches: int) -> dict[str, tuple]:
    """Per loop: (timed call of a library, the eager baseline) over fresh inputs."""
    a, b, c = (torch.randn(elements) for _ in range(3))
    out = torch.empty(elements)
    rows = max(1, elements // COLS)
    return {
        "pointwise": (lambda lib: lib.time_pointwise(pointer(a), pointer(b), pointer(c), pointer(out),
                                                     elements, reps_for(elements), batches),
                      lambda: torch.nn.functional.leaky_relu(a * b + c, 0.01)),
        "rowsum": (lambda lib: lib.time_rowsum(pointer(a), pointer(out), rows, COLS,
                                               reps_for(rows * COLS), batches),
                   lambda: a[:rows * COLS].view(rows, COLS).sum(1)),
    }


def measure(libraries: dict[str, ctypes.CDLL], sizes: list[int], batches: int) -> None:
    print(f"{'loop':10} {'elements':>9} {'eager':>10} " + " ".join(f"{name:>13}" for name in libraries)
          + "   (ns per call, speed-up over none)")
    for elements in sizes:
        for loop, (timed, eager) in loops(elements, batches).items():
            seconds = {name: timed(lib) for name, lib in libraries.items()}
            eager_ns = eager_seconds(eager, elements, batches) * 1e9
            cells = " ".join(f"{seconds[name] * 1e9:>8.0f} {seconds['none'] / seconds[name]:.1f}x"
                             for name in libraries)
            print(f"{loop:10} {elements:>9} {eager_ns:>10.0f} {cells}")


KERNEL_TU = "\n".join(
    ["#include <cmath>", "#include <cstdint>"]
    + [f"""extern "C" void kernel{k}(const float* __restrict__ in0, const float* __restrict__ in1,
                      float* __restrict__ out0, int64_t rows, int64_t cols, int threads) {{
  #pragma omp parallel for num_threads(threads)
  for (int64_t r = 0; r < rows; ++r) {{
    float acc = 0.0f;
    #pragma omp simd reduction(+: acc)
    for (int64_t c = 0; c < cols; ++c) {{
      float v = in0[r * cols + c] * in1[c] + {k}.5f;
      acc += v > 0.0f ? v : 0.0f;
    }}
    #pragma omp simd
    for (int64_t c = 0; c < cols; ++c) out0[r * cols + c] = std::sqrt(std::fabs(in0[r * cols + c])) / (acc + 1.0f);
  }}
}}""" for k in range(7)])


def compile_times(base: Toolchain, repeats: int) -> None:
    print(f"\ncompile of a {KERNEL_TU.count(chr(10)) + 1}-line kernel TU at -O3, {base.compiler.version}:")
    plain = assemble(base.compiler, base.isa, SIMD_ONLY)
    for name, chain in (("with OpenMP" if base.openmp else "as discovered", base), ("without OpenMP", plain)):
        with tempfile.TemporaryDirectory() as directory:
            times = []
            for repeat in range(repeats):
                os.environ["FASTDYNAMO_CACHE_DIR"] = f"{directory}/{repeat}"
                started = time.perf_counter()
                binary_cache.build(KERNEL_TU, chain)
                times.append(time.perf_counter() - started)
        print(f"  {name:15} best {min(times):.3f} s, median {sorted(times)[len(times) // 2]:.3f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer sizes and batches")
    parser.add_argument("--cxx", help="the compiler ($CXX for this run)")
    options = parser.parse_args()
    if options.cxx:
        os.environ["CXX"] = options.cxx
    torch.set_num_threads(1)
    base = discover()
    print(f"{base.compiler.version}; detected level {base.isa.value}; torch {torch.__version__}, 1 thread")
    with tempfile.TemporaryDirectory() as directory:
        os.environ["FASTDYNAMO_CACHE_DIR"] = directory
        libraries = {name: binary_cache.load(SOURCE, chain) for name, chain in variants(base).items()}
        for library in libraries.values():
            library.time_pointwise.restype = library.time_rowsum.restype = ctypes.c_double
            library.time_pointwise.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_long] * 2 + [ctypes.c_int]
            library.time_rowsum.argtypes = [ctypes.c_void_p] * 2 + [ctypes.c_long] * 3 + [ctypes.c_int]
        sizes = [10**3, 10**5, 10**7] if options.quick else [10**3, 10**4, 10**5, 10**6, 10**7]
        measure(libraries, sizes, 3 if options.quick else 7)
    compile_times(base, 3 if options.quick else 5)


if __name__ == "__main__":
    main()
