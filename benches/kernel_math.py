"""ns per element of fastdynamo_kernels.h's functions in a generated-kernel loop, against the
same loop calling std:: (scalar libm) and against eager torch, at one thread.

    PYTHONPATH=python python benches/kernel_math.py [--isa avx512|avx2|baseline] [--n 1000000]

Each row: `fd` is `#pragma omp simd` over out[i] = fd_f(a[i]) compiled as the CPU backend
compiles kernels; `std` the same loop with std::f (not vectorized: glibc's calls);
`torch` is torch.f(x, out=...) with torch.set_num_threads(1). Times are CPU time of this
thread (the machine's cores are shared), best of 7 runs of a few calls each.
"""
from __future__ import annotations

import argparse
import ctypes
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "cpp"))
from kernel_math_build import COMMON_FLAGS, HEADER_DIR, ISA_FLAGS  # noqa: E402

# name -> (fd expression, std expression, torch function, input range, C type)
ROWS = {
    "exp": ("fd_exp(a[i])", "std::exp(a[i])", torch.exp, (-10.0, 10.0), "float"),
    "tanh": ("fd_tanh(a[i])", "std::tanh(a[i])", torch.tanh, (-10.0, 10.0), "float"),
    "sigmoid": ("fd_sigmoid(a[i])", "1.0f / (1.0f + std::exp(-a[i]))", torch.sigmoid, (-10.0, 10.0), "float"),
    "erf": ("fd_erf(a[i])", "std::erf(a[i])", torch.erf, (-5.0, 5.0), "float"),
    "log": ("fd_log(a[i])", "std::log(a[i])", torch.log, (1e-3, 100.0), "float"),
    "exp2": ("fd_exp2(a[i])", "std::exp2(a[i])", torch.exp2, (-10.0, 10.0), "float"),
    "log2": ("fd_log2(a[i])", "std::log2(a[i])", torch.log2, (1e-3, 100.0), "float"),
    "sin": ("fd_sin(a[i])", "std::sin(a[i])", torch.sin, (-100.0, 100.0), "float"),
    "cos": ("fd_cos(a[i])", "std::cos(a[i])", torch.cos, (-100.0, 100.0), "float"),
    "exp f64": ("fd_exp(a[i])", "std::exp(a[i])", torch.exp, (-10.0, 10.0), "double"),
    "log f64": ("fd_log(a[i])", "std::log(a[i])", torch.log, (1e-3, 100.0), "double"),
    "sigmoid f64": ("fd_sigmoid(a[i])", "1.0 / (1.0 + std::exp(-a[i]))", torch.sigmoid, (-10.0, 10.0),
                    "double"),
    # fd_erf(double) is std::erf (scalar)
    "tanh f64": ("fd_tanh(a[i])", "std::tanh(a[i])", torch.tanh, (-10.0, 10.0), "double"),
    "erf f64": ("fd_erf(a[i])", "std::erf(a[i])", torch.erf, (-5.0, 5.0), "double"),
}
BINARY_ROWS = {
    "fmod": ("fd_fmod(a[i], b[i])", "std::fmod(a[i], b[i])", torch.fmod),
    "remainder": ("fd_remainder(a[i], b[i])", None, torch.remainder),
    "div_floor": ("fd_div_floor(a[i], b[i])", None,
                  lambda a, b, out: torch.div(a, b, rounding_mode="floor", out=out)),
}


def kernel_source() -> str:
    lines = ['#include "fastdynamo_kernels.h"']
    for i, (fd, std, _, _, ctype) in enumerate(ROWS.values()):
        for kind, expr in (("fd", fd), ("std", std)):
            lines += [f'extern "C" void {kind}_{i}(const {ctype}* a, {ctype}* out, int64_t n) {{',
                      "#pragma omp simd", f"  for (int64_t i = 0; i < n; ++i) out[i] = {expr};", "}"]
    for i, (fd, std, _) in enumerate(BINARY_ROWS.values()):
        for kind, expr in (("fd", fd), ("std", std)):
            if expr is not None:
                lines += [f'extern "C" void {kind}_b{i}(const float* a, const float* b, float* out, int64_t n) {{',
                          "#pragma omp simd", f"  for (int64_t i = 0; i < n; ++i) out[i] = {expr};", "}"]
    return "\n".join(lines) + "\n"


def build(isa: str, workdir: Path) -> ctypes.CDLL:
    src, lib = workdir / "bench_kernels.cpp", workdir / f"bench_kernels_{isa}.so"
    src.write_text(kernel_source())
    subprocess.run(["g++", *COMMON_FLAGS, *ISA_FLAGS[isa], "-I", str(HEADER_DIR), "-shared", "-fPIC",
                    "-o", str(lib), str(src)], check=True)
    return ctypes.CDLL(str(lib))


def ns_per_element(call, n: int, calls: int = 5, runs: int = 7) -> float:
    call()
    best = float("inf")
    for _ in range(runs):
        start = time.thread_time_ns()
        for _ in range(calls):
            call()
        best = min(best, (time.thread_time_ns() - start) / calls)
    return best / n


def c_call(lib: ctypes.CDLL, name: str, *tensors: torch.Tensor):
    fn = getattr(lib, name)
    args = [ctypes.c_void_p(t.data_ptr()) for t in tensors] + [ctypes.c_int64(tensors[0].numel())]
    return lambda: fn(*args)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--isa", default="avx512", choices=sorted(ISA_FLAGS))
    parser.add_argument("--n", type=int, default=1_000_000)
    args = parser.parse_args()
    torch.set_num_threads(1)
    n = args.n
    generator = torch.Generator().manual_seed(0)
    with tempfile.TemporaryDirectory() as tmp:
        lib = build(args.isa, Path(tmp))
        print(f"ns/element, n={n}, one thread, {args.isa}")
        print(f"{'function':12s} {'fd':>7s} {'std':>7s} {'torch':>7s}")
        for i, (name, (_, _, torch_fn, (low, high), ctype)) in enumerate(ROWS.items()):
            dtype = torch.float32 if ctype == "float" else torch.float64
            x = torch.rand(n, generator=generator, dtype=dtype) * (high - low) + low
            out = torch.empty_like(x)
            fd = ns_per_element(c_call(lib, f"fd_{i}", x, out), n)
            std = ns_per_element(c_call(lib, f"std_{i}", x, out), n)
            eager = ns_per_element(lambda: torch_fn(x, out=out), n)  # noqa: B023
            print(f"{name:12s} {fd:7.3f} {std:7.3f} {eager:7.3f}")
        a = torch.rand(n, generator=generator) * 2000 - 1000
        b = torch.rand(n, generator=generator) * 20 + 0.1
        out = torch.empty(n)
        for i, (name, (_, std_expr, torch_fn)) in enumerate(BINARY_ROWS.items()):
            fd = ns_per_element(c_call(lib, f"fd_b{i}", a, b, out), n)
            std = ns_per_element(c_call(lib, f"std_b{i}", a, b, out), n) if std_expr else float("nan")
            eager = ns_per_element(lambda: torch_fn(a, b, out=out), n)  # noqa: B023
            print(f"{name:12s} {fd:7.3f} {std:7.3f} {eager:7.3f}")


if __name__ == "__main__":
    main()
