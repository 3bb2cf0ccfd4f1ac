"""The kernel IR: a graph of pointwise, reduction and extern nodes over named buffers.

Every node defines one buffer. A pointwise node says what its element at index
``vars`` is; a reduction node says what the element of its *input space* (``full_shape``)
is and which dimensions it folds; an extern node is an ATen call on materialised
tensors. Bodies read other nodes only through :class:`Load` with a per-dimension
index into that node's shape, so views never need buffers of their own.

>>> from fastdynamo.backends.kernels.indexing import Var
>>> g = KernelGraph()
>>> g.add(InputNode("arg0", (4,), (1,), torch.float32))
>>> i = Var("i0", 4)
>>> g.add(PointwiseNode("buf0", (4,), torch.float32, (i,),
...                     Op(PointwiseOp.EXP, (Load("arg0", (i,), torch.float32),), torch.float32)))
>>> g.outputs = [OutputRef("buf0")]
>>> g.verify()
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator, Union

import torch

from . import indexing, sizes
from .opset import PointwiseOp, ReductionType

ValueExpr = Union["Load", "Constant", "Op", "IndexValue", "SizeValue"]


@dataclass(frozen=True)
class Load:
    """The element of buffer ``buffer`` at multi-dimensional ``index``."""

    buffer: str
    index: tuple
    dtype: torch.dtype


@dataclass(frozen=True)
class Constant:
    value: Any
    dtype: torch.dtype


@dataclass(frozen=True)
class Op:
    """A pointwise operation of the IR (:class:`opset.PointwiseOp`).

    ``operand_dtype`` is the dtype arguments are converted to before the operation
    (ATen's type promotion, decided at lowering); ``dtype`` is the result's dtype.
    ``params`` holds non-tensor attributes such as a cast's target.
    """

    name: PointwiseOp
    args: tuple
    dtype: torch.dtype
    operand_dtype: torch.dtype | None = None
    params: tuple = ()


@dataclass(frozen=True)
class IndexValue:
    """An index expression used as a value (``arange``/``iota``)."""

    index: indexing.IndexExpr
    dtype: torch.dtype


@dataclass(frozen=True)
class SizeValue:
    """A symbolic size used as a value (``x * x.shape[0]`` under dynamic shapes): a
    :data:`sizes.Size` expression the kernel computes from its size arguments."""

    size: Any
    dtype: torch.dtype


@dataclass
class InputNode:
    """A graph input: a tensor the wrapper receives."""

    name: str
    shape: tuple
    stride: tuple
    dtype: torch.dtype
    kind = "input"


@dataclass
class PointwiseNode:
    name: str
    shape: tuple
    dtype: torch.dtype
    vars: tuple
    body: ValueExpr
    stride: tuple | None = None  # layout when realised; from the ATen value's strides
    kind = "pointwise"


@dataclass
class ReductionNode:
    """Folds ``reduced_dims`` of ``body`` (defined over ``full_shape`` with ``vars``)."""

    name: str
    shape: tuple
    dtype: torch.dtype
    full_shape: tuple
    reduced_dims: tuple
    reduction_type: ReductionType
    vars: tuple
    body: ValueExpr
    stride: tuple | None = None
    kind = "reduction"

    @property
    def keepdim(self) -> bool:
        return len(self.shape) == len(self.full_shape) and len(self.full_shape) > 0

    def output_index(self, full_index: tuple) -> tuple:
        """Index into this node's output for an index into its input space."""
        if self.keepdim:
            return tuple(
                indexing.ZERO if d in self.reduced_dims else e for d, e in enumerate(full_index)
            )
        return tuple(e for d, e in enumerate(full_index) if d not in self.reduced_dims)


@dataclass(frozen=True)
class BufferArg:
    """A tensor argument of an extern: a buffer, then ATen view calls replayed on it.

    ``layout`` is the view's ``(shape, stride, offset)`` when it is static, the offset
    counted from the buffer's own storage offset: where the buffer's strides are known
    at run time the wrapper then makes the view in one call instead of replaying the chain."""

    buffer: str
    view_chain: tuple = ()
    layout: tuple | None = None


@dataclass(frozen=True)
class ExternOutput:
    name: str
    shape: tuple
    stride: tuple
    dtype: torch.dtype


@dataclass
class ExternNode:
    """An ATen call for what has no lowering; ``outputs`` are its tensor results in order.

    ``result_path`` says where each output sits in the op's return value: ``()`` for a
    single tensor, ``(i,)`` for element ``i`` of a tuple.
    """

    name: str
    target: Any
    args: tuple
    kwargs: dict
    outputs: tuple
    result_paths: tuple
    spelling: str | None = None  # a faster function running the same overload (externs.py)
    kind = "extern"


@dataclass(frozen=True)
class OutputRef:
    """A graph output: a buffer with view calls, or ``constant`` for a Python value."""

    buffer: str | None
    view_chain: tuple = ()
    constant: Any = None
    layout: tuple | None = None  # as BufferArg's


Node = Union[InputNode, PointwiseNode, ReductionNode, ExternNode]


class IRVerificationError(AssertionError):
    """The kernel IR broke one of its invariants (a bug in a pass)."""


@dataclass
class KernelGraph:
    """Nodes in topological order plus the outputs; see the module docstring."""

    nodes: list = field(default_factory=list)
    outputs: list = field(default_factory=list)
    # The wrapper's arguments in order: input nodes' names, and for symbolic graphs the
    # int inputs too (None: every input node, in order).
    arguments: list | None = None
    # Input nodes that are not arguments: tensors the trace made, written into the module.
    constants: dict = field(default_factory=dict)
    # Symbolic sizes: symbol name -> where ``call`` reads it, (kind, argument, dim) with
    # kind "size", "stride", "offset" or "value" (see :mod:`symbolic`).
    size_bindings: dict = field(default_factory=dict)
    # Inputs written in place: (argument name, position in ``outputs`` of its new value);
    # those outputs are stored into the argument, not returned (wrapper.py).
    input_writes: list = field(default_factory=list)

    def add(self, node: Node) -> None:
        self.nodes.append(node)

    def node_map(self) -> dict[str, Node]:
        return {node.name: node for node in self.nodes}

    def buffer_meta(self) -> dict[str, tuple]:
        """name -> (shape, stride or None, dtype) for every buffer, extern outputs included."""
        meta: dict[str, tuple] = {}
        for node in self.nodes:
            if isinstance(node, ExternNode):
                for out in node.outputs:
                    meta[out.name] = (out.shape, out.stride, out.dtype)
            else:
                meta[node.name] = (node.shape, node.stride, node.dtype)
        return meta

    def verify(self) -> None:
        """Check the invariants every pass must keep; raise IRVerificationError."""
        seen: dict[str, tuple] = {}
        for node in self.nodes:
            _check(node.name not in seen, f"{node.name} defined twice")
            if isinstance(node, (PointwiseNode, ReductionNode)):
                space = node.shape if isinstance(node, PointwiseNode) else node.full_shape
                _check(len(node.vars) == len(space), f"{node.name}: one var per dimension")
                for var, size in zip(node.vars, space, strict=True):
                    _check(var.extent == size, f"{node.name}: var {var.name} extent {var.extent} != {size}")
                scope = {var.name for var in node.vars}
                _verify_expr(node.body, seen, scope, node.name)
            if isinstance(node, ReductionNode):
                _check(isinstance(node.reduction_type, ReductionType), f"{node.name}: unknown reduction")
                _check(all(0 <= d < len(node.full_shape) for d in node.reduced_dims), f"{node.name}: bad dims")
                expected = tuple(s for d, s in enumerate(node.full_shape) if d not in node.reduced_dims)
                actual = tuple(s for d, s in enumerate(node.shape) if not (node.keepdim and d in node.reduced_dims))
                _check(expected == actual, f"{node.name}: output shape {node.shape} does not match reduction")
            if isinstance(node, ExternNode):
                for arg in _iter_buffer_args((node.args, node.kwargs)):
                    _check(arg.buffer in seen, f"{node.name}: extern reads undefined {arg.buffer}")
                for out in node.outputs:
                    seen[out.name] = (out.shape, out.dtype)
            else:
                seen[node.name] = (node.shape, node.dtype)
        for out in self.outputs:
            _check(out.buffer is None or out.buffer in seen, f"output reads undefined {out.buffer}")


def iter_loads(expr: object) -> Iterator[Load]:
    """Every Load inside a value expression."""
    if isinstance(expr, Load):
        yield expr
    elif isinstance(expr, Op):
        for arg in expr.args:
            yield from iter_loads(arg)


def _iter_buffer_args(value: object) -> Iterator[BufferArg]:
    if isinstance(value, BufferArg):
        yield value
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _iter_buffer_args(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _iter_buffer_args(item)


def extern_buffer_args(node: ExternNode) -> list[BufferArg]:
    return list(_iter_buffer_args((node.args, node.kwargs)))


def _verify_expr(expr: object, seen: dict, scope: set, owner: str) -> None:
    if isinstance(expr, Load):
        _check(expr.buffer in seen, f"{owner}: loads undefined buffer {expr.buffer}")
        shape, dtype = seen[expr.buffer]
        _check(len(expr.index) == len(shape), f"{owner}: index rank {len(expr.index)} for {expr.buffer}{list(shape)}")
        _check(expr.dtype == dtype, f"{owner}: load of {expr.buffer} as {expr.dtype}, buffer is {dtype}")
        for e, size in zip(expr.index, shape, strict=True):
            _check(indexing.free_vars(e) <= scope, f"{owner}: index uses vars out of scope")
            _check(sizes.provably_le(indexing.upper_bound(e), sizes.at_least_one(size)),
                   f"{owner}: index {indexing.render(e)} out of bounds of {size}")
    elif isinstance(expr, Op):
        _check(isinstance(expr.name, PointwiseOp), f"{owner}: unknown op {expr.name}")
        for arg in expr.args:
            _verify_expr(arg, seen, scope, owner)
    elif isinstance(expr, IndexValue):
        _check(indexing.free_vars(expr.index) <= scope, f"{owner}: index value out of scope")
    elif not isinstance(expr, (Constant, SizeValue)):
        raise IRVerificationError(f"{owner}: not a value expression: {expr!r}")


def _check(condition: bool, message: str) -> None:
    if not condition:
        raise IRVerificationError(message)
