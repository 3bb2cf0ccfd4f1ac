"""Rule tables for code generation: pointwise ops, reductions and dtypes.

Each pointwise IR op is one row: a Triton expression template over already-rendered
operands and which operands are converted to the op's operand dtype. Nothing here
is a chain of ifs: adding an op is adding a row.

>>> POINTWISE_RULES["add"].template.format("a", "b")
'a + b'
>>> triton_dtype(torch.bfloat16)
'tl.bfloat16'
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class PointwiseRule:
    """``template`` formats operands positionally; ``converted`` lists the operands that
    take the op's operand dtype (None: all of them)."""

    template: str
    converted: tuple | None = None


# Why some rows look indirect:
# - relu/maximum/minimum/clamp use tl.where so that NaN propagates as in ATen
#   (tl.maximum returns the non-NaN operand).
# - tanh has no tl/tl.math function that runs in the interpreter; tanh(x) = 2*sigmoid(2x) - 1
#   is exact in real arithmetic and stable in float32 at both tails.
POINTWISE_RULES: dict[str, PointwiseRule] = {
    "identity": PointwiseRule("{0}"),
    "add": PointwiseRule("{0} + {1}"),
    "sub": PointwiseRule("{0} - {1}"),
    "mul": PointwiseRule("{0} * {1}"),
    "truediv": PointwiseRule("{0} / {1}"),
    "neg": PointwiseRule("-{0}"),
    "abs": PointwiseRule("tl.abs({0})"),
    "reciprocal": PointwiseRule("1.0 / {0}"),
    "exp": PointwiseRule("tl.exp({0})"),
    "exp2": PointwiseRule("tl.math.exp2({0})"),
    "log": PointwiseRule("tl.log({0})"),
    "log2": PointwiseRule("tl.math.log2({0})"),
    "sqrt": PointwiseRule("tl.sqrt({0})"),
    "rsqrt": PointwiseRule("tl.math.rsqrt({0})"),
    "sin": PointwiseRule("tl.sin({0})"),
    "cos": PointwiseRule("tl.cos({0})"),
    "erf": PointwiseRule("tl.math.erf({0})"),
    "floor": PointwiseRule("tl.floor({0})"),
    "ceil": PointwiseRule("tl.ceil({0})"),
    "sigmoid": PointwiseRule("tl.sigmoid({0})"),
    "tanh": PointwiseRule("2.0 * tl.sigmoid(2.0 * {0}) - 1.0"),
    "relu": PointwiseRule("tl.where({0} < 0, 0, {0})"),
    "maximum": PointwiseRule("tl.where(({0} > {1}) | ({0} != {0}), {0}, {1})"),
    "minimum": PointwiseRule("tl.where(({0} < {1}) | ({0} != {0}), {0}, {1})"),
    "clamp_min": PointwiseRule("tl.where({0} < {1}, {1}, {0})"),
    "clamp_max": PointwiseRule("tl.where({0} > {1}, {1}, {0})"),
    "eq": PointwiseRule("{0} == {1}"),
    "ne": PointwiseRule("{0} != {1}"),
    "lt": PointwiseRule("{0} < {1}"),
    "le": PointwiseRule("{0} <= {1}"),
    "gt": PointwiseRule("{0} > {1}"),
    "ge": PointwiseRule("{0} >= {1}"),
    "logical_and": PointwiseRule("{0} & {1}"),
    "logical_or": PointwiseRule("{0} | {1}"),
    "logical_xor": PointwiseRule("{0} ^ {1}"),
    "logical_not": PointwiseRule("{0} == 0"),
    "isnan": PointwiseRule("{0} != {0}"),
    "where": PointwiseRule("tl.where({0}, {1}, {2})", converted=(1, 2)),
    # "cast" is rendered by the renderer (rounding through the target type); listed so the
    # verifier knows it.
    "cast": PointwiseRule("{0}"),
}


@dataclass(frozen=True)
class ReductionRule:
    """How one reduction type accumulates.

    ``combine`` merges an accumulator with new values elementwise (looped kernels);
    ``finish`` folds a [XBLOCK, RBLOCK] block along the row into [XBLOCK, 1].
    Index-tracking reductions (``with_index``) carry (value, index) pairs.
    """

    combine: str
    finish: str
    with_index: bool = False


