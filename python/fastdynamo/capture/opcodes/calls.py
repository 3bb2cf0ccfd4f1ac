"""Calls and function creation."""
from __future__ import annotations

from ...bytecode import version
from ...exc import unsupported
from ..variables.base import NULL
from ..variables.containers import DictVariable, TupleVariable, dict_items
from ..variables.functions import NestedFunctionVariable


class CallOpcodes:
    def KW_NAMES(self, inst):
        self.kw_names = self.code.co_consts[inst.arg]  # dis leaves argval unresolved in 3.11

    def CALL(self, inst):
        args = self.popn(inst.arg)
        callable_or_self = self.pop()
        null_or_method = self.pop()
        if null_or_method is NULL:
            fn = callable_or_self
        else:
            fn = null_or_method
            args = [callable_or_self, *args]
        kwargs = {}
        if self.kw_names:
            names = self.kw_names
            kwargs = dict(zip(names, args[len(args) - len(names):], strict=True))
            args = args[:len(args) - len(names)]
        self.kw_names = None
        self.push(fn.call_function(self, args, kwargs))

    def CALL_FUNCTION_EX(self, inst):
        kwargs = dict_items(self, self.pop()) if inst.arg & version.CALL_FUNCTION_EX_KWARGS else {}
        args = self.pop().unpack_var_sequence(self)
        fn = self.pop()
        if self.stack and self.stack[-1] is NULL:
            self.pop()
        if not all(isinstance(k, str) for k in kwargs):
            raise unsupported("keywords must be strings")
        self.push(fn.call_function(self, args, kwargs))

    def MAKE_FUNCTION(self, inst):
        code = self.pop().as_python_constant()
        flags = inst.arg
        closure = tuple(self.pop().items) if flags & version.MAKE_FUNCTION_CLOSURE else ()
        if flags & version.MAKE_FUNCTION_ANNOTATIONS:
            self.pop()  # annotations: irrelevant to behaviour
        kwdefaults = dict(self.pop().items) if flags & version.MAKE_FUNCTION_KWDEFAULTS else {}
        defaults = tuple(self.pop().unpack_var_sequence(self)) if flags & version.MAKE_FUNCTION_DEFAULTS else ()
        if not isinstance(kwdefaults, dict):
            raise unsupported("keyword defaults of a nested function")
        function = NestedFunctionVariable(code, code.co_qualname, defaults, kwdefaults, closure,
                                          self.f_globals, self.globals_source)
        function.has_annotations = bool(flags & version.MAKE_FUNCTION_ANNOTATIONS)  # dropped here: cannot be rebuilt
        self.push(function)


_ = (DictVariable, TupleVariable)
