"""List of :class:`Instruction` -> code object.

``assemble`` fills in what the list leaves implicit: indices into ``co_consts`` /
``co_names`` / ``co_varnames`` / localsplus (appending new entries), jump
directions and arguments with ``EXTENDED_ARG`` laid out to a fixed point, CACHE
units, the exception table, the location table, and ``co_stacksize`` by flow
analysis. A decoded, unedited list assembles to the original ``co_code``.

>>> from .decode import instructions_from_code
>>> def f(x):
...     return x * 2
>>> insts = instructions_from_code(f.__code__)
>>> assemble(insts, f.__code__).co_code == f.__code__.co_code
True
"""
from __future__ import annotations

import dis
from types import CodeType
from typing import Any, Sequence

from . import version
from .analysis import max_stack_depth
from .exception_table import RawExceptionEntry, encode_exception_table
from .instruction import UNSET, Instruction
from .line_table import encode_line_table

_COMPUTED_FIELDS = frozenset({"co_code", "co_linetable", "co_exceptiontable", "co_stacksize",
                              "co_nlocals"})
# Constants of these types are interchangeable when equal (and of the same type);
# anything else (code objects, functions, ...) is matched by identity, as CPython does.
_VALUE_CONSTANT_TYPES = (type(None), type(Ellipsis), bool, int, float, complex, str, bytes)


def _const_key(value: Any) -> Any:
    if isinstance(value, (float, complex)):
        return (type(value), repr(value))  # keeps 0.0 and -0.0 (and nan) apart
    if isinstance(value, _VALUE_CONSTANT_TYPES):
        return (type(value), value)
    if type(value) in (tuple, frozenset):
        return (type(value), type(value)(_const_key(item) for item in value))
    return ("identity", id(value))


class _Table:
    """An append-only tuple of names or constants with a reverse index."""

    def __init__(self, items: Sequence[Any], key=lambda item: item):
        self.items = list(items)
        self._key = key
        self._index: dict[Any, int] = {}
        for i, item in enumerate(self.items):
            self._index.setdefault(key(item), i)

    def index(self, item: Any, hint: int | None = None) -> int:
        # Keep the original index when it still holds this item: an unedited
        # instruction then assembles to its original argument.
        if hint is not None and 0 <= hint < len(self.items) and self.items[hint] is item:
            return hint
        key = self._key(item)
        if key not in self._index:
            self._index[key] = len(self.items)
            self.items.append(item)
        return self._index[key]


def _extended_arg_count(arg: int) -> int:
    count = 0
    while arg >= 256:
        arg >>= 8
        count += 1
    return count


