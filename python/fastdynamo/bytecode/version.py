"""Everything about the bytecode format that changes between CPython minor versions.

The rest of :mod:`fastdynamo.bytecode` asks this module instead of testing
``sys.version_info`` itself, so that 3.12 and 3.13 support is an addition here
(new opcode names, new jump rules, new table formats) rather than edits spread over
the package. Opcode numbers always come from :mod:`dis` / :mod:`opcode`.

>>> OPMAP["LOAD_FAST"] == dis.opmap["LOAD_FAST"]
True
>>> cache_entries("LOAD_GLOBAL") == {(3, 11): 5, (3, 12): 4, (3, 13): 4}[PY_VERSION]
True
"""
from __future__ import annotations

import dis
import inspect
import opcode
import sys
from types import CodeType

PY_VERSION = sys.version_info[:2]
if PY_VERSION not in ((3, 11), (3, 12), (3, 13)):
    raise ImportError(
        f"fastdynamo.bytecode supports CPython 3.11, 3.12 and 3.13; this is {PY_VERSION[0]}.{PY_VERSION[1]}"
    )

OPMAP: dict[str, int] = dict(dis.opmap)
OPNAME: list[str] = list(dis.opname)
HAVE_ARGUMENT: int = dis.HAVE_ARGUMENT
EXTENDED_ARG: int = dis.EXTENDED_ARG
CACHE: int = OPMAP["CACHE"]
# Opcodes that can appear in bytecode; 3.12+'s opmap also lists the compiler's
# pseudo-instructions (JUMP, LOAD_METHOD, ...), numbered above 255.
REAL_OPNAMES: frozenset[str] = frozenset(name for name, op in OPMAP.items() if op <= 255)

# Every jump in 3.11 is relative; the direction is part of the opcode.
JUMP_OPNAMES: frozenset[str] = frozenset(OPNAME[op] for op in dis.hasjrel + dis.hasjabs)
BACKWARD_JUMP_OPNAMES: frozenset[str] = frozenset(n for n in JUMP_OPNAMES if "BACKWARD" in n)
CONST_OPNAMES: frozenset[str] = frozenset(OPNAME[op] for op in dis.hasconst)
NAME_OPNAMES: frozenset[str] = frozenset(OPNAME[op] for op in dis.hasname)
LOCAL_OPNAMES: frozenset[str] = frozenset(OPNAME[op] for op in dis.haslocal)
# In 3.11 the argument of these indexes localsplus (varnames, then cells, then frees).
FREE_OPNAMES: frozenset[str] = frozenset(OPNAME[op] for op in dis.hasfree)
COMPARE_OPNAMES: frozenset[str] = frozenset(OPNAME[op] for op in dis.hascompare)

PY_3_12 = PY_VERSION >= (3, 12)
PY_3_13 = PY_VERSION >= (3, 13)

UNCONDITIONAL_JUMP_OPNAMES = frozenset(
    {"JUMP_FORWARD", "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT"})
# Instructions after which control never falls through to the next instruction.
TERMINATOR_OPNAMES = UNCONDITIONAL_JUMP_OPNAMES | {"RETURN_VALUE", "RAISE_VARARGS", "RERAISE"} \
    | ({"RETURN_CONST"} if PY_3_12 else set())

# Jumps whose direction is chosen at assembly: a forward opcode whose target ends up
# before it is flipped to its backward twin and vice versa. Generic names map to the
# forward opcode, so callers can write version-neutral code. From 3.12 on conditional
# jumps go forward only, under the generic names themselves; a backward one is laid out
# as the opposite condition jumping over a JUMP_BACKWARD (see `assemble`).
if PY_3_12:
    _DIRECTION_TWINS = {"JUMP_FORWARD": "JUMP_BACKWARD"}
    GENERIC_JUMP_NAMES = {"JUMP": "JUMP_FORWARD"}
else:
    _DIRECTION_TWINS = {
        "JUMP_FORWARD": "JUMP_BACKWARD",
        "POP_JUMP_FORWARD_IF_FALSE": "POP_JUMP_BACKWARD_IF_FALSE",
        "POP_JUMP_FORWARD_IF_TRUE": "POP_JUMP_BACKWARD_IF_TRUE",
        "POP_JUMP_FORWARD_IF_NONE": "POP_JUMP_BACKWARD_IF_NONE",
        "POP_JUMP_FORWARD_IF_NOT_NONE": "POP_JUMP_BACKWARD_IF_NOT_NONE",
    }
    GENERIC_JUMP_NAMES = {
        "JUMP": "JUMP_FORWARD",
        "POP_JUMP_IF_FALSE": "POP_JUMP_FORWARD_IF_FALSE",
        "POP_JUMP_IF_TRUE": "POP_JUMP_FORWARD_IF_TRUE",
        "POP_JUMP_IF_NONE": "POP_JUMP_FORWARD_IF_NONE",
        "POP_JUMP_IF_NOT_NONE": "POP_JUMP_FORWARD_IF_NOT_NONE",
    }
