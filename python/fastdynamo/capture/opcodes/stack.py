"""Stack shuffling and no-op opcodes."""
from __future__ import annotations

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

    def COPY(self, inst):
        self.push(self.stack[-inst.arg])

    def SWAP(self, inst):
        self.stack[-1], self.stack[-inst.arg] = self.stack[-inst.arg], self.stack[-1]
