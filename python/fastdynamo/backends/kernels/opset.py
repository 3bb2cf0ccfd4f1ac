"""The kernel IR's vocabulary: its pointwise operations, reductions and dtypes.

The IR owns these sets; each renderer (``backends/triton``, ``backends/cpp``) maps every
member to its own language in a table of its own, and a test checks that the table covers
the whole set. Adding an operation is one member here and one row per renderer.

>>> PointwiseOp("add") is PointwiseOp.ADD, ReductionType.ARGMAX.with_index
(True, True)
>>> reduction_identity(ReductionType.MAX, torch.float32)
-inf
>>> torch.bfloat16 in DTYPES, compute_dtype(torch.bfloat16)
(True, torch.float32)
"""
from __future__ import annotations

import enum
import math

import torch


class PointwiseOp(enum.Enum):
    """An elementwise operation of :class:`ir.Op`.

    Semantics are ATen's on the operation's operand dtype: ``maximum``/``minimum`` and
    ``clamp_min``/``clamp_max`` propagate NaN from any operand as ATen does; ``relu`` keeps
    NaN; ``floor_divide`` and ``remainder`` round toward negative infinity (Python's
    ``//`` and ``%``); ``truncdiv`` toward zero; ``cast`` converts to ``params[0]``
    (rounding through a half type when that is the target); ``where`` selects on its
    first (bool) operand."""

    IDENTITY = "identity"
    ADD = "add"
    SUB = "sub"
    MUL = "mul"
    TRUEDIV = "truediv"
    FLOOR_DIVIDE = "floor_divide"
    TRUNCDIV = "truncdiv"
    REMAINDER = "remainder"
    NEG = "neg"
    ABS = "abs"
    RECIPROCAL = "reciprocal"
    EXP = "exp"
    EXP2 = "exp2"
    LOG = "log"
    LOG2 = "log2"
    SQRT = "sqrt"
    RSQRT = "rsqrt"
    SIN = "sin"
    COS = "cos"
    ERF = "erf"
    FLOOR = "floor"
    CEIL = "ceil"
    SIGMOID = "sigmoid"
    TANH = "tanh"
    RELU = "relu"
    MAXIMUM = "maximum"
    MINIMUM = "minimum"
    CLAMP_MIN = "clamp_min"
    CLAMP_MAX = "clamp_max"
    EQ = "eq"
    NE = "ne"
    LT = "lt"
    LE = "le"
    GT = "gt"
    GE = "ge"
    LOGICAL_AND = "logical_and"
    LOGICAL_OR = "logical_or"
    LOGICAL_XOR = "logical_xor"
    LOGICAL_NOT = "logical_not"
    ISNAN = "isnan"
    WHERE = "where"
    CAST = "cast"


COMPARISONS = frozenset({PointwiseOp.EQ, PointwiseOp.NE, PointwiseOp.LT, PointwiseOp.LE, PointwiseOp.GT,
                         PointwiseOp.GE, PointwiseOp.ISNAN})
LOGICAL = frozenset({PointwiseOp.LOGICAL_AND, PointwiseOp.LOGICAL_OR, PointwiseOp.LOGICAL_XOR,
                     PointwiseOp.LOGICAL_NOT})

# Operations that cost a libm-style polynomial per element (tens of cycles, not one):
# fusion recomputes a value holding one only where that repeats little work.
TRANSCENDENTAL = frozenset({PointwiseOp.EXP, PointwiseOp.EXP2, PointwiseOp.LOG, PointwiseOp.LOG2, PointwiseOp.SIN,
                            PointwiseOp.COS, PointwiseOp.ERF, PointwiseOp.SIGMOID, PointwiseOp.TANH})


class ReductionType(enum.Enum):
    """How a :class:`ir.ReductionNode` folds its row. ``max``/``min`` propagate NaN;
    ``argmax``/``argmin`` treat NaN as the winner and pick the lowest index on ties (ATen)."""

    SUM = "sum"
    MAX = "max"
    MIN = "min"
    ARGMAX = "argmax"
    ARGMIN = "argmin"

    @property
    def with_index(self) -> bool:
        return self in (ReductionType.ARGMAX, ReductionType.ARGMIN)


# Every dtype a kernel reads or writes; anything else runs as ATen ops.
DTYPES = frozenset({torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int8, torch.int16,
                    torch.int32, torch.int64, torch.uint8, torch.bool})
HALF_DTYPES = frozenset({torch.float16, torch.bfloat16})


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype a kernel computes in: half types widen to float32."""
    return torch.float32 if dtype in HALF_DTYPES else dtype


def reduction_identity(reduction: ReductionType, dtype: torch.dtype) -> float | int | bool:
    """The value masked-out or initial lanes take so that they never win."""
    wants_low = reduction in (ReductionType.MAX, ReductionType.ARGMAX)
    if reduction is ReductionType.SUM:
        return False if dtype == torch.bool else 0
    if dtype == torch.bool:
        return not wants_low
    if dtype.is_floating_point:
        return -math.inf if wants_low else math.inf
    info = torch.iinfo(dtype)
    return info.min if wants_low else info.max


def accumulator_dtype(reduction: ReductionType, input_dtype: torch.dtype, output_dtype: torch.dtype) -> torch.dtype:
    """Sums accumulate in the output's compute dtype; comparisons in the input's."""
    if reduction is ReductionType.SUM:
        return compute_dtype(output_dtype)
    return compute_dtype(input_dtype)
