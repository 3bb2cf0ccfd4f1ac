"""Code object -> list of :class:`Instruction`.

``EXTENDED_ARG`` prefixes are folded into the instruction they extend and CACHE
units are dropped; jump arguments and exception-table offsets become references to
instructions.

>>> def f(x):
...     return x + 1
>>> [i.opname for i in instructions_from_code(f.__code__)]
['RESUME', 'LOAD_FAST', 'LOAD_CONST', 'BINARY_OP', 'RETURN_VALUE']
"""
from __future__ import annotations

import dis
from types import CodeType

from . import version
from .exception_table import parse_exception_table
from .instruction import UNSET, ExceptionTableEntry, Instruction


def instructions_from_code(code: CodeType) -> list[Instruction]:
    """Decode ``code`` (its unspecialised ``co_code``) into instructions.

    Every instruction gets its original ``offset`` (of the opcode, after any
    ``EXTENDED_ARG``), ``positions``, ``starts_line`` (set on the first instruction of
    each line, as in :mod:`dis`), ``argval``, jump ``target`` and ``exn_tab_entry``.
    """
    raw = code.co_code
    positions = list(code.co_positions())
    local_names = version.localsplus_names(code)
    instructions: list[Instruction] = []
    # Index of the instruction that owns each code unit (prefixes and caches included).
    owner: list[int] = [0] * (len(raw) // 2)
    ext = 0
    start = 0
    offset = 0
    while offset < len(raw):
        op, oparg = raw[offset], raw[offset + 1]
        if op == version.EXTENDED_ARG:
            ext = (ext | oparg) << 8
            offset += 2
            continue
        opname = version.OPNAME[op]
        arg = (ext | oparg) if op >= version.HAVE_ARGUMENT else None
        ext = 0
        inst = Instruction(opname, op, arg=arg, offset=offset,
                           positions=dis.Positions(*positions[offset // 2]))
        inst.argval, inst.argrepr = _decode_argval(code, opname, arg, offset, local_names)
        end = offset + 2 + 2 * version.cache_entries(opname)
        for unit in range(start // 2, end // 2):
            owner[unit] = len(instructions)
        instructions.append(inst)
        start = offset = end

    for inst in instructions:
        if inst.is_jump:
            assert inst.offset is not None and inst.arg is not None  # set above for every jump
            target_offset = version.jump_target_offset(inst.opname, inst.offset, inst.arg)
            inst.target = instructions[owner[target_offset // 2]]
    for line_offset, line in dis.findlinestarts(code):
        instructions[owner[line_offset // 2]].starts_line = line
    for raw_entry in parse_exception_table(code.co_exceptiontable):
        first, last = owner[raw_entry.start // 2], owner[raw_entry.end // 2 - 1]
        entry = ExceptionTableEntry(instructions[first], instructions[last],
                                    instructions[owner[raw_entry.target // 2]],
                                    raw_entry.depth, raw_entry.lasti)
        for inst in instructions[first:last + 1]:
            inst.exn_tab_entry = entry
    return instructions


def _decode_argval(code: CodeType, opname: str, arg: int | None, offset: int,
                   local_names: tuple[str, ...]):
    """(argval, argrepr) of one instruction, as :mod:`dis` would show them."""
    if arg is None:
        return UNSET, ""
    if opname in version.CONST_OPNAMES:
        value = code.co_consts[arg]
        return value, _short_repr(value)
    if opname in version.NAME_OPNAMES:
        shift = version.NAME_ARG_SHIFT.get(opname, 0)
        name = code.co_names[arg >> shift]
        if opname in version.LOAD_GLOBAL_NULL_BIT_OPNAMES:
            return name, ("NULL + " + name) if arg & version.PUSH_NULL_BIT else name
        return name, name
    if opname in version.PACKED_LOCAL_OPNAMES:
        pair = (local_names[arg >> 4], local_names[arg & 15])
        return pair, ", ".join(pair)
    if opname in version.LOCAL_OPNAMES or opname in version.FREE_OPNAMES:
        return local_names[arg], local_names[arg]
    if opname in version.COMPARE_OPNAMES:
        op = dis.cmp_op[arg >> version.COMPARE_ARG_SHIFT]
        return op, op
    if opname in version.JUMP_OPNAMES:
        target = version.jump_target_offset(opname, offset, arg)
        return target, f"to {target}"
    if opname == "BINARY_OP":
        return arg, version.binary_op_symbol(arg)
    return arg, ""


def _short_repr(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
