"""Output FakeTensors of a few common ATen ops under symbolic sizes, without torch's
meta path.

With symbolic sizes, FakeTensorMode runs every op whose C++ meta kernel does not take
SymInts through its Python decomposition (``hardswish`` is ``x * clamp(x + 3, 0, 6) /
6``: eight ops, each a new symbolic FakeTensor whose sizes, strides and contiguity are
sympy arithmetic), 3-30 ms an op where the static trace pays ~0.1 ms. The rules here
compute the result's metadata directly, for the cases where it is provably what torch's
path gives: every tensor argument a FakeTensor of the trace's mode, on one device, of one
floating dtype whose computation dtype is itself, and inputs with exactly the contiguous
strides of their sizes. A size that must match another one is compared as a sympy
expression (identical, so torch would add no guard either); anything else returns
``None`` and torch's path runs, guards and all. Each rule is tested against torch's
result (sizes, strides, dtype, device, guards) on static and symbolic inputs
(``tests/dynamic/test_shape_rules.py``).

>>> import torch
>>> run_rule(torch.ops.aten.relu.default, (torch.ones(2),), {}, None) is None  # not a FakeTensor
True
"""
from __future__ import annotations

from typing import Any, Callable

import sympy
import torch
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode, unset_fake_temporarily

__all__ = ["RULES", "run_rule"]

aten = torch.ops.aten
Rule = Callable[[FakeTensorMode, tuple, dict], Any]
_FLOATS = (torch.float32, torch.float64)  # their own computation dtype (half types compute in float32)


def run_rule(func: Any, args: tuple, kwargs: dict, mode: FakeTensorMode | None) -> Any:
    """The result of ``func(*args, **kwargs)`` by a rule of this module, or None when no
    rule applies (then torch's own path must run)."""
    rule = RULES.get(func)
    if rule is None or mode is None:
        return None
    return rule(mode, args, kwargs)


# -- what a rule may assume ----------------------------------------------------------
def _plain(mode: FakeTensorMode, *tensors: Any, floats: bool = True) -> bool:
    """FakeTensors of ``mode``, one device and one dtype (a float one unless ``floats`` is
    False: views compute nothing). Rules run below autograd, as torch's meta path does:
    ``requires_grad`` of an input is autograd's business, and its in-place checks have
    run before a rule is reached."""
    first = tensors[0]
    return all(isinstance(t, FakeTensor) and t.fake_mode is mode and t.device == first.device
               and t.dtype == first.dtype for t in tensors) \
        and (first.dtype in _FLOATS or not floats) and first.layout == torch.strided


def _expr(value: int | torch.SymInt) -> Any:
    return value.node.expr if isinstance(value, torch.SymInt) else sympy.Integer(value)


def _positive(expr: Any) -> bool:
    """A size known to be at least 1 for every value of its symbols (size symbols are
    positive integers, and 0 or 1 is specialised before a symbol is made)."""
    return bool(expr.is_positive) if not isinstance(expr, sympy.Integer) else int(expr) >= 1


def _contiguous_strides(sizes: list[Any]) -> list[Any] | None:
    """``torch._prims_common.make_contiguous_strides_for`` on size expressions, or None when
    a size may be 0 (then contiguity would be a question of values)."""
    strides, running = [], sympy.Integer(1)
    for size in reversed(sizes):
        if not _positive(size):
            return None
        strides.append(running)
        running = running * size
    return strides[::-1]


def _strictly_contiguous(t: torch.Tensor) -> bool:
    """Strides are exactly the contiguous strides of the sizes, storage offset 0."""
    offset = t.storage_offset()
    if isinstance(offset, torch.SymInt) or offset != 0:
        return False
    expected = _contiguous_strides([_expr(s) for s in t.shape])
    return expected is not None and [_expr(s) for s in t.stride()] == expected


def _same_size(a: Any, b: Any) -> bool:
    return _expr(a) == _expr(b)


def _new(mode: FakeTensorMode, sizes: Any, like: torch.Tensor, strides: Any = None) -> torch.Tensor:
    """A fresh FakeTensor of ``sizes`` with ``like``'s dtype and device: contiguous, or of
    the given ``strides`` (the sizes are positive: rules check it)."""
    sizes = list(sizes)
    if strides is None:
        strides, running = [], 1
        for size in reversed(sizes):
            strides.append(running)
            running = running * size
        strides.reverse()
    with unset_fake_temporarily():
        meta = torch.empty_strided(sizes, list(strides), dtype=like.dtype, device="meta")
    return FakeTensor(mode, meta, like.device)


