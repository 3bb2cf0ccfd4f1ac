"""What every generated wrapper calls at run time besides its kernels: layout fix-ups
and fast views. Nothing here imports triton or a compiler.

``reinterpret(t, shape, stride, offset)`` is a view of ``t``'s storage with ``offset``
counted from ``t``'s own storage offset: torch's C++ fast path when this torch has it
(about 5x cheaper than ``Tensor.as_strided`` from Python, and checked at import to count
the offset that way), else ``as_strided``.

>>> base = torch.arange(6.0)
>>> reinterpret(base, (2, 3), (1, 2), 0).tolist(), reinterpret(base[2:], (2,), (1,), 1).tolist()
([[0.0, 2.0, 4.0], [1.0, 3.0, 5.0]], [3.0, 4.0])
>>> with_strides(torch.ones(2, 3).t(), (3, 2), (2, 1)).stride()
(2, 1)
"""
from __future__ import annotations

from typing import Any, Callable

import torch


def _as_strided_from(tensor: torch.Tensor, shape, stride, offset: int) -> torch.Tensor:
    return tensor.as_strided(shape, stride, tensor.storage_offset() + offset)


def _fast_reinterpret() -> Callable[..., torch.Tensor]:
    guards = getattr(getattr(torch._C, "_dynamo", None), "guards", None)
    fast = getattr(guards, "_reinterpret_tensor", None)
    if fast is None:
        return _as_strided_from
    probe = torch.arange(4.0)[1:]
    try:
        relative = fast(probe, (1,), (1,), 1).item() == 2.0
    except Exception:  # noqa: BLE001 - another signature in another torch: not the fast path
        relative = False
    return fast if relative else _as_strided_from


reinterpret: Callable[..., torch.Tensor] = _fast_reinterpret()


def with_strides(tensor: torch.Tensor, shape: tuple, stride: tuple) -> torch.Tensor:
    """``tensor`` in the layout kernels were generated for (an extern may pick another)."""
    if tensor is None or tuple(tensor.stride()) == tuple(stride) or tensor.numel() <= 1:
        return tensor
    out = torch.empty_strided(shape, stride, dtype=tensor.dtype, device=tensor.device)
    out.copy_(tensor)
    return out


def empty_strided_for(device_type: str) -> Callable[..., Any]:
    """The cheapest ``(shape, stride, dtype) -> tensor`` allocator for ``device_type``:
    torch's C++ CPU fast path when present (half the cost of ``torch.empty_strided``)."""
    if device_type == "cpu":
        guards = getattr(getattr(torch._C, "_dynamo", None), "guards", None)
        fast = getattr(guards, "_empty_strided_cpu", None)
        if fast is not None:
            return fast
    device = torch.device(device_type)
    return lambda shape, stride, dtype: torch.empty_strided(shape, stride, dtype=dtype, device=device)


def storages_shared(tensors: tuple) -> bool:
    """Some two of ``tensors`` share a storage (or are empty: no address to tell). A
    module that writes its inputs computes from the values they had on entry, which is
    eager's only when no input it writes aliases another: it runs the graph's ATen ops
    instead (``ATEN_FORWARD``, set by the compiler).

    >>> x = torch.zeros(4)
    >>> storages_shared((x, torch.ones(4))), storages_shared((x, x[1:]))
    (False, True)
    """
    addresses = {t.untyped_storage().data_ptr() for t in tensors}
    return len(addresses) != len(tensors) or 0 in addresses

