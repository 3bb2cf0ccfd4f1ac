"""Output FakeTensors of common ATen ops under symbolic sizes, without torch's meta path.

With symbolic sizes, FakeTensorMode runs every op whose C++ meta kernel does not take
SymInts through its Python decomposition (``hardswish`` is ``x * clamp(x + 3, 0, 6) /
6``: eight ops, each a new symbolic FakeTensor whose sizes, strides and contiguity are
sympy arithmetic), 3-30 ms an op where the static trace pays ~0.1 ms. The rules here
compute the result's metadata directly, for the cases where it is provably what torch's
path gives: every tensor argument a FakeTensor of the trace's mode, on one device, of one
dtype (a floating one whose computation dtype is itself for ops that compute), and
inputs whose layout torch's result follows with exactly the contiguous strides of their
sizes (``mm``, ``cat``, ``stack`` and ``clone`` to the contiguous format make contiguous
results from any input). A size that must match another one is compared as a sympy
expression (identical, so torch would add no guard either); anything else returns
``None`` and torch's path runs, guards and all. The view ops' rules are in
``view_rules.py``. Each rule is tested against torch's result (sizes, strides, dtype,
device, guards) on static and symbolic inputs (``tests/dynamic/test_shape_rules.py``).

>>> import torch
>>> run_rule(torch.ops.aten.relu.default, (torch.ones(2),), {}, None) is None  # not a FakeTensor
True
"""
from __future__ import annotations

from typing import Any

import torch
from torch._prims_common import suggest_memory_format
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode, unset_fake_temporarily

from .rule_support import (
    FLOATS,
    Rule,
    aten,
    expr,
    new_tensor,
    plain,
    positive,
    same_size,
    strictly_contiguous,
)
from .view_rules import VIEW_RULES

__all__ = ["RULES", "run_rule"]


def run_rule(func: Any, args: tuple, kwargs: dict, mode: FakeTensorMode | None) -> Any:
    """The result of ``func(*args, **kwargs)`` by a rule of this module, or None when no
    rule applies (then torch's own path must run)."""
    rule = RULES.get(func)
    if rule is None or mode is None:
        return None
    return rule(mode, args, kwargs)


# -- rules ---------------------------------------------------------------------------
def _unary(mode: FakeTensorMode, args: tuple, kwargs: dict) -> Any:
    """A float pointwise op of one tensor: a new tensor of its sizes and strides."""
    x = args[0]
    if any(isinstance(a, torch.Tensor) for a in (*args[1:], *kwargs.values())):
        return None
    if not (plain(mode, x) and strictly_contiguous(x)):
        return None
    return new_tensor(mode, x.shape, x, x.stride())


def _unary_inplace(mode: FakeTensorMode, args: tuple, kwargs: dict) -> Any:
    """Its in-place form: the input itself (autograd's in-place layer, above the rules,
    counts the new version)."""
    x = args[0]
    if any(isinstance(a, torch.Tensor) for a in (*args[1:], *kwargs.values())):
        return None
    if not (plain(mode, x) and strictly_contiguous(x)):
        return None
    return x


def _pow_scalar(mode: FakeTensorMode, args: tuple, kwargs: dict) -> Any:
    """``pow(x, exponent)`` of a real Python number: ``x``'s dtype (a complex exponent
    would make a complex result; a bool is not a number here)."""
    if kwargs or len(args) != 2 or type(args[1]) not in (int, float):
        return None
    return _unary(mode, args, kwargs)


def _mean_dim(mode: FakeTensorMode, args: tuple, kwargs: dict) -> Any:
    """``mean(x, dims, keepdim)`` over some dims of a contiguous float tensor: a new
    contiguous tensor of the other sizes (1 in the reduced dims with ``keepdim``)."""
    if set(kwargs) - {"keepdim"} or not 2 <= len(args) <= 3:
        return None
    x, dims = args[0], args[1]
    keepdim = args[2] if len(args) == 3 else kwargs.get("keepdim", False)
    if type(keepdim) is not bool or not isinstance(dims, (list, tuple)) or not dims:
        return None
    if not (plain(mode, x) and x.dim() > 0 and strictly_contiguous(x)):
        return None
    if not all(type(d) is int and -x.dim() <= d < x.dim() for d in dims):
        return None
    reduced = {d % x.dim() for d in dims}
    if len(reduced) != len(dims):
        return None
    sizes = [1 if i in reduced else size for i, size in enumerate(x.shape) if keepdim or i not in reduced]
    return new_tensor(mode, sizes, x)


