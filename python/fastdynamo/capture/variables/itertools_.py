"""``itertools`` iterators, ``functools.reduce``, ``dict.fromkeys`` and ``sys.intern``.

The iterators are lazy (:class:`~.iterators.LazyIteratorVariable`), pulling from their
inputs in CPython's order, and follow each C implementation's state: ``chain`` calls
``iter()`` on an argument when it reaches it, ``product`` copies its inputs when made,
``islice`` skips up to its next index before each item. One that leaves the frame is
rebuilt in its state (``count(next_value, step)``, ``islice`` over its rebuilt input,
``product`` advanced by the items already taken) or, where that cannot be exact (an
``accumulate`` already started), the frame is unsupported.

>>> from fastdynamo.capture.variables.constant import ConstantVariable
>>> counter = CountVariable(ConstantVariable(5), ConstantVariable(2))
>>> [counter.next_item(None).as_python_constant() for _ in range(3)]
[5, 7, 9]
"""
from __future__ import annotations

import functools
import itertools
import operator
import sys

from ...exc import unsupported
from ...plans import BuildTuple, Call, Constant, OutputPlan
from .base import VariableTracker
from .constant import ConstantVariable
from .containers import DictVariable, IteratorVariable, TupleVariable, iterate
from .dict_views import advanced
from .iterators import LazyIteratorVariable, PlanFn, pull


class ChainVariable(LazyIteratorVariable):
    """``chain(*iterables)`` / ``chain.from_iterable(iterable)``: ``sources`` yields the
    iterables, each turned into an iterator when reached."""

    def __init__(self, sources: IteratorVariable):
        self.sources = sources
        self.current: IteratorVariable | None = None

    def python_type(self) -> type:
        return itertools.chain

    def pull(self, tx):
        while True:
            if self.current is None:
                source = pull(tx, self.sources)
                if source is None:
                    return None
                self.current = iterate(tx, source)
            item = pull(tx, self.current)
            if item is not None:
                return item
            self.current = None

    def rebuild(self, plan: PlanFn) -> OutputPlan:
        parts = [plan(self.current)] if self.current is not None else []
        return Call(Constant(itertools.chain.from_iterable),
                    [Call(Constant(itertools.chain), [BuildTuple(parts), plan(self.sources)])])


class IsliceVariable(LazyIteratorVariable):
    """``islice(iterable, [start,] stop[, step])`` with CPython's counters: ``count``
    items taken from the input, ``next_index`` the index of the next item it yields."""

    def __init__(self, iterator: IteratorVariable, start: int, stop: int | None, step: int):
        self.iterator = iterator
        self.count = 0
        self.next_index = start
        self.stop = stop
        self.step = step
        self.done = False

    def python_type(self) -> type:
        return itertools.islice

    def pull(self, tx):
        if self.done or (self.stop is not None and self.count >= self.stop):
            return None
        while self.count < self.next_index:
            if pull(tx, self.iterator) is None:
                self.done = True
                return None
            self.count += 1
        if self.stop is not None and self.count >= self.stop:
            return None
        item = pull(tx, self.iterator)
        if item is None:
            self.done = True
            return None
        self.count += 1
        self.next_index += self.step
        if self.stop is not None and self.next_index > self.stop:
            self.next_index = self.stop
        return item

    def rebuild(self, plan: PlanFn) -> OutputPlan:
        if self.done:
            return Call(Constant(itertools.islice), [Call(Constant(iter), [BuildTuple([])]), Constant(0)])
        stop = None if self.stop is None else max(self.stop - self.count, 0)
        return Call(Constant(itertools.islice), [plan(self.iterator), Constant(max(self.next_index - self.count, 0)),
                                                 Constant(stop), Constant(self.step)])


class CountVariable(LazyIteratorVariable):
    def __init__(self, start: VariableTracker, step: VariableTracker):
        self.value = start
        self.step = step

    def python_type(self) -> type:
        return itertools.count

    def pull(self, tx):
        from ..operators import binary_op

        item = self.value
        self.value = binary_op(tx, operator.add, self.value, self.step)
        return item

    def rebuild(self, plan: PlanFn) -> OutputPlan:
        return Call(Constant(itertools.count), [plan(self.value), plan(self.step)])


