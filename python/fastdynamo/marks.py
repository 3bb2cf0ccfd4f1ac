"""``mark_dynamic`` and ``mark_static``: per-tensor choices read when a frame is traced.

The marks live on the tensor (``t._fastdynamo_dynamic``: dim -> (min, max);
``t._fastdynamo_static``: a set of dims), as torch.compile keeps its own. They are read
when a frame that receives the tensor is compiled; an entry compiled before the mark
still serves the sizes it was compiled for.

>>> import torch
>>> x = torch.ones(4, 3)
>>> mark_dynamic(x, 0, min=2, max=64)
>>> dynamic_dims(x)
{0: (2, 64)}
>>> mark_dynamic(x, 2)
Traceback (most recent call last):
...
IndexError: mark_dynamic: dim 2 is out of range for a 2-d tensor (valid: -2..1)
"""
from __future__ import annotations

from typing import Any

DYNAMIC_ATTR = "_fastdynamo_dynamic"
STATIC_ATTR = "_fastdynamo_static"


def _normalize_dim(what: str, tensor: Any, dim: Any) -> int:
    import torch

    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"{what} expects a tensor, got {type(tensor).__name__}")
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise TypeError(f"{what}: dim must be an int, got {type(dim).__name__}")
    ndim = tensor.dim()
    if not -ndim <= dim < ndim:
        valid = f"-{ndim}..{ndim - 1}" if ndim else "none"
        raise IndexError(f"{what}: dim {dim} is out of range for a {ndim}-d tensor (valid: {valid})")
    return dim % ndim


def mark_dynamic(tensor: Any, dim: int | list[int] | tuple[int, ...], *, min: int | None = None,
                 max: int | None = None) -> None:
    """Compile ``tensor``'s dimension ``dim`` (or each of a list) with a symbolic size from
    the first call, optionally only for sizes in ``[min, max]`` (a size outside the range
    compiles a static entry). Sizes 0 and 1 are still specialised."""
    dims = list(dim) if isinstance(dim, (list, tuple)) else [dim]
    for bound, name in ((min, "min"), (max, "max")):
        if bound is not None and (isinstance(bound, bool) or not isinstance(bound, int)):
            raise TypeError(f"mark_dynamic: {name} must be an int or None, got {type(bound).__name__}")
    if min is not None and min < 0:
        raise ValueError(f"mark_dynamic: min={min} is negative (sizes are >= 0)")
    if min is not None and max is not None and min > max:
        raise ValueError(f"mark_dynamic: min={min} > max={max}")
    marks = dict(getattr(tensor, DYNAMIC_ATTR, {}))
    static = set(getattr(tensor, STATIC_ATTR, set()))
    for d in dims:
        d = _normalize_dim("mark_dynamic", tensor, d)
        marks[d] = (min, max)
        static.discard(d)
    setattr(tensor, DYNAMIC_ATTR, marks)
    setattr(tensor, STATIC_ATTR, static)


def mark_static(tensor: Any, dim: int | list[int] | tuple[int, ...]) -> None:
    """Never make ``tensor``'s dimension ``dim`` symbolic, whatever ``dynamic=`` says."""
    dims = list(dim) if isinstance(dim, (list, tuple)) else [dim]
    marks = dict(getattr(tensor, DYNAMIC_ATTR, {}))
    static = set(getattr(tensor, STATIC_ATTR, set()))
    for d in dims:
        d = _normalize_dim("mark_static", tensor, d)
        static.add(d)
        marks.pop(d, None)
    setattr(tensor, DYNAMIC_ATTR, marks)
    setattr(tensor, STATIC_ATTR, static)


def dynamic_dims(tensor: Any) -> dict[int, tuple[int | None, int | None]]:
    """The dims marked dynamic, with their (min, max)."""
    return dict(getattr(tensor, DYNAMIC_ATTR, None) or {})


def static_dims(tensor: Any) -> set[int]:
    return set(getattr(tensor, STATIC_ATTR, None) or ())
