"""Building and unpacking containers, slices and strings."""
from __future__ import annotations

from ...bytecode import version
from ...exc import unsupported
from ..variables.constant import ConstantVariable, constant_call
from ..variables.containers import (
    DictVariable,
    ListVariable,
    SetVariable,
    TupleVariable,
    dict_items,
    hashable,
)
from ..variables.symbolic import SymbolicSlice, SymbolicValue
from .operators import OperatorOpcodes

_CONVERSIONS = {0: lambda v: v, 1: str, 2: repr, 3: ascii}


class BuildOpcodes:
    def BUILD_TUPLE(self, inst):
        self.push(TupleVariable(self.popn(inst.arg)))

    def BUILD_LIST(self, inst):
        self.push(ListVariable(self.popn(inst.arg)))

    def BUILD_SET(self, inst):
        self.push(SetVariable({hashable(v) for v in self.popn(inst.arg)}))

    def BUILD_MAP(self, inst):
        flat = self.popn(2 * inst.arg)
        self.push(DictVariable({hashable(flat[i]): flat[i + 1] for i in range(0, len(flat), 2)}))

    def BUILD_CONST_KEY_MAP(self, inst):
        keys = self.pop().as_python_constant()
        values = self.popn(inst.arg)
        self.push(DictVariable(dict(zip(keys, values, strict=True))))

    def BUILD_SLICE(self, inst):
        self.push(self.build_slice(self.popn(inst.arg)))

    def build_slice(self, parts):
        """``slice(*parts)``; also 3.12's BINARY_SLICE/STORE_SLICE bounds."""
        if not all(p.is_python_constant() for p in parts):
            raise unsupported("slice with non-constant bounds")
        if any(isinstance(p, SymbolicValue) for p in parts):
            return SymbolicSlice(parts)  # symbolic where a graph op takes it
        return ConstantVariable(slice(*[p.as_python_constant() for p in parts]))

    def BUILD_STRING(self, inst):
        parts = self.popn(inst.arg)
        self.push(ConstantVariable("".join(p.as_python_constant() for p in parts)))

    def FORMAT_VALUE(self, inst):
        flags = inst.arg
        spec = self.pop().as_python_constant() if flags & version.FORMAT_VALUE_HAS_SPEC else ""
        value = self.pop().as_python_constant()
        convert = _CONVERSIONS[flags & version.FORMAT_VALUE_CONVERSION]
        self.push(ConstantVariable(constant_call(format, constant_call(convert, value), spec)))

    # 3.13 splits FORMAT_VALUE in three.
    def CONVERT_VALUE(self, inst):
        self.push(ConstantVariable(constant_call(_CONVERSIONS[inst.arg], self.pop().as_python_constant())))

    def FORMAT_SIMPLE(self, inst):
        self.push(ConstantVariable(constant_call(format, self.pop().as_python_constant())))

    def FORMAT_WITH_SPEC(self, inst):
        spec = self.pop().as_python_constant()
        self.push(ConstantVariable(constant_call(format, self.pop().as_python_constant(), spec)))

    def LIST_APPEND(self, inst):
        value = self.pop()
        self.stack[-inst.arg].items.append(value)

    def SET_ADD(self, inst):
        value = self.pop()
        self.stack[-inst.arg].items.add(hashable(value))

    def MAP_ADD(self, inst):
        value = self.pop()
        key = self.pop()
        self.stack[-inst.arg].items[hashable(key)] = value

    def LIST_EXTEND(self, inst):
        iterable = self.pop()
        self.stack[-inst.arg].items.extend(iterable.unpack_var_sequence(self))

    def SET_UPDATE(self, inst):
        iterable = self.pop()
        self.stack[-inst.arg].items.update(hashable(v) for v in iterable.unpack_var_sequence(self))

    def DICT_UPDATE(self, inst):
        update = self.pop()
        self.stack[-inst.arg].items.update(dict_items(self, update))

    def DICT_MERGE(self, inst):
        update = dict_items(self, self.pop())
        target = self.stack[-inst.arg]
        duplicate = set(update) & set(target.items)
        if duplicate:
            raise unsupported(f"got multiple values for keyword argument {sorted(duplicate)[0]!r}")
        target.items.update(update)

    def LIST_TO_TUPLE(self, inst):
        self.push(TupleVariable(self.pop().items))

    def CALL_INTRINSIC_1(self, inst):
        # 3.12+: the few intrinsics ordinary code uses have a 3.11 opcode's handler.
        name = version.INTRINSIC_1_NAMES[inst.arg]
        handler = _INTRINSIC_1_AS.get(name)
        if handler is None:
            raise unsupported(_intrinsic_reason("CALL_INTRINSIC_1", name))
        handler(self, inst)

    def CALL_INTRINSIC_2(self, inst):
        # 3.12+: type parameters and except*; none is traced (see _INTRINSIC_REASONS).
        raise unsupported(_intrinsic_reason("CALL_INTRINSIC_2", version.INTRINSIC_2_NAMES[inst.arg]))

    def UNPACK_SEQUENCE(self, inst):
        items = self.pop().unpack_var_sequence(self)
        if len(items) != inst.arg:
            raise unsupported(f"unpacking {len(items)} values into {inst.arg} names")
        for item in reversed(items):
            self.push(item)

    def UNPACK_EX(self, inst):
        before, after = inst.arg & 0xFF, inst.arg >> 8
        items = self.pop().unpack_var_sequence(self)
        if len(items) < before + after:
            raise unsupported(f"not enough values to unpack ({len(items)})")
        tail = items[len(items) - after:] if after else []
        middle = items[before:len(items) - after]
        for item in reversed(tail):
            self.push(item)
        self.push(ListVariable(middle))
        for item in reversed(items[:before]):
            self.push(item)