_FLIP = {**_DIRECTION_TWINS, **{b: f for f, b in _DIRECTION_TWINS.items()}}
# 3.12+: the condition that jumps when ``name`` falls through (for backward conditions).
OPPOSITE_CONDITION = {
    "POP_JUMP_IF_FALSE": "POP_JUMP_IF_TRUE", "POP_JUMP_IF_TRUE": "POP_JUMP_IF_FALSE",
    "POP_JUMP_IF_NONE": "POP_JUMP_IF_NOT_NONE", "POP_JUMP_IF_NOT_NONE": "POP_JUMP_IF_NONE",
} if PY_3_12 else {}

# Pairs that must be adjacent. 3.11: specialised PRECALL forms (e.g. list.append)
# finish the call themselves and skip over the CALL that must follow directly.
# 3.12: KW_NAMES hands its names to the next CALL. 3.13: an exhausted FOR_ITER jumps
# past its END_FOR *and* the POP_TOP that follows it.
MUST_BE_FOLLOWED_BY = (
    {"END_FOR": "POP_TOP"} if PY_3_13
    else {"KW_NAMES": "CALL"} if PY_3_12
    else {"PRECALL": "CALL"}
)

# LOAD_GLOBAL's low argument bit asks it to push NULL before the value (3.11+).
LOAD_GLOBAL_NULL_BIT_OPNAMES = frozenset({"LOAD_GLOBAL"})
# Name opcodes whose argument is ``name index << shift | flags``: LOAD_GLOBAL's NULL bit;
# from 3.12 LOAD_ATTR's method bit (push method and self, or NULL and the attribute) and
# LOAD_SUPER_ATTR's method and two-argument bits.
NAME_ARG_SHIFT: dict[str, int] = (
    {"LOAD_GLOBAL": 1, "LOAD_ATTR": 1, "LOAD_SUPER_ATTR": 2} if PY_3_12 else {"LOAD_GLOBAL": 1})
# COMPARE_OP's argument: ``cmp_op index << shift | mask``; from 3.12 the low bits are the
# comparison's outcome mask (3.13 adds bit 4: convert the result to bool).
COMPARE_ARG_SHIFT = 5 if PY_3_13 else 4 if PY_3_12 else 0
_COMPARE_MASKS = {"<": 2, ">": 4, "==": 8, "!=": 6, "<=": 10, ">=": 12}
# 3.13: two locals in one argument, ``first << 4 | second`` (argval: a pair of names).
PACKED_LOCAL_OPNAMES = frozenset(
    {"LOAD_FAST_LOAD_FAST", "STORE_FAST_LOAD_FAST", "STORE_FAST_STORE_FAST"} if PY_3_13 else ())
# Location entries: 3.11 writes one per instruction; 3.12+ one per run of instructions
# with the same location.
MERGE_EQUAL_LOCATIONS = PY_3_12


# Stack slots an instruction uses above its entry depth beyond what its effect shows, as
# CPython counts them: 3.13 sizes the stack before it fuses LOAD_CONST + RETURN_VALUE
# into RETURN_CONST, so that one still counts its constant.
TRANSIENT_STACK: dict[str, int] = {"RETURN_CONST": 1} if PY_3_13 else {}
# 3.13's code objects record a stack size of at least 1.
MIN_STACKSIZE = 1 if PY_3_13 else 0


def compare_arg(op: str) -> int:
    """COMPARE_OP's argument for comparison ``op`` as this version's compiler writes it.

    >>> dis.cmp_op[compare_arg("<") >> COMPARE_ARG_SHIFT]
    '<'
    """
    index = dis.cmp_op.index(op)
    return index if COMPARE_ARG_SHIFT == 0 else (index << COMPARE_ARG_SHIFT) | _COMPARE_MASKS[op]


# Code flags (``inspect.CO_*``), named once here.
CO_OPTIMIZED: int = inspect.CO_OPTIMIZED
CO_VARARGS: int = inspect.CO_VARARGS
CO_VARKEYWORDS: int = inspect.CO_VARKEYWORDS
CO_GENERATOR: int = inspect.CO_GENERATOR
CO_COROUTINE: int = inspect.CO_COROUTINE
CO_ITERABLE_COROUTINE: int = inspect.CO_ITERABLE_COROUTINE
CO_ASYNC_GENERATOR: int = inspect.CO_ASYNC_GENERATOR
# Flags that make a code object a generator or coroutine of some kind.
GENERATOR_FLAGS: int = CO_GENERATOR | CO_COROUTINE | CO_ITERABLE_COROUTINE | CO_ASYNC_GENERATOR

