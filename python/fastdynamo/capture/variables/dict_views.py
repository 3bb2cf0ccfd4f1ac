"""Dict views (``d.keys()``, ``d.values()``, ``d.items()``) and dict iterators.

A view is live, as in CPython: it holds the DictVariable, not a copy, so ``len``, ``in``
and iteration see every later change of the dict. A view that leaves the frame is
rebuilt as a real view of the rebuilt dict (``dict.items(the_dict)``), so it stays live
afterwards too.

A dict iterator reads the dict as it goes: values replaced during the loop are seen (as
CPython's iterator sees them); a change of the keys while it is in use raises
``RuntimeError`` in CPython and is unsupported here (the graph breaks, Python raises).

>>> from fastdynamo.capture.variables.constant import ConstantVariable
>>> from fastdynamo.capture.variables.containers import DictVariable
>>> d = DictVariable({1: ConstantVariable("a")})
>>> keys = DictViewVariable(d, "keys")
>>> d.items[2] = ConstantVariable("b")
>>> keys.call_method(None, "__len__", [], {}).as_python_constant()
2
"""
from __future__ import annotations

from typing import Any

from ...exc import unsupported
from .base import VariableTracker
from .constant import ConstantVariable
from .containers import IteratorVariable, TupleVariable, method_of

VIEW_TYPES = {"keys": type({}.keys()), "values": type({}.values()), "items": type({}.items())}
_ITERATOR_TYPES: dict[str, type] = {"keys": type(iter({}.keys())), "values": type(iter({}.values())),
                   "items": type(iter({}.items()))}
VIEW_METHODS = {"keys": dict.keys, "values": dict.values, "items": dict.items}


def view_items(dict_var, kind: str) -> list[VariableTracker]:
    """The items a view of ``dict_var`` yields now."""
    if kind == "keys":
        return [ConstantVariable(k) for k in dict_var.items]
    if kind == "values":
        return list(dict_var.items.values())
    return [TupleVariable([ConstantVariable(k), v]) for k, v in dict_var.items.items()]


class DictViewVariable(VariableTracker):
    """``d.keys()``, ``d.values()`` or ``d.items()`` over the DictVariable ``dict_var``."""

    def __init__(self, dict_var, kind: str):
        self.dict_var = dict_var
        self.kind = kind

    @property
    def view_of(self):
        return self.dict_var

    def python_type(self) -> type:
        return VIEW_TYPES[self.kind]

    def as_python_constant(self) -> Any:
        # A view of a copy: only used to compute results (set algebra, comparisons);
        # a keys view needs only the keys.
        if self.kind == "keys":
            return dict.fromkeys(self.dict_var.items).keys()
        return VIEW_METHODS[self.kind](self.dict_var.as_python_constant())

    def truth(self, tx) -> bool:
        return bool(self.dict_var.items)

    def unpack_var_sequence(self, tx) -> list[VariableTracker]:
        self.dict_var.uses_order("iterating a dict view")
        return view_items(self.dict_var, self.kind)

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if name == "mapping":
            raise unsupported("dict view .mapping (a read-only proxy)")
        return method_of(self, name)

    def call_method(self, tx, name, args, kwargs) -> VariableTracker:
        from .arity import check_arity

        check_arity(self.python_type(), name, args, kwargs)
        if name == "__len__":
            return ConstantVariable(len(self.dict_var.items))
        if name == "__contains__":
            return ConstantVariable(self.contains(tx, args[0]))
        if name == "__iter__":
            return DictIteratorVariable(self.dict_var, self.kind)
        if name == "__reversed__":
            return DictIteratorVariable(self.dict_var, self.kind, reverse=True)
        if name == "isdisjoint" and self.is_python_constant() and args[0].is_python_constant():
            return ConstantVariable(self.as_python_constant().isdisjoint(args[0].as_python_constant()))
        raise unsupported(f"{self.python_type().__name__}.{name}()")

    def contains(self, tx, item: VariableTracker) -> bool:
        """``item in view``, with CPython's comparisons (identity, then ``==``)."""
        from ..operators import rich_compare_bool

        items = self.dict_var.items
        if self.kind == "keys":
            return _constant_key(item) in items
        if self.kind == "items":
            pair = item.unpack_var_sequence(tx) if _is_pair(item) else None
            if pair is None or len(pair) != 2:
                return False
            key = _constant_key(pair[0])
            return key in items and rich_compare_bool(tx, items[key], pair[1])
        return any(rich_compare_bool(tx, value, item) for value in items.values())

    def describe(self) -> str:
        return f"DictViewVariable({self.kind} of {self.dict_var.describe()})"