REDUCTION_RULES: dict[str, ReductionRule] = {
    "sum": ReductionRule("{acc} + {value}", "tl.sum({acc}, 1)[:, None]"),
    "max": ReductionRule("_fd_maximum({acc}, {value})", "tl.reduce({acc}, 1, _fd_maximum)[:, None]"),
    "min": ReductionRule("_fd_minimum({acc}, {value})", "tl.reduce({acc}, 1, _fd_minimum)[:, None]"),
    "argmax": ReductionRule("_fd_argmax({acc}, {acc_index}, {value}, {index})",
                            "tl.reduce(({acc}, {acc_index}), 1, _fd_argmax)[1][:, None]", True),
    "argmin": ReductionRule("_fd_argmin({acc}, {acc_index}, {value}, {index})",
                            "tl.reduce(({acc}, {acc_index}), 1, _fd_argmin)[1][:, None]", True),
}


def reduction_identity(reduction_type: str, dtype: torch.dtype) -> float:
    """The value masked-out lanes take so that they never win.

    >>> reduction_identity("max", torch.float32)
    -inf
    """
    wants_low = reduction_type in ("max", "argmax")
    if reduction_type == "sum":
        return False if dtype == torch.bool else 0
    if dtype == torch.bool:
        return not wants_low
    if dtype.is_floating_point:
        return -math.inf if wants_low else math.inf
    info = torch.iinfo(dtype)
    return info.min if wants_low else info.max


def accumulator_dtype(reduction_type: str, input_dtype: torch.dtype, output_dtype: torch.dtype) -> torch.dtype:
    """Sums accumulate in the output's compute dtype; comparisons in the input's."""
    from .ir import compute_dtype

    if reduction_type == "sum":
        return compute_dtype(output_dtype)
    return compute_dtype(input_dtype)


_TRITON_DTYPES = {
    torch.float32: "tl.float32",
    torch.float16: "tl.float16",
    torch.bfloat16: "tl.bfloat16",
    torch.float64: "tl.float64",
    torch.int8: "tl.int8",
    torch.int16: "tl.int16",
    torch.int32: "tl.int32",
    torch.int64: "tl.int64",
    torch.uint8: "tl.uint8",
    torch.bool: "tl.int1",
}

SUPPORTED_DTYPES = frozenset(_TRITON_DTYPES)


def triton_dtype(dtype: torch.dtype) -> str:
    return _TRITON_DTYPES[dtype]


def render_literal(value: float, dtype: torch.dtype) -> str:
    """A Python literal of ``value`` converted to ``dtype``, valid inside a Triton kernel.

    >>> render_literal(1, torch.float32), render_literal(float("-inf"), torch.float32)
    ('1.0', 'float("-inf")')
    """
    if dtype == torch.bool:
        return "True" if bool(value) else "False"
    if dtype.is_floating_point:
        number = float(value)
        if math.isnan(number):
            return 'float("nan")'
        if math.isinf(number):
            return 'float("inf")' if number > 0 else 'float("-inf")'
        return repr(number)
    return str(int(value))


# Helpers every generated module starts with: NaN-propagating combines for reductions, as
# ATen's max/min/argmax/argmin treat NaN as the largest value (argmin: as the smallest wins
# too), and the lowest index wins ties.
COMBINE_HELPERS = '''
@triton.jit
def _fd_maximum(a, b):
    return tl.where((a > b) | (a != a), a, b)


@triton.jit
def _fd_minimum(a, b):
    return tl.where((a < b) | (a != a), a, b)


@triton.jit
def _fd_argmax(value_a, index_a, value_b, index_b):
    a_nan = value_a != value_a
    b_nan = value_b != value_b
    tie = (value_a == value_b) | (a_nan & b_nan)
    pick_a = (value_a > value_b) | (a_nan & ~b_nan) | (tie & (index_a < index_b))
    return tl.where(pick_a, value_a, value_b), tl.where(pick_a, index_a, index_b)


@triton.jit
def _fd_argmin(value_a, index_a, value_b, index_b):
    a_nan = value_a != value_a
    b_nan = value_b != value_b
    tie = (value_a == value_b) | (a_nan & b_nan)
    pick_a = (value_a < value_b) | (a_nan & ~b_nan) | (tie & (index_a < index_b))
    return tl.where(pick_a, value_a, value_b), tl.where(pick_a, index_a, index_b)
'''