# -- rules ---------------------------------------------------------------------------
def _unary(mode: FakeTensorMode, args: tuple, kwargs: dict) -> Any:
    """A float pointwise op of one tensor: a new tensor of its sizes and strides."""
    x = args[0]
    if any(isinstance(a, torch.Tensor) for a in (*args[1:], *kwargs.values())):
        return None
    if not (_plain(mode, x) and _strictly_contiguous(x)):
        return None
    return _new(mode, x.shape, x, x.stride())


def _unary_inplace(mode: FakeTensorMode, args: tuple, kwargs: dict) -> Any:
    """Its in-place form: the input itself (autograd's in-place layer, above the rules,
    counts the new version)."""
    x = args[0]
    if any(isinstance(a, torch.Tensor) for a in (*args[1:], *kwargs.values())):
        return None
    if not (_plain(mode, x) and _strictly_contiguous(x)):
        return None
    return x


def _batch_norm_no_training(mode: FakeTensorMode, args: tuple, kwargs: dict) -> Any:
    """``_native_batch_norm_legit_no_training(x, weight, bias, mean, var, momentum, eps)``:
    the normalised input and two empty statistics."""
    if kwargs or len(args) != 7:
        return None
    x, weight, bias, mean, var = args[:5]
    stats = [t for t in (weight, bias, mean, var) if t is not None]
    if x.dim() < 2 or not (_plain(mode, x, *stats) and _strictly_contiguous(x)):
        return None
    if any(t.dim() != 1 or not _same_size(t.shape[0], x.shape[1]) for t in stats):
        return None
    return _new(mode, x.shape, x, x.stride()), _new(mode, (0,), x), _new(mode, (0,), x)


def _layer_norm(mode: FakeTensorMode, args: tuple, kwargs: dict) -> Any:
    """``native_layer_norm(x, normalized_shape, weight, bias, eps)``: the output and the
    mean and inverse deviation, of the leading sizes with 1 for each normalised dim."""
    if kwargs or len(args) != 5:
        return None
    x, normalized, weight, bias, _ = args
    stats = [t for t in (weight, bias) if t is not None]
    axis = x.dim() - len(normalized)
    if axis < 0 or not (_plain(mode, x, *stats) and _strictly_contiguous(x)):
        return None
    trailing = list(x.shape[axis:])
    if not all(_same_size(a, b) for a, b in zip(trailing, normalized, strict=True)):
        return None
    if any(t.dim() != len(normalized) or not all(_same_size(a, b) for a, b in zip(t.shape, normalized, strict=True))
           for t in stats):
        return None
    statistic = [*x.shape[:axis], *([1] * len(normalized))]
    return _new(mode, x.shape, x, x.stride()), _new(mode, statistic, x), _new(mode, statistic, x)


def _addmm(mode: FakeTensorMode, args: tuple, kwargs: dict) -> Any:
    """``addmm(bias, a, b)`` with a 1-d bias of ``b``'s columns: a new (rows, columns)."""
    if len(args) != 3 or set(kwargs) - {"beta", "alpha"}:
        return None
    bias, a, b = args
    if not (_plain(mode, bias, a, b) and bias.dim() == 1 and a.dim() == 2 and b.dim() == 2):
        return None
    if not (_same_size(a.shape[1], b.shape[0]) and _same_size(bias.shape[0], b.shape[1])):
        return None
    sizes = (a.shape[0], b.shape[1])
    if not all(_positive(_expr(s)) for s in sizes):
        return None
    return _new(mode, sizes, a)


def _binary(mode: FakeTensorMode, args: tuple, kwargs: dict) -> Any:
    """``add``/``sub``/``mul``/``div`` of two tensors of one float dtype, or of a tensor and
    a Python number: the operand of the full shape is contiguous, the other contiguous
    too with each trailing size identical or 1; the result has the full operand's sizes
    and strides."""
    if len(args) != 2 or set(kwargs) - {"alpha"} or isinstance(kwargs.get("alpha"), torch.Tensor):
        return None
    a, b = args
    if isinstance(b, (int, float)) and not isinstance(b, bool):
        tensors = [a]
    elif isinstance(a, (int, float)) and not isinstance(a, bool):
        tensors = [b]
    else:
        tensors = [a, b]
    if not (_plain(mode, *tensors) and all(t.dim() > 0 and _strictly_contiguous(t) for t in tensors)):
        return None
    full = max(tensors, key=lambda t: t.dim())
    if not all(_broadcasts_into(t, full) for t in tensors):
        return None
    return _new(mode, full.shape, full, full.stride())