# MAKE_FUNCTION's argument: which extra values are on the stack below the code object.
MAKE_FUNCTION_DEFAULTS = 0x01
MAKE_FUNCTION_KWDEFAULTS = 0x02
MAKE_FUNCTION_ANNOTATIONS = 0x04
MAKE_FUNCTION_CLOSURE = 0x08
# FORMAT_VALUE's argument: a format spec is on the stack; the conversion (none, str,
# repr, ascii) in the low bits.
FORMAT_VALUE_HAS_SPEC = 0x04
FORMAT_VALUE_CONVERSION = 0x03
# CALL_FUNCTION_EX's argument: a dict of keyword arguments is on the stack.
CALL_FUNCTION_EX_KWARGS = 0x01
# LOAD_GLOBAL_NULL_BIT_OPNAMES: the argument's low bit pushes a NULL (the name index is
# the rest of the argument).
PUSH_NULL_BIT = 0x01


# The translator's handler names: one per jump kind whatever its direction, so a handler
# is written once for every version (3.12 has only some of 3.11's direction variants).
GENERIC_OPNAMES: dict[str, str] = {
    "JUMP_FORWARD": "JUMP",
    "JUMP_BACKWARD": "JUMP",
    "JUMP_BACKWARD_NO_INTERRUPT": "JUMP",
    # every version's spelling (3.11's directions, 3.12's forward-only names)
    **{f"POP_JUMP_{direction}IF_{condition}": f"POP_JUMP_IF_{condition}"
       for direction in ("FORWARD_", "BACKWARD_", "")
       for condition in ("TRUE", "FALSE", "NONE", "NOT_NONE")},
    # 3.12+: reads a local that may be unbound; the translator checks every read anyway.
    "LOAD_FAST_CHECK": "LOAD_FAST",
}

# 3.13 pushes the NULL (or ``self``) of a call above the callable: ``callable,
# NULL|self, *args``; 3.11 and 3.12 below it: ``NULL|callable, callable|self, *args``.
NULL_ABOVE_CALLABLE = PY_3_13
# 3.12+: an exhausted FOR_ITER pops its iterator and jumps *past* the END_FOR it targets
# (3.13: past END_FOR and POP_TOP); :mod:`dis` counts the stack as if it kept the
# iterator and pushed a value that END_FOR (and POP_TOP) remove. The translator and the
# graph-break code follow dis: iterator kept, a placeholder pushed, END_FOR run.
FOR_ITER_JUMPS_TO_END_FOR = PY_3_12
# Instructions CPython skips after an exhausted FOR_ITER's target (END_FOR included).
FOR_ITER_SKIPS = ("END_FOR", "POP_TOP") if PY_3_13 else ("END_FOR",) if PY_3_12 else ()
# 3.12+: CALL_INTRINSIC_1's argument names a function (``dis._intrinsic_1_descs``).
INTRINSIC_1_NAMES: tuple[str, ...] = tuple(getattr(dis, "_intrinsic_1_descs", ()))
INTRINSIC_2_NAMES: tuple[str, ...] = tuple(getattr(dis, "_intrinsic_2_descs", ()))
# 3.13: COMPARE_OP's argument bit asking for the result as a bool.
COMPARE_TO_BOOL_BIT = 0x10 if PY_3_13 else 0
# 3.12+: LOAD_ATTR's low bit (a method load) and LOAD_SUPER_ATTR's bits.
LOAD_METHOD_BIT = 0x01
SUPER_METHOD_BIT = 0x01
SUPER_TWO_ARGS_BIT = 0x02


def loads_method(inst) -> bool:
    """Whether ``inst`` pushes a method and ``self``, or NULL and the attribute, which
    one known only when it runs: 3.11's LOAD_METHOD, 3.12+'s LOAD_ATTR and
    LOAD_SUPER_ATTR with their method bit."""
    if inst.opname == "LOAD_METHOD":
        return True
    return PY_3_12 and inst.opname in ("LOAD_ATTR", "LOAD_SUPER_ATTR") \
        and bool(inst.arg & LOAD_METHOD_BIT)


