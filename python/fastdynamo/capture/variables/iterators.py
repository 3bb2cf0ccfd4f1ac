"""Lazy iterators: ``map``, ``filter``, ``zip``, ``enumerate`` (and the ``itertools`` ones
in :mod:`.itertools_`), which pull from their inputs only when an item is asked for.

As in CPython, the function of a ``map`` or ``filter`` runs when an item is pulled, not
when the iterator is made; ``zip`` pulls from its inputs left to right and stops at the
first exhausted one (the items already pulled from the inputs before it are lost, as in
CPython). An iterator that leaves the frame (returned, or live at a graph break) is
rebuilt lazily, ``map(fn, *inputs)`` over its rebuilt inputs; when a part cannot be
rebuilt the frame is unsupported, never materialised.

>>> from fastdynamo.capture.variables.constant import ConstantVariable
>>> from fastdynamo.capture.variables.containers import IteratorVariable
>>> pairs = ZipVariable([IteratorVariable([ConstantVariable(1)]),
...                      IteratorVariable([ConstantVariable(2), ConstantVariable(3)])])
>>> [item.as_python_constant() for item in pairs.unpack_var_sequence(None)]
[(1, 2)]
"""
from __future__ import annotations

from collections.abc import Callable

from ...exc import unsupported
from ...plans import Call, Constant, OutputPlan
from .base import VariableTracker
from .constant import ConstantVariable
from .containers import IteratorVariable, TupleVariable

PlanFn = Callable[[VariableTracker], OutputPlan]


class LazyIteratorVariable(IteratorVariable):
    """An iterator whose items are computed when pulled (``next_item(tx)``)."""

    live = False  # rebuilt by ``rebuild``, not from a list of items

    def __init__(self) -> None:
        pass

    def pull(self, tx) -> VariableTracker | None:
        """The next item, or None when exhausted."""
        raise NotImplementedError

    def rebuild(self, plan: PlanFn) -> OutputPlan:
        """A plan that makes the real iterator in the state the trace left it."""
        raise unsupported(f"{self.describe()} leaves the frame, and the rewritten code cannot rebuild it")

    def next_item(self, tx=None) -> VariableTracker | None:
        return self.pull(tx)

    def unpack_var_sequence(self, tx) -> list[VariableTracker]:
        items = []
        while (item := self.pull(tx)) is not None:
            items.append(item)
        return items

    def exhausted(self) -> bool:
        return False  # unknown without pulling

    def has_items_left(self) -> bool:
        return False  # unknown without pulling: a for loop over it may not run its body

    def remaining(self):
        raise unsupported(f"{self.describe()} is lazy: its items are not known in advance")

    def describe(self) -> str:
        return type(self).__name__


def pull(tx, iterator: IteratorVariable) -> VariableTracker | None:
    return iterator.next_item(tx)


class MapVariable(LazyIteratorVariable):
    def __init__(self, fn: VariableTracker, iterators: list[IteratorVariable]):
        self.fn = fn
        self.iterators = iterators

    def python_type(self) -> type:
        return map

    def pull(self, tx):
        args = []
        for iterator in self.iterators:  # left to right; the first exhausted one stops
            item = pull(tx, iterator)
            if item is None:
                return None
            args.append(item)
        return self.fn.call_function(tx, args, {})

    def rebuild(self, plan: PlanFn) -> OutputPlan:
        return Call(Constant(map), [plan(self.fn), *[plan(it) for it in self.iterators]])


class FilterVariable(LazyIteratorVariable):
    def __init__(self, fn: VariableTracker, iterator: IteratorVariable):
        self.fn = fn
        self.iterator = iterator

    def python_type(self) -> type:
        return filter

    def _identity(self) -> bool:
        return self.fn.is_python_constant() and self.fn.as_python_constant() is None

    def pull(self, tx):
        while (item := pull(tx, self.iterator)) is not None:
            verdict = item if self._identity() else self.fn.call_function(tx, [item], {})
            if verdict.truth(tx):
                return item
        return None

    def rebuild(self, plan: PlanFn) -> OutputPlan:
        fn = Constant(None) if self._identity() else plan(self.fn)
        return Call(Constant(filter), [fn, plan(self.iterator)])


class ZipVariable(LazyIteratorVariable):
    def __init__(self, iterators: list[IteratorVariable], strict: bool = False):
        self.iterators = iterators
        self.strict = strict

    def python_type(self) -> type:
        return zip

    def pull(self, tx):
        if not self.iterators:
            return None
        items = []
        for position, iterator in enumerate(self.iterators):
            item = pull(tx, iterator)
            if item is None:
                if self.strict:
                    self._check_strict(tx, position)
                return None
            items.append(item)
        return TupleVariable(items)

    def _check_strict(self, tx, position: int) -> None:
        # CPython: the first input ended, so every other one must end now too.
        if position > 0:
            raise unsupported(f"zip(strict=True): argument {position + 1} is shorter than argument 1 "
                              "(ValueError in Python)")
        for later, iterator in enumerate(self.iterators[1:], start=2):
            if pull(tx, iterator) is not None:
                raise unsupported(f"zip(strict=True): argument {later} is longer than argument 1 "
                                  "(ValueError in Python)")

    def rebuild(self, plan: PlanFn) -> OutputPlan:
        kwargs = [("strict", Constant(True))] if self.strict else []
        return Call(Constant(zip), [plan(it) for it in self.iterators], kwargs)


class EnumerateVariable(LazyIteratorVariable):
    def __init__(self, iterator: IteratorVariable, start: int = 0):
        self.iterator = iterator
        self.count = start

    def python_type(self) -> type:
        return enumerate

    def pull(self, tx):
        item = pull(tx, self.iterator)
        if item is None:
            return None
        self.count += 1
        return TupleVariable([ConstantVariable(self.count - 1), item])

    def rebuild(self, plan: PlanFn) -> OutputPlan:
        return Call(Constant(enumerate), [plan(self.iterator), Constant(self.count)])


__all__ = ["EnumerateVariable", "FilterVariable", "LazyIteratorVariable", "MapVariable", "ZipVariable"]
