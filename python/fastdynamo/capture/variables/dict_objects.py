"""Instances of user subclasses of ``dict`` and ``collections.OrderedDict`` made by the
frame (Hugging Face's ``ModelOutput``: a dataclass over ``OrderedDict`` with its own
``__post_init__``, ``__setattr__``, ``__setitem__`` and ``__getitem__``).

Such an object has two stores: its **dict items** (``storage``, a DictVariable) and its
**instance dict** (``attrs``, as for any user object). Each operation runs as CPython
runs it on the subclass:

- a protocol operation (``obj[k]``, ``obj[k] = v``, ``len``, ``in``, iteration, truth)
  calls the class's own Python method when a class above the built-in base defines one,
  else the built-in base's, which reads or writes ``storage`` only;
- an attribute is looked up as on any object (``attributes.instance_getattr``); a
  built-in method found there (``obj.keys``, ``super().__setitem__``) is bound to the
  built-in behaviour on ``storage``, so overrides are not called again;
- the built-in methods that call back into the subclass in CPython (``OrderedDict``'s
  ``pop``, ``popitem``, ``setdefault``, ``update``, ``copy`` go through the object's own
  ``__getitem__``/``__setitem__``/``__delitem__`` when it is a subclass) and ``dict``'s
  ``__getitem__`` on a class with ``__missing__`` are not modelled: they break.

When the object leaves the frame it is rebuilt by :func:`rebuild_dict_object`: an empty
instance from ``dict.__new__`` (no ``__init__`` runs again), the items in order through
the base's own ``__setitem__``, then the instance dict in order.

>>> import collections
>>> class Out(collections.OrderedDict):
...     pass
>>> out = rebuild_dict_object(Out, ("a",), (1,), ("note",), ("x",))
>>> type(out) is Out, list(out.items()), vars(out)
(True, [('a', 1)], {'note': 'x'})
"""
from __future__ import annotations

import collections
import types
from typing import Any

from ...exc import unsupported
from ...plans import BuildTuple, Call, Constant, OutputPlan
from .attributes import MISSING, type_lookup
from .base import VariableTracker
from .collections_ import OrderedDictVariable
from .constant import ConstantVariable
from .containers import DictVariable, IteratorVariable
from .misc import UserObjectVariable
from .user_objects import NewObjectVariable

DICT_BASES = (dict, collections.OrderedDict)

# Built-in methods that read or write the items only, on any subclass.
_ITEM_METHODS = frozenset({"__len__", "__contains__", "get", "keys", "values", "items", "__iter__",
                           "__reversed__", "__setitem__", "__delitem__", "clear", "move_to_end"})
# dict's own (not OrderedDict's): they never call the subclass's methods.
_PLAIN_DICT_METHODS = frozenset({"pop", "popitem", "setdefault", "update"})


def rebuild_dict_object(cls: type, keys: tuple, values: tuple, names: tuple, attr_values: tuple) -> Any:
    """An instance of the dict subclass ``cls`` made by the frame, rebuilt after the
    graph: ``dict.__new__`` (the class's ``__init__`` already ran in the trace), items
    through the built-in base's ``__setitem__`` (never the subclass's), then the
    instance dict with ``object.__setattr__``, both in order."""
    base: Any = builtin_dict_base(cls)
    obj: Any = dict.__new__(cls)
    for key, value in zip(keys, values, strict=True):
        base.__setitem__(obj, key, value)
    for name, value in zip(names, attr_values, strict=True):
        object.__setattr__(obj, name, value)
    return obj


def builtin_dict_base(cls: type) -> type:
    """``OrderedDict`` or ``dict``: the first built-in class on ``cls``'s MRO."""
    for klass in cls.__mro__:
        if klass in DICT_BASES:
            return klass
    raise TypeError(f"{cls.__qualname__} is not a dict subclass")


def is_dict_subclass(cls: type) -> bool:
    """A class made by class statements over exactly ``dict`` (or ``OrderedDict``) and
    ``object``: what :class:`DictObjectVariable` models."""
    from .user_objects import is_heap_type

    builtins = [klass for klass in cls.__mro__ if not is_heap_type(klass)]
    return builtins in ([dict, object], [collections.OrderedDict, dict, object])


class _ItemStorage(DictVariable):
    """The items of a DictObjectVariable: a dict with the base's behaviour whose own
    rebuilt form is the object itself (a view or iterator of it that leaves the frame
    is a view or iterator of the rebuilt object)."""

    def __init__(self, owner: DictObjectVariable):
        super().__init__({})
        self.owner = owner

    def python_type(self) -> type:
        return self.owner.base

    def rebuilt(self, items, plan) -> OutputPlan:
        return plan(self.owner)

    def clone_with(self, items: dict) -> DictVariable:
        return DictVariable(items)  # dict.copy of a subclass is a plain dict


