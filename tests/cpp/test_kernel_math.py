"""fastdynamo_kernels.h against eager: the transcendentals' accuracy (ulp distance to the
correctly rounded result and to torch's own result) and special values, over 10^6 random
floats of every exponent plus dense ranges; and which loops gcc vectorizes, per ISA.

The exact semantics (division, maximum/minimum/clamp, half types, casts) are in
test_kernel_semantics.py. The loops are the shape generated kernels have; see
kernel_math_build.py.
"""
from __future__ import annotations

import math
import re
import subprocess

import mpmath
import pytest
import torch
from kernel_math_build import (
    DOUBLE_VECTORIZED,
    HEADER_DIR,
    KERNELS,
    TRANSCENDENTALS,
    VECTOR_ISAS,
    WARNING_FLAGS,
    source,
    vectorized_kernels,
)
from kernel_math_values import (
    SPECIAL_F32,
    f32,
    random_f32_bits,
    random_f64_bits,
    same_bits_or_both_nan,
    ulp_distance,
    uniform,
    worst,
)

# Where each function's values are interesting (dense uniform samples, on top of the random
# bit patterns that cover every exponent).
DENSE_RANGES = {
    "exp": (-105.0, 90.0), "exp2": (-152.0, 129.0), "log": (0.0, 4.0), "log2": (0.0, 4.0),
    "sigmoid": (-100.0, 30.0), "tanh": (-10.0, 10.0), "erf": (-5.0, 5.0),
    "sin": (-200.0, 200.0), "cos": (-200.0, 200.0),
}

# Results that must be torch's bit for bit (exact results, overflow, underflow, NaN).
EXACT_F32 = {
    "exp": [0.0, -0.0, math.inf, -math.inf, math.nan, 89.0, 88.72283935546875, -104.0, -1e30],
    "exp2": [0.0, -0.0, math.inf, -math.inf, math.nan, 128.0, -151.0, -150.0,
             *[float(k) for k in range(-149, 128)]],
    "log": [0.0, -0.0, 1.0, -1.0, math.inf, -math.inf, math.nan, -2.0 ** -149],
    "log2": [0.0, -0.0, -1.0, math.inf, -math.inf, math.nan, *[2.0 ** k for k in range(-149, 128)]],
    "sigmoid": [0.0, -0.0, math.inf, -math.inf, math.nan, -89.0, -88.7229, -1e30, 30.0, 1e30],
    "tanh": [0.0, -0.0, math.inf, -math.inf, math.nan, 2.0 ** -149, -2.0 ** -149, 10.0, -20.0, 1e30],
    "erf": [0.0, -0.0, math.inf, -math.inf, math.nan, 2.0 ** -149, 4.0, -4.0, 1e30],
    "sin": [0.0, -0.0, math.inf, -math.inf, math.nan, 2.0 ** -149, -2.0 ** -149, 1e-30],
    "cos": [0.0, -0.0, math.inf, -math.inf, math.nan, 2.0 ** -149, -1e-30],
}


def torch_f32(fn: str, x: torch.Tensor) -> torch.Tensor:
    return getattr(torch, fn)(x)


# ATen's sigmoid, 1 / (1 + exp(-x)) in float, is 0 from here down (exp(-x) overflows).
SIGMOID_ZERO_FROM = -88.72283935546875


def correctly_rounded_f32(fn: str, x: torch.Tensor) -> torch.Tensor:
    """The float32 nearest the true value: torch in float64 (<= 1 ulp of double), rounded
    once; for sigmoid, with ATen's zero region."""
    reference = getattr(torch, fn)(x.double()).float()
    if fn == "sigmoid":
        reference = torch.where(x <= SIGMOID_ZERO_FROM, 0.0, reference)
    return reference


@pytest.fixture(scope="module")
def f32_inputs() -> dict[str, torch.Tensor]:
    """Per function: 2^20 random bit patterns, 2^18 dense values and the special values."""
    common = random_f32_bits(1 << 20, seed=1)
    return {fn: torch.cat([common, uniform(1 << 18, *DENSE_RANGES[fn], seed=2), f32(SPECIAL_F32)])
            for fn in TRANSCENDENTALS}


