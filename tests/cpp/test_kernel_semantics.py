"""fastdynamo_kernels.h's exact semantics against eager, bit for bit: division (floor, trunc,
remainder, fmod; floats and ints), maximum/minimum/clamp/relu with NaN and signed zeros,
float16/bfloat16 conversions (all 65536 bit patterns each way), bool, float -> int casts.

Eager runs on lengths that are multiples of 64 so that every element goes through ATen's
vector path (the tail of a tensor takes the scalar path, which differs for signed zeros, see
the header's "Maximum, minimum, clamp").
"""
from __future__ import annotations

import itertools
import math

import pytest
import torch
from kernel_math_values import (
    F32_MAX,
    F32_MIN_DENORMAL,
    f32,
    random_f32_bits,
    same_bits_or_both_nan,
    uniform,
    worst,
)

SPECIAL_OPERANDS = [0.0, -0.0, math.inf, -math.inf, math.nan, 1.0, -1.0, 2.5, -2.5, 3.0, 7.0, -7.0,
                    0.1, F32_MIN_DENORMAL, -F32_MIN_DENORMAL, 2.0 ** -126, F32_MAX, -F32_MAX, 1e-30,
                    -1e30, 16777216.0, 0.5, -0.5]


def padded(t: torch.Tensor) -> torch.Tensor:
    """t repeated up to a multiple of 64 elements (eager's vector path for all of it)."""
    return t.repeat(64 // math.gcd(t.numel(), 64))


def assert_same(x, got: torch.Tensor, want: torch.Tensor) -> None:
    same = same_bits_or_both_nan(got, want)
    assert bool(same.all()), worst(x, got, want)


@pytest.fixture(scope="module")
def float_pairs() -> tuple[torch.Tensor, torch.Tensor]:
    """Every pair of special operands; random bit patterns (huge exponent gaps); ordinary
    ratios; and exact multiples (remainder 0, quotients on integers)."""
    specials = list(itertools.product(SPECIAL_OPERANDS, repeat=2))
    a_special, b_special = f32([a for a, _ in specials]), f32([b for _, b in specials])
    n = 1 << 17
    b_small = uniform(n, -50.0, 50.0, seed=11)
    multiples = torch.randint(-1000, 1000, (n,), generator=torch.Generator().manual_seed(12))
    a = torch.cat([a_special, random_f32_bits(1 << 18, seed=13)[: 1 << 17], uniform(n, -1e4, 1e4, seed=14),
                   b_small * multiples.float()])
    b = torch.cat([b_special, random_f32_bits(1 << 18, seed=15)[: 1 << 17], uniform(n, -20.0, 20.0, seed=16),
                   b_small])
    size = a.numel() // 64 * 64
    return a[:size], b[:size]


FLOAT_DIVISIONS = {
    "fmod": torch.fmod,
    "remainder": torch.remainder,
    "div_floor": lambda a, b: torch.div(a, b, rounding_mode="floor"),
    "div_trunc": lambda a, b: torch.div(a, b, rounding_mode="trunc"),
}


def exact_fmod(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """C's fmod, from Python's (exact; what eager's scalar path, std::fmod, computes)."""
    return f32([math.fmod(x, y) if math.isfinite(x) and y != 0 and not math.isnan(y) else math.nan
                for x, y in zip(a.tolist(), b.tolist(), strict=True)])


def quotient_overflows(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Where eager's vector fmod (Sleef_fmodf16) returns NaN for finite operands: a / b
    overflows (an exponent gap of 128 or more). Its scalar path, std::fmod, is exact."""
    return torch.isfinite(a) & torch.isfinite(b) & (b != 0) & torch.isinf(a / b)


@pytest.mark.parametrize("variant", ["host", "baseline"])
@pytest.mark.parametrize("fn", sorted(FLOAT_DIVISIONS))
def test_float_division_as_eager(builds, float_pairs, fn, variant):
    """fmod is exact, remainder takes the divisor's sign (remainder(-4, 2) is -0 as in eager),
    div_floor is ATen's div_floor_floating_vec; all bit for bit with eager, but where eager's
    vector fmod and remainder return NaN (quotient_overflows): there, the exact result."""
    lib = builds.libraries[builds.host if variant == "host" else "baseline"]
    a, b = float_pairs
    got, eager = lib.call(f"f32_{fn}", a, b), FLOAT_DIVISIONS[fn](a, b)
    broken = quotient_overflows(a, b) if fn in ("fmod", "remainder") else torch.zeros_like(a, dtype=torch.bool)
    assert bool(torch.isnan(eager[broken]).all())  # the eager bug this works around
    fine = ~broken
    assert_same(torch.stack([a, b], 1)[fine], got[fine], eager[fine])
    if fn in ("fmod", "remainder"):
        a, b = a[broken], b[broken]
        mod = exact_fmod(a, b)
        want = mod if fn == "fmod" else torch.where((mod != 0) & ((b < 0) != (mod < 0)), mod + b, mod)
        assert_same(torch.stack([a, b], 1), got[broken], want)


def test_float_fmod_against_python(lib):
    """fmod of exponent gaps up to 277 bits (FLT_MAX mod denormals) and of random bit patterns,
    against Python's math.fmod."""
    a = f32([F32_MAX, 3e38, 1e30, 7.0, 2.0 ** 127, -1e38])
    b = f32([F32_MIN_DENORMAL, 3 * F32_MIN_DENORMAL, 1.7e-38, 1e-40, 0.1, 2.0 ** -140])
    assert_same(torch.stack([a, b], 1), lib.call("f32_fmod", a, b), exact_fmod(a, b))
    a, b = random_f32_bits(1 << 14, seed=18), random_f32_bits(1 << 14, seed=19)
    n = min(a.numel(), b.numel())
    a, b = a[:n], b[:n]
    assert_same(torch.stack([a, b], 1), lib.call("f32_fmod", a, b), exact_fmod(a, b))


INT_DIVISIONS = {
    "fmod": torch.fmod,
    "remainder": torch.remainder,
    "div_floor": lambda a, b: torch.div(a, b, rounding_mode="floor"),
    "div_trunc": lambda a, b: torch.div(a, b, rounding_mode="trunc"),
}


@pytest.mark.parametrize("dtype,prefix", [(torch.int32, "i32"), (torch.int64, "i64")])
@pytest.mark.parametrize("fn", sorted(INT_DIVISIONS))
def test_int_division_as_eager(lib, fn, dtype, prefix):
    """Python's floor semantics, C's trunc and fmod; the extremes of the range (INT_MIN / -1
    is INT_MIN for floor; INT_MIN % -1 is 0). Division by zero raises in eager (not tested)."""
    info = torch.iinfo(dtype)
    g = torch.Generator().manual_seed(17)
    edges = torch.tensor([info.min, info.min + 1, info.max, -1, 0, 1, 7, -7, 2, -2], dtype=dtype)
    a = torch.cat([edges.repeat_interleave(edges.numel()),
                   torch.randint(info.min, info.max, (1 << 16,), generator=g, dtype=dtype),
                   torch.randint(-100, 100, (1 << 16,), generator=g, dtype=dtype)])
    b = torch.cat([edges.repeat(edges.numel()),
                   torch.randint(info.min, info.max, (1 << 16,), generator=g, dtype=dtype),
                   torch.randint(-9, 9, (1 << 16,), generator=g, dtype=dtype)])
    keep = (b != 0) & ~((a == info.min) & (b == -1))  # trunc of INT_MIN / -1 kills eager (SIGFPE)
    a, b = a[keep], b[keep]
    assert torch.equal(lib.call(f"{prefix}_{fn}", a, b), INT_DIVISIONS[fn](a, b))


@pytest.mark.parametrize("dtype,prefix", [(torch.int32, "i32"), (torch.int64, "i64")])
def test_int_division_of_min_by_minus_one(lib, dtype, prefix):
    """INT_MIN / -1: floor gives INT_MIN and remainder/fmod 0 as eager; trunc (which crashes
    eager with SIGFPE) gives INT_MIN here."""
    a = torch.full((64,), torch.iinfo(dtype).min, dtype=dtype)
    b = torch.full((64,), -1, dtype=dtype)
    assert torch.equal(lib.call(f"{prefix}_div_floor", a, b), torch.div(a, b, rounding_mode="floor"))
    for fn in ("remainder", "fmod"):
        assert torch.equal(lib.call(f"{prefix}_{fn}", a, b), INT_DIVISIONS[fn](a, b))
    assert torch.equal(lib.call(f"{prefix}_div_trunc", a, b), a)


# --------------------------------------------------------------------------- maximum etc.
@pytest.fixture(scope="module")
def comparison_operands() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    specials = [0.0, -0.0, math.nan, -math.nan, math.inf, -math.inf, 1.0, -1.0, 2.0 ** -149]
    triples = list(itertools.product(specials, repeat=3))
    columns = [f32([t[i] for t in triples]) for i in range(3)]
    randoms = [uniform(1 << 12, -3.0, 3.0, seed=20 + i).round() for i in range(3)]
    return tuple(padded(torch.cat([c, r])) for c, r in zip(columns, randoms, strict=True))


@pytest.mark.parametrize("dtype,prefix", [(torch.float32, "f32"), (torch.float64, "f64")])
def test_maximum_minimum_as_eager_vector_path(lib, comparison_operands, dtype, prefix):
    """NaN if either is NaN; maximum(+0, -0) = -0 and maximum(-0, +0) = +0 (the second operand,
    as eager's vector path; its scalar path returns the first)."""
    a, b, _ = (t.to(dtype) for t in comparison_operands)
    for fn in ("maximum", "minimum"):
        assert_same(torch.stack([a, b], 1), lib.call(f"{prefix}_{fn}", a, b), getattr(torch, fn)(a, b))
    zero, negative_zero = torch.zeros(64, dtype=dtype), -torch.zeros(64, dtype=dtype)
    assert torch.signbit(lib.call(f"{prefix}_maximum", zero, negative_zero)).all()
    assert not torch.signbit(torch.maximum(zero[:7], negative_zero[:7])).any()  # scalar path


@pytest.mark.parametrize("dtype,prefix", [(torch.int32, "i32"), (torch.int64, "i64")])
def test_int_maximum_minimum(lib, dtype, prefix):
    g = torch.Generator().manual_seed(21)
    a, b = (torch.randint(-1000, 1000, (4096,), generator=g, dtype=dtype) for _ in range(2))
    for fn in ("maximum", "minimum"):
        assert torch.equal(lib.call(f"{prefix}_{fn}", a, b), getattr(torch, fn)(a, b))


BOUNDS = [0.0, -0.0, 1.0, -1.0, math.nan, math.inf, -math.inf]


def test_clamp_scalar_bounds_as_eager(lib, comparison_operands):
    """clamp/clamp_min/clamp_max with scalar bounds: x when x equals a bound (clamp(-0., min=0.)
    is -0), hi when lo > hi, all NaN for a NaN bound; relu(-0.) is -0."""
    x = comparison_operands[0]
    for lo, hi in itertools.product(BOUNDS, repeat=2):
        got = lib.call("f32_clamp", x, f32([lo]), f32([hi]))
        assert_same(x, got, torch.clamp(x, lo, hi))
    for bound in BOUNDS:
        assert_same(x, lib.call("f32_clamp_min", x, f32([bound])), torch.clamp(x, min=bound))
        assert_same(x, lib.call("f32_clamp_max", x, f32([bound])), torch.clamp(x, max=bound))
    assert_same(x, lib.call("f32_relu", x), torch.relu(x))


def test_clamp_tensor_bounds_as_eager_vector_path(lib, comparison_operands):
    """clamp with tensor bounds is minimum(maximum(x, lo), hi): clamp(-0., min=tensor(0.))
    is +0 (eager's vector path)."""
    x, lo, hi = comparison_operands
    assert_same(torch.stack([x, lo, hi], 1), lib.call("f32_clamp_tensor_bounds", x, lo, hi),
                torch.clamp(x, lo, hi))


# --------------------------------------------------------------------------- half types, bool
ALL_16_BIT = torch.arange(-2 ** 15, 2 ** 15, dtype=torch.int32).to(torch.int16)


@pytest.mark.parametrize("dtype,name", [(torch.float16, "half"), (torch.bfloat16, "bf16")])
def test_16_bit_to_float_all_patterns(lib, dtype, name):
    """All 65536 bit patterns, NaN payloads included, as tensor.to(float32)."""
    got = lib.call(f"{name}_to_f32", ALL_16_BIT)
    want = ALL_16_BIT.view(dtype).float()
    assert torch.equal(got.view(torch.int32), want.view(torch.int32))


def _rounding_cases(dtype: torch.dtype) -> torch.Tensor:
    """Every value of dtype, the midpoints between neighbours (the ties of round to nearest
    even), one float32 ulp either side of each midpoint, NaN payloads and random floats."""
    values = ALL_16_BIT.view(dtype).float()
    finite = values[torch.isfinite(values)].sort().values
    mids = (finite[1:].double() + finite[:-1].double()).div(2).float()  # exact in float32
    nans = torch.tensor([0x7F800001, 0x7FFFFFFF, -0x00400000, 0x7FA00000, -0x007FFFFF, 0x7FC00001],
                        dtype=torch.int32).view(torch.float32)
    return padded(torch.cat([values, mids, torch.nextafter(mids, mids.new_full((), math.inf)),
                             torch.nextafter(mids, mids.new_full((), -math.inf)), nans,
                             f32([65504.0, 65519.99, 65520.0, 65536.0, 3.4e38, 1e-8, 2.0 ** -25]),
                             random_f32_bits(1 << 18, seed=22)]))


@pytest.mark.parametrize("dtype,name", [(torch.float16, "half"), (torch.bfloat16, "bf16")])
def test_float_to_16_bit_rounding(lib, dtype, name):
    """Round to nearest even on every tie, overflow to inf, NaN kept NaN with the payload
    tensor.to() keeps (float16: top 9 bits, quiet; bfloat16: 0xffff): bit for bit."""
    x = _rounding_cases(dtype)
    got = lib.call(f"f32_to_{name}", x)
    want = x.to(dtype).view(torch.int16)
    mismatch = (got != want).nonzero()
    assert mismatch.numel() == 0, [(x[i].item(), hex(got[i].item() & 0xFFFF), hex(want[i].item() & 0xFFFF))
                                   for i in mismatch[:5, 0].tolist()]


def test_bool_storage(lib):
    """x != 0 (NaN is true, -0 false), stored as one byte 0/1; any non-zero byte reads true."""
    x = padded(f32([0.0, -0.0, math.nan, 1.0, -2.0, F32_MIN_DENORMAL, math.inf]))
    assert torch.equal(lib.call("f32_to_bool", x), x.to(torch.bool).view(torch.uint8))
    stored = torch.tensor([0, 1, 2, 255] * 16, dtype=torch.uint8)
    assert torch.equal(lib.call("bool_to_f32", stored), (stored != 0).float())


# --------------------------------------------------------------------------- float -> int
INT_TARGETS = ["int32", "int64", "int16", "int8", "uint8"]


@pytest.mark.parametrize("dtype,prefix", [(torch.float32, "f32"), (torch.float64, "f64")])
@pytest.mark.parametrize("target", INT_TARGETS)
def test_float_to_int_as_eager(lib, dtype, prefix, target):
    """Truncation in range; NaN, inf and out of range: INT_MIN (int32, int64) and the low bits
    of the int32 conversion for the narrow types, as tensor.to() on x86."""
    edges = [2.0 ** 31, -2.0 ** 31, 2.0 ** 31 - 128, 2.0 ** 63, -2.0 ** 63, 2.0 ** 63 - 2.0 ** 40,
             300.7, -300.7, 127.9, -129.5, 255.5, 256.0, -1.5, 65536.5, 40000.0, -40000.0, 3e9,
             math.nan, math.inf, -math.inf, 0.999, -0.999, -0.0, 1e20]
    x = padded(torch.cat([torch.tensor(edges, dtype=dtype), uniform(1 << 14, -3e4, 3e4, seed=23, dtype=dtype),
                          uniform(1 << 14, -1e10, 1e10, seed=24, dtype=dtype)]))
    want = x.to(getattr(torch, target))
    assert torch.equal(lib.call(f"{prefix}_to_{target}", x), want)


@pytest.mark.parametrize("name,source,target", [("i32_to_f32", torch.int32, torch.float32),
                                                ("i64_to_f32", torch.int64, torch.float32),
                                                ("i64_to_f64", torch.int64, torch.float64)])
def test_int_to_float_as_eager(lib, name, source, target):
    """A static_cast rounds to nearest even, as tensor.to(float) does."""
    info = torch.iinfo(source)
    x = torch.cat([torch.tensor([info.min, info.max, 0, -1, 2 ** 24 + 1, 2 ** 53 + 1 if source == torch.int64 else 3],
                                dtype=source),
                   torch.randint(info.min, info.max, (1 << 14,), generator=torch.Generator().manual_seed(25),
                                 dtype=source)])
    assert torch.equal(lib.call(name, x), x.to(target))
