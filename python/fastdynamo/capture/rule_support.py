"""What the rules of ``shape_rules.py`` and ``view_rules.py`` may assume, and how they make
their results: FakeTensors of the trace's mode, sizes compared as sympy expressions,
fresh meta tensors wrapped as FakeTensors, views made with ``as_strided`` (which the fake
mode runs with its C++ meta kernel).

>>> import torch
>>> str(expr(3)), positive(expr(3)), positive(expr(0))
('3', True, False)
"""
from __future__ import annotations

from typing import Any, Callable

import sympy
import torch
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode, unset_fake_temporarily

__all__ = ["FLOATS", "Rule", "aten", "as_view", "contiguous_strides", "expr", "new_tensor", "plain", "positive",
           "same_size", "strictly_contiguous"]

aten = torch.ops.aten
Rule = Callable[[FakeTensorMode, tuple, dict], Any]
FLOATS = (torch.float32, torch.float64)  # their own computation dtype (half types compute in float32)


def plain(mode: FakeTensorMode, *tensors: Any, floats: bool = True) -> bool:
    """FakeTensors of ``mode``, one device and one dtype (a float one unless ``floats`` is
    False: views compute nothing). Rules run below autograd, as torch's meta path does:
    ``requires_grad`` of an input is autograd's business, and its in-place checks have
    run before a rule is reached."""
    first = tensors[0]
    return all(isinstance(t, FakeTensor) and t.fake_mode is mode and t.device == first.device
               and t.dtype == first.dtype for t in tensors) \
        and (first.dtype in FLOATS or not floats) and first.layout == torch.strided


def expr(value: int | torch.SymInt) -> Any:
    return value.node.expr if isinstance(value, torch.SymInt) else sympy.Integer(value)


def positive(expr: Any) -> bool:
    """A size known to be at least 1 for every value of its symbols (size symbols are
    positive integers, and 0 or 1 is specialised before a symbol is made)."""
    return bool(expr.is_positive) if not isinstance(expr, sympy.Integer) else int(expr) >= 1


def contiguous_strides(sizes: list[Any]) -> list[Any] | None:
    """``torch._prims_common.make_contiguous_strides_for`` on size expressions, or None when
    a size may be 0 (then contiguity would be a question of values)."""
    strides, running = [], sympy.Integer(1)
    for size in reversed(sizes):
        if not positive(size):
            return None
        strides.append(running)
        running = running * size
    return strides[::-1]


def strictly_contiguous(t: torch.Tensor) -> bool:
    """Strides are exactly the contiguous strides of the sizes, storage offset 0."""
    offset = t.storage_offset()
    if isinstance(offset, torch.SymInt) or offset != 0:
        return False
    expected = contiguous_strides([expr(s) for s in t.shape])
    return expected is not None and [expr(s) for s in t.stride()] == expected


def same_size(a: Any, b: Any) -> bool:
    return expr(a) == expr(b)


def new_tensor(mode: FakeTensorMode, sizes: Any, like: torch.Tensor, strides: Any = None,
               dtype: torch.dtype | None = None, device: torch.device | None = None) -> torch.Tensor:
    """A fresh FakeTensor of ``sizes`` with ``like``'s dtype and device (or the given
    ones): contiguous, or of the given ``strides`` (the sizes are positive, or a single
    0: rules check it)."""
    sizes = list(sizes)
    if strides is None:
        strides, running = [], 1
        for size in reversed(sizes):
            strides.append(running)
            running = running * size
        strides.reverse()
    with unset_fake_temporarily():
        meta = torch.empty_strided(sizes, list(strides), dtype=dtype or like.dtype, device="meta")
    return FakeTensor(mode, meta, device or like.device)


def as_view(x: torch.Tensor, sizes: list, strides: list) -> torch.Tensor:
    return aten.as_strided.default(x, sizes, strides, x.storage_offset())
