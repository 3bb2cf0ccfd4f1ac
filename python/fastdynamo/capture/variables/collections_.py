"""``collections.OrderedDict``, ``defaultdict`` and ``Counter`` made by the frame: dicts
with their type's own behaviour (``move_to_end`` and order-sensitive equality, a default
factory called on a missing key, counting updates and a 0 for a missing key), rebuilt
with their type when they leave the frame.

Instances passed in from outside stay plain objects (their methods break the graph):
writing one back with ``dict`` methods would bypass the subclass. An exact ``OrderedDict``
from outside (a module's hook tables) is read with a dict's guards; changing it breaks.

>>> from fastdynamo.capture.variables.constant import ConstantVariable
>>> counts = CounterVariable({"a": ConstantVariable(2)})
>>> counts.getitem(None, ConstantVariable("b")).as_python_constant()
0
"""
from __future__ import annotations

import collections
from typing import Any

from ...exc import unsupported
from ...plans import Call, Constant, OutputPlan
from .base import VariableTracker
from .constant import ConstantVariable, wrap_constant_result
from .containers import DictVariable, TupleVariable, dict_items


class OrderedDictVariable(DictVariable):
    def python_type(self) -> type:
        return collections.OrderedDict

    def check_mutable(self, tx, keys_change: bool = True) -> None:
        if self.source is not None:
            # writing the final items back (clear + update) would be right, but the
            # partial write-back of ReplaceDict keeps the caller's order: not modelled
            raise unsupported(f"changing an OrderedDict from outside the frame ({self.source.name()})")
        super().check_mutable(tx, keys_change)

    def as_python_constant(self) -> Any:
        return collections.OrderedDict(super().as_python_constant())

    def clone_with(self, items: dict) -> DictVariable:
        return OrderedDictVariable(items)

    def rebuilt(self, items: OutputPlan, plan) -> OutputPlan:
        return Call(Constant(collections.OrderedDict), [items])

    def call_method(self, tx, name, args, kwargs) -> VariableTracker:
        from .arity import check_arity

        check_arity(collections.OrderedDict, name, args, kwargs)
        if name == "move_to_end":
            key = args[0].as_python_constant()
            last = (kwargs.get("last") or (args[1] if len(args) > 1 else ConstantVariable(True))).truth(tx)
            if key not in self.items:
                raise unsupported(f"KeyError {key!r} in OrderedDict.move_to_end")
            self.check_mutable(tx)
            value = self.items.pop(key)
            self.items = {key: value, **self.items} if not last else {**self.items, key: value}
            return ConstantVariable(None)
        if name == "popitem" and (args or kwargs):
            last = (kwargs.get("last") or args[0]).truth(tx)
            if not self.items:
                raise unsupported("KeyError from OrderedDict.popitem() on an empty dict")
            self.check_mutable(tx)
            key = next(reversed(self.items)) if last else next(iter(self.items))
            return TupleVariable([ConstantVariable(key), self.items.pop(key)])
        return super().call_method(tx, name, args, kwargs)


class DefaultDictVariable(DictVariable):
    def __init__(self, factory: VariableTracker, items: dict, source=None):
        super().__init__(items, source)
        self.factory = factory

    def python_type(self) -> type:
        return collections.defaultdict

    def as_python_constant(self) -> Any:
        return collections.defaultdict(self.factory.as_python_constant(), super().as_python_constant())

    def clone_with(self, items: dict) -> DictVariable:
        return DefaultDictVariable(self.factory, items)

    def rebuilt(self, items: OutputPlan, plan) -> OutputPlan:
        return Call(Constant(collections.defaultdict), [plan(self.factory), items])

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if name == "default_factory":
            return self.factory
        return super().var_getattr(tx, name)

    def getitem(self, tx, index) -> VariableTracker:
        key = index.as_python_constant()
        if key in self.items:
            return self.items[key]
        if self.factory.is_python_constant() and self.factory.as_python_constant() is None:
            raise unsupported(f"KeyError {key!r} in a defaultdict without a factory")
        value = self.factory.call_function(tx, [], {})  # __missing__: call, insert, return
        self.setitem(tx, index, value)
        return value


class CounterVariable(DictVariable):
    def python_type(self) -> type:
        return collections.Counter

    def as_python_constant(self) -> Any:
        return collections.Counter(super().as_python_constant())

    def clone_with(self, items: dict) -> DictVariable:
        return CounterVariable(items)

    def rebuilt(self, items: OutputPlan, plan) -> OutputPlan:
        return Call(Constant(collections.Counter), [items])

    def getitem(self, tx, index) -> VariableTracker:
        key = index.as_python_constant()
        return self.items.get(key, ConstantVariable(0))  # __missing__: 0, not inserted

    def call_method(self, tx, name, args, kwargs) -> VariableTracker:
        from .arity import check_arity

        check_arity(collections.Counter, name, args, kwargs)
        if name == "__getitem__":
            return self.getitem(tx, args[0])
        if name in ("update", "subtract"):
            # counting, not replacing: computed on the constants, then written back
            self.check_mutable(tx)
            counter = self.as_python_constant()
            getattr(counter, name)(*[a.as_python_constant() for a in args],
                                   **{k: v.as_python_constant() for k, v in kwargs.items()})
            self.items = {k: ConstantVariable(v) for k, v in counter.items()}
            return ConstantVariable(None)
        if name in ("most_common", "total", "elements"):
            result = getattr(self.as_python_constant(), name)(*[a.as_python_constant() for a in args])
            return wrap_constant_result(list(result) if name == "elements" else result)
        return super().call_method(tx, name, args, kwargs)