def assemble(instructions: Sequence[Instruction], template_code: CodeType,
             **code_replace_kwargs: Any) -> CodeType:
    """Build a code object from ``instructions``, taking every field not derived from
    them from ``template_code`` (overridden by ``code_replace_kwargs``, the keyword
    arguments of :meth:`types.CodeType.replace`, e.g. ``co_name`` or ``co_varnames``).

    Fills in ``opcode``/``arg`` of the instructions (and flips jump directions) as a
    side effect. Unknown fast locals are appended to ``co_varnames``; unknown cell or
    free variable names are an error (they would need a matching closure).
    """
    computed = _COMPUTED_FIELDS & code_replace_kwargs.keys()
    if computed:
        raise TypeError(f"assemble computes {sorted(computed)} itself")
    kwargs = dict(code_replace_kwargs)
    consts = _Table(kwargs.pop("co_consts", template_code.co_consts), key=_const_key)
    names = _Table(kwargs.pop("co_names", template_code.co_names))
    varnames = _Table(kwargs.pop("co_varnames", template_code.co_varnames))
    cellvars = tuple(kwargs.get("co_cellvars", template_code.co_cellvars))
    freevars = tuple(kwargs.get("co_freevars", template_code.co_freevars))
    first_line = kwargs.get("co_firstlineno", template_code.co_firstlineno)

    instructions = _forward_conditions_only(instructions)
    for inst in instructions:
        inst.opname = version.canonical_opname(inst.opname)
        inst.opcode = version.OPMAP[inst.opname]
        # Grow co_varnames before localsplus is fixed. From 3.13 a cell is loaded for a
        # closure with LOAD_FAST: a local opcode may name a cell or free variable.
        if inst.argval is UNSET or inst.opname not in version.LOCAL_OPNAMES:
            continue
        packed = inst.opname in version.PACKED_LOCAL_OPNAMES
        for name in inst.argval if packed else (inst.argval,):
            if name not in cellvars and name not in freevars:
                varnames.index(name, None if packed else inst.arg)
    localsplus = version.localsplus_names_from(varnames.items, cellvars, freevars)
    localsplus_index = {name: i for i, name in reversed(list(enumerate(localsplus)))}
    instructions = _unpack_far_pairs(instructions, localsplus_index)
    for inst in instructions:
        _set_arg(inst, consts, names, localsplus, localsplus_index)

    _check_adjacent_pairs(instructions)
    sizes = _layout_jumps(instructions)
    code = bytearray()
    for inst, size in zip(instructions, sizes, strict=True):
        arg = inst.arg or 0
        caches = version.cache_entries(inst.opname)
        for shift in range(size - 1 - caches, 0, -1):
            code += bytes((version.EXTENDED_ARG, (arg >> (8 * shift)) & 0xFF))
        code += bytes((inst.opcode, arg & 0xFF))
        code += bytes((version.CACHE, 0)) * caches

    positions = _resolve_positions(instructions, first_line)
    return template_code.replace(
        co_code=bytes(code),
        co_consts=tuple(consts.items),
        co_names=tuple(names.items),
        co_varnames=tuple(varnames.items),
        co_nlocals=len(varnames.items),
        co_linetable=encode_line_table(_location_runs(positions, sizes), first_line),
        co_exceptiontable=_exception_table(instructions, sizes),
        co_stacksize=max_stack_depth(instructions),
        **kwargs,
    )


def _set_arg(inst: Instruction, consts: _Table, names: _Table, localsplus: tuple[str, ...],
             localsplus_index: dict[str, int]) -> None:
    opname, argval = inst.opname, inst.argval
    if argval is UNSET or inst.is_jump:
        if inst.opcode >= version.HAVE_ARGUMENT and inst.arg is None and not inst.is_jump:
            raise ValueError(f"{inst!r} needs an arg or an argval")
        return
    if opname in version.CONST_OPNAMES:
        inst.arg = consts.index(argval, inst.arg)
    elif opname in version.NAME_ARG_SHIFT:
        # The bits below the name index are flags (NULL, method) that the caller set.
        shift = version.NAME_ARG_SHIFT[opname]
        flags = (inst.arg or 0) & ((1 << shift) - 1)
        hint = inst.arg >> shift if inst.arg is not None else None
        inst.arg = (names.index(argval, hint) << shift) | flags
    elif opname in version.NAME_OPNAMES:
        inst.arg = names.index(argval, inst.arg)
    elif opname in version.PACKED_LOCAL_OPNAMES:
        first, second = (localsplus_index[name] for name in argval)
        if first > 15 or second > 15:
            raise ValueError(f"{inst!r}: both locals must be among the first 16 of localsplus")
        inst.arg = (first << 4) | second
    elif opname in version.LOCAL_OPNAMES or opname in version.FREE_OPNAMES:
        if inst.arg is not None and inst.arg < len(localsplus) and localsplus[inst.arg] == argval:
            return
        if argval not in localsplus_index:
            raise ValueError(f"{inst!r}: {argval!r} is not a cell or free variable of the code")
        inst.arg = localsplus_index[argval]
    elif opname in version.COMPARE_OPNAMES and isinstance(argval, str):
        # Keep the argument's low bits (3.12+: outcome mask, bool conversion) when it
        # already names this comparison.
        if inst.arg is None or dis.cmp_op[inst.arg >> version.COMPARE_ARG_SHIFT] != argval:
            inst.arg = version.compare_arg(argval)