def _batch_norm_no_training(mode: FakeTensorMode, args: tuple, kwargs: dict) -> Any:
    """``_native_batch_norm_legit_no_training(x, weight, bias, mean, var, momentum, eps)``:
    the normalised input and two empty statistics."""
    if kwargs or len(args) != 7:
        return None
    x, weight, bias, mean, var = args[:5]
    stats = [t for t in (weight, bias, mean, var) if t is not None]
    if x.dim() < 2 or not (plain(mode, x, *stats) and strictly_contiguous(x)):
        return None
    if any(t.dim() != 1 or not same_size(t.shape[0], x.shape[1]) for t in stats):
        return None
    return new_tensor(mode, x.shape, x, x.stride()), new_tensor(mode, (0,), x), new_tensor(mode, (0,), x)


def _layer_norm(mode: FakeTensorMode, args: tuple, kwargs: dict) -> Any:
    """``native_layer_norm(x, normalized_shape, weight, bias, eps)``: the output and the
    mean and inverse deviation, of the leading sizes with 1 for each normalised dim."""
    if kwargs or len(args) != 5:
        return None
    x, normalized, weight, bias, _ = args
    stats = [t for t in (weight, bias) if t is not None]
    axis = x.dim() - len(normalized)
    if axis < 0 or not (plain(mode, x, *stats) and strictly_contiguous(x)):
        return None
    trailing = list(x.shape[axis:])
    if not all(same_size(a, b) for a, b in zip(trailing, normalized, strict=True)):
        return None
    if any(t.dim() != len(normalized) or not all(same_size(a, b) for a, b in zip(t.shape, normalized, strict=True))
           for t in stats):
        return None
    statistic = [*x.shape[:axis], *([1] * len(normalized))]
    return new_tensor(mode, x.shape, x, x.stride()), new_tensor(mode, statistic, x), new_tensor(mode, statistic, x)


def _addmm(mode: FakeTensorMode, args: tuple, kwargs: dict) -> Any:
    """``addmm(bias, a, b)`` with a 1-d bias of ``b``'s columns: a new (rows, columns)."""
    if len(args) != 3 or set(kwargs) - {"beta", "alpha"}:
        return None
    bias, a, b = args
    if not (plain(mode, bias, a, b) and bias.dim() == 1 and a.dim() == 2 and b.dim() == 2):
        return None
    if not (same_size(a.shape[1], b.shape[0]) and same_size(bias.shape[0], b.shape[1])):
        return None
    sizes = (a.shape[0], b.shape[1])
    if not all(positive(expr(s)) for s in sizes):
        return None
    return new_tensor(mode, sizes, a)


def _mm(mode: FakeTensorMode, args: tuple, kwargs: dict) -> Any:
    """``mm(a, b)`` of two matrices (any strides): a new contiguous (rows, columns)."""
    if kwargs or len(args) != 2:
        return None
    a, b = args
    if not (plain(mode, a, b) and a.dim() == 2 and b.dim() == 2 and same_size(a.shape[1], b.shape[0])):
        return None
    sizes = (a.shape[0], b.shape[1])
    if not all(positive(expr(s)) for s in sizes):
        return None
    return new_tensor(mode, sizes, a)


