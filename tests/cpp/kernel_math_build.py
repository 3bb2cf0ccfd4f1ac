"""Builds the test library of tests/cpp/test_kernel_math.py: one vectorizable loop per function
of fastdynamo_kernels.h, compiled with g++ into a shared library loaded with ctypes, and the
compiler's report of which loops it vectorized.

Each loop is the shape the code generator emits::

    extern "C" void f32_exp(const float* a, float* out, int64_t n) {
    #pragma omp simd
      for (int64_t i = 0; i < n; ++i) out[i] = fd_exp(a[i]);
    }
"""
from __future__ import annotations

import ctypes
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import torch

import fastdynamo

HEADER_DIR = Path(fastdynamo.__file__).parent / "backends" / "cpp" / "include"

# The flags of a generated kernel; never -ffast-math. -ffp-contract=off: see the header.
COMMON_FLAGS = ("-O3", "-std=c++17", "-fno-math-errno", "-fno-trapping-math", "-ffp-contract=off",
                "-fopenmp")
# The test library is compiled warning-free (generated kernels need not be).
WARNING_FLAGS = ("-Wall", "-Wextra", "-Wconversion", "-Wshadow", "-Werror")
ISA_FLAGS = {
    "avx512": ("-mavx512f", "-mavx512dq", "-mavx512vl", "-mavx512bw", "-mfma", "-mf16c"),
    "avx2": ("-mavx2", "-mfma", "-mf16c"),
    "baseline": (),  # x86-64: SSE2, no fma (the header's multiply-add variant)
}

C_TYPES = {
    "float": torch.float32, "double": torch.float64, "int32_t": torch.int32,
    "int64_t": torch.int64, "int16_t": torch.int16, "int8_t": torch.int8,
    "uint8_t": torch.uint8, "fd_half": torch.int16, "fd_bfloat16": torch.int16,
}


VECTOR_ISAS = frozenset({"avx2", "avx512"})
SCALAR = frozenset()


@dataclass(frozen=True)
class Kernel:
    """``out[i] = expr`` over inputs ``a``, ``b``, ``c`` of types ``inputs``; ``vectorized_on``:
    the ISAs on which gcc vectorizes its loop (none: the function calls libm)."""

    name: str
    inputs: tuple[str, ...]
    out: str
    expr: str
    vectorized_on: frozenset[str] = VECTOR_ISAS


def _unary(prefix: str, ctype: str, functions: dict[str, bool]) -> list[Kernel]:
    return [Kernel(f"{prefix}_{fn}", (ctype,), ctype, f"fd_{fn}(a[i])",
                   VECTOR_ISAS if vec else SCALAR) for fn, vec in functions.items()]


def _binary(prefix: str, ctype: str, functions: dict[str, bool]) -> list[Kernel]:
    return [Kernel(f"{prefix}_{fn}", (ctype, ctype), ctype, f"fd_{fn}(a[i], b[i])",
                   VECTOR_ISAS if vec else SCALAR) for fn, vec in functions.items()]


TRANSCENDENTALS = ("exp", "exp2", "log", "log2", "sigmoid", "tanh", "erf", "sin", "cos")
# double erf/sin/cos call std:: (scalar); everything else vectorizes
DOUBLE_VECTORIZED = {"exp", "exp2", "log", "log2", "sigmoid", "tanh"}
COMPARISONS = ("maximum", "minimum")
DIVISIONS = ("fmod", "remainder", "div_floor", "div_trunc")

