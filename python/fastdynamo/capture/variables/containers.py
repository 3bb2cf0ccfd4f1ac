"""Tuples, lists, dicts, sets and iterators built or passed in during tracing.

Containers hold VariableTrackers, so a list may mix constants and tensors. A list or
dict read from the frame (it has a source) is the caller's object: mutating it is
recorded as a side effect (:mod:`fastdynamo.capture.side_effects`) and the caller's
object gets the final items after the graph ran; containers the trace built are
mutated freely.

>>> from fastdynamo.capture.variables.constant import ConstantVariable
>>> t = TupleVariable([ConstantVariable(1), ConstantVariable(2)])
>>> t.as_python_constant()
(1, 2)
"""
from __future__ import annotations

from typing import Any

from ...exc import unsupported
from .base import MethodCallVariable, VariableTracker
from .constant import ConstantVariable


class BaseSequenceVariable(VariableTracker):
    """Shared behaviour of tuples and lists."""

    def __init__(self, items: list[VariableTracker], source=None):
        self.items = list(items)
        self.source = source

    def unpack_var_sequence(self, tx) -> list[VariableTracker]:
        return list(self.items)

    def var_getattr(self, tx, name: str) -> VariableTracker:
        return MethodCallVariable(self, name)

    def truth(self, tx) -> bool:
        return bool(self.items)

    def getitem(self, tx, index: VariableTracker) -> VariableTracker:
        key = index.as_python_constant()
        if isinstance(key, slice):
            return self.clone_with(self.items[key])
        try:
            return self.items[key]
        except (IndexError, TypeError) as err:
            raise unsupported(f"{self.describe()}[{key!r}] raised {type(err).__name__}") from err

    def clone_with(self, items: list[VariableTracker]) -> BaseSequenceVariable:
        return type(self)(items)

    def call_method(self, tx, name, args, kwargs) -> VariableTracker:
        if name == "index" and all(a.is_python_constant() for a in args):
            return ConstantVariable(self.as_python_constant().index(*[a.as_python_constant() for a in args]))
        if name == "count" and args[0].is_python_constant():
            return ConstantVariable(self.as_python_constant().count(args[0].as_python_constant()))
        if name == "__len__":
            return ConstantVariable(len(self.items))
        if name == "__getitem__":
            return self.getitem(tx, args[0])
        if name == "__contains__":
            return ConstantVariable(args[0].as_python_constant() in self.as_python_constant())
        raise unsupported(f"{self.python_type().__name__}.{name}()")


class TupleVariable(BaseSequenceVariable):
    """A tuple (or a named tuple / structseq such as ``torch.return_types.max``)."""

    view_of: DictVariable  # set on a dict's keys()/values()/items(): the dict it reads

    def __init__(self, items, source=None, tuple_type: type = tuple):
        super().__init__(items, source)
        self.tuple_type = tuple_type

    def python_type(self) -> type:
        return self.tuple_type

    def as_python_constant(self) -> Any:
        values = tuple(item.as_python_constant() for item in self.items)
        return values if self.tuple_type is tuple else self.tuple_type(values)

    def graph_arg(self, fake: bool) -> Any:
        return tuple(item.graph_arg(fake) for item in self.items)

    def var_getattr(self, tx, name: str) -> VariableTracker:
        fields = getattr(self.tuple_type, "_fields", None)
        if fields is None and hasattr(self.tuple_type, "n_fields"):
            # structseq (torch.return_types.*): field names from a dummy instance
            dummy = self.tuple_type(tuple(range(self.tuple_type.n_fields)))
            fields = [f for f in dir(dummy) if not f.startswith("_") and f not in ("count", "index")
                      and f not in ("n_fields", "n_sequence_fields", "n_unnamed_fields")]
            fields = sorted(fields, key=lambda f: getattr(dummy, f))
        if fields and name in fields:
            return self.items[list(fields).index(name)]
        if name in ("index", "count"):
            return MethodCallVariable(self, name)
        raise unsupported(f"attribute {name!r} of a {self.tuple_type.__name__}")

    def describe(self) -> str:
        return f"TupleVariable(len={len(self.items)})"


