"""``nn.Module`` instances: calls are inlined, parameters and buffers are graph inputs.

Reading ``self.weight`` makes a placeholder loaded from ``self.weight`` on every call,
so an optimizer step that updates parameters in place is seen without recompiling.
Plain attributes (``self.training``, config values) are constants guarded on their
source; submodules are guarded by identity.

>>> import torch
>>> NNModuleVariable(torch.nn.ReLU()).describe()
'NNModuleVariable(ReLU)'
"""
from __future__ import annotations

import types
from typing import Any

import torch

from ...exc import unsupported
from ...guards import len_is
from ...guards.sources import AttrSource, ItemSource
from .base import VariableTracker
from .constant import ConstantVariable
from .misc import _lookup_class


class NNModuleVariable(VariableTracker):
    """An ``nn.Module`` (including ModuleList, Sequential and ModuleDict)."""

    def __init__(self, module: torch.nn.Module, source=None):
        self.module = module
        self.source = source

    def python_type(self) -> type:
        return type(self.module)

    def as_python_constant(self) -> Any:
        return self.module

    def truth(self, tx) -> bool:
        return True

    def _child_source(self, name: str):
        return AttrSource(self.source, name) if self.source is not None else None

    def _table_source(self, table: str, name: str):
        # self._parameters['w'] rather than self.w: the latter goes through the Python
        # Module.__getattr__ on every guard check and every load in the rewritten code.
        if self.source is None:
            return None
        return ItemSource(AttrSource(self.source, table), name)

    def var_getattr(self, tx, name: str) -> VariableTracker:
        from ..builder import wrap_value
        from .functions import UserFunctionVariable, UserMethodVariable

        module = self.module
        pending = tx.output.side_effects.load_attr(module, name)
        if pending is not None:
            return pending
        for table in ("_parameters", "_buffers", "_modules"):
            entries = module.__dict__.get(table, {})
            if name in entries:
                value = entries[name]
                if value is None:
                    if self.source is not None:
                        tx.output.add_guard(self._table_source(table, name), ("is_none",))
                    return ConstantVariable(None)
                return wrap_value(tx, value, self._table_source(table, name))
        if name in module.__dict__:
            return wrap_value(tx, module.__dict__[name], self._child_source(name))
        class_attr = _lookup_class(type(module), name)
        if isinstance(class_attr, types.FunctionType):
            return UserMethodVariable(UserFunctionVariable(class_attr), self)
        if isinstance(class_attr, property) and isinstance(class_attr.fget, types.FunctionType):
            return UserFunctionVariable(class_attr.fget).call_function(tx, [self], {})
        if class_attr is None:
            raise unsupported(f"{type(module).__qualname__} has no attribute {name!r}")
        if isinstance(class_attr, (staticmethod, classmethod)) or hasattr(type(class_attr), "__get__"):
            raise unsupported(f"attribute {type(module).__qualname__}.{name} of kind {type(class_attr).__name__}")
        # A class-level constant (e.g. __constants__ or a default); guard it where it is read.
        return wrap_value(tx, getattr(module, name), self._child_source(name))

    def store_attr(self, tx, name: str, value: VariableTracker) -> None:
        """``self.name = value`` through ``nn.Module.__setattr__``: plain attributes and
        tensors assigned to buffers; never parameters, submodules or module internals."""
        from ..side_effects import where_of
        from .misc import is_data_descriptor
        from .tensor import TensorVariable

        module = self.module
        what = f"assignment to {type(module).__qualname__}.{name}"
        if self.source is None:
            raise unsupported(f"{what} on a module without a source")
        if type(module).__setattr__ is not torch.nn.Module.__setattr__:
            raise unsupported(f"{what}: the module class customises __setattr__")
        if name in _MODULE_INTERNALS or name == "forward" or name.startswith("__") \
                or is_data_descriptor(_lookup_class(type(module), name)):
            raise unsupported(f"{what}, an attribute the module machinery owns")
        if name in module.__dict__.get("_parameters", {}) or name in module.__dict__.get("_modules", {}):
            raise unsupported(f"{what}: replacing a parameter or submodule")
        if isinstance(value, NNModuleVariable) or (isinstance(value, TensorVariable) and
                                                   issubclass(value.python_type(), torch.nn.Parameter)):
            raise unsupported(f"{what}: registering a parameter or submodule")
        if name in module.__dict__.get("_buffers", {}):
            is_none = value.is_python_constant() and value.as_python_constant() is None
            if not (isinstance(value, TensorVariable) or is_none) or _buffer_hooks_installed():
                raise unsupported(f"{what}: a buffer takes a tensor or None (and no registration hooks)")
        tx.output.side_effects.store_attr(self, module, name, value, pinned=True, where=where_of(tx))

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        module = self.module
        if (module._forward_hooks or module._forward_pre_hooks or module._backward_hooks
                or _global_hooks_installed()):
            raise unsupported(f"{type(module).__qualname__} has hooks")
        if self.source is not None:
            # hooks added later must invalidate the entry
            tx.output.add_guard(AttrSource(self.source, "_forward_hooks"), len_is(0))
            tx.output.add_guard(AttrSource(self.source, "_forward_pre_hooks"), len_is(0))
        if "forward" in module.__dict__:
            raise unsupported(f"{type(module).__qualname__}.forward replaced on the instance")
        return self.call_method(tx, "forward", args, kwargs)

    def call_method(self, tx, name, args, kwargs) -> VariableTracker:
        from .containers import TupleVariable

        if name in ("parameters", "buffers", "named_parameters", "children", "modules"):
            raise unsupported(f"{type(self.module).__qualname__}.{name}() inside a compiled frame")
        if isinstance(self.module, torch.nn.ModuleDict):
            from .dict_order import guard_module_table

            if name in ("keys", "values", "items"):
                guard_module_table(tx, self.source, self.module, "_modules")
            if name == "keys":
                return TupleVariable([ConstantVariable(k) for k in self.module.keys()])
            if name == "values":
                return TupleVariable(self._submodules(tx))
            if name == "items":
                return TupleVariable([TupleVariable([ConstantVariable(k), v])
                                      for k, v in zip(self.module.keys(), self._submodules(tx), strict=True)])
        if name == "__len__" and isinstance(self.module, _MODULE_CONTAINERS):
            from .dict_order import guard_module_length

            guard_module_length(tx, self.source, self.module)  # ModuleList.append after a call
            return ConstantVariable(len(self.module))
        return self.var_getattr(tx, name).call_function(tx, args, kwargs)

    def _submodules(self, tx) -> list[VariableTracker]:
        from ..builder import wrap_value
        from .dict_order import guard_module_table

        guard_module_table(tx, self.source, self.module, "_modules")

        return [wrap_value(tx, mod, self._table_source("_modules", key)) for key, mod in self.module._modules.items()]

    def unpack_var_sequence(self, tx) -> list[VariableTracker]:
        if isinstance(self.module, torch.nn.ModuleDict):
            from .dict_order import guard_module_table

            guard_module_table(tx, self.source, self.module, "_modules")
            return [ConstantVariable(k) for k in self.module.keys()]
        if isinstance(self.module, (torch.nn.ModuleList, torch.nn.Sequential)):
            return self._submodules(tx)
        if isinstance(self.module, (torch.nn.ParameterList,)):
            from ..builder import wrap_value
            from .dict_order import guard_module_table

            guard_module_table(tx, self.source, self.module, "_parameters")
            return [wrap_value(tx, p, self._table_source("_parameters", k)) for k, p in self.module._parameters.items()]
        raise unsupported(f"iterating over {type(self.module).__qualname__}")

    def getitem(self, tx, index) -> VariableTracker:
        from ..builder import wrap_value
        from .containers import TupleVariable

        key = index.as_python_constant()
        module = self.module
        if isinstance(module, torch.nn.ModuleDict):
            return wrap_value(tx, module[key], self._table_source("_modules", key))
        if isinstance(module, (torch.nn.ModuleList, torch.nn.Sequential, torch.nn.ParameterList)):
            items = self.unpack_var_sequence(tx)
            if isinstance(key, slice):
                return TupleVariable(items[key])
            return items[key]
        raise unsupported(f"indexing {type(module).__qualname__}")

    def describe(self) -> str:
        return f"NNModuleVariable({type(self.module).__qualname__})"


_MODULE_CONTAINERS = (torch.nn.ModuleList, torch.nn.Sequential, torch.nn.ModuleDict, torch.nn.ParameterList)

# Names every module has in its __dict__ (tables, hooks, flags); ``training`` is a
# plain attribute and may be assigned.
_MODULE_INTERNALS = frozenset(torch.nn.Module().__dict__) - {"training"}


def _buffer_hooks_installed() -> bool:
    from torch.nn.modules import module as module_mod

    return bool(getattr(module_mod, "_global_buffer_registration_hooks", None))


def _global_hooks_installed() -> bool:
    from torch.nn.modules import module as module_mod

    return bool(module_mod._global_forward_hooks or module_mod._global_forward_pre_hooks
                or module_mod._global_backward_hooks)
