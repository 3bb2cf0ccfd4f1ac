"""The editable form of bytecode: a list of :class:`Instruction` objects.

Jumps point at their target *instruction* and instructions covered by an
exception-table entry point at that entry, so a list can be edited freely
(insert, remove, reorder) and :func:`fastdynamo.bytecode.assemble` recomputes
offsets, ``EXTENDED_ARG`` prefixes, CACHE slots and the tables.

>>> inst = create_instruction("LOAD_CONST", argval=42)
>>> inst.opname, inst.arg is None, inst.argval
('LOAD_CONST', True, 42)
"""
from __future__ import annotations

import dis
from dataclasses import dataclass, field
from typing import Any, Iterable

from . import version


class _Unset:
    """Marks ``argval`` as not given (``None`` is a valid constant)."""

    _instance = None

    def __new__(cls):
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNSET"

    def __bool__(self) -> bool:
        return False


UNSET: Any = _Unset()


@dataclass(eq=False)
class ExceptionTableEntry:
    """One exception-table range: exceptions raised by ``start`` .. ``end`` (both
    inclusive) unwind the stack to ``depth`` items, push ``lasti`` (the offset of
    the raising instruction) when ``lasti`` is set, push the exception and jump to
    ``target``.

    Assembly reads only ``target``, ``depth`` and ``lasti`` of the entry attached to
    each instruction, so inserting an instruction inside a try block means giving it
    the same entry (see :func:`copy_exception_entry`); ``start``/``end`` describe the
    range as decoded and are informational after edits.
    """

    start: "Instruction"
    end: "Instruction"
    target: "Instruction"
    depth: int
    lasti: bool


@dataclass(eq=False)
class Instruction:
    """One instruction. Identity matters (jump targets refer to instructions), so
    equality is identity.

    Which field is authoritative at assembly:

    * jumps: ``target`` (``arg`` and ``argval`` are recomputed);
    * const/name/local/free/compare opcodes: ``argval`` when it is not ``UNSET``
      (for ``LOAD_GLOBAL`` the low bit of ``arg`` still says "push NULL");
    * everything else: ``arg``.

    ``positions`` is the full source location (``dis.Positions``; all-``None`` for
    artificial instructions). New instructions leave it ``None``: they get the line
    ``starts_line`` when given, else the line of the previous instruction.
    """

    opname: str
    opcode: int
    arg: int | None = None
    argval: Any = UNSET
    offset: int | None = None
    starts_line: int | None = None
    positions: dis.Positions | None = None
    target: "Instruction | None" = None
    exn_tab_entry: ExceptionTableEntry | None = None
    argrepr: str = field(default="", repr=False)

    @property
    def is_jump(self) -> bool:
        return self.opname in version.JUMP_OPNAMES

    @property
    def lineno(self) -> int | None:
        """Source line of this instruction, if known."""
        if self.positions is not None:
            return self.positions.lineno
        return self.starts_line

    def short(self) -> str:
        """``OPNAME argval`` for logs and assertion messages."""
        if self.is_jump and self.target is not None:
            return f"{self.opname} -> {self.target.opname}@{self.target.offset}"
        if self.argval is UNSET:
            return self.opname if self.arg is None else f"{self.opname} {self.arg}"
        return f"{self.opname} {self.argval!r}"

    def __repr__(self) -> str:
        return f"Instruction({self.short()}, offset={self.offset})"


def create_instruction(opname: str, *, arg: int | None = None, argval: Any = UNSET,
                       target: Instruction | None = None,
                       starts_line: int | None = None) -> Instruction:
    """A new instruction; ``arg`` is computed at assembly when ``argval`` is given.

    Version-neutral jump names (``"JUMP"``, ``"POP_JUMP_IF_FALSE"``, ...) are accepted
    and the direction is fixed at assembly.

    >>> create_instruction("LOAD_FAST", argval="x").short()
    "LOAD_FAST 'x'"
    >>> create_instruction("JUMP", target=create_instruction("NOP")).opname
    'JUMP_FORWARD'
    """
    opname = version.canonical_opname(opname)
    if opname not in version.OPMAP:
        raise ValueError(f"unknown opcode {opname!r}")
    if version.OPMAP[opname] > 255:
        raise ValueError(f"{opname} is a pseudo-instruction of the compiler, not bytecode")
    if opname in version.JUMP_OPNAMES and target is None:
        raise ValueError(f"{opname} needs a target instruction")
    return Instruction(opname, version.OPMAP[opname], arg=arg, argval=argval, target=target,
                       starts_line=starts_line)


# ---------------------------------------------------------------- common sequences

def create_load_const(value: Any) -> Instruction:
    """``LOAD_CONST value``; the constant is added to ``co_consts`` at assembly."""
    return create_instruction("LOAD_CONST", argval=value)


def create_load_global(name: str, *, push_null: bool = False) -> Instruction:
    """``LOAD_GLOBAL name``, optionally also pushing the NULL that a call needs.

    >>> create_load_global("print", push_null=True).arg
    1
    """
    return create_instruction("LOAD_GLOBAL", arg=int(push_null), argval=name)


def create_load_attr(name: str) -> Instruction:
    return create_instruction("LOAD_ATTR", argval=name)


def create_load_method(name: str) -> Instruction:
    """Replaces ``obj`` with ``method, obj`` (or NULL, attr; 3.13: attr, NULL): 3.11's
    ``LOAD_METHOD``, 3.12's ``LOAD_ATTR`` with its method bit. Follow with
    :func:`create_call` of the explicit argument count."""
    if version.PY_3_12:
        return create_instruction("LOAD_ATTR", arg=1, argval=name)
    return create_instruction("LOAD_METHOD", argval=name)


