"""Unary, binary, comparison and subscript opcodes."""
from __future__ import annotations

import operator

from ...bytecode import version
from ...exc import unsupported
from .. import operators as ops
from ..variables.constant import ConstantVariable
from ..variables.tensor import TensorVariable


def _to_bool(tx, value):
    """``bool(value)`` as 3.13's TO_BOOL computes it. A tensor stays as it is: the jump or
    ``not`` that takes its truth breaks the graph there, as on 3.11, and runs natively
    behind a TO_BOOL of its own (graph_break.py)."""
    if isinstance(value, TensorVariable):
        return value
    return ConstantVariable(value.truth(tx))


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
        result = ops.compare_op(self, ops.COMPARE_OPERATORS[inst.argval], left, right)
        if inst.arg & version.COMPARE_TO_BOOL_BIT:  # 3.13: the result as a bool, for a jump
            result = _to_bool(self, result)
        self.push(result)

    def TO_BOOL(self, inst):
        # 3.13: before a conditional jump or ``not``, which then require an exact bool.
        self.push(_to_bool(self, self.pop()))

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

    def BINARY_SLICE(self, inst):
        # 3.12+: ``container[start:stop]``
        bounds = self.popn(2)
        container = self.pop()
        self.push(ops.getitem(self, container, self.build_slice(bounds)))

    def STORE_SLICE(self, inst):
        # 3.12+: ``container[start:stop] = value``
        bounds = self.popn(2)
        container = self.pop()
        value = self.pop()
        ops.setitem(self, container, self.build_slice(bounds), value)

    def STORE_SUBSCR(self, inst):
        index = self.pop()
        container = self.pop()
        value = self.pop()
        ops.setitem(self, container, index, value)

    def DELETE_SUBSCR(self, inst):
        index = self.pop()
        container = self.pop()
        container.call_method(self, "__delitem__", [index], {})
