"""``id(value)`` in a trace: a constant only where the object is pinned.

The address of an object that exists before the frame is fixed for as long as the object
is: reading ``id(x)`` of a value the frame reached through a source pins that source with
an ``id_is`` guard (the guard holds the object weakly where it can, so a freed object and
a new one at its address fail it), and the address becomes a constant of the trace. A
later call with another object recompiles. The singletons (``None``, ``True``, ...) have
one address for the process.

An object made by the frame has no address until the code runs. torch._dynamo hands out
a compile-time "fake id" for it, which may be compared and used as a dict key but must
never reach the graph, the rebuilt values or the rewritten code. Here constants are plain
values that flow everywhere (graph arguments, dict keys rebuilt after the graph, effects),
so a fake address could not be kept from escaping: ``id()`` of such an object is
unsupported (the frame breaks there, with the reason).

>>> from fastdynamo.capture.variables.constant import ConstantVariable
>>> identity_of(None, ConstantVariable(None)) == id(None)
True
"""
from __future__ import annotations

from typing import Any

from ...exc import unsupported
from ...guards import id_is
from .base import VariableTracker

_SINGLETONS = (None, True, False, Ellipsis, NotImplemented)


def identity_of(tx: Any, value: VariableTracker) -> int:
    """``id()`` of the object ``value`` models, pinned (see the module docstring)."""
    if value.is_python_constant():
        constant = value.as_python_constant()
        if any(constant is singleton for singleton in _SINGLETONS):
            return id(constant)
    source = value.source
    if source is None:
        raise unsupported(f"id() of {value.describe()}, made by the frame: its address exists "
                          "only when the code runs")
    obj = tx.output.resolve(source)
    tx.output.add_guard(source, id_is(obj))
    return id(obj)
