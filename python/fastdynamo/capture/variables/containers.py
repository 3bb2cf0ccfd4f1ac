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

from collections.abc import Callable
from typing import Any

from ...exc import unsupported
from .base import MethodCallVariable, VariableTracker
from .constant import ConstantVariable, constant_call
from .symbolic import SymbolicSlice, SymbolicValue


def method_of(container: VariableTracker, name: str) -> VariableTracker:
    """``container.name`` for a method of its type (called through ``call_method``); a
    name the type does not have is an AttributeError in Python (``getattr``'s default)."""
    if not callable(getattr(container.python_type(), name, None)):
        raise unsupported(f"{container.python_type().__name__!r} object has no attribute {name!r} "
                          "(AttributeError in Python)")
    return MethodCallVariable(container, name)


def holds_symbols(value: VariableTracker) -> bool:
    """A symbolic size, or a tuple/list with one inside (at any depth)."""
    if isinstance(value, (SymbolicValue, SymbolicSlice)):
        return True
    return isinstance(value, BaseSequenceVariable) and any(holds_symbols(item) for item in value.items)


class BaseSequenceVariable(VariableTracker):
    """Shared behaviour of tuples and lists."""

    def __init__(self, items: list[VariableTracker], source=None):
        self.items = list(items)
        self.source = source

    def unpack_var_sequence(self, tx) -> list[VariableTracker]:
        return list(self.items)

    def is_python_constant(self) -> bool:
        # Asking must not specialise: the default builds the constant, which turns every
        # symbolic size inside into a guard (``s[:-1] + (n,)`` then fixed the sizes).
        if holds_symbols(self):
            return all(item.is_python_constant() for item in self.items)
        return super().is_python_constant()

    def var_getattr(self, tx, name: str) -> VariableTracker:
        return method_of(self, name)

    def truth(self, tx) -> bool:
        return bool(self.items)

    def getitem(self, tx, index: VariableTracker) -> VariableTracker:
        key = index.as_python_constant()
        if isinstance(key, slice):
            return self.clone_with(constant_call(self.items.__getitem__, key))
        try:
            return self.items[key]
        except (IndexError, TypeError) as err:
            raise unsupported(f"{self.describe()}[{key!r}] raised {type(err).__name__}") from err

    def clone_with(self, items: list[VariableTracker]) -> BaseSequenceVariable:
        return type(self)(items)

    def call_method(self, tx, name, args, kwargs) -> VariableTracker:
        from .arity import check_arity

        check_arity(self.python_type(), name, args, kwargs)
        if name == "index" and all(a.is_python_constant() for a in args):
            return ConstantVariable(constant_call(self.as_python_constant().index, *[a.as_python_constant() for a in args]))
        if name == "count" and args[0].is_python_constant():
            return ConstantVariable(self.as_python_constant().count(args[0].as_python_constant()))
        if name == "__len__":
            return ConstantVariable(len(self.items))
        if name == "__getitem__":
            return self.getitem(tx, args[0])
        if name == "__contains__":
            from ..operators import contains_op

            return ConstantVariable(contains_op(tx, args[0], self))
        raise unsupported(f"{self.python_type().__name__}.{name}()")


class TupleVariable(BaseSequenceVariable):
    """A tuple (or a named tuple / structseq such as ``torch.return_types.max``)."""

    view_of: DictVariable  # set on a dict's keys()/values()/items(): the dict it reads

    def __init__(self, items, source=None, tuple_type: type = tuple, class_source=None):
        super().__init__(items, source)
        self.tuple_type = tuple_type
        # where the rewritten code finds ``tuple_type`` (a named tuple built in the frame
        # from a class with a source), so the class's methods can be guarded and inlined
        self.class_source = class_source

    def python_type(self) -> type:
        return self.tuple_type

    def as_python_constant(self) -> Any:
        values = tuple(item.as_python_constant() for item in self.items)
        return values if self.tuple_type is tuple else rebuild_tuple(self.tuple_type, values)

    def graph_arg(self, fake: bool) -> Any:
        return tuple(item.graph_arg(fake) for item in self.items)

    def check_plain(self, *names: str) -> None:
        """A tuple subclass that overrides one of ``names`` (``__getitem__``,
        ``__iter__``, ...) does not behave as a tuple there: unsupported."""
        for klass in self.tuple_type.__mro__:
            if klass is tuple:
                return
            overridden = [n for n in names if n in klass.__dict__]
            if overridden:
                raise unsupported(f"{klass.__qualname__}.{overridden[0]} overrides tuple's")

    def getitem(self, tx, index: VariableTracker) -> VariableTracker:
        self.check_plain("__getitem__")
        return super().getitem(tx, index)

    def unpack_var_sequence(self, tx) -> list[VariableTracker]:
        self.check_plain("__iter__")
        return super().unpack_var_sequence(tx)

    def truth(self, tx) -> bool:
        self.check_plain("__bool__", "__len__")
        return super().truth(tx)

    def call_method(self, tx, name, args, kwargs) -> VariableTracker:
        self.check_plain(name)
        return super().call_method(tx, name, args, kwargs)

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
            return method_of(self, name)
        own_fields = getattr(self.tuple_type, "_fields", None)
        if own_fields is not None:
            from .namedtuples import namedtuple_attribute

            found = namedtuple_attribute(tx, self, tuple(own_fields), name)
            if found is not None:
                return found
        raise unsupported(f"attribute {name!r} of a {self.tuple_type.__name__}")

    def describe(self) -> str:
        return f"TupleVariable(len={len(self.items)})"


