"""Readable listings of code objects, used by ``FASTDYNAMO_LOGS=bytecode``.

>>> def f(x):
...     return x
>>> text = format_side_by_side(f.__code__, f.__code__)
>>> left, right = text.splitlines()[2].split(" | ")
>>> left.split()[-3:], right.split()[-3:]
(['LOAD_FAST', '0', '(x)'], ['LOAD_FAST', '0', '(x)'])
"""
from __future__ import annotations

from itertools import zip_longest
from types import CodeType

from .decode import instructions_from_code
from .instruction import Instruction


def format_instruction(inst: Instruction) -> str:
    """One ``dis``-like line: line number (when it starts a line), offset, opcode,
    argument and its meaning; ``>>`` marks jump targets as in :mod:`dis`."""
    line = str(inst.starts_line) if inst.starts_line is not None else ""
    arg = "" if inst.arg is None else str(inst.arg)
    meaning = f"({inst.argrepr})" if inst.argrepr else ""
    return f"{line:>4} {inst.offset if inst.offset is not None else '':>5} " \
           f"{inst.opname:<20}{arg:>5} {meaning}".rstrip()


def format_code(code: CodeType) -> list[str]:
    """The listing of ``code`` as lines (header first)."""
    insts = instructions_from_code(code)
    targets = {id(i.target) for i in insts if i.target is not None}
    targets |= {id(i.exn_tab_entry.target) for i in insts if i.exn_tab_entry is not None}
    lines = [f"{code.co_name} (stack {code.co_stacksize}, {len(code.co_code)} bytes)"]
    for inst in insts:
        mark = ">>" if id(inst) in targets else "  "
        lines.append(mark + format_instruction(inst))
    return lines


def format_side_by_side(original_code: CodeType, new_code: CodeType, width: int = 64) -> str:
    """Two listings next to each other, original on the left.

    Each column is ``width`` characters wide; longer lines are cut with ``~``.
    """
    left, right = format_code(original_code), format_code(new_code)
    left[0], right[0] = "ORIGINAL " + left[0], "TRANSFORMED " + right[0]
    rows = []
    for a, b in zip_longest(left, right, fillvalue=""):
        if len(a) > width:
            a = a[:width - 1] + "~"
        rows.append(f"{a:<{width}} | {b}".rstrip())
    return "\n".join(rows)