class _OrderedItemStorage(_ItemStorage, OrderedDictVariable):
    """The items of an ``OrderedDict`` subclass (``move_to_end``, order-sensitive ``==``)."""


class DictProtocol(VariableTracker):
    """Protocol operations of a dict subclass instance (``cls``, ``base``, ``storage``,
    ``builtin_call``): the class's own Python method first, as CPython's slots do,
    else the built-in base's on the items."""

    cls: type
    base: type
    storage: DictVariable

    def builtin_call(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        raise NotImplementedError

    def items_var(self, tx) -> DictVariable:
        """The tracker of the object's own items."""
        return self.storage

    def protocol(self, tx, name: str, args: list, kwargs: dict | None = None) -> VariableTracker:
        from ..dunders import call_special, user_method

        if user_method(tx, self, name) is not None:
            return call_special(tx, self, name, args, kwargs or {})
        return self.builtin_call(tx, name, args, kwargs or {})

    def getitem(self, tx, index: VariableTracker) -> VariableTracker:
        return self.protocol(tx, "__getitem__", [index])

    def setitem(self, tx, index: VariableTracker, value: VariableTracker) -> None:
        self.protocol(tx, "__setitem__", [index, value])

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        if name in ("__len__", "__contains__", "__getitem__", "__setitem__", "__delitem__", "__iter__"):
            result = self.protocol(tx, name, args, kwargs)
            if name == "__len__":
                value = result.as_python_constant() if result.is_python_constant() else None
                if type(value) is not int or value < 0:
                    raise unsupported("__len__ returned something other than an int >= 0 (TypeError)")
            return result
        return super().call_method(tx, name, args, kwargs)  # the next class: the object's own

    def contains_item(self, tx, item: VariableTracker) -> bool:
        """``item in self``."""
        return self.protocol(tx, "__contains__", [item]).truth(tx)

    def truth(self, tx) -> bool:
        from ..dunders import user_method

        if user_method(tx, self, "__bool__") is not None:
            raise unsupported(f"truth of a {self.cls.__qualname__} (its class defines __bool__)")
        return bool(self.call_method(tx, "__len__", [], {}).as_python_constant())

    def make_iterator(self, tx) -> IteratorVariable:
        """``iter(self)``: the built-in iterator over the keys, read live."""
        from ..dunders import user_method
        from .dict_views import DictIteratorVariable

        if user_method(tx, self, "__iter__") is not None:
            raise unsupported(f"iterating a {self.cls.__qualname__} (its class defines __iter__)")
        items = self.items_var(tx)
        items.uses_order("iterating a dict")
        return DictIteratorVariable(items, "keys")

    def unpack_var_sequence(self, tx) -> list[VariableTracker]:
        return self.make_iterator(tx).unpack_var_sequence(tx)

    def mapping_items(self, tx) -> dict[Any, VariableTracker]:
        """What ``dict(self)``, ``d.update(self)`` and ``f(**self)`` read
        (``dict_merge``): the items themselves when iteration is dict's own, else
        ``keys()`` and ``self[key]`` through the class's methods (OrderedDict's
        iterator is not dict's, so an OrderedDict subclass goes that way)."""
        from .containers import iterate

        if self.base is dict and type_lookup(self.cls, "__iter__") is dict.__dict__["__iter__"]:
            items = self.items_var(tx)
            items.uses_order("copying a dict")
            return dict(items.items)
        keys = self.var_getattr(tx, "keys").call_function(tx, [], {})
        return {key.as_python_constant(): self.getitem(tx, key)
                for key in iterate(tx, keys).unpack_var_sequence(tx)}


class DictObjectVariable(DictProtocol, NewObjectVariable):
    """An instance of a user dict subclass made during the trace: ``storage`` holds its
    dict items, ``attrs`` its instance dict (both in insertion order)."""

    def __init__(self, cls: type, class_source=None):
        super().__init__(cls, class_source)
        self.base = builtin_dict_base(cls)
        self.storage: DictVariable = (_OrderedItemStorage(self) if self.base is collections.OrderedDict
                                      else _ItemStorage(self))

    # -- the built-in base's behaviour, on the items

    def builtin_call(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        """``base.name(self, *args, **kwargs)``: the built-in method, whatever the class
        overrides."""
        if name == "__getitem__":
            if type_lookup(self.cls, "__missing__") is not MISSING:
                raise unsupported(f"{self.cls.__qualname__}.__missing__ (called by dict.__getitem__)")
            return self.storage.call_method(tx, name, args, kwargs)
        if name in _ITEM_METHODS or (self.base is dict and name in _PLAIN_DICT_METHODS):
            return self.storage.call_method(tx, name, args, kwargs)
        if name == "copy" and self.base is dict:
            return self.storage.call_method(tx, name, args, kwargs)
        if name == "__init__":
            return self._builtin_init(tx, args, kwargs)
        raise unsupported(f"{self.base.__qualname__}.{name} on a {self.cls.__qualname__} (not modelled)")

    def _builtin_init(self, tx, args: list, kwargs: dict) -> VariableTracker:
        """``dict.__init__``/``OrderedDict.__init__``: ``update`` with the arguments;
        OrderedDict's stores through the object's own ``__setitem__``."""
        from .containers import dict_items

        if len(args) > 1:
            raise unsupported(f"{self.base.__qualname__}.__init__ with {len(args)} positional arguments (TypeError)")
        items = dict_items(tx, args[0]) if args else {}
        items.update(kwargs)
        for key, value in items.items():
            if self.base is dict:
                self.storage.setitem(tx, ConstantVariable(key), value)
            else:
                self.setitem(tx, ConstantVariable(key), value)
        return ConstantVariable(None)

    # -- attributes

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if name == "__dict__":
            return InstanceDictVariable(self)
        return super().var_getattr(tx, name)

    def rebuilt_plan(self, plan) -> OutputPlan:
        items = self.storage.items
        return Call(Constant(rebuild_dict_object), [
            Constant(self.cls), Constant(tuple(items)), BuildTuple([plan(v) for v in items.values()]),
            Constant(tuple(self.attrs)), BuildTuple([plan(v) for v in self.attrs.values()])])

    def describe(self) -> str:
        return f"DictObjectVariable({self.cls.__qualname__}, keys={list(self.storage.items)!r})"


class InstanceDictVariable(DictVariable):
    """``obj.__dict__`` of an object made by the frame: the same dict as its ``attrs``
    (a change through either is seen by the other); rebuilt as the rebuilt object's
    ``__dict__``."""

    def __init__(self, owner: NewObjectVariable):
        super().__init__({})
        self.items = owner.attrs
        self.owner = owner

    def rebuilt(self, items, plan) -> OutputPlan:
        return Call(Constant(getattr), [plan(self.owner), Constant("__dict__")])

    def clone_with(self, items: dict) -> DictVariable:
        return DictVariable(items)


class BuiltinMethodVariable(VariableTracker):
    """``obj.name`` (or ``super().name``) when the lookup found a method of the built-in
    base (``dict.keys``, ``OrderedDict.__setitem__``): calling it runs the built-in
    behaviour through ``owner.builtin_call``."""

    def __init__(self, owner: VariableTracker, name: str):
        self.owner = owner
        self.name = name

    def python_type(self) -> type:
        return types.BuiltinMethodType

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        return self.owner.builtin_call(tx, self.name, list(args), dict(kwargs))  # type: ignore[attr-defined]

    def describe(self) -> str:
        return f"BuiltinMethodVariable({self.owner.describe()}.{self.name})"


class ObjectMethodVariable(BuiltinMethodVariable):
    """``obj.name`` where the lookup found ``object``'s own method (a bound C method):
    found, but calling it is not modelled (``copy.deepcopy`` checks that its lookups
    found these, see copies.py)."""

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        raise unsupported(f"calling object.{self.name} on {self.owner.describe()} (not modelled)")


# ``object``'s own methods that deepcopy and pickle look up through an instance.
OBJECT_METHOD_NAMES = ("__reduce_ex__", "__reduce__", "__getstate__")


def object_method(owner: VariableTracker, name: str, attr: Any) -> VariableTracker | None:
    """The bound form of ``object.name`` found on a user object's class, or None."""
    if name in OBJECT_METHOD_NAMES and attr is object.__dict__.get(name):
        return ObjectMethodVariable(owner, name)
    return None


def builtin_method(owner: VariableTracker, name: str, attr: Any) -> VariableTracker | None:
    """The bound form of ``attr``, a method of a built-in dict base found by an
    attribute lookup on ``owner``, when ``owner`` models that base; else None."""
    if not isinstance(owner, DictProtocol):
        return None
    if isinstance(attr, (types.MethodDescriptorType, types.WrapperDescriptorType)) \
            and attr.__objclass__ in DICT_BASES and issubclass(owner.base, attr.__objclass__):
        return BuiltinMethodVariable(owner, name)
    return None


# Built-in classes whose method descriptors, called explicitly (``dict.get(d, k)``,
# ``list.__len__(l)``), run the modelled method of their argument.
_DESCRIPTOR_OWNERS = (dict, collections.OrderedDict, list, tuple)


class UnboundBuiltinMethodVariable(VariableTracker):
    """``cls.name`` for a method or slot wrapper of a built-in container class: calling
    it with a receiver of exactly that class runs the receiver's modelled method; a dict
    subclass made by the frame runs the built-in behaviour (not its overrides)."""

    def __init__(self, cls: type, name: str):
        self.cls = cls
        self.name = name

    def python_type(self) -> type:
        return type(type_lookup(self.cls, self.name))

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        if not args:
            raise unsupported(f"{self.cls.__qualname__}.{self.name}() without a receiver (TypeError)")
        receiver, rest = args[0], list(args[1:])
        if isinstance(receiver, DictProtocol) and issubclass(receiver.base, self.cls):
            return receiver.builtin_call(tx, self.name, rest, dict(kwargs))
        from .containers import BaseSequenceVariable

        modelled = isinstance(receiver, (DictVariable, BaseSequenceVariable)) and receiver.python_type() is self.cls
        if not modelled:
            raise unsupported(f"{self.cls.__qualname__}.{self.name} called on {receiver.describe()}")
        return receiver.call_method(tx, self.name, rest, dict(kwargs))

    def describe(self) -> str:
        return f"UnboundBuiltinMethodVariable({self.cls.__qualname__}.{self.name})"


def unbound_builtin_method(cls: type, name: str, attr: Any) -> VariableTracker | None:
    """The model of ``cls.name`` when it is a method of a built-in container class."""
    if cls in _DESCRIPTOR_OWNERS and isinstance(attr, (types.MethodDescriptorType, types.WrapperDescriptorType)):
        return UnboundBuiltinMethodVariable(cls, name)
    return None


# What an instance from outside the frame may do with the built-in base's methods: read.
_READ_METHODS = frozenset({"__getitem__", "__len__", "__contains__", "get", "keys", "values", "items",
                           "__iter__", "__reversed__"})


class OutsideDictObjectVariable(DictProtocol, UserObjectVariable):
    """An instance of a dict subclass from outside the frame (a ``ModelOutput`` handed
    to a resume function, a registry): attributes as any user object; its own items
    read through :class:`DictItemsSource` (so guards never call the class's overrides),
    on first use. Changing its items is not modelled (the graph breaks)."""

    def __init__(self, value: Any, source):
        super().__init__(value, source)
        self.cls = type(value)
        self.base = builtin_dict_base(self.cls)
        self._items: DictVariable | None = None

    def items_var(self, tx) -> DictVariable:
        if self._items is None:
            self._items = _outside_items(tx, self)
        return self._items

    def builtin_call(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        if name not in _READ_METHODS:
            raise unsupported(f"{self.base.__qualname__}.{name} on a {self.cls.__qualname__} from outside "
                              "the frame (changing its items is not modelled)")
        if name == "__getitem__" and type_lookup(self.cls, "__missing__") is not MISSING:
            raise unsupported(f"{self.cls.__qualname__}.__missing__ (called by dict.__getitem__)")
        return self.items_var(tx).call_method(tx, name, args, kwargs)

    def describe(self) -> str:
        return f"OutsideDictObjectVariable({self.cls.__qualname__})"


class _OutsideItems(DictVariable):
    """The items of an OutsideDictObjectVariable, guarded through DictItemsSource;
    read only, and rebuilt (a view that leaves the frame) as the object itself."""

    def __init__(self, items: dict, owner: OutsideDictObjectVariable):
        super().__init__(items)
        self.owner = owner

    def python_type(self) -> type:
        return self.owner.base

    def check_mutable(self, tx, keys_change: bool = True) -> None:
        raise unsupported(f"changing the items of a {self.owner.cls.__qualname__} from outside the frame")

    def rebuilt(self, items, plan) -> OutputPlan:
        return plan(self.owner)

    def clone_with(self, items: dict) -> DictVariable:
        return DictVariable(items)


def _outside_items(tx, owner: OutsideDictObjectVariable) -> DictVariable:
    from ...guards import len_is
    from ...guards.sources import DictItemsSource, ItemSource, dict_items_of
    from ..builder import wrap_value
    from .dict_order import OrderGuard

    if owner.source is None:
        raise unsupported(f"items of a {owner.cls.__qualname__} without a source")
    source = DictItemsSource(owner.source)
    value = dict_items_of(owner.value)
    if not all(type(k) in (str, int) for k in value):
        raise unsupported(f"a {owner.cls.__qualname__} with keys other than str/int")
    tx.output.add_guard(source, len_is(len(value)))
    items = _OutsideItems({k: wrap_value(tx, v, ItemSource(source, k)) for k, v in value.items()}, owner)
    items.order_guard = OrderGuard(tx, source, value.keys())
    return items
