"""Jumps, conditional branches and return (raise: exceptions.py)."""
from __future__ import annotations

from typing import TYPE_CHECKING, cast

from ..builder import wrap_code_constant

if TYPE_CHECKING:
    from ..translator import InstructionTranslator


def _is_none(value) -> bool:
    return value.is_python_constant() and value.as_python_constant() is None


class JumpOpcodes:
    """Jumps are handled by their direction-free names (``version.generic_opname``)."""

    def JUMP(self, inst):
        self.jump(inst)

    def _pop_jump_if(self, inst, when: bool):
        tx = cast("InstructionTranslator", self)  # which mixes this class in
        if tx.pop().truth(tx) is when:
            tx.jump(inst)

    def POP_JUMP_IF_TRUE(self, inst):
        self._pop_jump_if(inst, True)

    def POP_JUMP_IF_FALSE(self, inst):
        self._pop_jump_if(inst, False)

    def _pop_jump_if_none(self, inst, when: bool):
        tx = cast("InstructionTranslator", self)
        if _is_none(tx.pop()) is when:
            tx.jump(inst)

    def POP_JUMP_IF_NONE(self, inst):
        self._pop_jump_if_none(inst, True)

    def POP_JUMP_IF_NOT_NONE(self, inst):
        self._pop_jump_if_none(inst, False)

    def JUMP_IF_TRUE_OR_POP(self, inst):
        if self.stack[-1].truth(self):
            self.jump(inst)
        else:
            self.pop()

    def JUMP_IF_FALSE_OR_POP(self, inst):
        if not self.stack[-1].truth(self):
            self.jump(inst)
        else:
            self.pop()

    def RETURN_VALUE(self, inst):
        self.return_value = self.pop()

    def RETURN_CONST(self, inst):  # 3.12+
        self.return_value = wrap_code_constant(inst.argval)