_TUPLE_PROTOCOL = ("__getitem__", "__iter__", "__len__", "__contains__", "__bool__")


def overrides_tuple_protocol(cls: type) -> bool:
    """A tuple subclass whose items are not read as a tuple's (guards read them through
    ``len()`` and ``__getitem__``): modelled as a plain object instead."""
    for klass in cls.__mro__:
        if klass is tuple:
            return False
        if any(name in klass.__dict__ for name in _TUPLE_PROTOCOL):
            return True
    return False


def is_namedtuple_type(cls: type) -> bool:
    return issubclass(cls, tuple) and hasattr(cls, "_fields")


def rebuild_tuple(cls: type, values: tuple) -> tuple:
    """A ``cls`` instance holding ``values``: ``tuple.__new__`` for a namedtuple (as its
    ``_make`` does: no user ``__new__``/``__init__`` runs), ``cls(values)`` for a
    structseq such as ``torch.return_types.max``."""
    return tuple.__new__(cls, values) if is_namedtuple_type(cls) else cls(values)


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
        from .arity import check_arity

        check_arity(list, name, args, kwargs)
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
            self._extend(tx, args[0])
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

    def _extend(self, tx, iterable: VariableTracker) -> None:
        if not isinstance(iterable, IteratorVariable):
            self.items.extend(iterable.unpack_var_sequence(tx))  # a copy first, as CPython
            return
        # item by item: a lazy iterator's function may read the list as it grows
        while (item := iterable.next_item(tx)) is not None:
            self.items.append(item)

    def describe(self) -> str:
        return f"ListVariable(len={len(self.items)})"


class DictVariable(VariableTracker):
    """A dict with constant keys."""

    # A dict from the frame: an OrderGuard (dict_order.py), called when the trace first
    # depends on its key order.
    order_guard: Callable[[str], None] | None = None
    snapshots: list[IteratorVariable]  # set by snapshot_iterator: iterators over a copy

    def __init__(self, items: dict[Any, VariableTracker], source=None):
        self.items = dict(items)
        self.source = source

    @property
    def deleted_keys(self) -> set:
        """Keys the trace removed (and maybe inserted again): the effect that writes a
        frame's dict back pops them, then updates (side_effects.py)."""
        return self.__dict__.setdefault("_deleted_keys", set())

    def clone_with(self, items: dict) -> DictVariable:
        return DictVariable(items)

    def rebuilt(self, items, plan):
        """The output plan of this dict from ``items`` (a BuildDict plan); subclasses
        (OrderedDict, defaultdict, Counter) wrap it in their type."""
        return items

    def uses_order(self, what: str) -> None:
        """The trace depends on the key order from here on (``what`` names how)."""
        if self.order_guard is not None:
            self.order_guard(what)

    def python_type(self) -> type:
        return dict

    def as_python_constant(self) -> Any:
        self.uses_order("reading a dict as a constant")
        return {k: v.as_python_constant() for k, v in self.items.items()}

    def graph_arg(self, fake: bool) -> Any:
        return {k: v.graph_arg(fake) for k, v in self.items.items()}

    def var_getattr(self, tx, name: str) -> VariableTracker:
        return method_of(self, name)

    def truth(self, tx) -> bool:
        return bool(self.items)

    def unpack_var_sequence(self, tx) -> list[VariableTracker]:
        self.uses_order("iterating a dict")
        return [ConstantVariable(k) for k in self.items]

    def getitem(self, tx, index) -> VariableTracker:
        key = index.as_python_constant()
        if key not in self.items:  # (the keys of a dict from the frame are guarded)
            from .custom_lookup import raise_in_trace

            raise_in_trace(KeyError, key)  # handled by the trace (Mapping.get), or a break
        return self.items[key]

    def check_mutable(self, tx, keys_change: bool = True) -> None:
        """Called before every in-place change: a dict from the frame records it."""
        record_mutation(tx, self, keys_change)

    def setitem(self, tx, index, value) -> None:
        key = index.as_python_constant()
        self.check_mutable(tx, keys_change=key not in self.items)
        self.items[key] = value

    def call_method(self, tx, name, args, kwargs) -> VariableTracker:
        from .arity import check_arity
        from .dict_views import DictIteratorVariable, DictViewVariable

        check_arity(dict, name, args, kwargs)
        if name in ("keys", "values", "items"):
            return DictViewVariable(self, name)
        if name in ("__iter__", "__reversed__"):
            return DictIteratorVariable(self, "keys", reverse=name == "__reversed__")
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
            return self.clone_with(self.items)
        if name not in _DICT_MUTATORS:
            raise unsupported(f"dict.{name}()")
        self.check_mutable(tx, keys_change=name != "__setitem__")
        if name == "__setitem__":
            self.setitem(tx, args[0], args[1])
        elif name == "__delitem__":
            key = args[0].as_python_constant()
            if key not in self.items:
                raise unsupported(f"KeyError {key!r} in del")
            self.deleted_keys.add(key)
            del self.items[key]
        elif name == "update":
            if args:
                self.items.update(dict_items(tx, args[0]))
            self.items.update(kwargs)
        elif name == "pop":
            key = args[0].as_python_constant()
            if key in self.items:
                self.deleted_keys.add(key)
                return self.items.pop(key)
            if len(args) > 1:
                return args[1]
            raise unsupported(f"KeyError {key!r} in dict.pop")
        elif name == "setdefault":
            return self.items.setdefault(args[0].as_python_constant(),
                                         args[1] if len(args) > 1 else ConstantVariable(None))
        elif name == "clear":
            self.deleted_keys.update(self.items)
            self.items.clear()
        elif name == "popitem":
            self.uses_order("dict.popitem()")
            if not self.items:
                raise unsupported("KeyError from dict.popitem() on an empty dict")
            key, value = self.items.popitem()
            self.deleted_keys.add(key)
            return TupleVariable([ConstantVariable(key), value])
        else:
            raise unsupported(f"dict.{name}()")
        return ConstantVariable(None)

    def describe(self) -> str:
        return f"DictVariable(keys={list(self.items)!r})"


