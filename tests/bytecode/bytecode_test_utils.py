"""Shared helpers for the bytecode tests: stdlib code objects and round-tripping."""
from __future__ import annotations

import importlib
import sys
import inspect
import types
from functools import lru_cache

from fastdynamo.bytecode import version
from fastdynamo.bytecode import (
    assemble,
    create_instruction,
    instructions_from_code,
)

STDLIB_MODULES = [
    "collections", "json.decoder", "json.encoder", "dataclasses", "typing", "inspect", "ast",
    "argparse", "asyncio.base_events", "asyncio.tasks", "contextlib", "functools", "enum",
    "logging", "pathlib._local" if sys.version_info >= (3, 13) else "pathlib", "re._parser", "re._compiler", "unittest.case", "email.message",
    "http.client", "tarfile", "zipfile", "difflib", "_pydecimal", "statistics", "textwrap",
    "traceback", "shutil", "subprocess", "tokenize", "xml.etree.ElementTree", "urllib.parse",
    "configparser", "pickle", "string", "dis", "concurrent.futures._base", "calendar",
]


def all_code_objects(code: types.CodeType):
    """``code`` and every code object nested in its constants."""
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from all_code_objects(const)


@lru_cache(maxsize=None)
def module_codes(name: str) -> tuple[types.CodeType, ...]:
    """Every code object of a stdlib module, compiled from its source."""
    module = importlib.import_module(name)
    top = compile(inspect.getsource(module), module.__file__, "exec")
    return tuple(all_code_objects(top))


def stdlib_codes():
    for name in STDLIB_MODULES:
        yield from module_codes(name)


def with_nops(code: types.CodeType, every: int = 1) -> types.CodeType:
    """``code`` with a NOP inserted before every ``every``-th instruction after the
    prelude: everything moves, so jumps, tables and EXTENDED_ARGs are recomputed.
    The NOP joins the exception handler of the instruction it precedes."""
    insts = instructions_from_code(code)
    out = []
    seen_resume = False
    for i, inst in enumerate(insts):
        # Pairs that must stay adjacent (3.11: PRECALL, CALL; 3.12: KW_NAMES, CALL;
        # 3.13: END_FOR, POP_TOP) get no NOP between them.
        previous = insts[i - 1].opname if i else None
        bound = version.MUST_BE_FOLLOWED_BY.get(previous) == inst.opname
        if seen_resume and i % every == 0 and not bound:
            nop = create_instruction("NOP")
            nop.exn_tab_entry = inst.exn_tab_entry
            out.append(nop)
        seen_resume = seen_resume or inst.opname == "RESUME"
        out.append(inst)
    return assemble(out, code)


def function_with_code(fn, code: types.CodeType):
    """A copy of ``fn`` running ``code``."""
    new = types.FunctionType(code, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
    new.__kwdefaults__ = fn.__kwdefaults__
    return new


def roundtrip(fn, nops: bool = True):
    """``fn`` with its code decoded and re-assembled (after NOP insertion)."""
    code = with_nops(fn.__code__) if nops else assemble(instructions_from_code(fn.__code__),
                                                        fn.__code__)
    return function_with_code(fn, code)


def strip_nops(code: types.CodeType):
    """A comparable view of the instructions of ``code`` without NOPs: opname,
    argval, jump target and handler (by position among non-NOP instructions)."""
    insts = [i for i in instructions_from_code(code) if i.opname != "NOP"]
    position = {id(inst): k for k, inst in enumerate(insts)}

    rows = []
    for inst in insts:
        entry = inst.exn_tab_entry
        rows.append((
            inst.opname,
            None if inst.is_jump else _comparable(inst.argval),
            position.get(id(inst.target)) if inst.target is not None else None,
            (position.get(id(entry.target)), entry.depth, entry.lasti) if entry else None,
            inst.positions,
        ))
    return rows


def _comparable(value):
    # Nested code objects are rebuilt by nobody here but compare by content anyway;
    # show them by name to keep failure output short.
    return value.co_name if isinstance(value, types.CodeType) else repr(value)
