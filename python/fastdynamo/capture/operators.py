"""Python operators on symbolic values: ``+``, ``<``, ``is``, ``-x``, ``not x``, ``a[i]``.

Tensors on either side make one FX node; constants are computed for real; tuples and
lists concatenate and repeat symbolically.

>>> from fastdynamo.capture.variables.constant import ConstantVariable
>>> binary_op(None, operator.add, ConstantVariable(2), ConstantVariable(3)).as_python_constant()
5
"""
from __future__ import annotations

import operator
from typing import Any, Callable

import torch

from ..exc import Unsupported, unsupported
from ..guards import distinct_objects, same_object
from .variables.base import VariableTracker
from .variables.constant import ConstantVariable, constant_call, wrap_constant_result
from .variables.containers import (
    BaseSequenceVariable,
    IteratorVariable,
    ListVariable,
    SetVariable,
    TupleVariable,
    holds_symbols,
)
from .variables.symbolic import SymbolicValue, size_variable, symbolic_op
from .variables.tensor import TensorVariable

BINARY_OPERATORS: dict[str, Callable[[Any, Any], Any]] = {
    "+": operator.add, "&": operator.and_, "//": operator.floordiv, "<<": operator.lshift,
    "@": operator.matmul, "*": operator.mul, "%": operator.mod, "|": operator.or_,
    "**": operator.pow, ">>": operator.rshift, "-": operator.sub, "/": operator.truediv,
    "^": operator.xor,
    "+=": operator.iadd, "&=": operator.iand, "//=": operator.ifloordiv, "<<=": operator.ilshift,
    "@=": operator.imatmul, "*=": operator.imul, "%=": operator.imod, "|=": operator.ior,
    "**=": operator.ipow, ">>=": operator.irshift, "-=": operator.isub, "/=": operator.itruediv,
    "^=": operator.ixor,
}
COMPARE_OPERATORS = {"<": operator.lt, "<=": operator.le, "==": operator.eq, "!=": operator.ne,
                     ">": operator.gt, ">=": operator.ge}
_INPLACE_TO_PLAIN = {operator.iadd: operator.add, operator.imul: operator.mul}
# ``+=`` -> ``+``, ... for every augmented assignment
_PLAIN_OF_INPLACE = {op: BINARY_OPERATORS[symbol[:-1]] for symbol, op in BINARY_OPERATORS.items()
                     if symbol.endswith("=")}
# the left operands whose type has no in-place method: ``b += t`` is ``b = b + t`` for them
_NUMBER_TYPES = (bool, int, float, complex)
_INPLACE_SET_METHODS = {operator.ior: "update", operator.iand: "intersection_update",
                        operator.isub: "difference_update", operator.ixor: "symmetric_difference_update"}


def _is_sequence(var: VariableTracker) -> bool:
    if isinstance(var, BaseSequenceVariable):
        return True
    return isinstance(var, ConstantVariable) and type(var.value) in (tuple, list, torch.Size)


def _is_list(var: VariableTracker) -> bool:
    return var.python_type() is list


def _sequence_items(var: VariableTracker) -> list[VariableTracker]:
    if isinstance(var, BaseSequenceVariable):
        return list(var.items)
    assert isinstance(var, ConstantVariable), "_is_sequence checked it"
    return [wrap_constant_result(v) for v in var.value]