def _cat(mode: FakeTensorMode, args: tuple, kwargs: dict) -> Any:
    """``cat(tensors, dim)``: a new contiguous tensor whose ``dim`` is the sum of the
    inputs' (``torch.sym_sum``, as torch adds them), when every other size is the same
    expression in all inputs. 1-d inputs of static size 0 are left out, as torch leaves
    them out; the output's memory format is torch's own choice (``suggest_memory_format``
    of the inputs in order) and must be the contiguous one."""
    if kwargs or not 1 <= len(args) <= 2 or not isinstance(args[0], (list, tuple)) or not args[0]:
        return None
    tensors, dim = list(args[0]), args[1] if len(args) == 2 else 0
    if type(dim) is not int or not plain(mode, *tensors):
        return None
    ndim = next((t.dim() for t in tensors if t.dim() != 1), 1)
    kept = [t for t in tensors if not (t.dim() == 1 and type(t.shape[0]) is int and t.shape[0] == 0)]
    if not kept or ndim == 0 or not -ndim <= dim < ndim:
        return None
    dim %= ndim
    first = kept[0]
    for t in kept:
        if t.dim() != ndim or not all(positive(expr(size)) for size in t.shape):
            return None
        if not all(same_size(a, b) for i, (a, b) in enumerate(zip(t.shape, first.shape, strict=True)) if i != dim):
            return None
    if ndim in (4, 5) and _memory_format(tensors) != torch.contiguous_format:
        return None
    sizes = list(first.shape)
    sizes[dim] = torch.sym_sum([t.shape[dim] for t in kept])
    return new_tensor(mode, sizes, first)


def _stack(mode: FakeTensorMode, args: tuple, kwargs: dict) -> Any:
    """``stack(tensors, dim)`` of tensors of identical sizes, as torch's decomposition does
    it: a ``cat`` along ``dim`` viewed with the new dim (``dim`` before the last), or a
    ``cat`` of the tensors unsqueezed at the end (``dim`` past the last); contiguous."""
    if kwargs or not 1 <= len(args) <= 2 or not isinstance(args[0], (list, tuple)) or not args[0]:
        return None
    tensors, dim = list(args[0]), args[1] if len(args) == 2 else 0
    first = tensors[0]
    if type(dim) is not int or not plain(mode, *tensors) or not -first.dim() - 1 <= dim <= first.dim():
        return None
    if first.dim() + 1 in (4, 5) or first.dim() in (4, 5) or not all(positive(expr(s)) for s in first.shape):
        return None  # (a memory format to choose)
    if not all(t.dim() == first.dim() and all(same_size(a, b) for a, b in zip(t.shape, first.shape, strict=True))
               for t in tensors):
        return None
    dim %= first.dim() + 1
    sizes = list(first.shape)
    if dim == first.dim():
        return new_tensor(mode, [*sizes, len(tensors)], first)
    concatenated = list(sizes)
    concatenated[dim] = torch.sym_sum([t.shape[dim] for t in tensors])
    sizes.insert(dim, len(tensors))
    return aten.view.default(new_tensor(mode, concatenated, first), sizes)


def _memory_format(tensors: list[torch.Tensor]) -> Any:
    """The memory format torch's ``cat`` gives its output, computed as torch computes it
    (the same calls, so the same guards if any)."""
    chosen = None
    for t in tensors:
        suggested = suggest_memory_format(t)
        if suggested == torch.contiguous_format:
            return suggested
        if chosen is not None and chosen != suggested:
            return torch.contiguous_format
        chosen = suggested
    return chosen


def _zeros(mode: FakeTensorMode, args: tuple, kwargs: dict) -> Any:
    """``zeros(sizes, dtype=, device=)`` of positive sizes, a float dtype and the CPU
    given: a new contiguous tensor."""
    if len(args) != 1 or not isinstance(args[0], (list, tuple)) or set(kwargs) - {"dtype", "layout", "device",
                                                                                    "pin_memory"}:
        return None
    device, dtype = kwargs.get("device"), kwargs.get("dtype")
    if not isinstance(device, torch.device) or device.type != "cpu" or dtype not in FLOATS:
        return None
    if kwargs.get("layout") not in (None, torch.strided) or kwargs.get("pin_memory") not in (None, False):
        return None
    if not all(isinstance(s, (int, torch.SymInt)) and type(s) is not bool and positive(expr(s)) for s in args[0]):
        return None
    with unset_fake_temporarily():
        meta = torch.empty(list(args[0]), dtype=dtype, device="meta")
    return FakeTensor(mode, meta, device)