class ListVariable(BaseSequenceVariable):
    """A list; the trace's own lists are mutable."""

    snapshots: list[IteratorVariable]  # set by snapshot_iterator: iterators over a copy

    def python_type(self) -> type:
        return list

    def as_python_constant(self) -> Any:
        return [item.as_python_constant() for item in self.items]

    def graph_arg(self, fake: bool) -> Any:
        return [item.graph_arg(fake) for item in self.items]

    def check_mutable(self, tx) -> None:
        """Called before every in-place change: a list from the frame records it."""
        record_mutation(tx, self)

    def setitem(self, tx, index, value) -> None:
        self.check_mutable(tx)
        key = index.as_python_constant()
        try:
            if isinstance(key, slice):
                self.items[key] = value.unpack_var_sequence(tx)
            else:
                self.items[key] = value
        except (IndexError, TypeError, ValueError) as err:  # the eager run raises it
            raise unsupported(f"list[{key!r}] = ... raised {type(err).__name__}: {err}") from err

    def call_method(self, tx, name, args, kwargs) -> VariableTracker:
        mutators = {"append", "extend", "pop", "insert", "clear", "reverse", "remove", "sort",
                    "__setitem__", "__delitem__"}
        if name not in mutators:
            if name == "copy":
                return ListVariable(list(self.items))
            return super().call_method(tx, name, args, kwargs)
        self.check_mutable(tx)
        try:
            return self._mutate(tx, name, args, kwargs)
        except (IndexError, TypeError, ValueError) as err:  # the eager run raises it
            raise unsupported(f"list.{name}() raised {type(err).__name__}: {err}") from err

    def _mutate(self, tx, name, args, kwargs) -> VariableTracker:
        if name == "append":
            self.items.append(args[0])
        elif name == "extend":
            self.items.extend(args[0].unpack_var_sequence(tx))
        elif name == "pop":
            return self.items.pop(*[a.as_python_constant() for a in args])
        elif name == "insert":
            self.items.insert(args[0].as_python_constant(), args[1])
        elif name == "clear":
            self.items.clear()
        elif name == "reverse":
            self.items.reverse()
        elif name == "__delitem__":
            del self.items[args[0].as_python_constant()]
        elif name == "__setitem__":
            self.setitem(tx, args[0], args[1])
        else:  # remove, sort: on constants
            values = self.as_python_constant()
            getattr(values, name)(*[a.as_python_constant() for a in args],
                                  **{k: v.as_python_constant() for k, v in kwargs.items()})
            self.items = [ConstantVariable(v) for v in values]
        return ConstantVariable(None)

    def describe(self) -> str:
        return f"ListVariable(len={len(self.items)})"


