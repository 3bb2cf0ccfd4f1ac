"""Tensor values during lowering, and the ATen view ops as index maps.

A view never gets a buffer: it is a function from an index into the view to an index
into its base buffer, plus the ATen calls that rebuild it as a real view when a
tensor object is needed (an extern's argument, a graph output).

>>> from fastdynamo.backends.kernels.indexing import Var, render
>>> base = TensorValue.of_buffer("arg0", (4, 6), torch.float32)
>>> t = permute(base, [1, 0], "aten.permute")
>>> [render(e) for e in t.index_fn((Var("a", 6), Var("b", 4)))]
['b', 'a']
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import torch

from . import indexing
from .indexing import ZERO
from .ir import Load


@dataclass(frozen=True)
class TensorValue:
    """What an ATen tensor value is during lowering: a (view of a) buffer."""

    base: str
    shape: tuple
    dtype: torch.dtype
    index_fn: Callable[[tuple], tuple]
    view_chain: tuple = ()

    @staticmethod
    def of_buffer(name: str, shape: tuple, dtype: torch.dtype) -> "TensorValue":
        return TensorValue(name, tuple(shape), dtype, lambda index: tuple(index))

    def load(self, index: tuple) -> Load:
        return Load(self.base, tuple(self.index_fn(tuple(index))), self.dtype)

    def derive(self, shape: tuple, to_self: Callable[[tuple], tuple], call: tuple) -> "TensorValue":
        """A view of this value: ``to_self`` maps the view's index to this value's index;
        ``call`` is the ATen view call ``(target, args, kwargs)`` without the tensor."""
        parent = self.index_fn
        return TensorValue(
            self.base,
            tuple(shape),
            self.dtype,
            lambda index: parent(to_self(tuple(index))),
            self.view_chain + (call,),
        )


def permute(value: TensorValue, dims, target: Any, call_args: tuple | None = None) -> TensorValue:
    dims = [d % max(len(value.shape), 1) for d in dims]
    shape = tuple(value.shape[d] for d in dims)

    def to_self(index):
        source = [None] * len(dims)
        for out_dim, in_dim in enumerate(dims):
            source[in_dim] = index[out_dim]
        return tuple(source)

    return value.derive(shape, to_self, (target, call_args if call_args is not None else (list(dims),), {}))


def expand(value: TensorValue, out_shape: tuple, call: tuple) -> TensorValue:
    """Broadcast ``value`` to ``out_shape`` (new leading dims, size-1 dims stretched)."""
    lead = len(out_shape) - len(value.shape)

    def to_self(index):
        return tuple(
            ZERO if size == 1 and out_shape[lead + d] != 1 else index[lead + d]
            for d, size in enumerate(value.shape)
        )

    return value.derive(out_shape, to_self, call)


def broadcast_index(index: tuple, out_shape: tuple, in_shape: tuple) -> tuple:
    """Index into an operand of shape ``in_shape`` broadcast to ``out_shape``."""
    lead = len(out_shape) - len(in_shape)
    return tuple(
        ZERO if size == 1 and out_shape[lead + d] != 1 else index[lead + d]
        for d, size in enumerate(in_shape)
    )


def reshape(value: TensorValue, out_shape: tuple, call: tuple) -> TensorValue:
    """Row-major reinterpretation: what view/reshape mean for the values."""
    in_shape = value.shape

    def to_self(index):
        return indexing.unravel(indexing.ravel(index, out_shape), in_shape)

    return value.derive(out_shape, to_self, call)


def unsqueeze(value: TensorValue, dim: int, call: tuple) -> TensorValue:
    dim = dim % (len(value.shape) + 1)
    shape = value.shape[:dim] + (1,) + value.shape[dim:]
    return value.derive(shape, lambda index: index[:dim] + index[dim + 1:], call)


def squeeze(value: TensorValue, removed_dims, call: tuple) -> TensorValue:
    """Drop the size-1 dims in ``removed_dims`` (dims of another size stay, as in ATen)."""
    rank = max(len(value.shape), 1)
    removed = {d % rank for d in removed_dims if value.shape and value.shape[d % rank] == 1}
    kept = [d for d in range(len(value.shape)) if d not in removed]
    shape = tuple(value.shape[d] for d in kept)

    def to_self(index):
        positions = {d: i for i, d in enumerate(kept)}
        return tuple(index[positions[d]] if d in positions else ZERO for d in range(len(value.shape)))

    return value.derive(shape, to_self, call)


def slice_view(value: TensorValue, dim: int, start: int, step: int, out_shape: tuple, call: tuple) -> TensorValue:
    dim = dim % len(value.shape)

    def to_self(index):
        return index[:dim] + (indexing.add(indexing.mul(index[dim], step), start),) + index[dim + 1:]

    return value.derive(out_shape, to_self, call)


def select(value: TensorValue, dim: int, position, call: tuple) -> TensorValue:
    """``position`` is an int, or a symbolic one proved in range by the caller."""
    dim = dim % len(value.shape)
    if isinstance(position, int) and isinstance(value.shape[dim], int):
        position = position % value.shape[dim]
    shape = value.shape[:dim] + value.shape[dim + 1:]
    return value.derive(shape, lambda index: index[:dim] + (indexing.as_index(position),) + index[dim:], call)


def broadcast_in_dim(value: TensorValue, out_shape: tuple, broadcast_dims, call: tuple) -> TensorValue:
    def to_self(index):
        return tuple(
            ZERO if size == 1 and out_shape[out_dim] != 1 else index[out_dim]
            for size, out_dim in zip(value.shape, broadcast_dims, strict=True)
        )

    return value.derive(out_shape, to_self, call)
