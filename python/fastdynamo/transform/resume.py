"""Resume functions: the rest of a frame after a graph break, as a code object.

A resume function is a copy of the original code (same filename, lines and exception
table) with a prologue that pushes the stack the exit left back and jumps to the exit's
target. Its parameters are the stack values (``___stack0``, ...) and the live locals,
laid out by a :class:`ResumeLayout`; the original's cell variables become its free
variables, so the transformed frame's cells reach it through its closure. The hook
compiles it on its first call like any other code (graph_break.py makes the calls).

>>> def f(x):
...     y = x + 1
...     return y * 2
>>> from fastdynamo.bytecode import instructions_from_code
>>> target = next(i for i in instructions_from_code(f.__code__)
...               if i.opname == "LOAD_FAST" and i.argval == "y")
>>> code = resume_code(f.__code__, target.offset, ResumeLayout(0, frozenset(), (), ("y",), None))
>>> type(f)(code, {})(3)
6
"""
from __future__ import annotations

import dis
import itertools
import weakref
from dataclasses import dataclass
from types import CodeType

from ..bytecode import (
    Instruction,
    assemble,
    create_instruction,
    create_jump,
    create_load_attr,
    create_push_null,
    instructions_from_code,
    version,
)

_STACK_PREFIX = "___stack"
_resume_counter = itertools.count()
# Resume code -> index (in decoded instructions, the translator's index space) of the
# first original instruction: a break before it (while its prologue pushes the stack)
# makes no progress.
_PROLOGUE_END: "weakref.WeakKeyDictionary[CodeType, int]" = weakref.WeakKeyDictionary()
# Original code -> ((target, layout) -> resume code), so recompiling a frame reuses its
# resume functions (and their cache entries).
_RESUME_CACHE: "weakref.WeakKeyDictionary[CodeType, dict]" = weakref.WeakKeyDictionary()


def stack_argument(position: int) -> str:
    """The parameter (and the transformed frame's temporary) for a stack position."""
    return f"{_STACK_PREFIX}{position}"


def in_prologue(code: CodeType, index: int) -> bool:
    """Whether instruction ``index`` of ``code`` is in a resume function's prologue."""
    return _PROLOGUE_END.get(code, -1) > index


def resume_code(original: CodeType, target_offset: int, layout: "ResumeLayout") -> CodeType:
    """The resume function of ``original`` at ``target_offset`` for ``layout`` (cached)."""
    cache = _RESUME_CACHE.setdefault(original, {})
    key = (target_offset, layout)
    if key not in cache:
        cache[key] = _make_resume_code(original, target_offset, layout)
    return cache[key]


@dataclass(frozen=True)
class ResumeLayout:
    """How one exit hands its stack and locals to a resume function."""

    depth: int
    nulls: frozenset[int]
    derived: tuple[tuple[int, str, str], ...]  # (position, local, attribute): local.attribute
    locals: tuple[str, ...]
    first: str | None  # the original's first argument, kept first (zero-argument super())

    def stack_args(self) -> list[str]:
        derived = {position for position, _, _ in self.derived}
        return [stack_argument(i) for i in range(self.depth)
                if i not in self.nulls and i not in derived]

    def params(self) -> list[str]:
        rest = self.stack_args() + [n for n in self.locals if n != self.first]
        return ([self.first] if self.first else []) + rest

    def prologue(self) -> list[Instruction]:
        """Push the stack back: NULLs, rebuilt bound methods, stack arguments."""
        derived = {position: (local, attr) for position, local, attr in self.derived}
        out: list[Instruction] = []
        for i in range(self.depth):
            if i in self.nulls:
                out.append(create_push_null())
            elif i in derived:
                local, attr = derived[i]
                out += [create_instruction("LOAD_FAST", argval=local), create_load_attr(attr)]
            else:
                out.append(create_instruction("LOAD_FAST", argval=stack_argument(i)))
        return out


def _make_resume_code(original: CodeType, target_offset: int, layout: ResumeLayout) -> CodeType:
    """``original`` entered at ``target_offset`` with the stack and locals ``layout``
    describes as its arguments."""
    insts = instructions_from_code(original)
    body_start = next(i + 1 for i, inst in enumerate(insts) if inst.opname == "RESUME")
    body = insts[body_start:]
    target = next(inst for inst in body if inst.offset == target_offset)
    params = layout.params()
    entry = layout.prologue()
    entry.append(create_jump(target))
    line = target.lineno or original.co_firstlineno
    for inst in entry:
        inst.positions = dis.Positions(line, line, None, None)
    # The original's cell variables are free variables here: the resume function gets the
    # transformed frame's cells through its closure.
    freevars = original.co_freevars + original.co_cellvars
    head = [create_instruction("COPY_FREE_VARS", arg=len(freevars))] if freevars else []
    head.append(create_instruction("RESUME", arg=0))
    for inst in head:
        inst.positions = dis.Positions(None, None, None, None)
    others = [n for n in original.co_varnames if n not in params and n not in freevars]
    name = f"{original.co_name}_resume_at_line_{line}_{next(_resume_counter)}"
    code = assemble(
        head + entry + body, original,
        co_argcount=len(params), co_posonlyargcount=0, co_kwonlyargcount=0,
        co_varnames=tuple(params + others), co_cellvars=(), co_freevars=freevars,
        co_flags=original.co_flags & ~(version.GENERATOR_FLAGS | version.CO_VARARGS | version.CO_VARKEYWORDS),
        co_name=name, co_qualname=f"{original.co_qualname}.<resume at line {line}>")
    # Up to the prologue's jump (its first jump: the prologue has no other).
    _PROLOGUE_END[code] = next(i for i, inst in enumerate(instructions_from_code(code))
                               if version.generic_opname(inst.opname) == "JUMP") + 1
    return code


__all__ = ["ResumeLayout", "in_prologue", "resume_code", "stack_argument"]
