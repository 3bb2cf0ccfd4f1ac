"""Inputs and measures for tests/cpp/test_kernel_math.py: random floats over the whole
exponent range, special values, and ulp distances computed on the bits."""
from __future__ import annotations

import math

import torch

F32_MIN_DENORMAL = 2.0 ** -149
F32_MAX = float(torch.finfo(torch.float32).max)

# Special values of every float function: signed zeros and infinities, NaN, the ends of the
# denormal and normal ranges, and the thresholds the header's algorithms switch at.
SPECIAL_F32 = [
    0.0, -0.0, math.inf, -math.inf, math.nan, 1.0, -1.0, 0.5, -0.5, 2.0,
    F32_MIN_DENORMAL, -F32_MIN_DENORMAL, 2.0 ** -126, 2.0 ** -126 - 2.0 ** -149, F32_MAX, -F32_MAX,
    88.72283935546875, 88.72283172607422, 88.7228, -87.33654, -87.33655, -103.27892,
    -103.97208, -103.97209, -104.0, -150.0, -149.0, -149.5, -126.0, 127.0, 127.99999, 128.0,
    math.pi / 4, 0.7853981, 0.7853982, math.pi / 2, math.pi, 1e-30, -1e-30, 1e10, 3e38,
    2.0 ** 23, 2.0 ** 24, 0.55, 0.5499999, 9.01, 10.0, 3.925, 3.92, 1.0000001, 0.99999994,
    -0.99999994, 1e-7, 1e-20, 20.0, -20.0, 100.0, -100.0, 1e5, 12345.678, 16367173 * 2.0 ** 72,
]


def f32(values: list[float]) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float32)


def random_f32_bits(n: int, seed: int) -> torch.Tensor:
    """n float32 of uniformly random bits (every exponent equally likely), NaNs and infs
    dropped."""
    generator = torch.Generator().manual_seed(seed)
    bits = torch.randint(-2 ** 31, 2 ** 31, (n,), generator=generator, dtype=torch.int64)
    x = bits.to(torch.int32).view(torch.float32)
    return x[torch.isfinite(x)]


def random_f64_bits(n: int, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    bits = torch.randint(-2 ** 63, 2 ** 63 - 1, (n,), generator=generator, dtype=torch.int64)
    x = bits.view(torch.float64)
    return x[torch.isfinite(x)]


def uniform(n: int, low: float, high: float, seed: int, dtype=torch.float32) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.rand(n, generator=generator, dtype=torch.float64).mul(high - low).add(low).to(dtype)


def _ordered(t: torch.Tensor) -> torch.Tensor:
    """The bits as integers that order like the floats (-0 and +0 one apart)."""
    if t.dtype == torch.float32:
        i = t.view(torch.int32).to(torch.int64)
        return torch.where(i < 0, -(i & 0x7FFFFFFF) - 1, i)
    i = t.view(torch.int64)
    return torch.where(i < 0, -(i & 0x7FFFFFFFFFFFFFFF) - 1, i)


def ulp_distance(actual: torch.Tensor, expected: torch.Tensor) -> torch.Tensor:
    """Per element: how many representable values apart (0 for two NaNs, 2^60 for a NaN
    against a number). +0 and -0 count as one apart, so a signed-zero slip shows."""
    d = (_ordered(actual) - _ordered(expected)).abs()
    nan_a, nan_e = torch.isnan(actual), torch.isnan(expected)
    d = torch.where(nan_a & nan_e, 0, d)
    return torch.where(nan_a != nan_e, 2 ** 60, d)


def same_bits_or_both_nan(actual: torch.Tensor, expected: torch.Tensor) -> torch.Tensor:
    """Per element: identical bits, or both NaN (NaN payloads are not compared)."""
    return (ulp_distance(actual, expected) == 0)


def worst(x: torch.Tensor, actual: torch.Tensor, expected: torch.Tensor) -> str:
    """The input with the largest ulp distance, for an assertion message."""
    d = ulp_distance(actual, expected)
    i = int(d.argmax())
    return f"x={x[i].tolist()!r}: got {actual[i].item()!r}, want {expected[i].item()!r} ({int(d[i])} ulp)"
