"""Unary, binary, comparison and subscript opcodes."""
from __future__ import annotations

import operator

from ...exc import unsupported
from .. import operators as ops
from ..variables.constant import ConstantVariable


class OperatorOpcodes:
    def BINARY_OP(self, inst):
        right = self.pop()
        left = self.pop()
        op = ops.BINARY_OPERATORS.get(inst.argrepr)
        if op is None:
            raise unsupported(f"binary operator {inst.argrepr!r}")
        if op is operator.iadd or op is operator.imul:
            from ..variables.containers import ListVariable

            if isinstance(left, ListVariable):
                self.push(ops.binary_op(self, op, left, right))
                return
        self.push(ops.binary_op(self, op, left, right))

    def _unary(self, op):
        self.push(ops.unary_op(self, op, self.pop()))

    def UNARY_NEGATIVE(self, inst):
        self._unary(operator.neg)

    def UNARY_POSITIVE(self, inst):
        self._unary(operator.pos)

    def UNARY_INVERT(self, inst):
        self._unary(operator.invert)

    def UNARY_NOT(self, inst):
        self.push(ConstantVariable(not self.pop().truth(self)))

    def COMPARE_OP(self, inst):
        right = self.pop()
        left = self.pop()
        self.push(ops.compare_op(self, ops.COMPARE_OPERATORS[inst.argval], left, right))

    def IS_OP(self, inst):
        right = self.pop()
        left = self.pop()
        same = ops.is_same(left, right, self)
        self.push(ConstantVariable(same != bool(inst.arg)))

    def CONTAINS_OP(self, inst):
        container = self.pop()
        item = self.pop()
        self.push(ConstantVariable(ops.contains_op(self, item, container) != bool(inst.arg)))

    def BINARY_SUBSCR(self, inst):
        index = self.pop()
        container = self.pop()
        self.push(ops.getitem(self, container, index))

    def STORE_SUBSCR(self, inst):
        index = self.pop()
        container = self.pop()
        value = self.pop()
        ops.setitem(self, container, index, value)

    def DELETE_SUBSCR(self, inst):
        index = self.pop()
        container = self.pop()
        container.call_method(self, "__delitem__", [index], {})