# Max ulp distance to the correctly rounded value (with fma hardware, without), and to
# eager's float32 result. Eager's exp, log, log2, tanh, erf, sin and cos are MKL's (<= 1 ulp),
# its exp2 Sleef's (<= 1 ulp); its sigmoid, like ours, is 1 / (1 + exp(-x)) in float, <= 2 ulp
# from the true value, and the rounding of 1 + exp(-x) turns a 1-ulp difference between two
# exps into up to 4 ulp between the sigmoids (for 1 input in 10^5).
MAX_ULP = {fn: {"host": 1, "baseline": 1, "eager": 2} for fn in TRANSCENDENTALS} | {
    "sigmoid": {"host": 2, "baseline": 2, "eager": 4},
    "erf": {"host": 1, "baseline": 2, "eager": 2},
}


@pytest.mark.parametrize("variant", ["host", "baseline"])
@pytest.mark.parametrize("fn", TRANSCENDENTALS)
def test_float_accuracy(builds, f32_inputs, fn, variant):
    """Every float32 function within MAX_ULP of the correctly rounded result and of eager,
    with the fma variant (this machine's ISA) and without (baseline x86-64)."""
    lib = builds.libraries[builds.host if variant == "host" else "baseline"]
    x = f32_inputs[fn]
    got = lib.call(f"f32_{fn}", x)
    reference = correctly_rounded_f32(fn, x)
    assert int(ulp_distance(got, reference).max()) <= MAX_ULP[fn][variant], worst(x, got, reference)
    eager = torch_f32(fn, x)
    assert int(ulp_distance(got, eager).max()) <= MAX_ULP[fn]["eager"], worst(x, got, eager)


def test_sigmoid_zero_region_as_eager(lib):
    """Below x = -88.7228394 eager's sigmoid is 0 (the true value is a denormal down to
    x = -103.3); from the next float up, both are the true value's denormal."""
    below = torch.cat([uniform(4096, -1e4, SIGMOID_ZERO_FROM, seed=5), f32([SIGMOID_ZERO_FROM])])
    assert torch.equal(lib.call("f32_sigmoid", below), torch.zeros_like(below))
    assert torch.equal(torch.sigmoid(below), torch.zeros_like(below))
    above = torch.nextafter(f32([SIGMOID_ZERO_FROM]), f32([0.0]))
    got = lib.call("f32_sigmoid", above)
    assert 0 < got.item() < 2.0 ** -126
    assert int(ulp_distance(got, torch.sigmoid(above)).max()) <= 1


@pytest.mark.parametrize("fn", TRANSCENDENTALS)
def test_float_special_values_as_eager(lib, fn):
    """Zeros, infinities, NaN, exact results, overflow and underflow: eager's bits."""
    x = f32(EXACT_F32[fn])
    got, eager = lib.call(f"f32_{fn}", x), torch_f32(fn, x)
    assert bool(same_bits_or_both_nan(got, eager).all()), worst(x, got, eager)


def test_sin_cos_huge_arguments(lib):
    """The reduction is exact over the whole float range: every exponent from 2^-1 to 2^127,
    and the float nearest a multiple of pi/2 (16367173 2^72)."""
    exponents = (torch.arange(1 << 16) % 129 - 1).float()
    x = torch.cat([f32([16367173 * 2.0 ** 72, -16367173 * 2.0 ** 72]),
                   uniform(1 << 16, -2.0, 2.0, seed=6) * torch.exp2(exponents)])
    for fn in ("sin", "cos"):
        got = lib.call(f"f32_{fn}", x)
        reference = correctly_rounded_f32(fn, x)
        assert int(ulp_distance(got, reference).max()) <= 1, worst(x, got, reference)


# --------------------------------------------------------------------------- double
MPMATH_F64 = {
    "exp": mpmath.exp, "exp2": lambda v: mpmath.power(2, v), "log": mpmath.log,
    "log2": lambda v: mpmath.log(v, 2), "tanh": mpmath.tanh,
}
DENSE_RANGES_F64 = {"exp": (-746.0, 710.0), "exp2": (-1076.0, 1025.0), "log": (0.0, 4.0),
                    "log2": (0.0, 4.0), "tanh": (-3.0, 3.0)}
