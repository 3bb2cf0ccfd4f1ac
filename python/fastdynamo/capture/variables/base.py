"""The base class of every symbolic value the translator pushes on its stack.

A ``VariableTracker`` knows what it can about a Python value during tracing: a
constant's value, a tensor's FX node and FakeTensor, a list's items. It answers the
questions the opcode handlers ask (``var_getattr``, ``call_function``, truthiness,
iteration) or raises :class:`~fastdynamo.exc.Unsupported`.

>>> from fastdynamo.capture.variables.constant import ConstantVariable
>>> ConstantVariable(3).as_python_constant()
3
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...exc import unsupported
from ...guards.sources import Source

if TYPE_CHECKING:  # pragma: no cover
    from ..translator import InstructionTranslator


class VariableTracker:
    """A symbolic value; ``source`` says where it came from in the frame, or None when
    the trace built it."""

    source: Source | None = None

    def python_type(self) -> type:
        raise unsupported(f"type of {self.describe()} is unknown at trace time")

    def as_python_constant(self) -> Any:
        raise unsupported(f"{self.describe()} is not a Python constant")

    def is_python_constant(self) -> bool:
        try:
            self.as_python_constant()
        except Exception:  # noqa: BLE001 - any failure means "not a constant"
            return False
        return True

    def var_getattr(self, tx: InstructionTranslator, name: str) -> VariableTracker:
        raise unsupported(f"attribute {name!r} of {self.describe()}")

    def store_attr(self, tx: InstructionTranslator, name: str, value: VariableTracker) -> None:
        """``self.name = value`` (recorded as a side effect where that is modelled)."""
        raise unsupported(f"assignment to attribute {name!r} of {self.describe()} (side effect)")

    def delete_attr(self, tx: InstructionTranslator, name: str) -> None:
        raise unsupported(f"del {self.describe()}.{name}: deleting an attribute of this value is not "
                          "modelled (side effect)")

    def call_function(self, tx: InstructionTranslator, args: list[VariableTracker],
                      kwargs: dict[str, VariableTracker]) -> VariableTracker:
        raise unsupported(f"calling {self.describe()}")

    def call_method(self, tx: InstructionTranslator, name: str, args: list[VariableTracker],
                    kwargs: dict[str, VariableTracker]) -> VariableTracker:
        return self.var_getattr(tx, name).call_function(tx, args, kwargs)

    def getitem(self, tx: InstructionTranslator, index: VariableTracker) -> VariableTracker:
        """``self[index]``."""
        if self.is_python_constant() and index.is_python_constant():
            from .constant import wrap_constant_result

            try:
                return wrap_constant_result(self.as_python_constant()[index.as_python_constant()])
            except Exception as err:  # noqa: BLE001 - let Python raise the real error
                raise unsupported(f"indexing {self.describe()} raised {type(err).__name__}") from err
        raise unsupported(f"indexing {self.describe()}")

    def setitem(self, tx: InstructionTranslator, index: VariableTracker,
                value: VariableTracker) -> None:
        """``self[index] = value``."""
        raise unsupported(f"item assignment on {self.describe()}")

    def unpack_var_sequence(self, tx: InstructionTranslator) -> list[VariableTracker]:
        raise unsupported(f"iterating over {self.describe()}")

    def graph_arg(self, fake: bool) -> Any:
        """This value as an argument of an FX node (``fake=False``: nodes and constants)
        or of the FakeTensor run that gives the node its metadata (``fake=True``)."""
        return self.as_python_constant()

    def truth(self, tx: InstructionTranslator) -> bool:
        """``bool(value)`` when it is known at trace time."""
        return bool(self.as_python_constant())

    def describe(self) -> str:
        """Short text for error messages: the source when there is one."""
        if self.source is not None:
            return f"{type(self).__name__}({self.source.name()})"
        return type(self).__name__

    def __repr__(self) -> str:
        return self.describe()


class NullVariable(VariableTracker):
    """The NULL that ``LOAD_GLOBAL``/``PUSH_NULL`` put below a callable in 3.11."""

    def describe(self) -> str:
        return "NULL"


NULL = NullVariable()


class MethodCallVariable(VariableTracker):
    """``obj.name`` for containers whose methods are modelled by ``call_method``."""

    def __init__(self, obj: VariableTracker, name: str):
        self.obj = obj
        self.name = name

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        return self.obj.call_method(tx, self.name, args, kwargs)

    def describe(self) -> str:
        return f"MethodCallVariable({self.obj.describe()}.{self.name})"


class CallableVariable(VariableTracker):
    """A Python callable known at trace time (a builtin, a torch function, a pure
    function); subclasses say how calling it is traced."""

    def __init__(self, fn: Any, source: Source | None = None):
        self.fn = fn
        self.source = source

    def as_python_constant(self) -> Any:
        return self.fn

    def python_type(self) -> type:
        return type(self.fn)