# What the intrinsics that are not traced belong to. Type parameters (PEP 695) make new
# TypeVar-like objects on every call, whose identity the frame's callers can see; `except*`
# splits exception groups (CHECK_EG_MATCH, not traced either). The frame breaks at the
# call that runs them (a generic function's definition runs as Python).
_TYPE_PARAMETERS = "type parameters (PEP 695 `def f[T]`, `class C[T]`, `type X = ...`) are not traced"
_INTRINSIC_REASONS = {
    "INTRINSIC_TYPEVAR": _TYPE_PARAMETERS,
    "INTRINSIC_PARAMSPEC": _TYPE_PARAMETERS,
    "INTRINSIC_TYPEVARTUPLE": _TYPE_PARAMETERS,
    "INTRINSIC_SUBSCRIPT_GENERIC": _TYPE_PARAMETERS,
    "INTRINSIC_TYPEALIAS": _TYPE_PARAMETERS,
    "INTRINSIC_TYPEVAR_WITH_BOUND": _TYPE_PARAMETERS,
    "INTRINSIC_TYPEVAR_WITH_CONSTRAINTS": _TYPE_PARAMETERS,
    "INTRINSIC_SET_FUNCTION_TYPE_PARAMS": _TYPE_PARAMETERS,
    "INTRINSIC_SET_TYPEPARAM_DEFAULT": _TYPE_PARAMETERS,
    "INTRINSIC_PREP_RERAISE_STAR": "except* (exception groups) is not traced",
}


def _intrinsic_reason(opname: str, name: str) -> str:
    """``"CALL_INTRINSIC_2 INTRINSIC_TYPEVAR_WITH_BOUND: type parameters ... are not traced"``."""
    why = _INTRINSIC_REASONS.get(name)
    return f"{opname} {name}: {why}" if why else f"{opname} {name}"


# CALL_INTRINSIC_1's functions that do what a 3.11 opcode did: that opcode's handler.
_INTRINSIC_1_AS = {"INTRINSIC_LIST_TO_TUPLE": BuildOpcodes.LIST_TO_TUPLE,
                   "INTRINSIC_UNARY_POSITIVE": OperatorOpcodes.UNARY_POSITIVE}
