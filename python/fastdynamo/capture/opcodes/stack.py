"""Stack shuffling and no-op opcodes."""
from __future__ import annotations

from ...bytecode import version
from ..variables.base import NULL


class StackOpcodes:
    def NOP(self, inst):
        pass

    def RESUME(self, inst):
        pass

    def PRECALL(self, inst):
        pass  # 3.11 specialisation hook: nothing to do symbolically

    def COPY_FREE_VARS(self, inst):
        pass  # free variable cells are set up when the translator starts

    def POP_TOP(self, inst):
        self.pop()

    def PUSH_NULL(self, inst):
        self.push(NULL)

    def push_null_and(self, value):
        """Push ``value`` with a NULL next to it, as a call expects (the NULL below it
        up to 3.12, above it from 3.13)."""
        if version.NULL_ABOVE_CALLABLE:
            self.push(value)
            self.push(NULL)
        else:
            self.push(NULL)
            self.push(value)

    def pop_callable(self, args):
        """Pop the two slots below a call's arguments: ``(function, arguments)``, with
        the ``self`` of a method call first among them."""
        upper = self.pop()
        lower = self.pop()
        if version.NULL_ABOVE_CALLABLE:  # callable, NULL|self
            return lower, args if upper is NULL else [upper, *args]
        if lower is NULL:  # NULL, callable
            return upper, args
        return lower, [upper, *args]  # method, self

    def COPY(self, inst):
        self.push(self.stack[-inst.arg])

    def SWAP(self, inst):
        self.stack[-1], self.stack[-inst.arg] = self.stack[-inst.arg], self.stack[-1]
