"""Small editing operations on instruction lists that keep jumps and exception
handlers consistent.

>>> from .decode import instructions_from_code
>>> from .instruction import create_instruction
>>> def f(x):
...     return x
>>> insts = instructions_from_code(f.__code__)
>>> insert_before(insts, insts[1], [create_instruction("NOP")])
>>> [i.opname for i in insts]
['RESUME', 'NOP', 'LOAD_FAST', 'RETURN_VALUE']
"""
from __future__ import annotations

from typing import Sequence

from .instruction import Instruction


def insert_before(instructions: list[Instruction], at: Instruction,
                  new: Sequence[Instruction], *, retarget: bool = True) -> None:
    """Insert ``new`` just before ``at`` (in place).

    The new instructions run under ``at``'s exception handler unless they already
    have one. With ``retarget`` (the default) jumps and handlers that went to ``at``
    go to the first new instruction, so the code runs on every path to ``at``;
    without it, jumps still land on ``at`` and skip the new code.
    """
    if not new:
        return
    position = next(i for i, inst in enumerate(instructions) if inst is at)
    for inst in new:
        if inst.exn_tab_entry is None:
            inst.exn_tab_entry = at.exn_tab_entry
    if retarget:
        redirect(instructions, at, new[0])
    instructions[position:position] = list(new)


def redirect(instructions: Sequence[Instruction], old: Instruction, new: Instruction) -> None:
    """Make every jump and exception handler that goes to ``old`` go to ``new``."""
    entries = set()
    for inst in instructions:
        if inst.target is old:
            inst.target = new
        if inst.exn_tab_entry is not None:
            entries.add(inst.exn_tab_entry)
    for entry in entries:
        if entry.target is old:
            entry.target = new