def binary_op(tx, op: Callable, left: VariableTracker, right: VariableTracker) -> VariableTracker:
    """``op(left, right)`` for an ``operator`` function (including in-place ones)."""
    from .dunders import user_binary_op

    overridden = user_binary_op(tx, op, left, right)
    if overridden is not None:
        return overridden
    if isinstance(left, TensorVariable) or isinstance(right, TensorVariable):
        return tx.output.record_call("call_function", _graph_operator(op, left, right), [left, right], {})
    symbolic = symbolic_op(op, [left, right])
    if symbolic is not None:
        return symbolic
    if isinstance(left, SetVariable) and op in _INPLACE_SET_METHODS and right.is_python_constant():
        if not issubclass(right.python_type(), (set, frozenset)):  # set.__isub__([1]): TypeError
            raise unsupported(f"{op.__name__} of a set and a {right.python_type().__name__} (TypeError)")
        left.call_method(tx, _INPLACE_SET_METHODS[op], [right], {})  # in place, seen by aliases
        return left
    if left.is_python_constant() and right.is_python_constant() and not (
            isinstance(left, ListVariable) or isinstance(right, ListVariable)) \
            and not (_holds_symbols(left) or _holds_symbols(right)):
        try:
            return wrap_constant_result(op(left.as_python_constant(), right.as_python_constant()))
        except Exception as err:  # noqa: BLE001 - the eager run raises the real error
            raise unsupported(f"{op.__name__} on constants raised {type(err).__name__}: {err}") from err
    plain = _INPLACE_TO_PLAIN.get(op, op)
    if plain is operator.add and _is_sequence(left) and _is_sequence(right):
        if _is_list(left) != _is_list(right) and not (op is operator.iadd and _is_list(left)):  # += extends
            raise unsupported(f"{op.__name__}({left.describe()}, {right.describe()}): a list and a tuple "
                              "(TypeError in Python)")
        items = _sequence_items(left) + _sequence_items(right)
        if op is operator.iadd and isinstance(left, ListVariable):
            left.check_mutable(tx)
            left.items = items
            return left
        return _sequence_like(items, left, right)
    if plain is operator.mul and _is_sequence(left) and right.is_python_constant():
        items = _sequence_items(left) * right.as_python_constant()
        if op is operator.imul and isinstance(left, ListVariable):
            left.check_mutable(tx)  # list *= n repeats in place
            left.items = items
            return left
        return _sequence_like(items, left)
    raise unsupported(f"{op.__name__}({left.describe()}, {right.describe()})")


def _holds_symbols(value: VariableTracker) -> bool:
    """A tuple with symbolic sizes in it: folding it as a constant would specialise them."""
    return isinstance(value, BaseSequenceVariable) and holds_symbols(value)


def _sequence_like(items: list, left: VariableTracker, *others: VariableTracker) -> VariableTracker:
    """The result of ``+``/``*`` on sequences: a list, a ``torch.Size`` when an operand
    is one (``Size.__add__``/``__radd__``/``__mul__`` return Sizes), else a tuple."""
    if left.python_type() is list:
        return ListVariable(items)
    for operand in (left, *others):
        if operand.python_type() is torch.Size:
            return size_variable(items)
    return TupleVariable(items)


def _graph_operator(op: Callable, left: VariableTracker, right: VariableTracker) -> Callable:
    """The operator a graph node runs for ``left <op> right`` with a tensor operand.

    An augmented assignment is in place only when the left operand's type has the
    in-place method: a tensor's ``t += x`` mutates ``t``, but ``b = 0; b += t`` is
    ``int.__add__`` then ``Tensor.__radd__``, i.e. ``b + t`` (and the graph cannot
    assign to a literal). Other left operands with in-place methods (``lst += t``
    extends the list with the tensor's rows) are not modelled.
    """
    plain = _PLAIN_OF_INPLACE.get(op)
    if plain is None or isinstance(left, TensorVariable):
        return op
    if left.is_python_constant() and type(left.as_python_constant()) in _NUMBER_TYPES:
        return plain
    raise unsupported(f"{op.__name__}({left.describe()}, {right.describe()}): "
                      "augmented assignment of a tensor to a non-number")


def compare_op(tx, op: Callable, left: VariableTracker, right: VariableTracker) -> VariableTracker:
    """``left <op> right`` for the six rich comparisons."""
    from .dunders import compare_dicts, compare_sequences, user_compare_op
    from .variables.containers import DictVariable

    overridden = user_compare_op(tx, op, left, right)
    if overridden is not None:
        return overridden
    if isinstance(left, TensorVariable) or isinstance(right, TensorVariable):
        if op in (operator.eq, operator.ne) and (left.is_python_constant() and left.as_python_constant() is None
                                                 or right.is_python_constant() and right.as_python_constant() is None):
            return ConstantVariable(op is operator.ne)
        return tx.output.record_call("call_function", op, [left, right], {})
    symbolic = symbolic_op(op, [left, right])
    if symbolic is not None:
        return symbolic
    if left.is_python_constant() and right.is_python_constant() and not _values_view(left, right) \
            and not (_holds_symbols(left) or _holds_symbols(right)):
        return ConstantVariable(constant_call(op, left.as_python_constant(), right.as_python_constant()))
    if _is_sequence(left) and _is_sequence(right):
        return compare_sequences(tx, op, left, right)
    if isinstance(left, DictVariable) and isinstance(right, DictVariable):
        return compare_dicts(tx, op, left, right)
    if op in (operator.eq, operator.ne):
        same = is_same(left, right, tx)
        return ConstantVariable(same if op is operator.eq else not same)
    raise unsupported(f"{op.__name__}({left.describe()}, {right.describe()})")


