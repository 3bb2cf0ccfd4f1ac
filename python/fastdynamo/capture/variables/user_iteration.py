"""``iter(obj)`` and ``x in obj`` for instances of user classes, as CPython runs them.

``iter(obj)`` calls the class's ``__iter__`` (a Python function, inlined: a generator
function such as ``collections.abc.Sequence.__iter__`` gives a lazily run generator);
without one, a class with ``__getitem__`` gets the sequence protocol's iterator, which
calls ``obj[0]``, ``obj[1]``, ... until ``IndexError`` (or ``StopIteration``).
``x in obj`` calls ``__contains__`` (``Mapping.__contains__`` for registries such as
Hugging Face's ``AttentionInterface``), else iterates comparing with ``is`` then ``==``.
Methods are looked up on the type and guarded there (:func:`..dunders.user_method`);
a class that defines none of them in Python breaks the graph, as before.
"""
from __future__ import annotations

from typing import Any

from ...exc import unsupported
from .base import VariableTracker
from .constant import ConstantVariable
from .containers import IteratorVariable
from .generators import PulledIterator


def is_user_object(value: VariableTracker) -> bool:
    from .misc import UserObjectVariable
    from .user_objects import NewObjectVariable

    return isinstance(value, (UserObjectVariable, NewObjectVariable))


def iterate_user_object(tx, value: VariableTracker) -> IteratorVariable:
    """``iter(obj)`` for a user object."""
    from ..dunders import call_special, user_method

    if user_method(tx, value, "__iter__") is not None:
        iterator = call_special(tx, value, "__iter__", [], {})
        if not isinstance(iterator, IteratorVariable):
            raise unsupported(f"{value.describe()}.__iter__ returned {iterator.describe()}")
        return iterator
    found = user_method(tx, value, "__getitem__")
    if found is None:
        raise unsupported(f"iterating over {value.describe()} (no __iter__ or __getitem__ in Python)")
    return SequenceProtocolIterator(value, found)


def user_contains(tx, container: VariableTracker, item: VariableTracker) -> bool:
    """``item in container`` for a user object."""
    from ..dunders import call_special, user_method
    from ..operators import rich_compare_bool

    if user_method(tx, container, "__contains__") is not None:
        return call_special(tx, container, "__contains__", [item], {}).truth(tx)
    iterator = iterate_user_object(tx, container)
    return any(rich_compare_bool(tx, element, item) for element in iter(lambda: iterator.next_item(tx), None))


class SequenceProtocolIterator(PulledIterator):
    """CPython's ``iterator`` object over ``obj.__getitem__``: pulled lazily, each item
    an inlined call; it cannot be rebuilt after the graph (``live`` False)."""

    def __init__(self, obj: VariableTracker, getitem: tuple[Any, Any]):
        self.obj = obj
        self.item_method = getitem
        self.index = 0
        self.done = False

    def next_item(self, tx=None) -> VariableTracker | None:
        from ..dunders import _inline
        from ..opcodes.exceptions import RaisedInTrace

        if self.done:
            return None
        try:
            item = _inline(tx, self.item_method, [self.obj, ConstantVariable(self.index)])
        except RaisedInTrace as raised:
            if not issubclass(raised.exception.cls, (IndexError, StopIteration)):
                raise
            self.done = True
            return None
        self.index += 1
        return item

    def describe(self) -> str:
        return f"SequenceProtocolIterator({self.obj.describe()}, {self.index})"
