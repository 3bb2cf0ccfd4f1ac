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
from ...guards import id_is, len_is, tables_empty
from ...guards.sources import AttrSource, ItemSource, TypeSource
from .attributes import (
    MISSING,
    class_attribute,
    has_custom_getattribute,
    is_data_descriptor,
    property_get,
    type_lookup,
)
from .base import VariableTracker
from .constant import ConstantVariable
from .misc import ClassVariable, _lookup_class


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
        """Python's order (:mod:`.attributes`): data descriptors on the class, the
        instance dict, class attributes, then ``nn.Module.__getattr__`` (parameters,
        buffers, submodules): a method named like a submodule wins, as in eager."""
        from ..builder import wrap_value

        module = self.module
        pending = tx.output.side_effects.load_attr(module, name)
        if pending is not None:
            return pending
        cls = type(module)
        if has_custom_getattribute(cls):
            raise unsupported(f"{cls.__qualname__} customises __getattribute__")
        class_attr = type_lookup(cls, name)
        class_source = TypeSource(self.source) if self.source is not None else None
        if class_attr is not MISSING and is_data_descriptor(class_attr):
            if isinstance(class_attr, property):
                return property_get(tx, self, cls, name, class_attr, class_source)
            if name == "__class__" and class_attr is object.__dict__["__class__"]:
                # The module is guarded by identity, its class is not: `m.__class__ = X`
                # must recompile.
                if class_source is not None:
                    tx.output.add_guard(class_source, id_is(cls))
                return ClassVariable(cls, class_source)
            raise unsupported(f"attribute {cls.__qualname__}.{name} of kind {type(class_attr).__name__}")
        if name in module.__dict__:
            return wrap_value(tx, module.__dict__[name], self._child_source(name))
        if class_attr is not MISSING:
            return class_attribute(tx, self, cls, name, class_attr, self.source, class_source)
        if type_lookup(cls, "__getattr__") is not torch.nn.Module.__getattr__:
            raise unsupported(f"{cls.__qualname__} customises __getattr__")
        for table in ("_parameters", "_buffers", "_modules"):
            entries = module.__dict__.get(table, {})
            if name in entries:
                value = entries[name]
                if value is None:
                    if self.source is not None:
                        tx.output.add_guard(self._table_source(table, name), ("is_none",))
                    return ConstantVariable(None)
                return wrap_value(tx, value, self._table_source(table, name))
        raise unsupported(f"{cls.__qualname__} has no attribute {name!r}")

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
        """``module(*args)``: the class's own ``__call__`` when it overrides it (inlined;
        ``super().__call__`` comes back to :meth:`call_module`), else the module call path."""
        cls = type(self.module)
        override = type_lookup(cls, "__call__")
        if override is not torch.nn.Module.__call__:
            if not isinstance(override, types.FunctionType):
                raise unsupported(f"{cls.__qualname__}.__call__ of kind {type(override).__name__}")
            class_source = TypeSource(self.source) if self.source is not None else None
            return class_attribute(tx, self, cls, "__call__", override, None, class_source) \
                .call_function(tx, args, kwargs)
        return self.call_module(tx, args, kwargs)

    def call_module(self, tx, args, kwargs) -> VariableTracker:
        """``nn.Module.__call__``: no hooks (guarded), then ``self.forward`` looked up as
        Python does (a ``forward`` patched on the instance is called, and guarded)."""
        module = self.module
        if any(getattr(module, table) for table in _MODULE_HOOKS) or any(_global_hook_tables()):
            raise unsupported(f"{type(module).__qualname__} has hooks")
        tx.output.add_guard(None, tables_empty(*_global_hook_tables()))  # hooks added later
        if self.source is not None:  # must invalidate the entry
            for table in _MODULE_HOOKS:
                tx.output.add_guard(AttrSource(self.source, table), len_is(0))
        return self.var_getattr(tx, "forward").call_function(tx, args, kwargs)

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

        key = index.as_python_constant()
        module = self.module
        if isinstance(module, torch.nn.ModuleDict):
            return wrap_value(tx, module[key], self._table_source("_modules", key))
        if isinstance(module, (torch.nn.ModuleList, torch.nn.Sequential, torch.nn.ParameterList)):
            items = self.unpack_var_sequence(tx)
            if isinstance(key, slice):
                if type(module) not in (torch.nn.ModuleList, torch.nn.Sequential):
                    raise unsupported(f"slicing a {type(module).__qualname__}")
                return ModuleSliceVariable(type(module), items[key])
            return items[key]
        raise unsupported(f"indexing {type(module).__qualname__}")

    def describe(self) -> str:
        return f"NNModuleVariable({type(self.module).__qualname__})"


class ModuleSliceVariable(VariableTracker):
    """``seq[a:b]`` of a Sequential or ModuleList: eager builds a new container of the
    same class over the same submodules; here it is those submodules, callable (a
    Sequential chains them), iterable and indexable. It cannot leave the frame."""

    def __init__(self, cls: type, items: list[VariableTracker]):
        self.cls = cls
        self.items = list(items)

    def python_type(self) -> type:
        return self.cls

    def unpack_var_sequence(self, tx) -> list[VariableTracker]:
        return list(self.items)

    def getitem(self, tx, index) -> VariableTracker:
        key = index.as_python_constant()
        if isinstance(key, slice):
            return ModuleSliceVariable(self.cls, self.items[key])
        return self.items[key]

    def call_method(self, tx, name, args, kwargs) -> VariableTracker:
        if name == "__len__" and not args and not kwargs:
            return ConstantVariable(len(self.items))
        raise unsupported(f"{self.cls.__qualname__}.{name} on a slice made by the frame")

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        if self.cls is not torch.nn.Sequential or len(args) != 1 or kwargs:
            raise unsupported(f"calling a {self.cls.__qualname__} slice")
        value = args[0]
        for module in self.items:  # Sequential.forward
            value = module.call_function(tx, [value], {})
        return value

    def describe(self) -> str:
        return f"ModuleSliceVariable({self.cls.__qualname__}, {len(self.items)})"


_MODULE_CONTAINERS = (torch.nn.ModuleList, torch.nn.Sequential, torch.nn.ModuleDict, torch.nn.ParameterList)

# Names every module has in its __dict__ (tables, hooks, flags); ``training`` is a
# plain attribute and may be assigned.
_MODULE_INTERNALS = frozenset(torch.nn.Module().__dict__) - {"training"}


def _buffer_hooks_installed() -> bool:
    from torch.nn.modules import module as module_mod

    return bool(getattr(module_mod, "_global_buffer_registration_hooks", None))


# A module's own hook tables that ``nn.Module.__call__`` consults.
_MODULE_HOOKS = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks")


def _global_hook_tables() -> tuple:
    """torch's global module-hook dicts (mutated in place, never rebound)."""
    from torch.nn.modules import module as module_mod

    return (module_mod._global_forward_hooks, module_mod._global_forward_pre_hooks,
            module_mod._global_backward_hooks, module_mod._global_backward_pre_hooks)
