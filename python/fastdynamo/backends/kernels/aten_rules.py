"""ATen op -> kernel IR: one table row per op (packet or overload).

Pointwise ops share one generic lowering parameterised by the IR op name; views
and reductions have their own. A rule raises :class:`NoLowering` when a particular
call is outside what it expresses exactly, and the op then runs as an extern.

>>> torch.ops.aten.exp in LOWERINGS and torch.ops.aten.mm not in LOWERINGS
True
"""
from __future__ import annotations

from functools import partial

import sympy
import torch

from . import sizes, views
from .indexing import add, mod, mul
from .ir import Constant, IndexValue, Op, PointwiseNode, ReductionNode, SizeValue
from .opset import COMPARISONS, LOGICAL, PointwiseOp, ReductionType
from .views import TensorValue

aten = torch.ops.aten
prims = torch.ops.prims


class NoLowering(Exception):
    """This call has no exact lowering; run it as an extern."""


def _scalar_dtype(value) -> torch.dtype:
    if isinstance(value, bool):
        return torch.bool
    return torch.int64 if isinstance(value, (int, sympy.Expr)) else torch.float32


def _promoted(args) -> torch.dtype:
    """ATen's result type of a binary op over tensor values and Python scalars."""
    probes = [
        torch.empty((1,) if a.shape else (), dtype=a.dtype, device="meta") if isinstance(a, TensorValue)
        else 2 if isinstance(a, sympy.Expr) else a  # a symbolic size promotes as an int
        for a in args
    ]
    if len(probes) == 1:
        return probes[0].dtype if isinstance(probes[0], torch.Tensor) else _scalar_dtype(probes[0])
    if len(probes) != 2:
        raise NoLowering("comparison with more than two operands")
    return torch.result_type(probes[0], probes[1])


def pointwise_node(lowering, meta: torch.Tensor, build) -> TensorValue:
    """Add a pointwise node whose body is ``build(load, vars)``; ``load(value)`` gives
    an operand (tensor or scalar) at the node's index, broadcast as ATen does."""
    shape = lowering.shape_of(meta)
    if 0 in shape:
        raise NoLowering("no elements")  # empty_result makes it
    lowering.check_device(meta)
    index_vars = lowering.fresh_vars(shape)

    def operand(value, dtype=None):
        if isinstance(value, TensorValue):
            return value.load(views.broadcast_index(index_vars, shape, value.shape))
        if isinstance(value, (bool, int, float)):
            return Constant(value, dtype or _scalar_dtype(value))
        if isinstance(value, sympy.Expr):
            return SizeValue(value, torch.int64)  # converted to the operand dtype where used
        raise NoLowering(f"operand {type(value).__name__}")

    body = build(operand, index_vars)
    name = lowering.fresh_name()
    lowering.graph.add(PointwiseNode(name, shape, meta.dtype, index_vars, body, lowering.stride_of(meta)))
    return TensorValue.of_buffer(name, shape, meta.dtype)


def empty_result(lowering, meta: torch.Tensor) -> TensorValue:
    """A tensor without elements: a buffer the wrapper allocates, which no kernel fills."""
    lowering.check_device(meta)
    shape = lowering.shape_of(meta)
    name = lowering.fresh_name()
    lowering.graph.add(PointwiseNode(name, shape, meta.dtype, lowering.fresh_vars(shape), Constant(0, meta.dtype),
                                     lowering.stride_of(meta)))
    return TensorValue.of_buffer(name, shape, meta.dtype)


def _operand_dtype(op_name: PointwiseOp, result: torch.dtype, args) -> torch.dtype:
    if op_name in COMPARISONS:
        return _promoted(args)
    if op_name in LOGICAL:
        return torch.bool
    return result


def lower_pointwise(op_name: PointwiseOp, lowering, node, meta, *args, **kwargs) -> TensorValue:
    if kwargs:
        raise NoLowering(f"{op_name} with {sorted(kwargs)}")
    operand_dtype = _operand_dtype(op_name, meta.dtype, args)
    if op_name in (PointwiseOp.FLOOR, PointwiseOp.CEIL) and not meta.dtype.is_floating_point:
        op_name = PointwiseOp.IDENTITY  # an integer is its own floor (a double would round it)

    def build(operand, _vars):
        return Op(op_name, tuple(operand(a, operand_dtype) for a in args), meta.dtype, operand_dtype)

    return pointwise_node(lowering, meta, build)