class DictVariable(VariableTracker):
    """A dict with constant keys."""

    snapshots: list[IteratorVariable]  # set by snapshot_iterator: iterators over a copy

    def __init__(self, items: dict[Any, VariableTracker], source=None):
        self.items = dict(items)
        self.source = source

    def python_type(self) -> type:
        return dict

    def as_python_constant(self) -> Any:
        return {k: v.as_python_constant() for k, v in self.items.items()}

    def graph_arg(self, fake: bool) -> Any:
        return {k: v.graph_arg(fake) for k, v in self.items.items()}

    def var_getattr(self, tx, name: str) -> VariableTracker:
        return MethodCallVariable(self, name)

    def truth(self, tx) -> bool:
        return bool(self.items)

    def unpack_var_sequence(self, tx) -> list[VariableTracker]:
        return [ConstantVariable(k) for k in self.items]

    def getitem(self, tx, index) -> VariableTracker:
        key = index.as_python_constant()
        if key not in self.items:
            raise unsupported(f"KeyError {key!r} in {self.describe()}")
        return self.items[key]

    def check_mutable(self, tx) -> None:
        """Called before every in-place change: a dict from the frame records it."""
        record_mutation(tx, self)

    def setitem(self, tx, index, value) -> None:
        self.check_mutable(tx)
        self.items[index.as_python_constant()] = value

    def call_method(self, tx, name, args, kwargs) -> VariableTracker:
        if name in ("keys", "values", "items"):
            view = TupleVariable(_dict_view(self, name))
            view.view_of = self  # iterating it must stop at a change of the dict, as a view does
            return view
        if name == "get":
            key = args[0].as_python_constant()
            default = args[1] if len(args) > 1 else ConstantVariable(None)
            return self.items.get(key, default)
        if name in ("__getitem__",):
            return self.getitem(tx, args[0])
        if name == "__contains__":
            return ConstantVariable(args[0].as_python_constant() in self.items)
        if name == "__len__":
            return ConstantVariable(len(self.items))
        if name == "copy":
            return DictVariable(self.items)
        if name not in _DICT_MUTATORS:
            raise unsupported(f"dict.{name}()")
        self.check_mutable(tx)
        if name == "__setitem__":
            self.setitem(tx, args[0], args[1])
        elif name == "__delitem__":
            key = args[0].as_python_constant()
            if key not in self.items:
                raise unsupported(f"KeyError {key!r} in del")
            del self.items[key]
        elif name == "update":
            if args:
                self.items.update(dict_items(tx, args[0]))
            self.items.update(kwargs)
        elif name == "pop":
            key = args[0].as_python_constant()
            if key in self.items:
                return self.items.pop(key)
            if len(args) > 1:
                return args[1]
            raise unsupported(f"KeyError {key!r} in dict.pop")
        elif name == "setdefault":
            return self.items.setdefault(args[0].as_python_constant(),
                                         args[1] if len(args) > 1 else ConstantVariable(None))
        elif name == "clear":
            self.items.clear()
        else:
            raise unsupported(f"dict.{name}()")
        return ConstantVariable(None)

    def describe(self) -> str:
        return f"DictVariable(keys={list(self.items)!r})"


def _dict_view(d: "DictVariable", name: str) -> list[VariableTracker]:
    if name == "keys":
        return [ConstantVariable(k) for k in d.items]
    if name == "values":
        return list(d.items.values())
    return [TupleVariable([ConstantVariable(k), v]) for k, v in d.items.items()]


_DICT_MUTATORS = frozenset({"__setitem__", "__delitem__", "update", "pop", "setdefault", "clear"})


def record_mutation(tx, container: VariableTracker) -> None:
    """``container`` is about to change in place: for one read from the frame, a side
    effect (the caller's object gets its final items after the graph ran).

    An iterator made from a copy of its items (``enumerate``, ``zip``, a dict's keys)
    would not see the change, as CPython's would: while one is in use, unsupported.
    """
    if any(not it.exhausted() for it in getattr(container, "snapshots", ())):
        raise unsupported(f"changing {container.describe()} while iterating over it")
    if container.source is not None:
        from ..side_effects import where_of

        tx.output.side_effects.mutate_container(container, where_of(tx))


def dict_items(tx, value: VariableTracker) -> dict[Any, VariableTracker]:
    """Items of a dict-like value (a DictVariable or a sequence of pairs)."""
    if isinstance(value, DictVariable):
        return dict(value.items)
    pairs = {}
    for pair in value.unpack_var_sequence(tx):
        key, item = pair.unpack_var_sequence(tx)
        pairs[key.as_python_constant()] = item
    return pairs