def _constant_key(item: VariableTracker) -> Any:
    if not item.is_python_constant():
        raise unsupported(f"looking up {item.describe()} among a dict's keys")
    return item.as_python_constant()


def _is_pair(item: VariableTracker) -> bool:
    try:
        return issubclass(item.python_type(), tuple)
    except Exception:  # noqa: BLE001 - an unknown type is not a tuple
        return False


class DictIteratorVariable(IteratorVariable):
    """``iter(d)`` / ``iter(d.items())``: reads the dict at each step; the keys must not
    change while it is in use (CPython raises RuntimeError), values may."""

    live = False  # not rebuilt through the generic IteratorVariable path
    reads_live_values = True  # record_mutation: replacing a value is fine

    def __init__(self, dict_var, kind: str, reverse: bool = False):
        self.dict_var = dict_var
        self.kind = kind
        self.reverse = reverse
        dict_var.uses_order("iterating a dict")
        self.keys_at_start = tuple(dict_var.items)
        self.index = 0
        self.finished = False
        _register(dict_var, self)

    def python_type(self) -> type:
        return _ITERATOR_TYPES[self.kind]

    def _check_unchanged(self) -> None:
        if tuple(self.dict_var.items) != self.keys_at_start:
            raise unsupported("dict changed size or keys during iteration (RuntimeError in Python)")

    def next_item(self, tx=None) -> VariableTracker | None:
        if self.finished:
            return None
        self._check_unchanged()  # CPython checks the size before it looks for an item
        if self.index >= len(self.keys_at_start):
            self.finished = True
            return None
        items = view_items(self.dict_var, self.kind)
        if self.reverse:
            items.reverse()
        self.index += 1
        return items[self.index - 1]

    def unpack_var_sequence(self, tx) -> list[VariableTracker]:
        rest = []
        while (item := self.next_item(tx)) is not None:
            rest.append(item)
        return rest

    def has_items_left(self) -> bool:
        return not self.finished and self.index < len(self.keys_at_start)

    def exhausted(self) -> bool:
        return self.finished

    def remaining(self):
        raise unsupported(f"{self.describe()} is rebuilt from its dict, not from its items")

    def describe(self) -> str:
        return f"DictIteratorVariable({self.kind}, {self.index}/{len(self.keys_at_start)})"


def _register(dict_var, iterator) -> None:
    # record_mutation refuses key changes while the iterator is in use
    if not hasattr(dict_var, "snapshots"):
        dict_var.snapshots = []
    dict_var.snapshots.append(iterator)


def advanced(iterator, steps: int):
    """``iterator`` after ``steps`` calls of ``next``: rebuilds an iterator the trace
    partly consumed with its real type (used by output plans)."""
    for _ in range(steps):
        next(iterator)
    return iterator


__all__ = [
    "VIEW_METHODS",
    "VIEW_TYPES",
    "DictIteratorVariable",
    "DictViewVariable",
    "advanced",
    "view_items",
]


def unordered_items(tx, iterable: VariableTracker) -> list[VariableTracker]:
    """The items of ``iterable`` for a consumer whose result does not depend on their
    order (``sorted`` without a key, ``set``, ``min``/``max``): a dict's keys, or its
    items (pairs with distinct keys), are read without guarding the dict's key order."""
    from .containers import DictVariable

    if isinstance(iterable, DictVariable):
        return view_items(iterable, "keys")
    if isinstance(iterable, DictViewVariable) and iterable.kind in ("keys", "items"):
        return view_items(iterable.dict_var, iterable.kind)
    return iterable.unpack_var_sequence(tx)
