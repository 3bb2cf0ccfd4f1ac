"""Iteration, and generators run to completion (generator expressions)."""
from __future__ import annotations

from ...exc import unsupported
from ..variables.constant import ConstantVariable
from ..variables.containers import IteratorVariable, iterate


class IterationOpcodes:
    def GET_ITER(self, inst):
        self.push(iterate(self, self.pop()))

    def FOR_ITER(self, inst):
        if not isinstance(self.stack[-1], IteratorVariable):
            raise unsupported(f"iterating over {self.stack[-1].describe()}")
        item = self.stack[-1].next_item(self)
        if item is None:
            self.pop()
            self.jump(inst)
        else:
            self.push(item)

    def RETURN_GENERATOR(self, inst):
        self.push(ConstantVariable(None))  # popped by the POP_TOP that follows

    def YIELD_VALUE(self, inst):
        self.yielded.append(self.pop())
        self.push(ConstantVariable(None))  # the value sent back in: next() sends None