def _clone(mode: FakeTensorMode, args: tuple, kwargs: dict) -> Any:
    """``clone(x, memory_format=)``: a new tensor of ``x``'s sizes, contiguous (asked for,
    or ``x`` itself exactly contiguous)."""
    if len(args) != 1 or set(kwargs) - {"memory_format"} or not plain(mode, args[0], floats=False):
        return None
    x, memory_format = args[0], kwargs.get("memory_format")
    if memory_format in (None, torch.preserve_format):
        if not strictly_contiguous(x):
            return None
    elif memory_format != torch.contiguous_format or not all(positive(expr(s)) for s in x.shape):
        return None
    return new_tensor(mode, x.shape, x)


def _mkldnn_rnn_layer(mode: FakeTensorMode, args: tuple, kwargs: dict) -> Any:
    """One LSTM layer on the CPU (``mkldnn_rnn_layer``): the output sequence and the new
    hidden and cell states, new contiguous tensors, and an empty uint8 workspace, as
    torch's meta function makes them."""
    if kwargs or len(args) != 16:
        return None
    x, *weights, hx, cx = args[:7]
    hidden_size, batch_first = args[10], args[14]
    if type(hidden_size) is not int or hidden_size < 1 or type(batch_first) is not bool:
        return None
    if not (plain(mode, x, *weights, hx, cx) and x.dim() == 3):
        return None
    if not all(positive(expr(s)) for t in (x, hx, cx) for s in t.shape):
        return None
    steps, batch = (x.shape[1], x.shape[0]) if batch_first else (x.shape[0], x.shape[1])
    sizes = [batch, steps, hidden_size] if batch_first else [steps, batch, hidden_size]
    return (new_tensor(mode, sizes, x), new_tensor(mode, hx.shape, hx), new_tensor(mode, cx.shape, cx),
            new_tensor(mode, [0], x, dtype=torch.uint8))


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
    if not (plain(mode, *tensors) and all(t.dim() > 0 and strictly_contiguous(t) for t in tensors)):
        return None
    full = max(tensors, key=lambda t: t.dim())
    if not all(_broadcasts_into(t, full) for t in tensors):
        return None
    return new_tensor(mode, full.shape, full, full.stride())


def _broadcasts_into(t: torch.Tensor, full: torch.Tensor) -> bool:
    """Each trailing size of ``t`` is ``full``'s (the same expression) or the int 1, and
    the other way round ``full`` has no 1 where ``t`` is larger."""
    if t.dim() > full.dim():
        return False
    pairs = zip(t.shape, full.shape[full.dim() - t.dim():], strict=True)
    return all(same_size(mine, theirs) or (type(mine) is int and mine == 1) for mine, theirs in pairs)


_UNARY = ("relu", "hardswish", "hardsigmoid", "silu", "sigmoid", "tanh", "gelu", "neg", "rsqrt", "cos", "sin")

RULES: dict[Any, Rule] = {
    **{getattr(aten, name).default: _unary for name in _UNARY},
    **{getattr(aten, name + "_").default: _unary_inplace for name in _UNARY},
    aten._native_batch_norm_legit_no_training.default: _batch_norm_no_training,
    aten.native_layer_norm.default: _layer_norm,
    aten.addmm.default: _addmm,
    aten.mm.default: _mm,
    aten.pow.Tensor_Scalar: _pow_scalar,
    aten.mean.dim: _mean_dim,
    aten.cat.default: _cat,
    aten.stack.default: _stack,
    aten.zeros.default: _zeros,
    aten.clone.default: _clone,
    aten.mkldnn_rnn_layer.default: _mkldnn_rnn_layer,
    **{getattr(aten, name).Tensor: _binary for name in ("add", "sub", "mul", "div")},
    **VIEW_RULES,
}