def lower_bitwise_of_bools(op_name: PointwiseOp, lowering, node, meta, *args) -> TensorValue:
    """``bitwise_and``/``or``/``xor``/``not`` of bools are the logical ops (masks, as in
    the embedding backward's); on integers they are bit operations, not lowered."""
    if meta.dtype != torch.bool or not all(a.dtype == torch.bool if isinstance(a, TensorValue) else type(a) is bool
                                           for a in args):
        raise NoLowering(f"{op_name} of integers")
    return lower_pointwise(op_name, lowering, node, meta, *args)


def lower_add_sub(op_name: PointwiseOp, lowering, node, meta, left, right, alpha=1) -> TensorValue:
    def build(operand, _vars):
        scaled = operand(right, meta.dtype)
        if alpha != 1:
            scaled = Op(PointwiseOp.MUL, (scaled, Constant(alpha, meta.dtype)), meta.dtype, meta.dtype)
        return Op(op_name, (operand(left, meta.dtype), scaled), meta.dtype, meta.dtype)

    return pointwise_node(lowering, meta, build)


_ROUNDED = {"trunc": PointwiseOp.TRUNCDIV, "floor": PointwiseOp.FLOOR_DIVIDE}


def _integer_divisor(meta, right) -> bool:
    """Integer division a kernel computes exactly: by a constant that is neither 0 (ATen
    raises) nor -1 (the lowest integer overflows: a trap in C)."""
    return (not meta.dtype.is_floating_point and meta.dtype != torch.bool and isinstance(right, int)
            and not isinstance(right, bool) and right not in (0, -1))


def lower_div(lowering, node, meta, left, right, rounding_mode=None) -> TensorValue:
    if rounding_mode is None:
        if not meta.dtype.is_floating_point:
            raise NoLowering("true division to an integer result")
        return lower_pointwise(PointwiseOp.TRUEDIV, lowering, node, meta, left, right)
    if rounding_mode not in _ROUNDED or not _integer_divisor(meta, right):
        raise NoLowering(f"division with rounding {rounding_mode!r} of {meta.dtype} by {right!r}")
    return lower_pointwise(_ROUNDED[rounding_mode], lowering, node, meta, left, right)


def lower_floor_divide(lowering, node, meta, left, right) -> TensorValue:
    return lower_div(lowering, node, meta, left, right, "floor")


def lower_remainder(lowering, node, meta, left, right) -> TensorValue:
    if not _integer_divisor(meta, right):
        raise NoLowering(f"remainder of {meta.dtype} by {right!r}")
    return lower_pointwise(PointwiseOp.REMAINDER, lowering, node, meta, left, right)


def lower_where(lowering, node, meta, condition, left, right) -> TensorValue:
    def build(operand, _vars):
        return Op(PointwiseOp.WHERE, (operand(condition, torch.bool), operand(left, meta.dtype), operand(right, meta.dtype)),
                  meta.dtype, meta.dtype)

    return pointwise_node(lowering, meta, build)


def lower_clamp(lowering, node, meta, value, low=None, high=None) -> TensorValue:
    def build(operand, _vars):
        body = operand(value, meta.dtype)
        if low is not None:
            body = Op(PointwiseOp.CLAMP_MIN, (body, operand(low, meta.dtype)), meta.dtype, meta.dtype)
        if high is not None:
            body = Op(PointwiseOp.CLAMP_MAX, (body, operand(high, meta.dtype)), meta.dtype, meta.dtype)
        return body

    return pointwise_node(lowering, meta, build)


# x ** e for the exponents that have an exact Triton spelling.
_MUL, _ROOTS = PointwiseOp.MUL, (PointwiseOp.SQRT, PointwiseOp.RSQRT, PointwiseOp.RECIPROCAL)
_POW_RULES = {1: (), 2: (_MUL,), 3: (_MUL, _MUL), 4: (_MUL, _MUL, _MUL), 0.5: (PointwiseOp.SQRT,),
              -0.5: (PointwiseOp.RSQRT,), -1: (PointwiseOp.RECIPROCAL,)}


