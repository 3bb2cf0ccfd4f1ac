"""Shape rules for view ops (see ``shape_rules.py``): the input's storage with other sizes,
strides and offset, made with ``as_strided`` as torch's own kernels make them.

>>> sorted(str(op) for op in VIEW_RULES)[:2]
['aten._unsafe_view.default', 'aten.select.int']
"""
from __future__ import annotations

import sys
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from .rule_support import Rule, as_view, aten, expr, plain, positive

__all__ = ["VIEW_RULES"]


def _view(mode: FakeTensorMode, args: tuple, kwargs: dict) -> Any:
    """``view``/``_unsafe_view``: the new sizes (one -1 inferred as torch infers it), when
    they keep, split or merge the input's dims group by group with identical products
    (merged dims contiguous among themselves); strides follow each group."""
    if kwargs or len(args) != 2 or not plain(mode, args[0], floats=False):
        return None
    x, shape = args
    if isinstance(x.storage_offset(), torch.SymInt):
        return None
    inferred = [i for i, size in enumerate(shape) if type(size) is int and size == -1]
    known = [size for size in shape if not (type(size) is int and size == -1)]
    if len(inferred) > 1 or not all(positive(expr(size)) for size in known):
        return None
    product: Any = 1
    for size in known:
        product = product * size
    sizes = list(shape)
    if inferred:
        sizes[inferred[0]] = x.numel() // product
        if not positive(expr(sizes[inferred[0]])):
            return None
    old = [(size, stride) for size, stride in zip(x.shape, x.stride(), strict=True) if expr(size) != 1]
    strides = _view_strides(old, sizes)
    return None if strides is None else as_view(x, sizes, strides)


def _view_strides(old: list[tuple[Any, Any]], new: list[Any]) -> list[Any] | None:
    """Strides of ``new`` over the (size, stride) dims ``old`` (size-1 dims dropped), group
    by group: a kept dim keeps its stride, a split dim's parts multiply it from the
    inside, merged dims take the innermost stride if each outer stride is the next dim's
    extent; None for anything else (a new size-1 dim, products not identical)."""
    if any(expr(size) == 1 for size in new):
        return None
    old_sizes = [expr(size) for size, _ in old]
    new_sizes = [expr(size) for size in new]
    strides: list[Any] = []
    i = j = 0
    while i < len(old) and j < len(new):
        if old_sizes[i] == new_sizes[j]:
            strides.append(old[i][1])
            i, j = i + 1, j + 1
            continue
        merged = _group(old_sizes, i, new_sizes[j])
        if merged is not None:
            if not all(expr(old[k][1]) == expr(old[k + 1][0]) * expr(old[k + 1][1]) for k in range(i, merged - 1)):
                return None
            strides.append(old[merged - 1][1])
            i, j = merged, j + 1
            continue
        split = _group(new_sizes, j, old_sizes[i])
        if split is None:
            return None
        inner, parts = old[i][1], []
        for size in reversed(new[j:split]):
            parts.append(inner)
            inner = inner * size
        strides.extend(reversed(parts))
        i, j = i + 1, split
    return strides if i == len(old) and j == len(new) else None


def _group(sizes: list[Any], start: int, total: Any) -> int | None:
    """The end of the run of ``sizes`` from ``start`` whose product is ``total`` (at least
    two dims), or None."""
    product = sizes[start]
    for end in range(start + 1, len(sizes)):
        product = product * sizes[end]
        if product == total:
            return end + 1
    return None


def _transpose(mode: FakeTensorMode, args: tuple, kwargs: dict) -> Any:
    """``transpose(x, a, b)`` (``t``: the last two of at most two dims): sizes and strides
    of the two dims swapped."""
    x = args[0]
    if kwargs or not plain(mode, x, floats=False) or x.dim() == 0:
        return None
    if len(args) == 1:  # t
        if x.dim() > 2:
            return None
        dims = (0, x.dim() - 1)
    elif len(args) == 3 and all(type(d) is int and -x.dim() <= d < x.dim() for d in args[1:]):
        dims = (args[1] % x.dim(), args[2] % x.dim())
    else:
        return None
    sizes, strides = list(x.shape), list(x.stride())
    a, b = dims
    sizes[a], sizes[b] = sizes[b], sizes[a]
    strides[a], strides[b] = strides[b], strides[a]
    return as_view(x, sizes, strides)