def generic_opname(opname: str) -> str:
    """The direction-free name of ``opname`` (``JUMP``, ``POP_JUMP_IF_TRUE``, ...); other
    opcodes keep their own name.

    >>> generic_opname("POP_JUMP_BACKWARD_IF_NONE"), generic_opname("LOAD_FAST")
    ('POP_JUMP_IF_NONE', 'LOAD_FAST')
    """
    return GENERIC_OPNAMES.get(opname, opname)


def binary_op_symbol(arg: int) -> str:
    """The operator of ``BINARY_OP arg`` as source spells it (``"+"``, ``"+="``).

    >>> binary_op_symbol(0)
    '+'
    """
    return dis._nb_ops[arg][1]  # type: ignore[attr-defined]


def cache_entries(opname: str) -> int:
    """Number of inline CACHE code units that follow ``opname`` in ``co_code``."""
    # A list by opcode before 3.13, a dict by name after.
    entries = opcode._inline_cache_entries  # type: ignore[attr-defined]
    if isinstance(entries, dict):
        return entries.get(opname, 0)
    return entries[OPMAP[opname]]


def canonical_opname(opname: str) -> str:
    """Map a version-neutral jump name (``"JUMP"``, ``"POP_JUMP_IF_TRUE"``) to 3.11's."""
    return GENERIC_JUMP_NAMES.get(opname, opname)


def is_backward_jump(opname: str) -> bool:
    return opname in BACKWARD_JUMP_OPNAMES


def jump_opname_for_direction(opname: str, backward: bool) -> str:
    """The variant of jump ``opname`` that goes in the given direction.

    >>> jump_opname_for_direction("JUMP_FORWARD", backward=True)
    'JUMP_BACKWARD'
    """
    if is_backward_jump(opname) == backward:
        return opname
    if opname not in _FLIP:
        raise ValueError(f"{opname} cannot jump {'backward' if backward else 'forward'}")
    return _FLIP[opname]


def jump_target_offset(opname: str, offset: int, arg: int) -> int:
    """Byte offset that a jump at byte ``offset`` (its opcode, after any EXTENDED_ARG)
    with argument ``arg`` goes to. 3.11 counts from the end of the instruction."""
    end = offset + 2 + 2 * cache_entries(opname)
    return end - 2 * arg if is_backward_jump(opname) else end + 2 * arg


def jump_arg(opname: str, end_offset: int, target_offset: int) -> int:
    """Inverse of :func:`jump_target_offset`; ``end_offset`` is past the caches."""
    distance = (end_offset - target_offset) if is_backward_jump(opname) else (target_offset - end_offset)
    assert distance >= 0 and distance % 2 == 0, (opname, end_offset, target_offset)
    return distance // 2


def localsplus_names(code: CodeType) -> tuple[str, ...]:
    """Names of ``localsplus`` slots, the index space of LOAD_FAST and LOAD_DEREF in 3.11.

    A cell variable that is also a local (an argument captured by an inner function)
    shares the local's slot, so it is not repeated.
    """
    return localsplus_names_from(code.co_varnames, code.co_cellvars, code.co_freevars)


def localsplus_names_from(varnames, cellvars, freevars) -> tuple[str, ...]:
    names = list(varnames)
    names += [name for name in cellvars if name not in varnames]
    names += list(freevars)
    return tuple(names)


# What each fast-local opcode does to the locals it names, in order (3.13's paired forms
# name two). LOAD_FAST_AND_CLEAR (3.12+, around inlined comprehensions) reads a local
# that may be unset and leaves it unset; its STORE_FAST restores it afterwards.
_LOCAL_EFFECTS: dict[str, tuple[str, ...]] = {
    "LOAD_FAST": ("read",), "LOAD_FAST_CHECK": ("read",), "STORE_FAST": ("bind",),
    "DELETE_FAST": ("read", "unbind"), "LOAD_FAST_AND_CLEAR": ("read", "unbind"),
    "LOAD_FAST_LOAD_FAST": ("read", "read"), "STORE_FAST_STORE_FAST": ("bind", "bind"),
    "STORE_FAST_LOAD_FAST": ("bind", "read"),
}


def local_effects(inst) -> tuple[tuple[str, str], ...]:
    """``(effect, name)`` pairs, in order, of what ``inst`` does to fast locals: effect
    is ``"read"``, ``"bind"`` or ``"unbind"``.

    >>> local_effects(type("I", (), {"opname": "DELETE_FAST", "argval": "x"})())
    (('read', 'x'), ('unbind', 'x'))
    """
    effects = _LOCAL_EFFECTS.get(inst.opname)
    if effects is None:
        return ()
    names = inst.argval if inst.opname in PACKED_LOCAL_OPNAMES else (inst.argval,) * len(effects)
    return tuple(zip(effects, names, strict=True))