def lower_pow_scalar(lowering, node, meta, base, exponent) -> TensorValue:
    if isinstance(exponent, bool) or not isinstance(exponent, (int, float)) or exponent not in _POW_RULES:
        raise NoLowering(f"pow with exponent {exponent}")
    if not meta.dtype.is_floating_point and exponent not in (1, 2, 3, 4):
        raise NoLowering("integer pow with a fractional exponent")
    steps = _POW_RULES[exponent]

    def build(operand, _vars):
        x = operand(base, meta.dtype)
        if steps and steps[0] in _ROOTS:
            return Op(steps[0], (x,), meta.dtype, meta.dtype)
        body = x if steps else Op(PointwiseOp.IDENTITY, (x,), meta.dtype, meta.dtype)
        for _ in steps:
            body = Op(PointwiseOp.MUL, (body, x), meta.dtype, meta.dtype)
        return body

    return pointwise_node(lowering, meta, build)


def converted_copy(lowering, meta, source: TensorValue) -> TensorValue:
    """A pointwise node of ``meta``'s shape holding ``source`` (broadcast) in ``meta``'s
    dtype: the value of casts, clones, copies and a cat of one non-empty input."""

    def build(operand, _vars):
        value = operand(source)
        if source.dtype == meta.dtype:
            return Op(PointwiseOp.IDENTITY, (value,), meta.dtype, meta.dtype)
        return Op(PointwiseOp.CAST, (value,), meta.dtype, None, (meta.dtype,))

    return pointwise_node(lowering, meta, build)


def lower_cast(lowering, node, meta, value, dtype=None, **kwargs) -> TensorValue:
    device = kwargs.pop("device", None)
    kwargs.pop("memory_format", None)
    kwargs.pop("layout", None)
    kwargs.pop("pin_memory", None)
    kwargs.pop("non_blocking", None)
    if kwargs or (device is not None and torch.device(device) != meta.device):
        raise NoLowering("copy to another device")
    if not isinstance(value, TensorValue):
        raise NoLowering("cast of a non-tensor")
    return converted_copy(lowering, meta, value)


def lower_clone(lowering, node, meta, value, memory_format=None) -> TensorValue:
    return lower_cast(lowering, node, meta, value)


def lower_copy(lowering, node, meta, destination, source, non_blocking=False) -> TensorValue:
    """``copy(destination, source)``: ``source`` broadcast to the destination's shape and
    converted to its dtype (what ``copy_`` leaves in it); the destination's values unread."""
    if not isinstance(source, TensorValue):
        raise NoLowering("copy from a non-tensor")
    return converted_copy(lowering, meta, source)


def lower_empty(lowering, node, meta, *args, **kwargs) -> TensorValue:
    """``empty``: its values are unspecified, so zeros are as good as any (and a dead
    ``empty``, as decompositions leave them, costs nothing)."""
    return pointwise_node(lowering, meta, lambda operand, _vars: Constant(0, meta.dtype))


def lower_fill(lowering, node, meta, *args, **kwargs) -> TensorValue:
    """full / full_like / fill / scalar_tensor: a constant of the result's shape."""
    value = args[0] if node.target is aten.scalar_tensor.default else args[1]
    if isinstance(value, sympy.Expr):
        return pointwise_node(lowering, meta, lambda operand, _vars: operand(value))
    if not isinstance(value, (bool, int, float)):
        raise NoLowering("fill with a tensor value")
    return pointwise_node(lowering, meta, lambda operand, _vars: Constant(value, meta.dtype))


def lower_iota(lowering, node, meta, length, *, start, step, **_ignored) -> TensorValue:
    if start < 0 or step <= 0 or not isinstance(start, int) or not isinstance(step, int):
        raise NoLowering("iota with a negative start or step")
    return pointwise_node(lowering, meta, lambda operand, index_vars: IndexValue(add(mul(index_vars[0], step), start), meta.dtype))