_DICT_MUTATORS = frozenset({"__setitem__", "__delitem__", "update", "pop", "setdefault", "clear",
                            "popitem"})


def record_mutation(tx, container: VariableTracker, keys_change: bool = True) -> None:
    """``container`` is about to change in place: for one read from the frame, a side
    effect (the caller's object gets its final items after the graph ran).

    An iterator made from a copy of its items (``reversed``, ``sorted``) would not see
    the change, as CPython's would; a dict iterator sees new values but not new keys
    (CPython raises RuntimeError): while one is in use, unsupported.
    """
    for it in getattr(container, "snapshots", ()):
        if not it.exhausted() and (keys_change or not getattr(it, "reads_live_values", False)):
            raise unsupported(f"changing {container.describe()} while iterating over it")
    if container.source is not None:
        from ..side_effects import where_of

        tx.output.side_effects.mutate_container(container, where_of(tx))


def dict_items(tx, value: VariableTracker) -> dict[Any, VariableTracker]:
    """Items of a dict-like value (a DictVariable or a sequence of pairs)."""
    if isinstance(value, DictVariable):
        value.uses_order("copying a dict")
        return dict(value.items)
    if hasattr(value, "mapping_items"):  # a dict subclass made by the frame
        return value.mapping_items(tx)
    pairs = {}
    for number, pair in enumerate(value.unpack_var_sequence(tx)):
        parts = pair.unpack_var_sequence(tx)
        if len(parts) != 2:
            raise unsupported(f"dictionary update sequence element #{number} has length {len(parts)} (ValueError)")
        pairs[hashable(parts[0])] = parts[1]
    return pairs


def hashable(key: VariableTracker) -> Any:
    """The Python value of a dict key or set item; an unhashable one (a list) raises
    TypeError in the user's program, run as Python."""
    value = key.as_python_constant()
    constant_call(hash, value)
    return value


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

    def has_items_left(self) -> bool:
        """Whether a ``for`` loop over it runs its body (False when unknown)."""
        return len(self.items) > self.index

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
    from .dict_views import DictIteratorVariable, DictViewVariable

    if isinstance(value, DictVariable):
        return DictIteratorVariable(value, "keys")
    if hasattr(value, "make_iterator"):  # a dict subclass made by the frame
        return value.make_iterator(tx)
    if isinstance(value, DictViewVariable):
        return DictIteratorVariable(value.dict_var, value.kind)
    if value.is_python_constant() and type(value.as_python_constant()) is range:
        return IteratorVariable(ConstantRange(value.as_python_constant()))
    from .user_iteration import is_user_object, iterate_user_object

    if is_user_object(value):
        return iterate_user_object(tx, value)
    return snapshot_iterator(value.unpack_var_sequence(tx), [value])


def snapshot_iterator(items: list, iterables: list) -> IteratorVariable:
    """An iterator over ``items``, copied now from ``iterables``: each list or dict among
    them (or behind a dict view) refuses changes while it is in use (record_mutation),
    and the iterator is not rebuilt at a graph break (``live`` is False)."""
    iterator = IteratorVariable(items)
    for iterable in iterables:
        container = getattr(iterable, "view_of", iterable)
        if isinstance(container, (ListVariable, DictVariable, SetVariable)) \
                or getattr(container, "tracks_snapshots", False):
            iterator.live = False
            if not hasattr(container, "snapshots"):
                container.snapshots = []
            container.snapshots.append(iterator)
    return iterator


# Sets live in sets.py; re-exported here, where the other containers are.
from .sets import SetVariable
