"""How the generated wrapper calls ATen for an extern node, as fast as Python can.

``torch.ops.aten.addmm.default(...)`` costs ~2 us more per call than ``torch.addmm(...)``
(the overload packet's Python ``__call__`` and schema-driven argument parsing). So each
extern is spelled as the ``torch`` function of the same name when that function
**provably runs the same overload**: :func:`fast_spelling` calls it once on the node's
FakeTensor arguments under a dispatch mode that records the ATen calls it makes, and
accepts it only when the one call it made is the extern's overload with the same
arguments. Anything else keeps the ``torch.ops`` spelling, which is always exact.

>>> import torch
>>> a = torch.empty(2, 3, device="meta"); b = torch.empty(3, 4, device="meta")
>>> fast_spelling(torch.ops.aten.mm.default, (a, b), {})
'torch.mm'
>>> fast_spelling(torch.ops.aten.add.Tensor, (a, 1), {}) is None  # no such extern spelling kept
True
"""
from __future__ import annotations

import math

import sympy
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from . import sizes
from .ir import BufferArg


class ExternSpellingError(Exception):
    """A value of an extern call has no source spelling (the graph then runs as ATen ops)."""


# Where a same-named function may live; tried in order.
_NAMESPACES = (("torch", torch), ("torch._C._nn", torch._C._nn))
# Externs whose fast spelling is worth checking: the ops a captured model runs as ATen
# calls between kernels. Others keep the torch.ops spelling (they are rare).
_CHECKED = frozenset({
    "addmm", "mm", "bmm", "baddbmm", "addmv", "mv", "embedding", "convolution", "cat", "stack",
    "_scaled_dot_product_flash_attention_for_cpu", "native_batch_norm", "_native_batch_norm_legit_no_training",
    "native_layer_norm", "mkldnn_rnn_layer", "split_with_sizes", "index_select", "gather", "constant_pad_nd",
    "_adaptive_avg_pool2d", "max_pool2d_with_indices", "avg_pool2d", "cumsum", "topk", "sort", "unbind",
})


class _Recorder(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.calls: list = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.calls.append(func)
        return func(*args, **(kwargs or {}))


def fast_spelling(target, args: tuple, kwargs: dict) -> str | None:
    """``"torch.addmm"`` when calling that function with ``args``/``kwargs`` (FakeTensors
    or meta tensors) runs exactly ``target`` once and nothing else; else None."""
    if not isinstance(target, torch._ops.OpOverload) or target.namespace != "aten":
        return None
    name = target._opname
    if name not in _CHECKED:
        return None
    for spelling, namespace in _NAMESPACES:
        function = getattr(namespace, name, None)
        if function is None:
            continue
        recorder = _Recorder()
        try:
            with recorder:
                function(*args, **kwargs)
        except Exception:  # noqa: BLE001 - a form the function does not take: not a spelling
            continue
        if recorder.calls == [target]:
            return f"{spelling}.{name}"
    return None


def render_python_value(value) -> str:
    """Source for an extern's non-tensor argument, or a buffer with its view chain.

    >>> render_python_value([1, float("inf"), torch.float16, None])
    '[1, float("inf"), torch.float16, None]'
    """
    if isinstance(value, BufferArg):
        text = value.buffer
        for target, args, kwargs in value.view_chain:
            text = render_call(target, (Source(text),) + tuple(args), kwargs)
        return text
    if isinstance(value, Source):
        return value.text
    if isinstance(value, sympy.Expr):
        return sizes.render_size(sizes.normalise(value))  # a symbolic size, bound in the wrapper
    if value is None or isinstance(value, (bool, int, str)):
        return repr(value)
    if isinstance(value, float):
        if math.isnan(value):
            return 'float("nan")'
        if math.isinf(value):
            return 'float("inf")' if value > 0 else 'float("-inf")'
        return repr(value)
    if isinstance(value, (list, tuple)):
        items = ", ".join(render_python_value(v) for v in value)
        return f"[{items}]" if isinstance(value, list) else f"({items}{',' if len(value) == 1 else ''})"
    if isinstance(value, torch.dtype):
        return str(value)
    if isinstance(value, torch.device):
        return f"torch.device({str(value)!r})"
    if isinstance(value, (torch.memory_format, torch.layout)):
        return f"torch.{str(value).split('.')[-1]}"
    raise ExternSpellingError(f"cannot write {type(value).__name__} argument {value!r} into source")


class Source:
    """Already-rendered source, written as it is."""

    def __init__(self, text: str):
        self.text = text


def render_call(target, args: tuple, kwargs: dict, spelling: str | None = None) -> str:
    """``torch.ops.aten.<op>.<overload>(...)``, or ``spelling(...)`` when given."""
    if not isinstance(target, torch._ops.OpOverload):
        raise ExternSpellingError(f"extern {target} is not an ATen operator")
    name = spelling or f"torch.ops.{target.namespace}.{target._opname}.{target._overloadname}"
    parts = [render_python_value(a) for a in args]
    parts += [f"{key}={render_python_value(v)}" for key, v in kwargs.items()]
    return f"{name}({', '.join(parts)})"