def lower_reduction(reduction_type: ReductionType, lowering, node, meta, value, dims=None, keepdim=False, **kwargs) -> TensorValue:
    kwargs.pop("dtype", None)
    if kwargs or not isinstance(value, TensorValue):
        raise NoLowering("reduction with unexpected arguments")
    rank = len(value.shape)
    # ATen reads an empty dim list as "all dims" for sum and amax/amin.
    if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
        reduced = tuple(range(rank))
    else:
        dims = [dims] if isinstance(dims, int) else dims
        reduced = tuple(sorted({d % max(rank, 1) for d in dims})) if rank else ()
    full_shape = value.shape
    if 0 in full_shape:
        raise NoLowering("a reduction over no elements")  # ATen's identity or error
    index_vars = lowering.fresh_vars(full_shape)
    name = lowering.fresh_name()
    body = value.load(index_vars)
    shape = lowering.shape_of(meta)
    lowering.graph.add(ReductionNode(name, shape, meta.dtype, full_shape, reduced, reduction_type,
                                     index_vars, body, lowering.stride_of(meta)))
    return TensorValue.of_buffer(name, shape, meta.dtype)


def lower_prims_sum(lowering, node, meta, value, dims, **kwargs) -> TensorValue:
    if not dims:
        raise NoLowering("prims.sum over no dims")
    return lower_reduction(ReductionType.SUM, lowering, node, meta, value, dims, False, **kwargs)


def lower_total(reduction_type: ReductionType, lowering, node, meta, value, dtype=None) -> TensorValue:
    return lower_reduction(reduction_type, lowering, node, meta, value, None, False)


def lower_arg_reduction(reduction_type: ReductionType, lowering, node, meta, value, dim=None, keepdim=False) -> TensorValue:
    if dim is None and len(value.shape) > 1 and keepdim:
        raise NoLowering("argmax over all dims with keepdim")
    return lower_reduction(reduction_type, lowering, node, meta, value, dim, keepdim)


# A cat of more pieces stays an extern: each output element would select among them all.
_CAT_PIECES = 4


def lower_cat(lowering, node, meta, tensors, dim=0) -> TensorValue:
    """``cat`` along a dimension whose pieces have static lengths: one pointwise node that
    selects, by the index along ``dim``, the piece holding it (so a cat fuses with the
    pieces' producers and its consumers). Every piece is loaded at an index in its
    bounds, ``(i - offset) mod length``, which is the element's own where the piece is
    selected; a cat of one non-empty input is a copy of it."""
    kept = [t for t in tensors if not (isinstance(t, TensorValue) and _statically_empty(t.shape))]
    shape = lowering.shape_of(meta)
    if len(kept) == 1 and isinstance(kept[0], TensorValue) and tuple(kept[0].shape) == shape:
        return converted_copy(lowering, meta, kept[0])
    if not 1 < len(kept) <= _CAT_PIECES or not all(isinstance(t, TensorValue) for t in kept):
        raise NoLowering("cat of several non-empty inputs")
    dim = dim % len(shape)
    lengths = [t.shape[dim] for t in kept]
    if not all(isinstance(length, int) for length in lengths) or not all(
            tuple(t.shape[:dim]) == shape[:dim] and tuple(t.shape[dim + 1:]) == shape[dim + 1:] for t in kept):
        raise NoLowering("cat along a symbolic size")

    def build(_operand, index_vars):
        position = index_vars[dim]
        offsets = [sum(lengths[:k]) for k in range(len(kept))]
        body = None
        for piece, offset, length in reversed(list(zip(kept, offsets, lengths, strict=True))):
            index = list(index_vars)
            index[dim] = mod(add(position, (-offset) % length), length)
            value = piece.load(tuple(index))
            if piece.dtype != meta.dtype:
                value = Op(PointwiseOp.CAST, (value,), meta.dtype, None, (meta.dtype,))
            if body is None:
                body = value  # the last piece: every index past the others
                continue
            inside = Op(PointwiseOp.LT, (IndexValue(position, torch.int64), Constant(offset + length, torch.int64)),
                        torch.bool, torch.int64)
            body = Op(PointwiseOp.WHERE, (inside, value, body), meta.dtype, meta.dtype)
        return body

    return pointwise_node(lowering, meta, build)


def _statically_empty(shape: tuple) -> bool:
    return any(isinstance(size, int) and size == 0 for size in shape)


def lower_arange(lowering, node, meta, *args, **kwargs) -> TensorValue:
    """``arange(start, end, step)`` of ints: ``start + step * i``."""
    start, step = (0, 1) if len(args) < 2 else (args[0], args[2] if len(args) > 2 else 1)
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (start, step)) or meta.dtype != torch.int64:
        raise NoLowering("arange of floats or symbolic bounds")
    if start < 0 or step <= 0:
        raise NoLowering("arange with a negative start or step")
    return pointwise_node(lowering, meta, lambda operand, index_vars: IndexValue(
        add(mul(index_vars[0], step), start), meta.dtype))


