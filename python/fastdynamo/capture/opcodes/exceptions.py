"""Exceptions raised and caught inside traced code, kept in one graph.

A ``raise`` of an exception the trace made (``ValueError("...")``, or a class) goes
where CPython sends it: the exception-table entry of the raising instruction (the
stack unwound to its depth, ``lasti`` pushed if asked, the exception pushed, then the
handler). A raise with no handler in its own code leaves an inlined callee and is
raised again at the caller's ``CALL``; out of the compiled frame it is a graph break
(the frame runs as Python and raises for real). Handlers run as traced code:
``PUSH_EXC_INFO``/``POP_EXCEPT`` keep the handled exception for a bare ``raise``;
``CHECK_EXC_MATCH`` is ``isinstance`` on the class. ``with`` blocks' exits
(``WITH_EXCEPT_START``) are not modelled, so a raise through one breaks the graph.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, cast

from ...exc import unsupported
from ..variables.constant import ConstantVariable
from ..variables.misc import ClassVariable, ExceptionVariable

if TYPE_CHECKING:
    from ..translator import InstructionTranslator

class RaisedInTrace(Exception):
    """An exception raised by traced code that its own code does not handle: it leaves
    an inlined callee (``InstructionTranslator.run`` lets it through) and is raised
    again at the caller's current instruction."""

    def __init__(self, exception: ExceptionVariable):
        super().__init__(exception.describe())
        self.exception = exception


def exception_value(value) -> ExceptionVariable:
    """What ``raise value`` raises: an instance, or a class called with no arguments."""
    if isinstance(value, ExceptionVariable):
        return value
    if isinstance(value, ClassVariable) and issubclass(value.cls, BaseException):
        return ExceptionVariable(value.cls, [])
    raise unsupported(f"raise {value.describe()}")


class ExceptionOpcodes:
    def RAISE_VARARGS(self, inst):
        if inst.arg == 0:
            if not self.handled_exceptions:
                raise unsupported("re-raise")
            self.raise_in_trace(inst, self.handled_exceptions[-1])
        elif inst.arg == 1:
            self.raise_in_trace(inst, exception_value(self.pop()))
        else:
            raise unsupported("raise ... from ...")

    def RERAISE(self, inst):
        exception = self.pop()
        if inst.arg:
            self.pop()  # the lasti the handler kept
        if not isinstance(exception, ExceptionVariable):
            raise unsupported(f"re-raise of {exception.describe()}")
        self.raise_in_trace(inst, exception)

    def PUSH_EXC_INFO(self, inst):
        exception = self.pop()
        # The exception handled before this one (restored by POP_EXCEPT); nothing traced
        # reads it (sys.exc_info is not modelled).
        self.push(ConstantVariable(None))
        self.push(exception)
        self.handled_exceptions.append(exception)

    def POP_EXCEPT(self, inst):
        self.pop()
        if self.handled_exceptions:
            self.handled_exceptions.pop()

    def CHECK_EXC_MATCH(self, inst):
        classes = self.pop().as_python_constant()
        exception = self.stack[-1]
        if not isinstance(exception, ExceptionVariable):
            raise unsupported(f"except clause on {exception.describe()}")
        self.push(ConstantVariable(issubclass(exception.cls, classes)))

    def raise_in_trace(self, inst, exception: ExceptionVariable) -> None:
        """Send ``exception`` to the handler of ``inst``, or out of this code."""
        tx = cast("InstructionTranslator", self)  # which mixes this class in
        entry = inst.exn_tab_entry
        if entry is None:
            if tx.depth == 0:
                raise unsupported(f"raise {exception.cls.__name__}")
            raise RaisedInTrace(exception)
        del tx.stack[entry.depth:]
        if entry.lasti:
            tx.push(ConstantVariable(inst.offset))
        tx.push(exception)
        tx.index = tx.index_of[id(entry.target)]