# 3.13's paired local opcodes, as the two single ones they stand for.
_UNPACKED = {"LOAD_FAST_LOAD_FAST": ("LOAD_FAST", "LOAD_FAST"),
             "STORE_FAST_STORE_FAST": ("STORE_FAST", "STORE_FAST"),
             "STORE_FAST_LOAD_FAST": ("STORE_FAST", "LOAD_FAST")}


def _unpack_far_pairs(instructions: list[Instruction], localsplus_index: dict[str, int]) -> list[Instruction]:
    """A paired local opcode packs two 4-bit indices: when a rewrite moved either local
    past the first 16 (new locals of transformed code), it becomes its two single
    opcodes (new instructions; jumps to the pair land on the first)."""
    out: list[Instruction] = []
    replaced: dict[int, Instruction] = {}
    for inst in instructions:
        if inst.opname not in _UNPACKED or all(localsplus_index[n] <= 15 for n in inst.argval):
            out.append(inst)
            continue
        halves = [Instruction(op, version.OPMAP[op], argval=name, positions=inst.positions,
                              exn_tab_entry=inst.exn_tab_entry)
                  for op, name in zip(_UNPACKED[inst.opname], inst.argval, strict=True)]
        replaced[id(inst)] = halves[0]
        out += halves
    if replaced:
        for inst in out:
            if inst.target is not None and id(inst.target) in replaced:
                inst.target = replaced[id(inst.target)]
            entry = inst.exn_tab_entry
            if entry is not None and id(entry.target) in replaced:
                entry.target = replaced[id(entry.target)]
    return out


def _forward_conditions_only(instructions: Sequence[Instruction]) -> list[Instruction]:
    """3.12+: conditional jumps only go forward. One whose target comes at or before it
    becomes the opposite condition jumping over a ``JUMP_BACKWARD`` to the target, as
    CPython's own compiler lays such jumps out. The list is returned (new when changed)."""
    if not version.OPPOSITE_CONDITION:
        return list(instructions)
    index = {id(inst): i for i, inst in enumerate(instructions)}
    out: list[Instruction] = []
    for i, inst in enumerate(instructions):
        opposite = version.OPPOSITE_CONDITION.get(inst.opname)
        target_index = index.get(id(inst.target)) if inst.target is not None else None
        if opposite is None or target_index is None or target_index > i:
            out.append(inst)
            continue
        jump_back = Instruction("JUMP_BACKWARD", version.OPMAP["JUMP_BACKWARD"], target=inst.target,
                                positions=inst.positions, starts_line=None,
                                exn_tab_entry=inst.exn_tab_entry)
        after = instructions[i + 1] if i + 1 < len(instructions) else None
        if after is None:
            raise ValueError(f"{inst!r}: a backward conditional jump cannot end the code")
        inst.opname, inst.opcode, inst.target = opposite, version.OPMAP[opposite], after
        out += [inst, jump_back]
    return out


def _location_runs(positions: Sequence[dis.Positions], sizes: Sequence[int]):
    """``(positions, code units)`` runs for the location table: one per instruction
    (3.11), or one per run of instructions with the same location (3.12+), as CPython's
    assembler writes them."""
    runs: list[list] = []
    for pos, size in zip(positions, sizes, strict=True):
        if version.MERGE_EQUAL_LOCATIONS and runs and runs[-1][0] == pos:
            runs[-1][1] += size
        else:
            runs.append([pos, size])
    return [(pos, size) for pos, size in runs]


def _check_adjacent_pairs(instructions: Sequence[Instruction]) -> None:
    for inst, following in zip(instructions, [*instructions[1:], None], strict=True):
        needed = version.MUST_BE_FOLLOWED_BY.get(inst.opname)
        if needed is not None and (following is None or following.opname != needed):
            raise ValueError(f"{inst!r} must be directly followed by {needed}, "
                             f"got {following!r}")


