"""``copy.deepcopy`` and ``copy.copy`` of plain data, modelled on the trackers (Hugging
Face's configs are deep-copied inside ``forward``: T5's decoder cache asks
``config.get_text_config``).

``copy.py`` itself is not traced: its memo is keyed by ``id()`` of objects the frame
makes, its dispatch table by types, and its user-object path runs C methods
(``object.__reduce_ex__``). This module walks the same steps ``deepcopy`` takes for the
values it accepts, and refuses (a graph break) everything else:

- atoms (``copy._deepcopy_atomic``: numbers, strings, None, classes, functions, and
  ``torch.dtype``, whose reduction is a name) are themselves; symbolic numbers too;
- tuples, lists and dicts are rebuilt item by item (a dict in its key order, which is
  then guarded);
- an instance of a plain user class (Python classes only, no ``__slots__``, ``object``'s
  ``__new__``, ``__reduce_ex__``, ``__reduce__`` and ``__getstate__``, no
  ``__deepcopy__`` or ``__setstate__``) becomes a new object of the class, made without
  ``__init__``, whose instance dict is the deep copy of the original's. The lookups
  ``deepcopy`` makes *through the instance* (``__deepcopy__``, ``__reduce_ex__``,
  ``__reduce__``, ``__getstate__``; ``__setstate__`` and ``__dict__`` on the copy) run
  the class's own ``__getattribute__`` when it has one, as in eager, and must find what
  ``object`` gives;
- tensors, modules, sets and anything else: unsupported.

The memo is kept as ``deepcopy``'s is: an object reached twice is copied once, so the
copy shares what the original shared. Objects from outside the frame are keyed by
identity; the trace's choice (one object, or distinct ones) is guarded through the
relation guards ``same_object``/``distinct_objects``, so a later call that aliases
differently recompiles.
A class registered in ``copyreg.dispatch_table`` is refused when traced; registering
one afterwards is not guarded.

``copy.copy`` takes its own steps: immutable values (atoms, tuples) are themselves;
exact lists, dicts and sets are their ``copy()``; a plain user object (as above, with no
``__copy__`` on its class) is a new object whose instance dict holds the same values.
"""
from __future__ import annotations

import copy
import copyreg
import enum
from typing import Any

import torch

from ...exc import unsupported
from ...guards import distinct_objects, same_object
from ...guards.sources import Source
from .attributes import MISSING, class_source_of, instance_attr_source, type_lookup
from .base import VariableTracker
from .constant import ConstantVariable
from .custom_lookup import InstanceDictView, lookup_or_missing
from .dict_objects import OBJECT_METHOD_NAMES, InstanceDictVariable, ObjectMethodVariable


def deepcopy_value(tx, value: VariableTracker) -> VariableTracker:
    """``copy.deepcopy(value)`` with a fresh memo."""
    copier = _DeepCopier(tx)
    result = copier.copy(value)
    copier.settle_outside_objects()
    return result


