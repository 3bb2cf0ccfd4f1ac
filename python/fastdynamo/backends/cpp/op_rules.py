"""How C++ spells the kernel IR's vocabulary: one row per pointwise op, reduction and dtype.

A pointwise row is an expression template over operands already converted to the op's
operand dtype; the renderer casts the result to the op's dtype (C++ would compute
``int8 + int8`` in ``int``: ATen wraps in ``int8``). The ``fd_*`` functions are the
runtime header's (``include/fastdynamo_kernels.h``): ATen's NaN and signed-zero rules,
Python's floor division, vectorizable math; ``std::sqrt``, ``std::floor``... are single
instructions (``-fno-math-errno``). ``tests/cpp`` checks every member of the IR's sets has a row.

>>> POINTWISE_RULES[PointwiseOp.MAXIMUM].format("a", "b")
'fd_maximum(a, b)'
>>> cpp_type(torch.bfloat16), compute_type(torch.bfloat16)
('fd_bfloat16', 'float')
>>> render_literal(float("-inf"), torch.float32), render_literal(-2**63, torch.int64)
('(-std::numeric_limits<float>::infinity())', '(-INT64_C(9223372036854775807) - 1)')
"""
from __future__ import annotations

import math

import torch

from ..kernels.opset import PointwiseOp, ReductionType, compute_dtype

POINTWISE_RULES: dict[PointwiseOp, str] = {
    PointwiseOp.IDENTITY: "{0}",
    PointwiseOp.ADD: "{0} + {1}",
    PointwiseOp.SUB: "{0} - {1}",
    PointwiseOp.MUL: "{0} * {1}",
    PointwiseOp.TRUEDIV: "{0} / {1}",
    PointwiseOp.FLOOR_DIVIDE: "fd_div_floor({0}, {1})",
    PointwiseOp.TRUNCDIV: "{0} / {1}",
    PointwiseOp.REMAINDER: "fd_remainder({0}, {1})",
    PointwiseOp.NEG: "-{0}",
    PointwiseOp.ABS: "std::abs({0})",
    PointwiseOp.RECIPROCAL: "1 / {0}",
    PointwiseOp.EXP: "fd_exp({0})",
    PointwiseOp.EXP2: "fd_exp2({0})",
    PointwiseOp.LOG: "fd_log({0})",
    PointwiseOp.LOG2: "fd_log2({0})",
    PointwiseOp.SQRT: "std::sqrt({0})",
    PointwiseOp.RSQRT: "1 / std::sqrt({0})",
    PointwiseOp.SIN: "fd_sin({0})",
    PointwiseOp.COS: "fd_cos({0})",
    PointwiseOp.ERF: "fd_erf({0})",
    PointwiseOp.FLOOR: "std::floor({0})",
    PointwiseOp.CEIL: "std::ceil({0})",
    PointwiseOp.SIGMOID: "fd_sigmoid({0})",
    PointwiseOp.TANH: "fd_tanh({0})",
    PointwiseOp.RELU: "fd_relu({0})",
    PointwiseOp.MAXIMUM: "fd_maximum({0}, {1})",
    PointwiseOp.MINIMUM: "fd_minimum({0}, {1})",
    PointwiseOp.CLAMP_MIN: "fd_clamp_min({0}, {1})",
    PointwiseOp.CLAMP_MAX: "fd_clamp_max({0}, {1})",
    PointwiseOp.EQ: "{0} == {1}",
    PointwiseOp.NE: "{0} != {1}",
    PointwiseOp.LT: "{0} < {1}",
    PointwiseOp.LE: "{0} <= {1}",
    PointwiseOp.GT: "{0} > {1}",
    PointwiseOp.GE: "{0} >= {1}",
    PointwiseOp.LOGICAL_AND: "{0} && {1}",
    PointwiseOp.LOGICAL_OR: "{0} || {1}",
    PointwiseOp.LOGICAL_XOR: "{0} != {1}",
    PointwiseOp.LOGICAL_NOT: "!{0}",
    PointwiseOp.ISNAN: "{0} != {0}",
    PointwiseOp.WHERE: "{0} ? {1} : {2}",
    # rendered by the renderer (rounding through a half target); the row keeps the table whole
    PointwiseOp.CAST: "{0}",
}

# Operands converted to the op's operand dtype (None: all); where's condition stays bool.
CONVERTED: dict[PointwiseOp, tuple] = {PointwiseOp.WHERE: (1, 2)}

# What a reduction's accumulator starts from is opset.reduction_identity; this is how
# one value joins it (``simd`` rows vectorize under `omp simd reduction`).
REDUCTION_RULES: dict[ReductionType, str] = {
    ReductionType.SUM: "sum",
    ReductionType.MAX: "max",
    ReductionType.MIN: "min",
    ReductionType.ARGMAX: "argmax",
    ReductionType.ARGMIN: "argmin",
}

_STORAGE_TYPES = {
    torch.float32: "float",
    torch.float64: "double",
    torch.float16: "fd_half",
    torch.bfloat16: "fd_bfloat16",
    torch.int8: "int8_t",
    torch.int16: "int16_t",
    torch.int32: "int32_t",
    torch.int64: "int64_t",
    torch.uint8: "uint8_t",
    torch.bool: "bool",
}

# Half types are stored as their bits and computed in float (opset.compute_dtype).
LOAD_CONVERSIONS = {torch.bfloat16: "fd_to_float({0})", torch.float16: "fd_to_float({0})"}
STORE_CONVERSIONS = {torch.bfloat16: "fd_float_to_bfloat16({0})", torch.float16: "fd_float_to_half({0})"}
FLOAT_TO_INTEGER = {torch.int64: "fd_float_to_int64({0})", torch.int32: "fd_float_to_int32({0})",
                    torch.int16: "fd_float_to_int16({0})", torch.int8: "fd_float_to_int8({0})",
                    torch.uint8: "fd_float_to_uint8({0})"}
ROUNDINGS = {torch.bfloat16: "fd_to_float(fd_float_to_bfloat16({0}))", torch.float16: "fd_to_float(fd_float_to_half({0}))"}


def cpp_type(dtype: torch.dtype) -> str:
    """The C++ type a buffer of ``dtype`` holds."""
    return _STORAGE_TYPES[dtype]


def compute_type(dtype: torch.dtype) -> str:
    """The C++ type values of ``dtype`` are computed in."""
    return _STORAGE_TYPES[compute_dtype(dtype)]


def render_literal(value, dtype: torch.dtype) -> str:
    """A C++ constant of ``value`` converted to ``dtype``'s compute type, exactly as ATen
    converts a Python scalar (a double literal cast to float, not a float literal)."""
    dtype = compute_dtype(dtype)
    if dtype == torch.bool:
        return "true" if bool(value) else "false"
    if dtype.is_floating_point:
        number = float(value)
        kind = compute_type(dtype)
        if math.isnan(number):
            return f"std::numeric_limits<{kind}>::quiet_NaN()"
        if math.isinf(number):
            return f"({'' if number > 0 else '-'}std::numeric_limits<{kind}>::infinity())"
        text = repr(number)  # the shortest decimal that reads back as this double: exact
        return f"static_cast<float>({text})" if kind == "float" else text
    number = int(value)
    if number == -2**63:
        return "(-INT64_C(9223372036854775807) - 1)"
    return f"static_cast<{compute_type(dtype)}>(INT64_C({number}))"
