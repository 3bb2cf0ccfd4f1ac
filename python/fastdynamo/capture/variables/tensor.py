"""Tensors during tracing: an FX node plus a FakeTensor with its metadata.

Metadata (shape, dtype, device, ndim, ``size()``, ``dim()``...) is read from the
FakeTensor and is a constant of the trace: shapes are static and guarded on the inputs.
Any other method call is recorded as one ``call_method`` node.

>>> import torch
>>> from fastdynamo.capture.output_graph import OutputGraph
>>> from fastdynamo.guards.sources import LocalSource
>>> x = OutputGraph().add_tensor_input(torch.ones(2, 3), LocalSource(0, "x"))
>>> x.var_getattr(None, "shape").as_python_constant()
torch.Size([2, 3])
"""
from __future__ import annotations

from typing import Any

import torch

from ...exc import unsupported
from .base import VariableTracker
from .constant import ConstantVariable
from .symbolic import has_symbolic

# Attributes that are pure metadata under static shapes: read from the FakeTensor.
METADATA_ATTRS = frozenset({
    "shape", "dtype", "device", "ndim", "is_cuda", "is_sparse", "is_quantized", "is_meta",
    "layout", "requires_grad", "is_leaf", "is_complex_dtype", "itemsize", "nbytes",
})
METADATA_METHODS = frozenset({
    "size", "dim", "ndimension", "numel", "nelement", "stride", "is_contiguous",
    "is_floating_point", "is_complex", "element_size", "get_device", "type_as_dtype",
    "is_signed", "storage_offset",
})
# Tensor methods whose result leaves the graph (Python scalars, host data, hooks,
# autograd side effects): the frame runs eagerly instead.
DENIED_METHODS = frozenset({
    "item", "tolist", "numpy", "nonzero", "backward", "register_hook", "retain_grad",
    "data_ptr", "untyped_storage", "storage", "__bool__", "__int__", "__float__", "__index__",
    "unique", "masked_select", "resize_", "set_", "share_memory_", "pin_memory", "__len__",
    "requires_grad_", "record_stream", "__array__", "tobytes",
})
DENIED_ATTRS = frozenset({"grad", "data", "_base", "grad_fn", "_version", "__dict__"})


class TensorVariable(VariableTracker):
    """A tensor in the graph: ``node`` produces it, ``example`` is its FakeTensor."""

    def __init__(self, node: torch.fx.Node, example: torch.Tensor, source=None,
                 python_type: type = torch.Tensor):
        self.node = node
        self.example = example
        self.source = source
        self._python_type = python_type

    def python_type(self) -> type:
        return self._python_type

    def graph_arg(self, fake: bool) -> Any:
        return self.example if fake else self.node

    def truth(self, tx) -> bool:
        raise unsupported("tensor used as a Python bool (data-dependent control flow)")

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if name in DENIED_ATTRS:
            raise unsupported(f"Tensor.{name} is not captured")
        if name in METADATA_ATTRS:
            value = getattr(self.example, name)
            if has_symbolic(value):  # x.shape with symbolic sizes: a tuple of sizes
                from .constant import wrap_constant_result

                return wrap_constant_result(value)
            return ConstantVariable(value)
        if name in DENIED_METHODS:
            # Raised when called, so a graph break happens at the call and the bound
            # method is rebuilt from the tensor (graph_break.py).
            return TensorMethodVariable(self, name)
        attr = getattr(torch.Tensor, name, None)
        if attr is None:
            raise unsupported(f"Tensor has no attribute {name!r}")
        if callable(attr) and not isinstance(attr, property):
            return TensorMethodVariable(self, name)
        # A tensor-valued property such as .T, .mT, .real: record it.
        return _output(tx).record_call("call_function", getattr, [self, ConstantVariable(name)], {})

    def call_method(self, tx, name, args, kwargs) -> VariableTracker:
        return self.var_getattr(tx, name).call_function(tx, args, kwargs)

    def unpack_var_sequence(self, tx) -> list[VariableTracker]:
        if self.example.dim() == 0:
            raise unsupported("iteration over a 0-d tensor")
        unbound = _output(tx).record_call("call_method", "unbind", [self], {})
        return unbound.unpack_var_sequence(tx)

    def describe(self) -> str:
        where = self.source.name() if self.source is not None else self.node.name
        return f"TensorVariable({where}: {tuple(self.example.shape)} {self.example.dtype})"


class TensorMethodVariable(VariableTracker):
    """``tensor.name`` before it is called."""

    def __init__(self, tensor: TensorVariable, name: str):
        self.tensor = tensor
        self.name = name

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        if self.name in DENIED_METHODS:
            raise unsupported(f"Tensor.{self.name}() leaves the graph")
        if self.name in METADATA_METHODS:
            if not all(a.is_python_constant() for a in args):
                raise unsupported(f"Tensor.{self.name} with symbolic arguments")
            const_args = [a.as_python_constant() for a in args]
            const_kwargs = {k: v.as_python_constant() for k, v in kwargs.items()}
            from .constant import constant_call, wrap_constant_result

            value = constant_call(getattr(self.tensor.example, self.name), *const_args, **const_kwargs)

            return wrap_constant_result(value)
        return _output(tx).record_call("call_method", self.name, [self.tensor, *args], kwargs)

    def describe(self) -> str:
        return f"TensorMethodVariable({self.name})"


def _output(tx):
    return tx.output
