"""Bytecode layer: instructions <-> code objects, analysis, listings.

>>> def f(x):
...     return x + 1
>>> insts = instructions_from_code(f.__code__)
>>> insts.insert(1, create_instruction("NOP"))
>>> g = type(f)(assemble(insts, f.__code__), {})
>>> g(1)
2
"""
from __future__ import annotations

from .analysis import (
    BasicBlock,
    StackDepthError,
    basic_blocks,
    bound_after,
    definitely_bound,
    jump_targets,
    live_locals,
    liveness,
    max_stack_depth,
    reachable,
    stack_depths,
)
from .assemble import assemble
from .decode import instructions_from_code
from .edit import insert_before, redirect
from .instruction import (
    UNSET,
    ExceptionTableEntry,
    Instruction,
    copy_exception_entry,
    create_call,
    create_call_function,
    create_callable,
    create_instruction,
    create_jump,
    create_list_to_tuple,
    create_load_attr,
    create_load_closure,
    create_load_const,
    create_load_global,
    create_load_method,
    create_make_function,
    create_push_null,
)
from .parameters import parameter_names, varargs_name, varkeywords_name
from .printer import format_code, format_side_by_side

__all__ = [
    "UNSET",
    "BasicBlock",
    "ExceptionTableEntry",
    "Instruction",
    "StackDepthError",
    "assemble",
    "basic_blocks",
    "bound_after",
    "copy_exception_entry",
    "create_call",
    "create_call_function",
    "create_callable",
    "create_instruction",
    "create_jump",
    "create_list_to_tuple",
    "create_load_attr",
    "create_load_closure",
    "create_load_const",
    "create_load_global",
    "create_make_function",
    "create_load_method",
    "create_push_null",
    "definitely_bound",
    "format_code",
    "format_side_by_side",
    "insert_before",
    "instructions_from_code",
    "jump_targets",
    "live_locals",
    "liveness",
    "max_stack_depth",
    "parameter_names",
    "reachable",
    "redirect",
    "stack_depths",
    "varargs_name",
    "varkeywords_name",
]