class RepeatVariable(LazyIteratorVariable):
    def __init__(self, value: VariableTracker, times: int | None):
        self.value = value
        self.times = times

    def python_type(self) -> type:
        return itertools.repeat

    def pull(self, tx):
        if self.times is not None:
            if self.times <= 0:
                return None
            self.times -= 1
        return self.value

    def rebuild(self, plan: PlanFn) -> OutputPlan:
        times = [] if self.times is None else [Constant(max(self.times, 0))]
        return Call(Constant(itertools.repeat), [plan(self.value), *times])


class ProductVariable(LazyIteratorVariable):
    """``product(*iterables, repeat=n)``: CPython copies every input into a tuple when
    the iterator is made, then yields the combinations lazily."""

    def __init__(self, pools: list[list[VariableTracker]], repeat: int):
        self.pools = pools
        self.repeat = repeat
        self.rows = iter(itertools.product(*[range(len(p)) for p in pools], repeat=repeat))
        self.taken = 0

    def python_type(self) -> type:
        return itertools.product

    def pull(self, tx):
        indices = next(self.rows, None)
        if indices is None:
            return None
        self.taken += 1
        pools = self.pools * self.repeat
        return TupleVariable([pools[i][j] for i, j in enumerate(indices)])

    def rebuild(self, plan: PlanFn) -> OutputPlan:
        fresh = Call(Constant(itertools.product), [BuildTuple([plan(v) for v in pool]) for pool in self.pools],
                     [("repeat", Constant(self.repeat))])
        return Call(Constant(advanced), [fresh, Constant(self.taken)])


class StarmapVariable(LazyIteratorVariable):
    def __init__(self, fn: VariableTracker, iterator: IteratorVariable):
        self.fn = fn
        self.iterator = iterator

    def python_type(self) -> type:
        return itertools.starmap

    def pull(self, tx):
        item = pull(tx, self.iterator)
        return None if item is None else self.fn.call_function(tx, item.unpack_var_sequence(tx), {})

    def rebuild(self, plan: PlanFn) -> OutputPlan:
        return Call(Constant(itertools.starmap), [plan(self.fn), plan(self.iterator)])


class AccumulateVariable(LazyIteratorVariable):
    def __init__(self, iterator: IteratorVariable, fn: VariableTracker | None, initial: VariableTracker | None):
        self.iterator = iterator
        self.fn = fn
        self.total = initial
        self.started = False
        self.initial = initial

    def python_type(self) -> type:
        return itertools.accumulate

    def pull(self, tx):
        from ..operators import binary_op

        if not self.started and self.total is not None:
            self.started = True
            return self.total
        self.started = True
        item = pull(tx, self.iterator)
        if item is None:
            return None
        if self.total is None:
            self.total = item
        elif self.fn is None:
            self.total = binary_op(tx, operator.add, self.total, item)
        else:
            self.total = self.fn.call_function(tx, [self.total, item], {})
        return self.total

    def rebuild(self, plan: PlanFn) -> OutputPlan:
        if self.started:
            raise unsupported("an itertools.accumulate already started leaves the frame (its total is internal)")
        fn = [plan(self.fn)] if self.fn is not None else []
        initial = [("initial", plan(self.initial))] if self.initial is not None else []
        return Call(Constant(itertools.accumulate), [plan(self.iterator), *fn], initial)


class ZipLongestVariable(LazyIteratorVariable):
    def __init__(self, iterators: list[IteratorVariable], fillvalue: VariableTracker):
        self.iterators = iterators
        self.active = [True] * len(iterators)
        self.fillvalue = fillvalue

    def python_type(self) -> type:
        return itertools.zip_longest

    def pull(self, tx):
        if not any(self.active):
            return None
        items = []
        for position, iterator in enumerate(self.iterators):
            item = pull(tx, iterator) if self.active[position] else None
            if item is None:
                if self.active[position]:
                    self.active[position] = False
                    if not any(self.active):
                        return None
                item = self.fillvalue
            items.append(item)
        return TupleVariable(items)

    def rebuild(self, plan: PlanFn) -> OutputPlan:
        if not all(self.active):
            raise unsupported("an itertools.zip_longest with an exhausted input leaves the frame")
        return Call(Constant(itertools.zip_longest), [plan(it) for it in self.iterators],
                    [("fillvalue", plan(self.fillvalue))])