class _DeepCopier:
    def __init__(self, tx):
        self.tx = tx
        self.memo: dict[Any, VariableTracker] = {}
        self.outside: dict[int, tuple[Any, list]] = {}  # id -> (object, sources reaching it)

    # -- dispatch, in deepcopy's order ------------------------------------------------
    def copy(self, value: VariableTracker) -> VariableTracker:
        from .containers import ListVariable, TupleVariable
        from .misc import UserObjectVariable
        from .user_objects import NewObjectVariable

        if self._is_atom(value):
            return value
        key = self._memo_key(value)
        if key in self.memo:
            return self.memo[key]
        if isinstance(value, TupleVariable) and value.python_type() is tuple:
            items = [self.copy(item) for item in value.items]
            return self.memo.setdefault(key, TupleVariable(items))
        if isinstance(value, ListVariable) and type(value) is ListVariable:
            result = ListVariable([])
            self.memo[key] = result
            result.items.extend(self.copy(item) for item in value.items)
            return result
        if _is_plain_dict(value) or isinstance(value, InstanceDictVariable):
            return self._copy_dict(key, value)
        if isinstance(value, (UserObjectVariable, NewObjectVariable)):
            return self._copy_object(key, value)
        raise unsupported(f"copy.deepcopy of {value.describe()}")

    @staticmethod
    def _is_atom(value: VariableTracker) -> bool:
        from .functions import UserFunctionVariable
        from .misc import ClassVariable
        from .tensor import TensorVariable

        if isinstance(value, ConstantVariable):
            return _atomic_constant(value.as_python_constant())
        if isinstance(value, (UserFunctionVariable, ClassVariable)):
            return True  # functions and classes: copy._deepcopy_atomic
        if isinstance(value, TensorVariable):
            return False
        return value.python_type() in (int, float, bool)  # a symbolic number

    def _memo_key(self, value: VariableTracker) -> Any:
        """What ``id(x)`` is in deepcopy's memo: the real object for a value from outside
        the frame (recorded with the source that reached it), else the tracker (for an
        instance dict, the object's attribute storage)."""
        from .misc import UserObjectVariable

        if isinstance(value, InstanceDictVariable):
            return ("dict of", id(value.items))
        outside = value.value if isinstance(value, UserObjectVariable) else \
            self.tx.output.side_effects.object_at(value.source) if getattr(value, "source", None) else None
        if outside is None:
            return ("frame", id(value))
        sources = self.outside.setdefault(id(outside), (outside, []))[1]
        if value.source not in sources:
            sources.append(value.source)
        return ("outside", id(outside))

    def settle_outside_objects(self) -> None:
        """The copy's sharing follows the originals', guarded as ``is`` between them is
        (``operators.is_same``): an object reached through several paths stays one
        object, and originals of one type stay distinct."""
        by_type: dict[type, list[Source]] = {}
        for obj, sources in self.outside.values():
            if len(sources) > 1:
                self.tx.output.add_guard(None, same_object(*sources))
            by_type.setdefault(type(obj), []).append(sources[0])
        for firsts in by_type.values():
            if len(firsts) > 1:
                self.tx.output.add_guard(None, distinct_objects(*firsts))

    # -- containers and objects -------------------------------------------------------
    def _copy_dict(self, key: Any, value) -> VariableTracker:
        from .containers import DictVariable

        value.uses_order("copy.deepcopy keeps the key order")
        result = DictVariable({})
        self.memo[key] = result
        for item_key, item in list(value.items.items()):
            result.items[item_key] = self.copy(item)  # keys are constants: atoms
        return result

    def _copy_object(self, key: Any, original: VariableTracker) -> VariableTracker:
        cls = original.python_type()
        _check_plain_class(cls, "copy.deepcopy")
        if lookup_or_missing(self.tx, original, "__deepcopy__") is not None:
            raise unsupported(f"copy.deepcopy of a {cls.__qualname__}, which has __deepcopy__")
        _check_reduce_lookups(self.tx, original, cls, "copy.deepcopy")
        result = _new_instance(original, cls)
        self.memo[key] = result
        state = _object_state(self.tx, original, "copy.deepcopy")
        _check_copy_lookups(self.tx, result, cls, "copy.deepcopy")
        if state is not None:
            result.attrs.update(self.copy(state).items)  # type: ignore[attr-defined]
        return result


def copy_value(tx, value: VariableTracker) -> VariableTracker:
    """``copy.copy(value)``: ``copy``'s dispatch on the exact type, then ``__copy__`` on
    the class, then ``__reduce_ex__(4)`` without deep-copying the state."""
    from .containers import DictVariable, ListVariable, SetVariable, TupleVariable
    from .misc import UserObjectVariable
    from .user_objects import NewObjectVariable

    if _DeepCopier._is_atom(value) or (isinstance(value, TupleVariable) and value.python_type() is tuple):
        return value  # copy._copy_immutable
    if type(value) in (ListVariable, SetVariable) and value.python_type() in (list, set):
        return value.call_method(tx, "copy", [], {})
    if isinstance(value, DictVariable) and _is_plain_dict(value):
        value.uses_order("copy.copy keeps the key order")
        return value.call_method(tx, "copy", [], {})
    if isinstance(value, InstanceDictVariable):  # vars() of an object made by the frame
        return DictVariable(dict(value.items))
    if isinstance(value, InstanceDictView) and isinstance(value.owner, UserObjectVariable):
        state = _outside_state(tx, value.owner, "copy.copy")  # vars() of one from outside
        return DictVariable(dict(state.items) if state is not None else {})  # type: ignore[attr-defined]
    if isinstance(value, (UserObjectVariable, NewObjectVariable)):
        return _shallow_copy_object(tx, value)
    raise unsupported(f"copy.copy of {value.describe()}")


def _shallow_copy_object(tx, original: VariableTracker) -> VariableTracker:
    cls = original.python_type()
    _check_plain_class(cls, "copy.copy")
    if type_lookup(cls, "__copy__") is not MISSING:
        raise unsupported(f"copy.copy of a {cls.__qualname__}, which has __copy__")
    _check_reduce_lookups(tx, original, cls, "copy.copy")
    state = _object_state(tx, original, "copy.copy")
    result = _new_instance(original, cls)
    _check_copy_lookups(tx, result, cls, "copy.copy")
    if state is not None:
        result.attrs.update(state.items)
    return result


