"""How Triton spells the kernel IR's vocabulary: one row per pointwise op, reduction and dtype.

Each pointwise IR op (:class:`kernels.opset.PointwiseOp`) is one row: a Triton
expression template over already-rendered operands and which operands are converted to
the op's operand dtype. Nothing here is a chain of ifs: adding an op is adding a row
(``tests/triton`` checks every member of the IR's sets has one).

>>> POINTWISE_RULES[PointwiseOp.ADD].template.format("a", "b")
'a + b'
>>> triton_dtype(torch.bfloat16)
'tl.bfloat16'
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ..kernels.opset import PointwiseOp, ReductionType


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
#   is exact in real arithmetic and stable in float32 at both tails; below 2**-12 it
#   cancels (and makes -0.0 +0.0) where tanh(x) rounds to x itself.
POINTWISE_RULES: dict[PointwiseOp, PointwiseRule] = {
    PointwiseOp.IDENTITY: PointwiseRule("{0}"),
    PointwiseOp.ADD: PointwiseRule("{0} + {1}"),
    PointwiseOp.SUB: PointwiseRule("{0} - {1}"),
    PointwiseOp.MUL: PointwiseRule("{0} * {1}"),
    PointwiseOp.TRUEDIV: PointwiseRule("{0} / {1}"),
    # Integer operands only (lowering's rule): Triton's // and % truncate toward zero,
    # Python's and ATen's floor, so the floor forms correct by one where the signs differ.
    PointwiseOp.TRUNCDIV: PointwiseRule("{0} // {1}"),
    PointwiseOp.FLOOR_DIVIDE: PointwiseRule(
        "tl.where((({0} % {1}) != 0) & ((({0} % {1}) < 0) != ({1} < 0)), {0} // {1} - 1, {0} // {1})"),
    PointwiseOp.REMAINDER: PointwiseRule(
        "tl.where((({0} % {1}) != 0) & ((({0} % {1}) < 0) != ({1} < 0)), {0} % {1} + {1}, {0} % {1})"),
    PointwiseOp.NEG: PointwiseRule("-{0}"),
    PointwiseOp.ABS: PointwiseRule("tl.abs({0})"),
    PointwiseOp.RECIPROCAL: PointwiseRule("1.0 / {0}"),
    PointwiseOp.EXP: PointwiseRule("tl.exp({0})"),
    PointwiseOp.EXP2: PointwiseRule("tl.math.exp2({0})"),
    PointwiseOp.LOG: PointwiseRule("tl.log({0})"),
    PointwiseOp.LOG2: PointwiseRule("tl.math.log2({0})"),
    PointwiseOp.SQRT: PointwiseRule("tl.sqrt({0})"),
    PointwiseOp.RSQRT: PointwiseRule("tl.math.rsqrt({0})"),
    PointwiseOp.SIN: PointwiseRule("tl.sin({0})"),
    PointwiseOp.COS: PointwiseRule("tl.cos({0})"),
    PointwiseOp.ERF: PointwiseRule("tl.math.erf({0})"),
    PointwiseOp.FLOOR: PointwiseRule("tl.floor({0})"),
    PointwiseOp.CEIL: PointwiseRule("tl.ceil({0})"),
    PointwiseOp.SIGMOID: PointwiseRule("tl.sigmoid({0})"),
    PointwiseOp.TANH: PointwiseRule("tl.where(tl.abs({0}) < 0.000244140625, {0}, 2.0 * tl.sigmoid(2.0 * {0}) - 1.0)"),
    PointwiseOp.RELU: PointwiseRule("tl.where({0} < 0, 0, {0})"),
    PointwiseOp.MAXIMUM: PointwiseRule("tl.where(({0} > {1}) | ({0} != {0}), {0}, {1})"),
    PointwiseOp.MINIMUM: PointwiseRule("tl.where(({0} < {1}) | ({0} != {0}), {0}, {1})"),
    # a NaN bound makes the result NaN, as in ATen; a tie keeps x (its -0.0 too)
    PointwiseOp.CLAMP_MIN: PointwiseRule("tl.where(({0} < {1}) | ({1} != {1}), {1}, {0})"),
    PointwiseOp.CLAMP_MAX: PointwiseRule("tl.where(({0} > {1}) | ({1} != {1}), {1}, {0})"),
    PointwiseOp.EQ: PointwiseRule("{0} == {1}"),
    PointwiseOp.NE: PointwiseRule("{0} != {1}"),
    PointwiseOp.LT: PointwiseRule("{0} < {1}"),
    PointwiseOp.LE: PointwiseRule("{0} <= {1}"),
    PointwiseOp.GT: PointwiseRule("{0} > {1}"),
    PointwiseOp.GE: PointwiseRule("{0} >= {1}"),
    PointwiseOp.LOGICAL_AND: PointwiseRule("{0} & {1}"),
    PointwiseOp.LOGICAL_OR: PointwiseRule("{0} | {1}"),
    PointwiseOp.LOGICAL_XOR: PointwiseRule("{0} ^ {1}"),
    PointwiseOp.LOGICAL_NOT: PointwiseRule("{0} == 0"),
    PointwiseOp.ISNAN: PointwiseRule("{0} != {0}"),
    PointwiseOp.WHERE: PointwiseRule("tl.where({0}, {1}, {2})", converted=(1, 2)),
    # "cast" is rendered by the renderer (rounding through the target type); listed so the
    # verifier knows it.
    PointwiseOp.CAST: PointwiseRule("{0}"),
}

# Rows for integer operands where Triton's function takes floats only: floor and ceil of
# an integer are the integer (ATen keeps its dtype).
INTEGER_RULES: dict[PointwiseOp, PointwiseRule] = {
    PointwiseOp.FLOOR: PointwiseRule("{0}"),
    PointwiseOp.CEIL: PointwiseRule("{0}"),
}
# ... and for bools, where Triton's i1 arithmetic is not ATen's: bool `+` is `or` in ATen
# (True + True is True), while i1 addition wraps (True + True is False).
BOOL_RULES: dict[PointwiseOp, PointwiseRule] = {
    **INTEGER_RULES,
    PointwiseOp.ADD: PointwiseRule("{0} | {1}"),
}


def pointwise_rule(op: PointwiseOp, operand_dtype: torch.dtype | None) -> PointwiseRule:
    """The row for ``op`` on operands of ``operand_dtype`` (None: the op's own dtypes).

    >>> pointwise_rule(PointwiseOp.ADD, torch.bool).template
    '{0} | {1}'
    >>> pointwise_rule(PointwiseOp.FLOOR, torch.int32).template, pointwise_rule(PointwiseOp.ADD, torch.int8).template
    ('{0}', '{0} + {1}')
    """
    if operand_dtype == torch.bool:
        overrides = BOOL_RULES
    elif operand_dtype is not None and not operand_dtype.is_floating_point:
        overrides = INTEGER_RULES
    else:
        overrides = {}
    return overrides.get(op) or POINTWISE_RULES[op]


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


REDUCTION_RULES: dict[ReductionType, ReductionRule] = {
    ReductionType.SUM: ReductionRule("{acc} + {value}", "tl.sum({acc}, 1)[:, None]"),
    ReductionType.MAX: ReductionRule("_fd_maximum({acc}, {value})", "tl.reduce({acc}, 1, _fd_maximum)[:, None]"),
    ReductionType.MIN: ReductionRule("_fd_minimum({acc}, {value})", "tl.reduce({acc}, 1, _fd_minimum)[:, None]"),
    ReductionType.ARGMAX: ReductionRule("_fd_argmax({acc}, {acc_index}, {value}, {index})",
                            "tl.reduce(({acc}, {acc_index}), 1, _fd_argmax)[1][:, None]", True),
    ReductionType.ARGMIN: ReductionRule("_fd_argmin({acc}, {acc_index}, {value}, {index})",
                            "tl.reduce(({acc}, {acc_index}), 1, _fd_argmin)[1][:, None]", True),
}


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