def _broadcasts_into(t: torch.Tensor, full: torch.Tensor) -> bool:
    """Each trailing size of ``t`` is ``full``'s (the same expression) or the int 1, and
    the other way round ``full`` has no 1 where ``t`` is larger."""
    if t.dim() > full.dim():
        return False
    pairs = zip(t.shape, full.shape[full.dim() - t.dim():], strict=True)
    return all(_same_size(mine, theirs) or (type(mine) is int and mine == 1) for mine, theirs in pairs)


# -- views: the input's storage with other sizes and strides (as_strided, which the fake
# mode runs with its C++ meta kernel)
def _as_view(x: torch.Tensor, sizes: list, strides: list) -> torch.Tensor:
    return aten.as_strided.default(x, sizes, strides, x.storage_offset())


def _view(mode: FakeTensorMode, args: tuple, kwargs: dict) -> Any:
    """``view``/``_unsafe_view``: the new sizes (one -1 inferred as torch infers it), when
    they keep, split or merge the input's dims group by group with identical products
    (merged dims contiguous among themselves); strides follow each group."""
    if kwargs or len(args) != 2 or not _plain(mode, args[0], floats=False):
        return None
    x, shape = args
    if isinstance(x.storage_offset(), torch.SymInt):
        return None
    inferred = [i for i, size in enumerate(shape) if type(size) is int and size == -1]
    known = [size for size in shape if not (type(size) is int and size == -1)]
    if len(inferred) > 1 or not all(_positive(_expr(size)) for size in known):
        return None
    product: Any = 1
    for size in known:
        product = product * size
    sizes = list(shape)
    if inferred:
        sizes[inferred[0]] = x.numel() // product
        if not _positive(_expr(sizes[inferred[0]])):
            return None
    old = [(size, stride) for size, stride in zip(x.shape, x.stride(), strict=True) if _expr(size) != 1]
    strides = _view_strides(old, sizes)
    return None if strides is None else _as_view(x, sizes, strides)


def _view_strides(old: list[tuple[Any, Any]], new: list[Any]) -> list[Any] | None:
    """Strides of ``new`` over the (size, stride) dims ``old`` (size-1 dims dropped), group
    by group: a kept dim keeps its stride, a split dim's parts multiply it from the
    inside, merged dims take the innermost stride if each outer stride is the next dim's
    extent; None for anything else (a new size-1 dim, products not identical)."""
    if any(_expr(size) == 1 for size in new):
        return None
    old_sizes = [_expr(size) for size, _ in old]
    new_sizes = [_expr(size) for size in new]
    strides: list[Any] = []
    i = j = 0
    while i < len(old) and j < len(new):
        if old_sizes[i] == new_sizes[j]:
            strides.append(old[i][1])
            i, j = i + 1, j + 1
            continue
        merged = _group(old_sizes, i, new_sizes[j])
        if merged is not None:
            if not all(_expr(old[k][1]) == _expr(old[k + 1][0]) * _expr(old[k + 1][1]) for k in range(i, merged - 1)):
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
    if kwargs or not _plain(mode, x, floats=False) or x.dim() == 0:
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
    return _as_view(x, sizes, strides)


def _unsqueeze(mode: FakeTensorMode, args: tuple, kwargs: dict) -> Any:
    """``unsqueeze(x, d)``: a dim of size 1 whose stride is the next dim's extent."""
    if kwargs or len(args) != 2 or type(args[1]) is not int or not _plain(mode, args[0], floats=False):
        return None
    x, dim = args
    if not -x.dim() - 1 <= dim <= x.dim():
        return None
    dim = dim % (x.dim() + 1)
    sizes, strides = list(x.shape), list(x.stride())
    stride = 1 if dim >= x.dim() else sizes[dim] * strides[dim]
    return _as_view(x, [*sizes[:dim], 1, *sizes[dim:]], [*strides[:dim], stride, *strides[dim:]])


_UNARY = ("relu", "hardswish", "hardsigmoid", "silu", "sigmoid", "tanh", "gelu")

RULES: dict[Any, Rule] = {
    **{getattr(aten, name).default: _unary for name in _UNARY},
    **{getattr(aten, name + "_").default: _unary_inplace for name in _UNARY},
    aten._native_batch_norm_legit_no_training.default: _batch_norm_no_training,
    aten.native_layer_norm.default: _layer_norm,
    aten.addmm.default: _addmm,
    **{getattr(aten, name).Tensor: _binary for name in ("add", "sub", "mul", "div")},
    aten.view.default: _view,
    aten._unsafe_view.default: _view,
    aten.transpose.int: _transpose,
    aten.t.default: _transpose,
    aten.unsqueeze.default: _unsqueeze,
}