def _int(value: VariableTracker | None, default):
    if value is None:
        return default
    constant = value.as_python_constant()
    if constant is not None and type(constant) is not int:
        raise unsupported(f"itertools argument of type {type(constant).__name__}")
    return constant


def _islice(tx, iterable, *bounds):
    if len(bounds) == 1:
        start, stop, step = None, bounds[0], None
    elif len(bounds) in (2, 3):
        start, stop, step = (*bounds, None)[:3]
    else:
        raise unsupported(f"islice() with {len(bounds)} bounds (TypeError in Python)")
    start, stop, step = _int(start, 0), _int(stop, None), _int(step, 1)
    if start is None:
        start = 0
    if step is None:
        step = 1
    if start < 0 or (stop is not None and stop < 0) or step < 1:
        raise unsupported("islice() with negative bounds or step (ValueError in Python)")
    return IsliceVariable(iterate(tx, iterable), start, stop, step)


def _reduce(tx, fn, iterable, *initial):
    if len(initial) > 1:
        raise unsupported("reduce() takes at most 3 arguments (TypeError in Python)")
    iterator = iterate(tx, iterable)
    total = initial[0] if initial else pull(tx, iterator)
    if total is None:
        raise unsupported("reduce() of an empty iterable with no initial value (TypeError in Python)")
    while (item := pull(tx, iterator)) is not None:
        total = fn.call_function(tx, [total, item], {})
    return total


def _fromkeys(tx, iterable, value=None):
    value = value if value is not None else ConstantVariable(None)
    keys = [k.as_python_constant() for k in iterate(tx, iterable).unpack_var_sequence(tx)]
    return DictVariable({k: value for k in keys})  # one value object for every key


def _intern(tx, string):
    value = string.as_python_constant()
    if type(value) is not str:
        raise unsupported("sys.intern() of a non-str (TypeError in Python)")
    return ConstantVariable(sys.intern(value))


def _no_kwargs(handler):
    def checked(tx, *args, **kwargs):
        if kwargs:
            raise unsupported(f"unexpected keyword arguments {sorted(kwargs)} (TypeError in Python)")
        return handler(tx, *args)
    return checked


HANDLERS = {
    itertools.chain: _no_kwargs(lambda tx, *its: ChainVariable(iterate(tx, TupleVariable(list(its))))),
    itertools.chain.from_iterable: _no_kwargs(lambda tx, it: ChainVariable(iterate(tx, it))),
    itertools.islice: _no_kwargs(_islice),
    itertools.count: lambda tx, start=None, step=None: CountVariable(start or ConstantVariable(0),
                                                                     step or ConstantVariable(1)),
    itertools.repeat: lambda tx, object, times=None: RepeatVariable(object, _int(times, None)),
    itertools.product: lambda tx, *its, repeat=None: ProductVariable(
        [iterate(tx, it).unpack_var_sequence(tx) for it in its], _int(repeat, 1)),
    itertools.starmap: _no_kwargs(lambda tx, fn, it: StarmapVariable(fn, iterate(tx, it))),
    itertools.accumulate: lambda tx, iterable, func=None, *, initial=None: AccumulateVariable(
        iterate(tx, iterable), None if func is None or (func.is_python_constant() and func.as_python_constant() is None)
        else func, initial if initial is None or not (initial.is_python_constant() and initial.as_python_constant() is None)
        else None),
    itertools.zip_longest: lambda tx, *its, fillvalue=None: ZipLongestVariable(
        [iterate(tx, it) for it in its], fillvalue or ConstantVariable(None)),
    functools.reduce: _no_kwargs(_reduce),
    dict.fromkeys: _no_kwargs(_fromkeys),
    sys.intern: _no_kwargs(_intern),
}