MAX_ULP_F64 = {"exp": 1, "exp2": 1, "log": 1, "log2": 1, "tanh": 2}


def mpmath_f64(fn: str, x: torch.Tensor) -> torch.Tensor:
    """Correctly rounded double results, from mpmath at 30 digits (NaN outside the domain)."""
    function = MPMATH_F64[fn]
    out = []
    with mpmath.workdps(30):
        for v in x.tolist():
            negative_log = v < 0 and fn.startswith("log")
            out.append(math.nan if negative_log else float(function(mpmath.mpf(v))))
    return torch.tensor(out, dtype=torch.float64)


@pytest.mark.parametrize("variant", ["host", "baseline"])
@pytest.mark.parametrize("fn", sorted(MPMATH_F64))
def test_double_accuracy(builds, fn, variant):
    """The vectorized double functions are within MAX_ULP_F64 of the correctly rounded result."""
    lib = builds.libraries[builds.host if variant == "host" else "baseline"]
    x = torch.cat([random_f64_bits(3000, seed=7),
                   uniform(3000, *DENSE_RANGES_F64[fn], seed=8, dtype=torch.float64)])
    got = lib.call(f"f64_{fn}", x)
    reference = mpmath_f64(fn, x)
    assert int(ulp_distance(got, reference).max()) <= MAX_ULP_F64[fn], worst(x, got, reference)


F64_SPECIAL = [0.0, -0.0, 1.0, -1.0, math.inf, -math.inf, math.nan, 2.0 ** -1074, -2.0 ** -1074,
               2.0 ** -1022, 709.78, 709.79, -745.13, -745.14, -746.0, 1024.0, -1074.0, -1075.0,
               -1076.0, 1e300, -1e300]


@pytest.mark.parametrize("fn", TRANSCENDENTALS)
def test_double_against_eager(lib, fn):
    """Double results within 2 ulp of eager's (1 for each side), special values as eager."""
    x = torch.cat([random_f64_bits(1 << 16, seed=9), torch.tensor(F64_SPECIAL, dtype=torch.float64)])
    if fn in ("sin", "cos"):
        x = x[x.abs() < 1e6]  # std::sin and MKL agree closely there; beyond, both are correct
    got, eager = lib.call(f"f64_{fn}", x), getattr(torch, fn)(x)
    assert int(ulp_distance(got, eager).max()) <= 2, worst(x, got, eager)


# --------------------------------------------------------------------------- vectorization
@pytest.mark.parametrize("isa", sorted(VECTOR_ISAS))
def test_loops_vectorize(builds, isa):
    """gcc vectorizes exactly the loops the header promises: every float function, the
    double ones but erf/sin/cos and fmod/remainder/div_floor (std:: calls), int32
    division (through double), not int64 division; float -> int64 needs AVX-512."""
    _, loop_lines = source()
    vectorized = vectorized_kernels(builds.reports[isa], loop_lines, "kernel_math_test.cpp")
    expected = {k.name for k in KERNELS if isa in k.vectorized_on}
    assert vectorized == expected, (sorted(expected - vectorized), sorted(vectorized - expected))
    assert {f"f32_{fn}" for fn in TRANSCENDENTALS} <= vectorized
    assert {f"f64_{fn}" for fn in DOUBLE_VECTORIZED} <= vectorized


def test_header_is_self_contained():
    """Only these standard headers (ATen's would make every kernel compile 10x slower), and it
    compiles alone, warning-free."""
    text = (HEADER_DIR / "fastdynamo_kernels.h").read_text()
    includes = set(re.findall(r"^#include <([a-z]+)>", text, flags=re.M))
    assert includes <= {"cstdint", "cmath", "cstring", "limits", "algorithm"}
    assert not re.findall(r'^#include "', text, flags=re.M)
    subprocess.run(["g++", "-std=c++17", *WARNING_FLAGS, "-Wpedantic", "-fsyntax-only", "-x", "c++",
                    "-I", str(HEADER_DIR), "-"], input='#include "fastdynamo_kernels.h"\n', text=True,
                   check=True)
