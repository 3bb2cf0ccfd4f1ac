"""What a recorded call may be given in its FakeTensor run.

A recorded call (``record_call``) runs the real function on FakeTensors to learn its
result's metadata. Python objects passed along are the real ones: an optimizer, a
module, a user object. The function may reach real tensors through them and change
them: FakeTensorMode refuses a real tensor only after an in-place kernel has run on it
(``SGD.step`` on a real optimizer updated the first parameter during the trace, then
again when the frame ran). So the run receives only values that hold no tensor of their
own: FakeTensors, constants, torch's value types, and containers of those; anything
else is :class:`~fastdynamo.exc.Unsupported` before the run.

>>> import torch
>>> from fastdynamo.exc import Unsupported
>>> check_fake_arguments("add", [1, (2.0, None), torch.float32], {})
>>> def reason(*args, **kwargs):
...     try:
...         check_fake_arguments(*args, **kwargs)
...     except Unsupported as err:
...         return err.reason
>>> reason("step", [object()], {})
'step: an argument of type object is not run in the trace (it may hold real tensors)'
>>> reason("step", [], {}, target=torch.optim.SGD([torch.zeros(1)]).step)
'step: a method of a SGD object is not run in the trace (it may hold real tensors)'
"""
from __future__ import annotations

import enum
import types
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensor

from ..exc import unsupported

# values that hold no tensor: passed to the FakeTensor run as they are
_VALUE_TYPES = (
    type(None), bool, int, float, complex, str, bytes, slice, range, type(Ellipsis),
    torch.dtype, torch.device, torch.layout, torch.memory_format, torch.Size, enum.Enum,
    torch.finfo, torch.iinfo, torch.SymInt, torch.SymFloat, torch.SymBool,  # (symbolic sizes)
)
# callables of no state of their own (a Python function may close over real tensors)
_STATELESS_CALLABLES = (
    types.BuiltinFunctionType, types.MethodDescriptorType, types.WrapperDescriptorType,
    torch._ops.OpOverload, torch._ops.OpOverloadPacket, type,
)


def check_fake_arguments(name: str, args: list, kwargs: dict, target: Any = None) -> None:
    """Unsupported unless every argument, and the bound object of a method ``target``,
    is safe to hand to the FakeTensor run."""
    owner = getattr(target, "__self__", None)
    if isinstance(target, types.MethodType) and not isinstance(owner, (types.ModuleType, type)):
        # ``opt.step`` bound to the real optimizer: its parameters are real tensors
        raise unsupported(f"{name}: a method of a {type(owner).__qualname__} object is not run in the trace "
                          "(it may hold real tensors)")
    for value in [*args, *kwargs.values()]:
        _check(name, value)


def _check(name: str, value: Any) -> None:
    if isinstance(value, torch.Tensor):
        if not isinstance(value, FakeTensor):
            raise unsupported(f"{name}: a real tensor argument is not run in the trace")
        return
    if isinstance(value, _VALUE_TYPES) or isinstance(value, _STATELESS_CALLABLES):
        return
    if type(value) in (tuple, list):
        for item in value:
            _check(name, item)
        return
    if type(value) is dict:
        for item in value.values():
            _check(name, item)
        return
    raise unsupported(f"{name}: an argument of type {type(value).__qualname__} is not run in the trace "
                      "(it may hold real tensors)")


__all__ = ["check_fake_arguments"]