def _new_instance(original: VariableTracker, cls: type):
    """``cls.__new__(cls)`` (``copyreg.__newobj__``), found again through the
    original's class."""
    from .user_objects import NewObjectVariable

    return NewObjectVariable(cls, class_source_of(original))


def _check_reduce_lookups(tx, original: VariableTracker, cls: type, what: str) -> None:
    """What ``object.__reduce_ex__`` looks up through the instance: object's own."""
    for name in OBJECT_METHOD_NAMES:
        found = lookup_or_missing(tx, original, name)
        if not (isinstance(found, ObjectMethodVariable) and found.owner is original and found.name == name):
            raise unsupported(f"{what} of a {cls.__qualname__}: its {name} is not object's")


def _check_copy_lookups(tx, result: VariableTracker, cls: type, what: str) -> None:
    """``copy._reconstruct`` on the new object: no ``__setstate__``, and its
    ``__dict__`` is its instance dict (which the state updates)."""
    if lookup_or_missing(tx, result, "__setstate__") is not None:
        raise unsupported(f"{what} of a {cls.__qualname__}: the copy has __setstate__")
    target = lookup_or_missing(tx, result, "__dict__")
    if not (isinstance(target, InstanceDictVariable) and target.owner is result):
        raise unsupported(f"{what} of a {cls.__qualname__}: its __dict__ is not the instance dict")


def _object_state(tx, original: VariableTracker, what: str):
    """``object.__getstate__``'s answer: the instance dict (None when empty)."""
    from .misc import UserObjectVariable

    if not isinstance(original, UserObjectVariable):
        state = InstanceDictVariable(original)  # type: ignore[arg-type]
        return state if state.items else None
    return _outside_state(tx, original, what)


def _outside_state(tx, original, what: str) -> VariableTracker | None:
    from ..builder import wrap_value
    from .containers import DictVariable

    obj, cls = original.value, type(original.value)
    instance_dict = object.__getattribute__(obj, "__dict__")
    if type(instance_dict) is not dict or not all(type(k) is str for k in instance_dict):
        raise unsupported(f"{what} of a {cls.__qualname__} whose __dict__ is not a plain dict")
    dict_source = instance_attr_source(original.source, cls, "__dict__")
    wrapped = wrap_value(tx, instance_dict, dict_source)
    if not isinstance(wrapped, DictVariable):
        raise unsupported(f"{what} of a {cls.__qualname__}: its __dict__ as {wrapped.describe()}")
    wrapped.uses_order(f"{what} keeps the attribute order")
    items = dict(wrapped.items)
    for name, pending in tx.output.side_effects.pending_attrs(obj):
        items[name] = pending  # a store of the trace (new names go last, as in the dict)
    return DictVariable(items) if items else None


def _is_plain_dict(value: VariableTracker) -> bool:
    from .containers import DictVariable

    return type(value) is DictVariable


def _atomic_constant(value: Any) -> bool:
    """A constant ``deepcopy`` returns as itself."""
    if copy._deepcopy_dispatch.get(type(value)) is copy._deepcopy_atomic:  # type: ignore[attr-defined]
        return True
    if type(value) is tuple:
        return all(_atomic_constant(item) for item in value)  # _deepcopy_tuple keeps it
    if isinstance(value, torch.dtype):
        return True  # its __reduce__ is its name: deepcopy keeps the object
    if isinstance(value, enum.Enum):
        return type_lookup(type(value), "__deepcopy__") is enum.Enum.__dict__.get("__deepcopy__")
    return False


def _check_plain_class(cls: type, what: str) -> None:
    """The classes whose deepcopy is ``__reduce_ex__(4)``'s default: ``object.__new__``
    then the instance dict (see the module docstring)."""
    from .user_objects import has_slots, is_heap_type

    why = None
    if any(klass is not object and not is_heap_type(klass) for klass in cls.__mro__):
        why = "it subclasses a built-in type"
    elif cls in copyreg.dispatch_table:
        why = "copyreg.dispatch_table has a reducer for it"
    elif has_slots(cls):
        why = "it has __slots__"
    elif type_lookup(cls, "__new__") is not object.__new__:
        why = "it defines __new__"
    elif type_lookup(cls, "__getnewargs_ex__") is not MISSING or type_lookup(cls, "__getnewargs__") is not MISSING:
        why = "it defines __getnewargs__"
    elif type(cls) is not type:
        why = f"its metaclass is {type(cls).__qualname__}"
    if why is not None:
        raise unsupported(f"{what} of a {cls.__qualname__}: {why}")