def _slice(mode: FakeTensorMode, args: tuple, kwargs: dict) -> Any:
    """``slice(x, dim, start, end, step)`` with int bounds on a dim of static size (the
    bounds clamped as Python slices clamp them, a non-empty result), or the whole of a
    dim of any size: a view whose offset moves by ``start`` strides (the same arithmetic
    as torch's, so the same expression when a stride is symbolic)."""
    if kwargs or not 1 <= len(args) <= 5 or not plain(mode, args[0], floats=False):
        return None
    x, rest = args[0], [*args[1:], *(0, None, None, 1)[len(args) - 1:]]  # schema defaults
    dim, start, end, step = rest
    if x.dim() == 0 or type(dim) is not int or not -x.dim() <= dim < x.dim():
        return None
    if not all(v is None or type(v) is int for v in (start, end)) or type(step) is not int or step < 1:
        return None
    dim %= x.dim()
    size = x.shape[dim]
    if start in (None, 0) and end in (None, sys.maxsize) and step == 1:
        begin, length = 0, size
    elif type(size) is int:
        begin, stop, _ = slice(start, end).indices(size)
        length = (stop - begin + step - 1) // step
        if length < 1:
            return None
    else:
        return None
    sizes, strides = list(x.shape), list(x.stride())
    offset = x.storage_offset() + begin * strides[dim]
    sizes[dim], strides[dim] = length, strides[dim] * step
    return aten.as_strided.default(x, sizes, strides, offset)


def _unsqueeze(mode: FakeTensorMode, args: tuple, kwargs: dict) -> Any:
    """``unsqueeze(x, d)``: a dim of size 1 whose stride is the next dim's extent."""
    if kwargs or len(args) != 2 or type(args[1]) is not int or not plain(mode, args[0], floats=False):
        return None
    x, dim = args
    if not -x.dim() - 1 <= dim <= x.dim():
        return None
    dim = dim % (x.dim() + 1)
    sizes, strides = list(x.shape), list(x.stride())
    stride = 1 if dim >= x.dim() else sizes[dim] * strides[dim]
    return as_view(x, [*sizes[:dim], 1, *sizes[dim:]], [*strides[:dim], stride, *strides[dim:]])


def _select(mode: FakeTensorMode, args: tuple, kwargs: dict) -> Any:
    """``select(x, dim, index)`` on a dim of static size: the dim dropped, the offset moved
    by ``index`` strides (a negative index from the end, as torch's kernel counts it)."""
    if kwargs or len(args) != 3 or not plain(mode, args[0], floats=False):
        return None
    x, dim, index = args
    if type(dim) is not int or type(index) is not int or not -x.dim() <= dim < x.dim():
        return None
    dim %= x.dim()
    size = x.shape[dim]
    if type(size) is not int or not -size <= index < size:
        return None
    return _drop(x, dim, index if index >= 0 else index + size)


def _drop(x: Any, dim: int, index: int) -> Any:
    sizes, strides = list(x.shape), list(x.stride())
    offset = x.storage_offset() + index * strides[dim]
    del sizes[dim], strides[dim]
    return aten.as_strided.default(x, sizes, strides, offset)


def _squeeze_dim(mode: FakeTensorMode, args: tuple, kwargs: dict) -> Any:
    """``squeeze(x, dim)`` of a dim whose size is the int 1: that dim dropped."""
    if kwargs or len(args) != 2 or type(args[1]) is not int or not plain(mode, args[0], floats=False):
        return None
    x, dim = args
    if not -x.dim() <= dim < x.dim() or x.dim() == 0:
        return None
    dim %= x.dim()
    if type(x.shape[dim]) is not int or x.shape[dim] != 1:
        return None
    sizes, strides = list(x.shape), list(x.stride())
    del sizes[dim], strides[dim]
    return aten.as_strided.default(x, sizes, strides, x.storage_offset())


def _unbind(mode: FakeTensorMode, args: tuple, kwargs: dict) -> Any:
    """``unbind(x, dim)`` of a dim of static size: one ``select`` per index."""
    if kwargs or not 1 <= len(args) <= 2 or not plain(mode, args[0], floats=False):
        return None
    x, dim = args[0], args[1] if len(args) == 2 else 0
    if x.dim() == 0 or type(dim) is not int or not -x.dim() <= dim < x.dim():
        return None
    dim %= x.dim()
    size = x.shape[dim]
    if type(size) is not int or size < 1:
        return None
    return tuple(_drop(x, dim, index) for index in range(size))


VIEW_RULES: dict[Any, Rule] = {
    aten.view.default: _view,
    aten._unsafe_view.default: _view,
    aten.transpose.int: _transpose,
    aten.t.default: _transpose,
    aten.unsqueeze.default: _unsqueeze,
    aten.slice.Tensor: _slice,
    aten.select.int: _select,
    aten.squeeze.dim: _squeeze_dim,
    aten.unbind.int: _unbind,
}