# ---- views ---------------------------------------------------------------------------

def _call(lowering, node) -> tuple:
    """The view call to replay on a real tensor; sizes computed in the graph (symbolic
    ``sym_size`` nodes) become their size expressions."""
    args = tuple(lowering.lookup(a) if not isinstance(a, (list, tuple)) else type(a)(map(lowering.lookup, a))
                 for a in node.args[1:])
    return (node.target, args, dict(node.kwargs))


def lower_view(lowering, node, meta, value, *args, **kwargs) -> TensorValue:
    return views.reshape(value, lowering.shape_of(meta), _call(lowering, node))


def lower_permute(lowering, node, meta, value, dims) -> TensorValue:
    return views.permute(value, dims, node.target, tuple(node.args[1:]))


def lower_transpose(lowering, node, meta, value, dim0=0, dim1=1) -> TensorValue:
    dims = list(range(len(value.shape)))
    if dims:
        dim0, dim1 = dim0 % len(dims), dim1 % len(dims)
        dims[dim0], dims[dim1] = dims[dim1], dims[dim0]
    return views.permute(value, dims, node.target, tuple(node.args[1:]))


def lower_expand(lowering, node, meta, value, *args, **kwargs) -> TensorValue:
    return views.expand(value, lowering.shape_of(meta), _call(lowering, node))


def lower_unsqueeze(lowering, node, meta, value, dim) -> TensorValue:
    return views.unsqueeze(value, dim, _call(lowering, node))


def lower_squeeze(lowering, node, meta, value, dims=None) -> TensorValue:
    if dims is None:
        dims = list(range(len(value.shape)))
    elif isinstance(dims, int):
        dims = [dims]
    return views.squeeze(value, dims, _call(lowering, node))


def lower_slice(lowering, node, meta, value, dim=0, start=None, end=None, step=1) -> TensorValue:
    dim = dim % len(value.shape)
    size = value.shape[dim]
    start = 0 if start is None else start
    if isinstance(size, int) and isinstance(start, int):
        start = max(0, min(size, start + size if start < 0 else start))
    elif isinstance(start, int) and start < 0:
        start = size + start  # from the end; must also be provably in range (below)
    if not (isinstance(step, int) and sizes.provably_le(0, start) and sizes.provably_le(start, size)):
        # a symbolic bound ATen clamps or wraps: the clamp is not known when generating
        raise NoLowering(f"slice from {start} of a dimension of size {size}")
    return views.slice_view(value, dim, start, step, lowering.shape_of(meta), _call(lowering, node))


def lower_select(lowering, node, meta, value, dim, index) -> TensorValue:
    size = value.shape[dim % len(value.shape)]
    if not (isinstance(size, int) and isinstance(index, int)):
        index = size + index if isinstance(index, int) and index < 0 else index
        if not (sizes.provably_le(0, index) and sizes.provably_le(index + 1, size)):
            raise NoLowering(f"select of {index} in a dimension of size {size}")
    return views.select(value, dim, index, _call(lowering, node))


def lower_split_with_sizes(lowering, node, meta, value, split_sizes, dim=0) -> tuple:
    """The pieces of a split: slices of the value along ``dim`` (views, no copy)."""
    if not isinstance(value, TensorValue) or not all(isinstance(s, int) for s in split_sizes):
        raise NoLowering("split of a symbolic size")
    dim = dim % len(value.shape)
    pieces, start = [], 0
    for size, piece in zip(split_sizes, meta, strict=True):
        call: tuple = (aten.slice.Tensor, (dim, start, start + size, 1), {})
        pieces.append(views.slice_view(value, dim, start, 1, lowering.shape_of(piece), call))
        start += size
    return tuple(pieces)


def lower_split(lowering, node, meta, value, split_size, dim=0) -> tuple:
    if not isinstance(split_size, int) or not isinstance(value, TensorValue):
        raise NoLowering("split by a symbolic size")
    sizes = [lowering.shape_of(piece)[dim % len(value.shape)] for piece in meta]
    return lower_split_with_sizes(lowering, node, meta, value, sizes, dim)