def _ordered_dict(tx, *args, **kwargs):
    if len(args) > 1:
        raise unsupported("OrderedDict() takes at most 1 positional argument (TypeError in Python)")
    items = dict_items(tx, args[0]) if args else {}
    items.update(kwargs)
    return OrderedDictVariable(items)


def _defaultdict(tx, factory=None, *args, **kwargs):
    factory = factory if factory is not None else ConstantVariable(None)
    if len(args) > 1:
        raise unsupported("defaultdict() takes at most 2 positional arguments (TypeError in Python)")
    items = dict_items(tx, args[0]) if args else {}
    items.update(kwargs)
    return DefaultDictVariable(factory, items)


def _counter(tx, *args, **kwargs):
    from .containers import iterate

    if len(args) > 1:
        raise unsupported("Counter() takes at most 1 positional argument (TypeError in Python)")
    counter = CounterVariable({})
    if args and isinstance(args[0], DictVariable):
        counter.items = dict(args[0].items)
    elif args:
        counter.items = {k: ConstantVariable(v) for k, v in collections.Counter(
            item.as_python_constant() for item in iterate(tx, args[0]).unpack_var_sequence(tx)).items()}
    if kwargs:
        counter.call_method(tx, "update", [], kwargs)
    return counter


class DequeVariable(VariableTracker):
    """A ``collections.deque`` made by the frame (``maxlen`` drops from the other end).
    Not a list: ``+``, comparisons and slicing are not modelled (they break)."""

    tracks_snapshots = True  # iterating it while it changes is refused (record_mutation)

    def __init__(self, items: list[VariableTracker], maxlen: int | None):
        self.items = list(items)[-maxlen:] if maxlen else ([] if maxlen == 0 else list(items))
        self.maxlen = maxlen

    def python_type(self) -> type:
        return collections.deque

    def as_python_constant(self) -> Any:
        return collections.deque([i.as_python_constant() for i in self.items], self.maxlen)

    def truth(self, tx) -> bool:
        return bool(self.items)

    def unpack_var_sequence(self, tx) -> list[VariableTracker]:
        return list(self.items)

    def var_getattr(self, tx, name: str) -> VariableTracker:
        from .containers import method_of

        if name == "maxlen":
            return ConstantVariable(self.maxlen)
        return method_of(self, name)

    def getitem(self, tx, index) -> VariableTracker:
        key = index.as_python_constant()
        if type(key) is not int or not -len(self.items) <= key < len(self.items):
            raise unsupported(f"deque[{key!r}] (IndexError/TypeError in Python)")
        return self.items[key]

    def rebuilt_plan(self, plan) -> OutputPlan:
        from ...plans import BuildList

        return Call(Constant(collections.deque), [BuildList([plan(i) for i in self.items]), Constant(self.maxlen)])

    def _bounded(self, left: bool) -> None:
        # a full deque drops items from the end opposite the one added to
        if self.maxlen is not None and len(self.items) > self.maxlen:
            self.items = self.items[:self.maxlen] if left else self.items[-self.maxlen:]

    def call_method(self, tx, name, args, kwargs) -> VariableTracker:
        from .arity import check_arity
        from .containers import iterate, record_mutation

        check_arity(collections.deque, name, args, kwargs)
        if name in _DEQUE_READERS:
            return self._read(tx, name, args)
        record_mutation(tx, self)
        items = self.items
        if name in ("append", "appendleft"):
            items.insert(0 if name == "appendleft" else len(items), args[0])
            self._bounded(name == "appendleft")
        elif name in ("extend", "extendleft"):
            for item in iterate(tx, args[0]).unpack_var_sequence(tx):
                items.insert(0 if name == "extendleft" else len(items), item)
                self._bounded(name == "extendleft")
        elif name in ("pop", "popleft"):
            if not items:
                raise unsupported(f"IndexError from deque.{name}() on an empty deque")
            return items.pop(0 if name == "popleft" else -1)
        elif name == "rotate":
            steps = args[0].as_python_constant() if args else 1
            if items:
                steps %= len(items)
                self.items = items[-steps:] + items[:-steps] if steps else items
        elif name == "clear":
            items.clear()
        elif name == "reverse":
            items.reverse()
        elif name == "__setitem__":
            self.getitem(tx, args[0])  # bounds
            items[args[0].as_python_constant()] = args[1]
        else:
            raise unsupported(f"deque.{name}()")
        return ConstantVariable(None)

    def _read(self, tx, name, args) -> VariableTracker:
        from ..operators import contains_op

        if name == "__len__":
            return ConstantVariable(len(self.items))
        if name == "__getitem__":
            return self.getitem(tx, args[0])
        if name == "__contains__":
            return ConstantVariable(contains_op(tx, args[0], self))
        if name == "copy":
            return DequeVariable(self.items, self.maxlen)
        values = self.as_python_constant()  # index, count: on constants
        return ConstantVariable(getattr(values, name)(*[a.as_python_constant() for a in args]))

    def describe(self) -> str:
        return f"DequeVariable(len={len(self.items)})"


_DEQUE_READERS = frozenset({"__len__", "__getitem__", "__contains__", "copy", "index", "count"})


def _deque(tx, iterable=None, maxlen=None):
    from .containers import iterate

    bound = None if maxlen is None else maxlen.as_python_constant()
    if bound is not None and (type(bound) is not int or bound < 0):
        raise unsupported("deque() maxlen must be a non-negative int (ValueError/TypeError in Python)")
    items = iterate(tx, iterable).unpack_var_sequence(tx) if iterable is not None else []
    return DequeVariable(items, bound)


HANDLERS = {
    collections.deque: _deque,
    collections.OrderedDict: _ordered_dict,
    collections.defaultdict: _defaultdict,
    collections.Counter: _counter,
}