def stack_effect(opname: str, arg: int | None, *, jump: bool) -> int:
    """Stack effect of one instruction, from :func:`dis.stack_effect`.

    RETURN_GENERATOR is treated as pushing the value that is sent in when the
    generator first resumes (its POP_TOP discards it); CPython computes its own
    stack depth before it inserts that prelude, so it never needs this.
    """
    if opname == "RETURN_GENERATOR":
        return 1
    op = OPMAP[opname]
    if op < HAVE_ARGUMENT:
        return dis.stack_effect(op, jump=jump)
    return dis.stack_effect(op, arg or 0, jump=jump)


# ---------------------------------------------------------------- stack layout at a break
# graph_break.py runs one instruction natively and must know the stack after it.

# LOAD_METHOD pushes NULL or not depending on the object, so the stack after it is
# unknown (so do 3.12's method loads: ``loads_method``); the others only make sense in their own sequence (calls, handlers, loops).
NOT_RESUMABLE_OPNAMES = frozenset({
    "LOAD_METHOD", "RETURN_VALUE", "YIELD_VALUE", "SEND", "FOR_ITER", "PRECALL", "KW_NAMES",
    "RERAISE", "PUSH_EXC_INFO", "POP_EXCEPT", "CHECK_EXC_MATCH", "WITH_EXCEPT_START"})
_PUSHES_NOTHING = frozenset({"STORE_ATTR", "STORE_SUBSCR", "DELETE_SUBSCR", "DELETE_ATTR",
                             "STORE_GLOBAL", "DELETE_GLOBAL", "POP_TOP", "RAISE_VARARGS",
                             "IMPORT_STAR", "PRINT_EXPR", "JUMP_IF_TRUE_OR_POP",
                             "JUMP_IF_FALSE_OR_POP", "STORE_SLICE", "END_FOR", "END_SEND",
                             "STORE_FAST", "STORE_FAST_STORE_FAST", "DELETE_FAST",
                             "DELETE_DEREF", "STORE_DEREF", "DELETE_NAME", "STORE_NAME"})


# 3.13: instructions that require an exact bool, made by a TO_BOOL before them. A graph
# break at one of them (the translator kept a tensor there) runs a TO_BOOL first.
NEEDS_BOOL_OPNAMES = frozenset({"POP_JUMP_IF_TRUE", "POP_JUMP_IF_FALSE", "UNARY_NOT"}) \
    if PY_3_13 else frozenset()


def resumable(inst) -> bool:
    """Whether a graph break can run ``inst`` alone natively and know the stack after it."""
    return inst.opname not in NOT_RESUMABLE_OPNAMES and not loads_method(inst)


def values_pushed(inst) -> int:
    """Values ``inst`` leaves on the stack when it falls through.

    >>> values_pushed(type("I", (), {"opname": "LOAD_GLOBAL", "arg": 3})())
    2
    """
    if inst.opname in _PUSHES_NOTHING or inst.opname.startswith("POP_JUMP"):
        return 0
    if inst.opname == "UNPACK_SEQUENCE":
        return inst.arg
    if inst.opname == "UNPACK_EX":
        return (inst.arg & 0xFF) + (inst.arg >> 8) + 1
    if inst.opname == "BEFORE_WITH":
        return 2
    if inst.opname == "LOAD_GLOBAL":
        return 1 + (inst.arg & 1)
    if inst.opname == "LOAD_FAST_LOAD_FAST" or loads_method(inst):
        return 2
    return 1


def nulls_pushed(inst) -> frozenset[int]:
    """Which of the values ``inst`` pushes are NULL (counted from the lowest): LOAD_GLOBAL's
    NULL goes below the global, from 3.13 above it."""
    if inst.opname == "LOAD_GLOBAL" and inst.arg & 1:
        return frozenset({1 if PY_3_13 else 0})
    return frozenset()


def values_consumed(inst) -> int:
    """Values ``inst`` pops when it falls through (``CALL`` with its ``PRECALL``)."""
    if inst.opname in ("JUMP_IF_TRUE_OR_POP", "JUMP_IF_FALSE_OR_POP"):
        return 1
    if inst.opname == "CALL" and not PY_3_12:  # 3.11's dis counts the arguments against PRECALL
        return inst.arg + 2
    opcode = OPMAP[inst.opname]
    effect = dis.stack_effect(opcode, inst.arg, jump=False) if opcode >= HAVE_ARGUMENT \
        else dis.stack_effect(opcode, jump=False)
    return values_pushed(inst) - effect