def _values_view(*values: VariableTracker) -> bool:
    # dict_values compare by identity: two copies would never be equal
    from .variables.dict_views import DictViewVariable

    return any(isinstance(v, DictViewVariable) and v.kind == "values" for v in values)


def rich_compare_bool(tx, left: VariableTracker, right: VariableTracker) -> bool:
    """CPython's ``PyObject_RichCompareBool(left, right, Py_EQ)``: identity first (a
    tensor equals itself without ``__eq__``), then ``bool(left == right)``; a tensor
    compared by value is data-dependent. Sizes skip the identity test: for numbers it
    never changes the answer, and asking it would specialise them."""
    symbolic = isinstance(left, SymbolicValue) or isinstance(right, SymbolicValue)
    if not symbolic and _identical(left, right, tx):
        return True
    result = compare_op(tx, operator.eq, left, right)
    if isinstance(result, TensorVariable):
        raise unsupported("comparing tensors by value inside a container (data-dependent)")
    return result.truth(tx)


def _identical(left: VariableTracker, right: VariableTracker, tx) -> bool:
    try:
        return is_same(left, right, tx)
    except Unsupported:  # identity undecidable: compared by value instead
        return False


def is_same(left: VariableTracker, right: VariableTracker, tx=None) -> bool:
    """``left is right`` when it is decidable at trace time."""
    from .variables.misc import UserObjectVariable
    from .variables.user_objects import NewObjectVariable

    if left is right:
        return True
    if isinstance(left, NewObjectVariable) or isinstance(right, NewObjectVariable):
        return False  # an object the frame made has one tracker, which is not the other
    for obj, other in ((left, right), (right, left)):
        if isinstance(obj, UserObjectVariable) and other.is_python_constant() \
                and type(other.as_python_constant()) is not obj.python_type():
            return False  # the object's type is guarded: it is not a constant of another type
    if isinstance(left, TensorVariable) and isinstance(right, TensorVariable):
        _rely_on_tensor_identity(tx, left, right)
        return left.example is right.example
    if isinstance(left, TensorVariable) or isinstance(right, TensorVariable):
        other = right if isinstance(left, TensorVariable) else left
        if other.is_python_constant():
            return False
        raise unsupported(f"identity of a tensor and {other.describe()}")
    related = _identity_of_two_sources(tx, left, right)
    if related is not None:
        return related
    if left.is_python_constant() and right.is_python_constant() and not (_is_container(left) and _is_container(right)):
        return left.as_python_constant() is right.as_python_constant()
    if getattr(left, "identity_guarded", False) and getattr(right, "identity_guarded", False):
        return left.value is right.value  # type: ignore[attr-defined]  # both pinned by id_is
    for pinned, other in ((left, right), (right, left)):
        if getattr(pinned, "identity_guarded", False) and other.is_python_constant():
            return pinned.value is other.as_python_constant()  # type: ignore[attr-defined]
    made = _made_container_identity(left, right)
    if made is not None:
        return made
    raise unsupported(f"identity of {left.describe()} and {right.describe()}")


def _made_container_identity(left: VariableTracker, right: VariableTracker) -> bool | None:
    """``left is right`` where one is a list, tuple or dict the frame made (it has one
    tracker, so another tracker is another object; an instance dict is its owner's);
    None when undecided."""
    from .variables.dict_objects import InstanceDictVariable

    if isinstance(left, InstanceDictVariable) and isinstance(right, InstanceDictVariable):
        return left.owner is right.owner
    if not (_is_container(left) or _is_container(right)):
        return None
    if _reaches_outside(left) and _reaches_outside(right):
        return None  # two values from outside the frame that the tracker does not know
    return False


def _is_container(value: VariableTracker) -> bool:
    """A list, tuple or dict tracker: its constant value is a new object each time it is
    asked for, so ``is`` between two of those says nothing."""
    from .variables.containers import DictVariable

    return isinstance(value, (BaseSequenceVariable, DictVariable))


def _reaches_outside(value: VariableTracker) -> bool:
    return getattr(value, "source", None) is not None


