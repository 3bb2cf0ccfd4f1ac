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
        fn, args = self.pop_callable(self.popn(inst.arg))
        kwargs = {}
        if self.kw_names:
            names = self.kw_names
            kwargs = dict(zip(names, args[len(args) - len(names):], strict=True))
            args = args[:len(args) - len(names)]
        self.kw_names = None
        self.push(fn.call_function(self, args, kwargs))

    def CALL_KW(self, inst):
        # 3.13: the keyword names are a constant tuple above the arguments.
        self.kw_names = self.pop().as_python_constant()
        self.CALL(inst)

    def CALL_FUNCTION_EX(self, inst):
        kwargs = dict_items(self, self.pop()) if inst.arg & version.CALL_FUNCTION_EX_KWARGS else {}
        args = self.pop().unpack_var_sequence(self)
        if version.NULL_ABOVE_CALLABLE:  # 3.13: callable, NULL, args
            self.pop()
            fn = self.pop()
        else:
            fn = self.pop()
            if self.stack and self.stack[-1] is NULL:
                self.pop()
        if not all(isinstance(k, str) for k in kwargs):
            raise unsupported("keywords must be strings")
        self.push(fn.call_function(self, args, kwargs))

    def MAKE_FUNCTION(self, inst):
        code = self.pop().as_python_constant()
        flags = inst.arg or 0  # 3.13: no argument; SET_FUNCTION_ATTRIBUTE adds each part
        closure = self.pop() if flags & version.MAKE_FUNCTION_CLOSURE else None
        annotations = self.pop() if flags & version.MAKE_FUNCTION_ANNOTATIONS else None
        kwdefaults = self.pop() if flags & version.MAKE_FUNCTION_KWDEFAULTS else None
        defaults = self.pop() if flags & version.MAKE_FUNCTION_DEFAULTS else None
        function = NestedFunctionVariable(code, code.co_qualname, (), {}, (),
                                          self.f_globals, self.globals_source)
        function.has_annotations = False
        for flag, value in ((version.MAKE_FUNCTION_DEFAULTS, defaults),
                            (version.MAKE_FUNCTION_KWDEFAULTS, kwdefaults),
                            (version.MAKE_FUNCTION_ANNOTATIONS, annotations),
                            (version.MAKE_FUNCTION_CLOSURE, closure)):
            if value is not None:
                self._set_function_attribute(function, flag, value)
        self.push(function)

    def SET_FUNCTION_ATTRIBUTE(self, inst):
        function = self.pop()
        self._set_function_attribute(function, inst.arg, self.pop())
        self.push(function)

    def _set_function_attribute(self, function, flag, value):
        """One part of a function being made (MAKE_FUNCTION's flags)."""
        if flag == version.MAKE_FUNCTION_DEFAULTS:
            function.defaults = tuple(value.unpack_var_sequence(self))
        elif flag == version.MAKE_FUNCTION_KWDEFAULTS:
            kwdefaults = dict(value.items)
            if not isinstance(kwdefaults, dict):
                raise unsupported("keyword defaults of a nested function")
            function.kwdefaults = kwdefaults
        elif flag == version.MAKE_FUNCTION_ANNOTATIONS:
            function.has_annotations = True  # dropped here: cannot be rebuilt
        elif flag == version.MAKE_FUNCTION_CLOSURE:
            function.closure = tuple(value.items)
        else:
            raise unsupported(f"function attribute {flag:#x}")


_ = (DictVariable, TupleVariable)