def lower_unbind(lowering, node, meta, value, dim=0) -> tuple:
    if not isinstance(value, TensorValue):
        raise NoLowering("unbind of a non-tensor")
    dim = dim % len(value.shape)
    return tuple(views.select(value, dim, index, (aten.select.int, (dim, index), {})) for index in range(len(meta)))


def lower_alias(lowering, node, meta, value) -> TensorValue:
    return value.derive(value.shape, lambda index: index, _call(lowering, node))


def lower_broadcast_in_dim(lowering, node, meta, value, shape, broadcast_dims) -> TensorValue:
    return views.broadcast_in_dim(value, lowering.shape_of(meta), broadcast_dims, _call(lowering, node))


_POINTWISE_PACKETS = ("neg", "abs", "exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sin", "cos", "erf", "sigmoid",
                      "tanh", "relu", "reciprocal", "mul", "maximum", "minimum", "eq", "ne", "lt", "le", "gt", "ge",
                      "logical_and", "logical_or", "logical_xor", "logical_not", "isnan", "floor", "ceil")

LOWERINGS: dict = {getattr(aten, packet): partial(lower_pointwise, PointwiseOp(packet)) for packet in _POINTWISE_PACKETS}
LOWERINGS.update({
    aten.bitwise_and: partial(lower_bitwise_of_bools, PointwiseOp.LOGICAL_AND),
    aten.bitwise_or: partial(lower_bitwise_of_bools, PointwiseOp.LOGICAL_OR),
    aten.bitwise_xor: partial(lower_bitwise_of_bools, PointwiseOp.LOGICAL_XOR),
    aten.bitwise_not: partial(lower_bitwise_of_bools, PointwiseOp.LOGICAL_NOT),
    aten.add: partial(lower_add_sub, PointwiseOp.ADD),
    aten.sub: partial(lower_add_sub, PointwiseOp.SUB),
    aten.div: lower_div,
    aten.floor_divide: lower_floor_divide,
    aten.remainder: lower_remainder,
    prims.div: lower_div,
    aten.where: lower_where,
    aten.clamp: lower_clamp,
    aten.pow.Tensor_Scalar: lower_pow_scalar,
    aten._to_copy: lower_cast,
    prims.convert_element_type: lower_cast,
    aten.clone: lower_clone,
    aten.full: lower_fill,
    aten.copy.default: lower_copy,
    aten.empty.memory_format: lower_empty,
    aten.empty_strided.default: lower_empty,
    aten.full_like: lower_fill,
    aten.scalar_tensor: lower_fill,
    aten.fill.Scalar: lower_fill,
    prims.iota: lower_iota,
    aten.sum.dim_IntList: partial(lower_reduction, ReductionType.SUM),
    aten.sum.default: partial(lower_total, ReductionType.SUM),
    prims.sum: lower_prims_sum,
    aten.amax: partial(lower_reduction, ReductionType.MAX),
    aten.amin: partial(lower_reduction, ReductionType.MIN),
    aten.max.default: partial(lower_total, ReductionType.MAX),
    aten.min.default: partial(lower_total, ReductionType.MIN),
    aten.argmax: partial(lower_arg_reduction, ReductionType.ARGMAX),
    aten.argmin: partial(lower_arg_reduction, ReductionType.ARGMIN),
    aten.cat: lower_cat,
    aten.arange.start_step: lower_arange,
    aten.arange.start: lower_arange,
    aten.arange.default: lower_arange,
    aten.view: lower_view,
    aten._unsafe_view: lower_view,
    aten.reshape: lower_view,
    prims.reshape: lower_view,
    aten.permute: lower_permute,
    aten.transpose.int: lower_transpose,
    aten.t: lower_transpose,
    aten.expand: lower_expand,
    aten.unsqueeze: lower_unsqueeze,
    aten.squeeze: lower_squeeze,
    aten.slice.Tensor: lower_slice,
    aten.select.int: lower_select,
    aten.alias: lower_alias,
    prims.broadcast_in_dim: lower_broadcast_in_dim,
})

# Views that return several tensors (``meta`` is their list).
MULTI_VIEWS: dict = {
    aten.split_with_sizes: lower_split_with_sizes,
    aten.split.Tensor: lower_split,
    aten.unbind.int: lower_unbind,
}
