"""Control-flow facts about an instruction list: jump targets, basic blocks,
reachability, stack depth before each instruction and liveness of locals.

All functions take the list produced by :func:`instructions_from_code` (or an
edited one) and work by instruction identity, so they stay valid after edits.

>>> from .decode import instructions_from_code
>>> def f(x):
...     y = x + 1
...     return y
>>> insts = instructions_from_code(f.__code__)
>>> max_stack_depth(insts) == f.__code__.co_stacksize
True
>>> sorted(live_locals(insts, insts[1]))    # before LOAD_FAST x
['x']
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from . import version
from .instruction import Instruction


class StackDepthError(ValueError):
    """The instructions do not have one consistent stack depth at every point."""


def _index_of(instructions: Sequence[Instruction]) -> dict[int, int]:
    return {id(inst): i for i, inst in enumerate(instructions)}


def falls_through(inst: Instruction) -> bool:
    """Whether control can continue to the next instruction."""
    return inst.opname not in version.TERMINATOR_OPNAMES


def successors(instructions: Sequence[Instruction], i: int,
               index: dict[int, int] | None = None) -> list[int]:
    """Indices that can run after instruction ``i``, exception handler included."""
    index = index if index is not None else _index_of(instructions)
    inst = instructions[i]
    out = []
    if falls_through(inst) and i + 1 < len(instructions):
        out.append(i + 1)
    if inst.target is not None and inst.is_jump:
        out.append(index[id(inst.target)])
    if inst.exn_tab_entry is not None:
        out.append(index[id(inst.exn_tab_entry.target)])
    return out


def jump_targets(instructions: Sequence[Instruction]) -> set[Instruction]:
    """Instructions that some jump or exception handler goes to (instructions hash
    by identity)."""
    targets: set[Instruction] = set()
    for inst in instructions:
        if inst.is_jump and inst.target is not None:
            targets.add(inst.target)
        if inst.exn_tab_entry is not None:
            targets.add(inst.exn_tab_entry.target)
    return targets


@dataclass
class BasicBlock:
    """Instructions ``start`` .. ``end - 1`` of the list: entered only at the top,
    left only at the bottom (or by an exception)."""

    start: int
    end: int
    successors: list[int]  # indices of successor blocks


def basic_blocks(instructions: Sequence[Instruction]) -> list[BasicBlock]:
    """Split the list into basic blocks, in order.

    >>> from .instruction import create_instruction, create_jump
    >>> ret = create_instruction("RETURN_VALUE")
    >>> insts = [create_instruction("LOAD_CONST", argval=None), create_jump(ret), ret]
    >>> [(b.start, b.end, b.successors) for b in basic_blocks(insts)]
    [(0, 2, [1]), (2, 3, [])]
    """
    index = _index_of(instructions)
    leaders = {0} if instructions else set()
    for i, inst in enumerate(instructions):
        if inst.is_jump or not falls_through(inst):
            leaders.add(i + 1)
        for succ in successors(instructions, i, index):
            if succ != i + 1:
                leaders.add(succ)
    starts = sorted(s for s in leaders if s < len(instructions))
    block_of = {start: b for b, start in enumerate(starts)}
    blocks = []
    for b, start in enumerate(starts):
        end = starts[b + 1] if b + 1 < len(starts) else len(instructions)
        succ_blocks: list[int] = []
        for i in range(start, end):
            for succ in successors(instructions, i, index):
                if succ == i + 1 and i + 1 < end:
                    continue  # falling through inside the block
                if block_of[succ] not in succ_blocks:
                    succ_blocks.append(block_of[succ])
        blocks.append(BasicBlock(start, end, succ_blocks))
    return blocks


def reachable(instructions: Sequence[Instruction]) -> list[bool]:
    """For each instruction, whether it can run (from the first one)."""
    index = _index_of(instructions)
    seen = [False] * len(instructions)
    work = [0] if instructions else []
    while work:
        i = work.pop()
        if seen[i]:
            continue
        seen[i] = True
        work.extend(successors(instructions, i, index))
    return seen


def stack_depths(instructions: Sequence[Instruction]) -> list[int | None]:
    """Stack depth before each instruction (``None`` where unreachable).

    Flow analysis with :func:`dis.stack_effect` (with the jump flag on jump edges);
    an exception handler starts at its entry's depth, plus one for ``lasti`` when
    set, plus one for the exception. Raises :class:`StackDepthError` when two paths
    reach an instruction with different depths or the stack underflows.
    """
    return _flow(instructions)[0]


def max_stack_depth(instructions: Sequence[Instruction]) -> int:
    """The ``co_stacksize`` the instructions need (3.13's code constructor records at
    least 1)."""
    return max(_flow(instructions)[1], version.MIN_STACKSIZE)


def _flow(instructions: Sequence[Instruction]) -> tuple[list[int | None], int]:
    index = _index_of(instructions)
    depths: list[int | None] = [None] * len(instructions)
    max_depth = 0
    work = [(0, 0)] if instructions else []

    def reach(i: int, depth: int, came_from: Instruction) -> None:
        if depth < 0:
            raise StackDepthError(f"stack underflow reaching {instructions[i]!r} "
                                  f"from {came_from!r}")
        if depths[i] is None:
            work.append((i, depth))
        elif depths[i] != depth:
            raise StackDepthError(f"{instructions[i]!r} reached with depth {depths[i]} "
                                  f"and {depth} (from {came_from!r})")

    while work:
        i, depth = work.pop()
        while True:
            if depths[i] is not None:
                if depths[i] != depth:
                    raise StackDepthError(f"{instructions[i]!r} reached with depths "
                                          f"{depths[i]} and {depth}")
                break
            depths[i] = depth
            inst = instructions[i]
            max_depth = max(max_depth, depth + version.TRANSIENT_STACK.get(inst.opname, 0))
            entry = inst.exn_tab_entry
            if entry is not None:
                handler_depth = entry.depth + int(entry.lasti) + 1
                max_depth = max(max_depth, handler_depth)
                reach(index[id(entry.target)], handler_depth, inst)
            if inst.is_jump:
                jump_depth = depth + version.stack_effect(inst.opname, inst.arg, jump=True)
                max_depth = max(max_depth, jump_depth)
                reach(index[id(inst.target)], jump_depth, inst)
            depth += version.stack_effect(inst.opname, inst.arg, jump=False)
            max_depth = max(max_depth, depth)
            if not falls_through(inst) or i + 1 >= len(instructions):
                break
            if depth < 0:
                raise StackDepthError(f"stack underflow after {inst!r}")
            i += 1
    return depths, max_depth


# ---------------------------------------------------------------- liveness

def _uses_and_kills(inst: Instruction) -> tuple[set[str], set[str]]:
    """Locals ``inst`` reads before writing them, and locals it writes (binds or unbinds)."""
    uses: set[str] = set()
    kills: set[str] = set()
    for effect, name in version.local_effects(inst):
        if effect == "read" and name not in kills:
            uses.add(name)
        elif effect != "read":
            kills.add(name)
    return uses, kills


def liveness(instructions: Sequence[Instruction]) -> list[frozenset[str]]:
    """For each instruction, the fast locals that may be read before being written
    on some path starting at that instruction (its live-in set).

    Cell and free variables are not tracked here: an inner function can read a cell
    at any time, see :func:`live_locals`. Exception edges count: a local read by a
    handler is live throughout its ``try`` body.
    """
    index = _index_of(instructions)
    effects = [_uses_and_kills(inst) for inst in instructions]
    names = sorted({name for used, killed in effects for name in used | killed})
    bit = {name: 1 << k for k, name in enumerate(names)}
    uses = [sum(bit[n] for n in used) for used, _ in effects]
    kills = [sum(bit[n] for n in killed) for _, killed in effects]
    succs = [successors(instructions, i, index) for i in range(len(instructions))]
    handler = [index[id(inst.exn_tab_entry.target)] if inst.exn_tab_entry else None
               for inst in instructions]
    live = [0] * len(instructions)
    changed = True
    while changed:  # backward iteration to a fixed point
        changed = False
        for i in range(len(instructions) - 1, -1, -1):
            normal_out = 0
            for s in succs[i]:
                if s != handler[i]:
                    normal_out |= live[s]
            # The instruction may raise before its write happens: the handler's
            # live set is not killed by it.
            at_handler = handler[i]
            exc_out = live[at_handler] if at_handler is not None else 0
            new = uses[i] | (normal_out & ~kills[i]) | exc_out
            if new != live[i]:
                live[i] = new
                changed = True
    return [frozenset(n for n in names if mask & bit[n]) for mask in live]


def live_locals(instructions: Sequence[Instruction], at: Instruction) -> frozenset[str]:
    """Names whose values are needed if execution continues at ``at``: fast locals
    read later (see :func:`liveness`) plus every cell and free variable the code
    touches (closures may read a cell at any time).

    >>> from .decode import instructions_from_code
    >>> def f(a, b):
    ...     c = a
    ...     return c
    >>> insts = instructions_from_code(f.__code__)
    >>> sorted(live_locals(insts, insts[-2]))   # before LOAD_FAST c
    ['c']
    """
    position = _index_of(instructions)[id(at)]
    cells = {inst.argval for inst in instructions if inst.opname in version.FREE_OPNAMES}
    return liveness(instructions)[position] | frozenset(cells)


# ---------------------------------------------------------------- definite assignment

def bound_after(bound: frozenset, inst: Instruction) -> frozenset:
    """The fast locals bound after ``inst`` runs, given those bound before it."""
    for effect, name in version.local_effects(inst):
        if effect == "bind":
            bound = bound | {name}
        elif effect == "unbind":
            bound = bound - {name}
    return bound


def definitely_bound(insts: Sequence[Instruction], start: int, end: int,
                     entry: frozenset) -> tuple[dict[int, frozenset], frozenset]:
    """Locals bound on every path to each instruction of ``start..end`` (entered at
    ``start`` with ``entry`` bound), and on every path that comes back to ``start``
    from inside the region (a loop's later iterations). The must-analysis twin of
    :func:`liveness`; exception edges carry the state before the raising instruction.

    >>> from .decode import instructions_from_code
    >>> def f(a):
    ...     b = a
    ...     return b
    >>> insts = instructions_from_code(f.__code__)
    >>> bound, _ = definitely_bound(insts, 0, len(insts) - 1, frozenset({"a"}))
    >>> sorted(bound[len(insts) - 1])
    ['a', 'b']
    """
    index = _index_of(insts)
    bound_in: dict[int, frozenset] = {start: entry}
    loop: frozenset | None = None
    changed = True
    while changed:
        changed = False
        for i in range(start, end + 1):
            if i not in bound_in:
                continue
            inst = insts[i]
            after = bound_after(bound_in[i], inst)
            edges = []
            if falls_through(inst) and i < end:
                edges.append((i + 1, after))
            if inst.is_jump and inst.target is not None:
                edges.append((index[id(inst.target)], after))
            if inst.exn_tab_entry is not None:
                edges.append((index[id(inst.exn_tab_entry.target)], bound_in[i]))
            for succ, state in edges:
                if not start <= succ <= end:
                    continue
                if succ == start:
                    loop = state if loop is None else loop & state
                    state = entry & loop
                new = state if succ not in bound_in else bound_in[succ] & state
                if new != bound_in.get(succ):
                    bound_in[succ] = new
                    changed = True
    return bound_in, loop if loop is not None else entry