def create_load_closure(name: str) -> Instruction:
    """Pushes the cell of ``name`` (for a closure tuple): 3.11's ``LOAD_CLOSURE``, a
    ``LOAD_FAST`` of the cell's slot from 3.12 (where ``LOAD_CLOSURE`` is a pseudo-op)."""
    return create_instruction("LOAD_FAST" if version.PY_3_12 else "LOAD_CLOSURE", argval=name)


def create_list_to_tuple() -> list[Instruction]:
    """Replaces a list on the stack by a tuple: 3.11's ``LIST_TO_TUPLE``, 3.12's
    ``CALL_INTRINSIC_1 INTRINSIC_LIST_TO_TUPLE``.

    >>> create_list_to_tuple()[0].opname in ("LIST_TO_TUPLE", "CALL_INTRINSIC_1")
    True
    """
    if version.PY_3_12:
        intrinsic = dis._intrinsic_1_descs.index("INTRINSIC_LIST_TO_TUPLE")  # type: ignore[attr-defined]
        return [create_instruction("CALL_INTRINSIC_1", arg=intrinsic)]
    return [create_instruction("LIST_TO_TUPLE")]


def create_make_function(flags: int = 0) -> list[Instruction]:
    """Make a function of the code object on the stack, with the values ``flags``
    (``version.MAKE_FUNCTION_*``) name below it: 3.11/3.12's ``MAKE_FUNCTION flags``;
    from 3.13 ``MAKE_FUNCTION`` and a ``SET_FUNCTION_ATTRIBUTE`` per flag, innermost
    value first.

    >>> create_make_function()[0].opname
    'MAKE_FUNCTION'
    """
    if not version.PY_3_13:
        return [create_instruction("MAKE_FUNCTION", arg=flags)]
    parts = [bit for bit in (version.MAKE_FUNCTION_CLOSURE, version.MAKE_FUNCTION_ANNOTATIONS,
                             version.MAKE_FUNCTION_KWDEFAULTS, version.MAKE_FUNCTION_DEFAULTS)
             if flags & bit]
    return [create_instruction("MAKE_FUNCTION"),
            *[create_instruction("SET_FUNCTION_ATTRIBUTE", arg=bit) for bit in parts]]


def create_push_null() -> Instruction:
    return create_instruction("PUSH_NULL")


def create_call(nargs: int, kw_names: tuple[str, ...] = ()) -> list[Instruction]:
    """The call itself, for a stack of ``NULL|self, callable|method, *args`` (3.13:
    ``callable|method, NULL|self, *args``); ``nargs`` counts positional and keyword
    values, keyword values last, named by ``kw_names``.

    3.11: ``[KW_NAMES names] PRECALL n CALL n``; 3.12: ``[KW_NAMES names] CALL n``;
    3.13: ``CALL n``, or ``LOAD_CONST names CALL_KW n``.

    >>> create_call(2, kw_names=("dim",))[-1].opname in ("CALL", "CALL_KW")
    True
    """
    if version.PY_3_13:
        if kw_names:
            return [create_load_const(tuple(kw_names)), create_instruction("CALL_KW", arg=nargs)]
        return [create_instruction("CALL", arg=nargs)]
    insts = []
    if kw_names:
        insts.append(create_instruction("KW_NAMES", argval=tuple(kw_names)))
    if not version.PY_3_12:
        insts.append(create_instruction("PRECALL", arg=nargs))
    insts.append(create_instruction("CALL", arg=nargs))
    return insts


def create_callable(load_callable: Iterable[Instruction]) -> list[Instruction]:
    """``load_callable`` with the ``PUSH_NULL`` a call needs next to it: below the
    callable up to 3.12, above it from 3.13. Follow with the arguments and
    :func:`create_call`.

    >>> names = [i.opname for i in create_callable([create_load_const(len)])]
    >>> names == (["LOAD_CONST", "PUSH_NULL"] if version.PY_3_13 else ["PUSH_NULL", "LOAD_CONST"])
    True
    """
    if version.NULL_ABOVE_CALLABLE:
        return [*load_callable, create_push_null()]
    return [create_push_null(), *load_callable]


def create_call_function(load_callable: Iterable[Instruction],
                         load_args: Iterable[Iterable[Instruction]],
                         kw_names: tuple[str, ...] = ()) -> list[Instruction]:
    """``PUSH_NULL`` and the callable (in this version's order), each argument, then
    the call.

    >>> names = [i.opname for i in create_call_function([create_load_global("len")],
    ...                                                  [[create_load_const("ab")]])]
    >>> names[:2] == (["LOAD_GLOBAL", "PUSH_NULL"] if version.PY_3_13 else ["PUSH_NULL", "LOAD_GLOBAL"])
    True
    """
    insts = create_callable(load_callable)
    nargs = 0
    for arg in load_args:
        insts.extend(arg)
        nargs += 1
    return insts + create_call(nargs, kw_names)


def create_jump(target: Instruction, opname: str = "JUMP") -> Instruction:
    """A jump to ``target``; the forward/backward opcode is chosen at assembly."""
    return create_instruction(opname, target=target)


def copy_exception_entry(new: Iterable[Instruction], like: Instruction) -> None:
    """Put ``new`` instructions under the same exception handler as ``like``, as
    needed when inserting code inside a ``try`` block."""
    for inst in new:
        inst.exn_tab_entry = like.exn_tab_entry