def _layout_jumps(instructions: Sequence[Instruction]) -> list[int]:
    """Set jump opcodes and arguments; return every instruction's size in code units.

    A jump's argument depends on offsets, which depend on how many EXTENDED_ARG
    prefixes the jumps need: iterate, only ever growing prefixes, so it terminates
    (at the same least fixed point CPython's assembler reaches).
    """
    index = {id(inst): i for i, inst in enumerate(instructions)}
    prefixes = []
    for i, inst in enumerate(instructions):
        if inst.is_jump:
            if inst.target is None or id(inst.target) not in index:
                raise ValueError(f"{inst!r}: jump target is not in the instruction list")
            backward = index[id(inst.target)] <= i
            inst.opname = version.jump_opname_for_direction(inst.opname, backward)
            inst.opcode = version.OPMAP[inst.opname]
            prefixes.append(0)
        else:
            prefixes.append(_extended_arg_count(inst.arg or 0))
    while True:
        sizes = [p + 1 + version.cache_entries(inst.opname)
                 for p, inst in zip(prefixes, instructions, strict=True)]
        starts = [0] * len(instructions)
        total = 0
        for i, size in enumerate(sizes):
            starts[i] = total
            total += size
        changed = False
        for i, inst in enumerate(instructions):
            if not inst.is_jump:
                continue
            end = starts[i] + sizes[i]
            inst.arg = version.jump_arg(inst.opname, 2 * end, 2 * starts[index[id(inst.target)]])
            needed = _extended_arg_count(inst.arg)
            if needed > prefixes[i]:
                prefixes[i] = needed
                changed = True
        if not changed:
            return sizes


def _resolve_positions(instructions: Sequence[Instruction], first_line: int) -> list[dis.Positions]:
    """Positions of every instruction; new ones (``positions is None``) get
    ``starts_line`` or the line of the closest earlier instruction with a line (the
    next one for a prologue), without columns."""
    def line_only(line: int) -> dis.Positions:
        return dis.Positions(line, line, None, None)

    resolved: list[dis.Positions | None] = []
    last_line = None
    for inst in instructions:
        pos: dis.Positions | None
        if inst.positions is not None:
            pos = inst.positions
        elif inst.starts_line is not None:
            pos = line_only(inst.starts_line)
        else:
            pos = line_only(last_line) if last_line is not None else None
        if pos is not None and pos.lineno is not None:
            last_line = pos.lineno
        resolved.append(pos)
    next_line = first_line
    backwards: list[dis.Positions] = []
    for pos in reversed(resolved):
        if pos is None:
            pos = line_only(next_line)
        elif pos.lineno is not None:
            next_line = pos.lineno
        backwards.append(pos)
    return backwards[::-1]


def _exception_table(instructions: Sequence[Instruction], sizes: Sequence[int]) -> bytes:
    """One entry per maximal run of instructions with the same handler, as CPython."""
    index = {id(inst): i for i, inst in enumerate(instructions)}
    starts = []
    total = 0
    for size in sizes:
        starts.append(total)
        total += size
    entries = []
    current = None  # (handler index, depth, lasti)
    run_start = 0
    for i, inst in enumerate([*instructions, None]):
        entry = inst.exn_tab_entry if inst is not None else None
        key = None
        if entry is not None:
            if id(entry.target) not in index:
                raise ValueError(f"{inst!r}: exception handler is not in the instruction list")
            key = (index[id(entry.target)], entry.depth, bool(entry.lasti))
        if key != current:
            if current is not None:
                end = starts[i] if i < len(starts) else total
                entries.append(RawExceptionEntry(2 * starts[run_start], 2 * end,
                                                 2 * starts[current[0]], current[1], current[2]))
            current, run_start = key, i
    return encode_exception_table(entries)