def _identity_of_two_sources(tx, left: VariableTracker, right: VariableTracker) -> bool | None:
    """``a is b`` for a list, tuple, dict or user object read through two sources (two
    arguments, an argument and an attribute): one object or two, as the frame's objects
    are now, guarded by the native relation (``same_object`` / ``distinct_objects``) so a
    call that aliases them otherwise recompiles. None where it does not apply. (A list
    of constants is a constant too, but rebuilding two copies says nothing of identity.)"""
    from .variables.containers import DictVariable
    from .variables.misc import UserObjectVariable

    kinds = (BaseSequenceVariable, DictVariable, UserObjectVariable)
    if not (isinstance(left, kinds) and isinstance(right, kinds)) or tx is None:
        return None
    if left.source is None or right.source is None:
        return None
    if any(isinstance(v, TupleVariable) and v.python_type() is torch.Size for v in (left, right)) \
            or isinstance(left, SymbolicValue) or isinstance(right, SymbolicValue):
        return None  # a Size is made anew at each read of x.shape
    if left.source == right.source:
        return True  # one path, one object
    same = tx.output.resolve(left.source) is tx.output.resolve(right.source)
    relation = same_object if same else distinct_objects
    tx.output.add_guard(None, relation(left.source, right.source))
    return same


def _rely_on_tensor_identity(tx, left: TensorVariable, right: TensorVariable) -> None:
    """Two tensors read through different sources are one object, or two, at trace time
    only: the graph's answer to ``is`` holds later only if both are pinned with ``id_is``
    (done when each source hangs off long-lived state, e.g. a module's parameter and a
    weak reference to it); otherwise Unsupported. Tensors made by the graph are never an
    input (a fresh object), and one source is one object."""
    if left.source is None or right.source is None or left.source == right.source:
        return
    reason = f"identity of tensors {left.source.name()} and {right.source.name()} (guards cannot relate two sources)"
    if tx is None:
        raise unsupported(reason)
    tx.output.side_effects.settle_identity(
        [(tx.output.input_tensor(var.source), var.source) for var in (left, right)], reason)


def unary_op(tx, op: Callable, value: VariableTracker) -> VariableTracker:
    """``-x``, ``+x``, ``~x``."""
    if isinstance(value, TensorVariable):
        return tx.output.record_call("call_function", op, [value], {})
    symbolic = symbolic_op(op, [value])
    if symbolic is not None:
        return symbolic
    return wrap_constant_result(constant_call(op, value.as_python_constant()))


def contains_op(tx, item: VariableTracker, container: VariableTracker) -> bool:
    """``item in container``."""
    from .variables.containers import DictVariable
    from .variables.dict_views import DictViewVariable
    from .variables.environ import EnvironVariable

    if isinstance(container, DictVariable):
        return item.as_python_constant() in container.items
    if hasattr(container, "contains_item"):  # a dict subclass made by the frame
        return container.contains_item(tx, item)
    if isinstance(container, DictViewVariable):
        return container.contains(tx, item)
    if isinstance(container, EnvironVariable):
        return container.contains(tx, item)
    from .variables.custom_lookup import InstanceDictView

    if isinstance(container, InstanceDictView):
        return container.contains(tx, item)
    from .variables.user_iteration import is_user_object, user_contains

    if is_user_object(container):
        return user_contains(tx, container, item)
    if isinstance(container, BaseSequenceVariable):
        if isinstance(container, TupleVariable):
            container.check_plain("__contains__", "__iter__")
        return any(rich_compare_bool(tx, element, item) for element in container.items)
    if isinstance(container, IteratorVariable):  # consumes up to the first match only
        return any(rich_compare_bool(tx, element, item)
                   for element in iter(lambda: container.next_item(tx), None))
    if isinstance(container, TensorVariable):
        raise unsupported("`in` on a tensor (data-dependent)")
    if container.is_python_constant() and item.is_python_constant():
        return item.as_python_constant() in container.as_python_constant()
    return any(rich_compare_bool(tx, element, item) for element in container.unpack_var_sequence(tx))


def getitem(tx, container: VariableTracker, index: VariableTracker) -> VariableTracker:
    """``container[index]``."""
    if isinstance(container, TensorVariable):
        return tx.output.record_call("call_function", operator.getitem, [container, index], {})
    return container.getitem(tx, index)


def setitem(tx, container: VariableTracker, index: VariableTracker, value: VariableTracker) -> None:
    """``container[index] = value``."""
    if isinstance(container, TensorVariable):
        tx.output.record_call("call_function", operator.setitem, [container, index, value], {})
        return
    container.setitem(tx, index, value)