KERNELS: list[Kernel] = [
    *_unary("f32", "float", {fn: True for fn in (*TRANSCENDENTALS, "relu")}),
    *_unary("f64", "double", {**{fn: fn in DOUBLE_VECTORIZED for fn in TRANSCENDENTALS}, "relu": True}),
    *_binary("f32", "float", {fn: True for fn in (*COMPARISONS, *DIVISIONS)}),
    *_binary("f64", "double", {**{fn: True for fn in COMPARISONS},
                               **{fn: fn == "div_trunc" for fn in DIVISIONS}}),
    *_binary("i32", "int32_t", {fn: True for fn in (*COMPARISONS, *DIVISIONS)}),
    *_binary("i64", "int64_t", {**{fn: True for fn in COMPARISONS},
                                **{fn: False for fn in DIVISIONS}}),
    Kernel("f32_clamp", ("float", "float", "float"), "float", "fd_clamp(a[i], b[0], c[0])"),
    Kernel("f32_clamp_min", ("float", "float"), "float", "fd_clamp_min(a[i], b[0])"),
    Kernel("f32_clamp_max", ("float", "float"), "float", "fd_clamp_max(a[i], b[0])"),
    Kernel("f32_clamp_tensor_bounds", ("float", "float", "float"), "float",
           "fd_clamp_tensor_bounds(a[i], b[i], c[i])"),
    Kernel("half_to_f32", ("fd_half",), "float", "fd_to_float(a[i])"),
    Kernel("f32_to_half", ("float",), "fd_half", "fd_float_to_half(a[i])"),
    Kernel("bf16_to_f32", ("fd_bfloat16",), "float", "fd_to_float(a[i])"),
    Kernel("f32_to_bf16", ("float",), "fd_bfloat16", "fd_float_to_bfloat16(a[i])"),
    Kernel("f32_to_bool", ("float",), "uint8_t", "fd_bool_store(fd_to_bool(a[i]))"),
    # int -> float is a plain cast (round to nearest even), as in ATen
    Kernel("i32_to_f32", ("int32_t",), "float", "static_cast<float>(a[i])"),
    Kernel("i64_to_f32", ("int64_t",), "float", "static_cast<float>(a[i])",
           vectorized_on=frozenset({"avx512"})),
    Kernel("i64_to_f64", ("int64_t",), "double", "static_cast<double>(a[i])",
           vectorized_on=frozenset({"avx512"})),
    Kernel("bool_to_f32", ("uint8_t",), "float", "fd_bool_load(a[i]) ? 1.0f : 0.0f"),
    *[Kernel(f"{src}_to_{dst}", (ctype,), f"{dst}_t", f"fd_float_to_{dst}(a[i])",
             # AVX2 has no float -> int64 conversion (double -> uint8 goes through int64)
             vectorized_on=frozenset({"avx512"})
             if dst == "int64" or (src, dst) == ("f64", "uint8") else VECTOR_ISAS)
      for src, ctype in (("f32", "float"), ("f64", "double"))
      for dst in ("int32", "int64", "int16", "int8", "uint8")],
]
KERNELS_BY_NAME = {k.name: k for k in KERNELS}


def source() -> tuple[str, dict[int, str]]:
    """The test TU, and the line of each kernel's loop (what -fopt-info reports)."""
    lines = ['#include "fastdynamo_kernels.h"', ""]
    loop_lines: dict[int, str] = {}
    for k in KERNELS:
        params = ", ".join(f"const {t}* {v}" for t, v in zip(k.inputs, "abc", strict=False))
        lines.append(f'extern "C" void {k.name}({params}, {k.out}* out, int64_t n) {{')
        lines.append("#pragma omp simd")
        loop_lines[len(lines) + 1] = k.name
        lines.append(f"  for (int64_t i = 0; i < n; ++i) out[i] = {k.expr};")
        lines.append("}")
    return "\n".join(lines) + "\n", loop_lines


def compile_command(src: Path, out: Path, isa: str, shared: bool) -> list[str]:
    target = ["-shared", "-fPIC", "-o", str(out)] if shared else ["-S", "-o", str(out)]
    return ["g++", *COMMON_FLAGS, *ISA_FLAGS[isa], *WARNING_FLAGS, "-I", str(HEADER_DIR),
            "-fopt-info-vec-optimized", str(src), *target]


def vectorized_kernels(report: str, loop_lines: dict[int, str], src_name: str) -> set[str]:
    """Kernels whose loop -fopt-info-vec-optimized reports as vectorized."""
    pattern = re.compile(rf"{re.escape(src_name)}:(\d+):\d+: optimized: loop vectorized")
    return {loop_lines[int(m.group(1))] for m in pattern.finditer(report)
            if int(m.group(1)) in loop_lines}


class KernelLibrary:
    """A compiled test library: ``lib.call(name, *inputs)`` runs a kernel over tensors."""

    def __init__(self, path: Path):
        self._lib = ctypes.CDLL(str(path))

    def call(self, name: str, *inputs: torch.Tensor) -> torch.Tensor:
        kernel = KERNELS_BY_NAME[name]
        args = [t.contiguous() for t in inputs]
        for t, ctype in zip(args, kernel.inputs, strict=True):
            assert t.dtype == C_TYPES[ctype], (name, t.dtype, ctype)
        n = args[0].numel()
        out = torch.empty(n, dtype=C_TYPES[kernel.out])
        fn = getattr(self._lib, name)
        fn.restype = None
        fn(*[ctypes.c_void_p(t.data_ptr()) for t in args], ctypes.c_void_p(out.data_ptr()),
           ctypes.c_int64(n))
        return out


def start_compile(workdir: Path, isa: str, shared: bool) -> tuple[subprocess.Popen, Path]:
    """Starts g++ on the test TU (written to workdir) for one ISA; returns the process and
    its output path. Compiles run in parallel; ``finish`` waits for one."""
    src = workdir / "kernel_math_test.cpp"
    if not src.exists():
        src.write_text(source()[0])
    out = workdir / (f"kernel_math_{isa}.so" if shared else f"kernel_math_{isa}.s")
    proc = subprocess.Popen(compile_command(src, out, isa, shared), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    return proc, out


def finish(proc: subprocess.Popen) -> str:
    report, _ = proc.communicate()
    assert proc.returncode == 0, report[-4000:]
    return report