class SetVariable(VariableTracker):
    """A set of constants."""

    def __init__(self, items: set | frozenset, source=None):
        self.items = set(items)
        self.source = source

    def python_type(self) -> type:
        return set

    def as_python_constant(self) -> Any:
        return set(self.items)

    def var_getattr(self, tx, name: str) -> VariableTracker:
        return MethodCallVariable(self, name)

    def unpack_var_sequence(self, tx) -> list[VariableTracker]:
        return [ConstantVariable(v) for v in self.items]

    def call_method(self, tx, name, args, kwargs) -> VariableTracker:
        if name in ("add", "update", "discard", "remove", "clear", "pop") and self.source is not None:
            raise unsupported(f"mutating {self.source.name()}, a set from outside the frame")
        const_args = [a.as_python_constant() for a in args]
        result = getattr(self.items, name)(*const_args)
        if isinstance(result, (set, frozenset)):
            return SetVariable(result)
        return ConstantVariable(result)


class ConstantRange:
    """The items of a ``range`` as ConstantVariables, made on demand: ``for i in
    range(10**6)`` must not build a million trackers before the trace gives up."""

    def __init__(self, values: range):
        self.values = values

    def __len__(self) -> int:
        return len(self.values)

    def __getitem__(self, index):
        from .constant import ConstantVariable

        if isinstance(index, slice):
            return ConstantRange(self.values[index])
        return ConstantVariable(self.values[index])

    def __iter__(self):
        return (self[i] for i in range(len(self)))


class IteratorVariable(VariableTracker):
    """An iterator over items known at trace time (``iter(list)``, ``zip``, a
    generator expression run to completion)."""

    # False for a copy of a list's or dict's items (snapshot_iterator): CPython's iterator
    # would read the container live.
    live = True

    def __init__(self, items):
        self.items = items if isinstance(items, ConstantRange) else list(items)
        self.index = 0

    def next_item(self, tx=None) -> VariableTracker | None:
        if self.index >= len(self.items):
            return None
        self.index += 1
        return self.items[self.index - 1]

    def unpack_var_sequence(self, tx) -> list[VariableTracker]:
        rest = list(self.items[self.index:])
        self.index = len(self.items)
        return rest

    def exhausted(self) -> bool:
        return self.index >= len(self.items)

    def remaining(self):
        """What is left to iterate: a ``range`` or a list of trackers."""
        rest = self.items[self.index:]
        return rest.values if isinstance(rest, ConstantRange) else list(rest)

    def describe(self) -> str:
        return f"IteratorVariable({self.index}/{len(self.items)})"


class ListIteratorVariable(IteratorVariable):
    """``iter(a_list)``: reads the list's items as it goes, as CPython's list iterator
    does, so appending to or removing from the list inside the loop behaves as in eager."""

    def __init__(self, sequence: ListVariable):
        self.sequence = sequence
        self.index = 0
        self.finished = False  # CPython's list iterator drops its list once it stops

    @property
    def items(self) -> list[VariableTracker]:
        return [] if self.finished else self.sequence.items

    def next_item(self, tx=None) -> VariableTracker | None:
        item = super().next_item(tx)
        self.finished = item is None
        return item

    def unpack_var_sequence(self, tx) -> list[VariableTracker]:
        rest = super().unpack_var_sequence(tx)
        self.finished = True
        return rest


def iterate(tx, value: VariableTracker) -> IteratorVariable:
    """``iter(value)``."""
    if isinstance(value, IteratorVariable):
        return value
    if isinstance(value, ListVariable):
        return ListIteratorVariable(value)
    if value.is_python_constant() and type(value.as_python_constant()) is range:
        return IteratorVariable(ConstantRange(value.as_python_constant()))
    return snapshot_iterator(value.unpack_var_sequence(tx), [value])


def snapshot_iterator(items: list, iterables: list) -> IteratorVariable:
    """An iterator over ``items``, copied now from ``iterables``: each list or dict among
    them (or behind a dict view) refuses changes while it is in use (record_mutation),
    and the iterator is not rebuilt at a graph break (``live`` is False)."""
    iterator = IteratorVariable(items)
    for iterable in iterables:
        container = getattr(iterable, "view_of", iterable)
        if isinstance(container, (ListVariable, DictVariable)):
            iterator.live = False
            if not hasattr(container, "snapshots"):
                container.snapshots = []
            container.snapshots.append(iterator)
    return iterator
