"""Graph breaks: compile the part of a frame before an unsupported construct, run the
construct as Python, and continue in a generated *resume function*.

When the translator raises :class:`~fastdynamo.exc.Unsupported` at instruction
``I`` of the compiled frame (directly, or inside a call it was inlining), the frame is
split in three:

1. **The graph**: everything traced before ``I``. :func:`choose_region` says where the
   trace must stop; capture translates the frame again up to there and hands over the
   graph and the frame's state as plans (:class:`~fastdynamo.plans.BreakState`): the
   tensors the rest of the frame needs are graph outputs.
2. **A native region** run by CPython in the transformed code: ``I`` alone, or, when
   ``I`` lies inside a loop, the whole outermost loop around it (a break on every
   iteration would nest one resume call per iteration). Before it, the transformed
   code rebuilds the Python stack and the locals exactly as CPython would have them.
3. **Exits**: every way control leaves the region (falling through, a jump out, an
   exception caught by a ``try``/``with`` handler of the frame) pops the stack into
   temporaries and returns ``resume_fn(*stack, *live_locals)``. A resume function is a
   copy of the original code with a prologue that pushes the stack back and jumps to the
   exit's target; it is an ordinary code object, so the hook intercepts and compiles it
   on its first call (and it may break again). Handler exits are marked ``SKIP``: an
   exception path runs as Python.

``with`` blocks over grad-mode contexts are re-entered for real before the region
(``BEFORE_WITH`` on a fresh ``torch.no_grad()``/``torch.enable_grad()``), so the exit
method on the stack, and the one a resume function receives, is the real one.

Anything this module cannot rebuild exactly raises ``Unsupported`` and the frame runs as
Python, as before graph breaks existed. It sees plans only, never a translator.
"""
from __future__ import annotations

import copy
import dis
from dataclasses import dataclass, field
from types import CodeType
from typing import Callable, Sequence

import torch

from ..bytecode import (
    ExceptionTableEntry,
    Instruction,
    assemble,
    bound_after,
    create_call,
    create_call_function,
    create_instruction,
    create_jump,
    create_load_const,
    create_load_global,
    create_push_null,
    definitely_bound,
    instructions_from_code,
    live_locals,
    parameter_names,
    stack_depths,
    version,
)
from ..exc import Unsupported, unsupported
from ..guards.sources import Source
from ..plans import NULL_VALUE, BreakState, NullValue, ReenterGradMode
from .codegen import GRAPH_OUTPUTS_LOCAL, effect_instructions, load_source, prelude
from .fallback import make_function, protect, set_grad_mode
from .resume import ResumeLayout, in_prologue, resume_code, stack_argument


@dataclass(frozen=True)
class Region:
    """Instructions ``start``..``end`` (inclusive, indices into the decoded original)
    run natively; the trace stops at step ``stop_step`` (just before ``start``)."""

    start: int
    end: int
    stop_step: int
    is_loop: bool


@dataclass(frozen=True)
class GraphCall:
    """The graph that runs before the break: loaded from the frame's globals as
    ``compiled_fn_name`` and called with ``inputs``. ``fallback`` (or None) runs the
    frame as Python if it raises (:mod:`fastdynamo.transform.fallback`); ``may_catch``
    says traced code had ``try``/``with`` blocks that could have caught the error."""

    compiled_fn_name: str
    inputs: Sequence[Source]
    fallback: CodeType | None
    may_catch: bool


# Calls that see a frame's locals by name: such a frame is not split.
_READS_LOCALS_BY_NAME = frozenset({"locals", "vars", "dir", "eval", "exec", "_getframe",
                                   "currentframe", "stack", "getframeinfo"})


# ---------------------------------------------------------------- where to split

def choose_region(code: CodeType, err: Unsupported) -> Region:
    """The native region for the break ``err`` reports; raises ``Unsupported`` when the
    frame cannot be split (it then runs as Python)."""
    if err.root_index is None or err.root_step is None:
        raise unsupported("the break is not at an instruction of the frame")
    if in_prologue(code, err.root_index):
        raise unsupported("graph break while entering a resume function")
    introspective = _READS_LOCALS_BY_NAME & set(code.co_names)
    if introspective:
        # The resume function has other locals than the frame (only those read later,
        # plus the break's temporaries), which these would see.
        raise unsupported(f"graph break in a function that calls {sorted(introspective)[0]}()")
    insts = instructions_from_code(code)
    at = err.root_index
    loop = _outermost_loop(insts, at)
    if loop is None:
        if not version.resumable(insts[at]):
            raise unsupported(f"graph break at {insts[at].opname}")
        return Region(at, at, err.root_step, is_loop=False)
    start, end = loop
    if start not in err.first_steps:
        raise unsupported("loop header was never reached")
    return Region(start, end, err.first_steps[start], is_loop=True)


def _outermost_loop(insts: list[Instruction], at: int) -> tuple[int, int] | None:
    """``(header, backward jump)`` of the outermost loop containing instruction ``at``."""
    index = {id(inst): i for i, inst in enumerate(insts)}
    best = None
    for i, inst in enumerate(insts):
        if inst.is_jump and inst.target is not None:
            target = index[id(inst.target)]
            if target <= at <= i and (best is None or target < best[0] or
                                      (target == best[0] and i > best[1])) \
                    and _reaches(insts, index, target, i):
                best = (target, i)
    return best


def _reaches(insts: list[Instruction], index: dict[int, int], start: int, end: int) -> bool:
    """Whether ordinary control flow (no exception edges) within ``start..end`` goes from
    ``start`` to ``end``: a backward jump closes a loop only then. From 3.12 the code
    after a ``with`` or ``except`` handler jumps back to the statement after the block,
    a backward jump that no iteration takes."""
    seen = {start}
    todo = [start]
    while todo:
        i = todo.pop()
        if i == end:
            return True
        inst = insts[i]
        nexts = [] if inst.opname in version.TERMINATOR_OPNAMES else [i + 1]
        if inst.is_jump and inst.target is not None:
            nexts.append(index[id(inst.target)])
        for n in nexts:
            if start <= n <= end and n not in seen:
                seen.add(n)
                todo.append(n)
    return False


def split_frame(code: CodeType, region: Region, state: BreakState, graph: GraphCall | None,
                mark_skip: Callable[[CodeType], None]) -> CodeType:
    """The transformed code of a frame split at ``region``: the graph call (if any), the
    state rebuilt, the region, and a resume call at every exit; raises ``Unsupported``
    when the state cannot be rebuilt exactly. ``mark_skip`` marks a code object to run
    as Python (resume functions of exception handlers)."""
    if state.index != region.start:
        raise unsupported("the second trace stopped at a different instruction")
    return _Builder(code, instructions_from_code(code), region, state, graph, mark_skip).build()


# ---------------------------------------------------------------- the transformed code

@dataclass
class _Exit:
    """Where control leaves the region: ``stub`` is the first instruction of the code
    that calls the resume function for ``target``."""

    target: Instruction
    depth: int
    nulls: frozenset[int]
    handler: ExceptionTableEntry | None = None
    bound: frozenset[str] = frozenset()  # locals bound on every path to the exit
    stub: Instruction = field(default_factory=lambda: create_instruction("NOP"))
    # 3.12+: what an exhausted FOR_ITER skips (END_FOR...), placed before ``stub``.
    skipped: list[Instruction] = field(default_factory=list)


class _Builder:
    def __init__(self, code: CodeType, insts: list[Instruction], region: Region,
                 state: BreakState, graph: GraphCall | None,
                 mark_skip: Callable[[CodeType], None]):
        self.code = code
        self.insts = insts
        self.region = region
        self.state = state
        self.graph = graph
        self.mark_skip = mark_skip
        self.index = {id(inst): i for i, inst in enumerate(insts)}
        self.depths = stack_depths(insts)
        self.line = insts[region.start].lineno or code.co_firstlineno
        self.stack = state.stack

    # -- orchestration ------------------------------------------------------------
    def build(self) -> CodeType:
        region_code, exits = self._region()
        stubs = [inst for ex in exits for inst in self._exit_stub(ex)]
        # Cells first: closures rebuilt below need them; arguments they hold are then
        # read from the cell (``cells_made``).
        body = [create_instruction("MAKE_CELL", argval=name) for name in self.code.co_cellvars]
        handler: list[Instruction] = []
        if self.graph is not None:
            call = self._graph_call(self.graph)
            handler = self._fallback_handler(self.graph, call)
            body += call
        body += self._restore_state()
        body += region_code + stubs + handler
        for inst in body:
            if inst.positions is None:
                inst.positions = dis.Positions(self.line, self.line, None, None)
        return assemble(
            prelude(self.code) + body, self.code,
            co_varnames=parameter_names(self.code),
            co_flags=self.code.co_flags & ~version.GENERATOR_FLAGS)

    # -- the graph ----------------------------------------------------------------
    def _fallback_handler(self, graph: GraphCall, call: list[Instruction]) -> list[Instruction]:
        """If the graph raises, the frame runs again as Python (fallback.py)."""
        if graph.fallback is None:
            return []
        cells = set(self.code.co_cellvars)
        return protect(call, self.code, graph.fallback,
                       lambda name: [create_instruction("LOAD_DEREF" if name in cells else "LOAD_FAST",
                                                        argval=name)],
                       self.state.grad_mode_at_start, graph.may_catch)

    def _graph_call(self, graph: GraphCall) -> list[Instruction]:
        body = [create_load_global(graph.compiled_fn_name, push_null=True)]
        for source in graph.inputs:
            body += load_source(source, self.code, cells_made=True)
        body += create_call(len(graph.inputs))
        body.append(create_instruction("STORE_FAST", argval=GRAPH_OUTPUTS_LOCAL))
        return body

    # -- state at the break -------------------------------------------------------
    def _deleted_arguments(self) -> list[Instruction]:
        """``del`` of an argument before the break: the transformed frame still holds it."""
        return [create_instruction("DELETE_DEREF" if name in self.code.co_cellvars else "DELETE_FAST",
                                   argval=name)
                for name in self.state.deleted_arguments]

    def _restore_state(self) -> list[Instruction]:
        """Replay the side effects, then push the stack, store the locals and set the
        grad mode of the break.

        Every value is computed first (``effect_instructions`` reads sources as they
        were at frame entry and builds a container shared by several places once),
        then the locals are stored and the stack values parked in temporaries, so that
        NULLs and re-entered with-blocks can be pushed between them in stack order.
        """
        state = self.state
        values = [v for v in state.stack if not isinstance(v, (NullValue, ReenterGradMode))]
        out = effect_instructions(self.code, state.effects,
                                  then=values + [p for _, p in state.locals] + [p for _, p in state.cells],
                                  cells_made=True)
        for name, _ in reversed(state.cells):
            out.append(create_instruction("STORE_DEREF", argval=name))
        for name, _ in reversed(state.locals):
            out.append(create_instruction("STORE_FAST", argval=name))
        out += self._deleted_arguments()
        parked = [f"___break_value{i}" for i in range(len(values))]
        out += [create_instruction("STORE_FAST", argval=name) for name in reversed(parked)]
        temps = iter(parked)
        for value in state.stack:
            if value is NULL_VALUE:
                out.append(create_push_null())
            elif isinstance(value, ReenterGradMode):
                out += _reenter_grad_mode(value)
            else:
                out.append(create_instruction("LOAD_FAST", argval=next(temps)))
        if any(isinstance(v, ReenterGradMode) for v in state.stack) or \
                state.grad_mode_at_stop != state.grad_mode_at_start:
            out += set_grad_mode(state.grad_mode_at_stop)
        return out

    # -- the native region and its exits -----------------------------------------
    def _region(self) -> tuple[list[Instruction], list[_Exit]]:
        region = self.region
        originals = self.insts[region.start:region.end + 1]
        copies = {id(inst): copy.copy(inst) for inst in originals}
        exits: dict[tuple, _Exit] = {}
        entries: dict[int, ExceptionTableEntry] = {}
        bound_in, bound_loop = definitely_bound(self.insts, region.start, region.end,
                                                self.state.bound_locals)

        def exit_to(source: int, target: Instruction, depth: int, bound: frozenset) -> Instruction:
            skips = self._for_iter_skips(self.insts[source], target)
            if skips:  # the depth is already the one after them (_depth_after)
                target = self.insts[self.index[id(target)] + len(skips)]
            key = ("jump", id(target), depth)
            if key not in exits:
                exits[key] = _Exit(target, depth, self._nulls(depth), bound=bound)
            ex = exits[key]
            ex.bound &= bound
            if not skips:
                return ex.stub
            if not ex.skipped:
                ex.skipped = [create_instruction(inst.opname, arg=inst.arg) for inst in skips]
            return ex.skipped[0]

        for i, inst in enumerate(originals, region.start):
            new = copies[id(inst)]
            after = bound_after(bound_in[i], inst) if i in bound_in else frozenset()
            if inst.is_jump and inst.target is not None:
                if id(inst.target) in copies:
                    new.target = copies[id(inst.target)]
                else:
                    exhausted = inst.opname == "FOR_ITER" and i == region.start
                    bound = bound_loop if exhausted and self._iterates_once() else after
                    new.target = exit_to(i, inst.target, self._depth_after(inst, jump=True), bound)
            entry = inst.exn_tab_entry
            if entry is not None:
                if id(entry) not in entries:
                    entries[id(entry)] = self._region_entry(entry, copies, exits)
                new.exn_tab_entry = entries[id(entry)]
                handler = exits.get(("handler", id(entry)))
                if handler is not None:
                    handler.bound &= bound_in.get(i, frozenset())
        code = [copies[id(inst)] for inst in originals]
        if region.start == region.end and originals[0].opname == "CALL":
            code = self._call_with_prefix(originals[0], copies[id(originals[0])])
        if region.start == region.end and originals[0].opname in version.NEEDS_BOOL_OPNAMES:
            to_bool = create_instruction("TO_BOOL")
            to_bool.exn_tab_entry, to_bool.positions = code[0].exn_tab_entry, originals[0].positions
            code = [to_bool, *code]
        last = originals[-1]
        if last.opname not in version.TERMINATOR_OPNAMES:
            following = self.insts[region.end + 1]
            bound = bound_after(bound_in.get(region.end, frozenset()), last)
            code.append(create_jump(exit_to(region.end, following,
                                            self._depth_after(last, jump=False), bound)))
        return code, list(exits.values())

    def _for_iter_skips(self, inst: Instruction, target: Instruction) -> list[Instruction]:
        """The instructions at ``target`` that an exhausted FOR_ITER jumps over (3.12+:
        its END_FOR; 3.13: and the POP_TOP after it). The exit is after them, and the
        stub starts with copies of them, which CPython skips as well."""
        if inst.opname != "FOR_ITER" or not version.FOR_ITER_SKIPS:
            return []
        at = self.index[id(target)]
        skipped = self.insts[at:at + len(version.FOR_ITER_SKIPS)]
        if tuple(i.opname for i in skipped) != version.FOR_ITER_SKIPS:
            raise unsupported("a FOR_ITER whose target is not its END_FOR")
        return skipped

    def _iterates_once(self) -> bool:
        """A ``for`` loop entered with items left runs its body at least once."""
        return self.state.iterator_has_items

    def _call_with_prefix(self, original: Instruction, call: Instruction) -> list[Instruction]:
        """``CALL`` needs its ``PRECALL`` (and ``KW_NAMES``) directly before it."""
        assert original.arg is not None  # a decoded CALL has its argument count
        insts = create_call(original.arg, self.state.kw_names)
        for inst in insts[:-1]:
            inst.exn_tab_entry = call.exn_tab_entry
            inst.positions = original.positions
        return insts[:-1] + [call]

    def _region_entry(self, entry: ExceptionTableEntry, copies: dict,
                      exits: dict) -> ExceptionTableEntry:
        if id(entry.target) in copies:
            target = copies[id(entry.target)]
        else:
            key = ("handler", id(entry))
            if key not in exits:
                depth = entry.depth + int(entry.lasti) + 1
                if entry.depth > self._untouched():
                    raise unsupported("exception handler below the values the break rebuilds")
                exits[key] = _Exit(entry.target, depth, self._nulls(entry.depth), handler=entry,
                                   bound=self.state.bound_locals)
            target = exits[key].stub
        return ExceptionTableEntry(entry.start, entry.end, target, entry.depth, entry.lasti)

    def _untouched(self) -> int:
        """Stack items below those the region's first instruction consumes."""
        if self.region.is_loop:
            return len(self.stack)
        consumed = version.values_consumed(self.insts[self.region.start])
        if not 0 <= consumed <= len(self.stack):
            raise unsupported(f"graph break at {self.insts[self.region.start].opname} with "
                              f"{len(self.stack)} stack values")
        return len(self.stack) - consumed

    def _depth_after(self, inst: Instruction, jump: bool) -> int:
        if not self.region.is_loop:
            depth = self._untouched() + version.values_pushed(inst)
            if jump and inst.opname in ("JUMP_IF_TRUE_OR_POP", "JUMP_IF_FALSE_OR_POP"):
                depth = len(self.stack)
            return depth
        target = inst.target if jump else self.insts[self.index[id(inst)] + 1]
        assert target is not None  # a jump has its target
        skips = self._for_iter_skips(inst, target) if jump else []
        at_target = self.depths[self.index[id(target)] + len(skips)]
        if at_target is None or at_target > len(self.stack):
            raise unsupported("a loop exit with more values on the stack than at its start")
        return at_target

    def _nulls(self, depth: int) -> frozenset[int]:
        untouched = self._untouched()
        below = frozenset(i for i in range(min(depth, untouched)) if self.stack[i] is NULL_VALUE)
        if self.region.is_loop:
            return below
        pushed = version.nulls_pushed(self.insts[self.region.start])
        return below | {untouched + k for k in pushed if untouched + k < depth}

    def _exit_stub(self, ex: _Exit) -> list[Instruction]:
        """Pop the stack into temporaries, call the resume function, return its result."""
        layout = self._layout(ex)
        resume = self._resume_code(ex, layout)
        out: list[Instruction] = []
        derived = {position for position, _, _ in layout.derived}
        for position in reversed(range(ex.depth)):
            if position in ex.nulls:
                out += _pop_null()
            elif position in derived:
                out.append(create_instruction("POP_TOP"))  # the prologue rebuilds it
            else:
                out.append(create_instruction("STORE_FAST", argval=stack_argument(position)))
        params = layout.params()
        out += create_call_function(make_function(resume),
                                    [[create_instruction("LOAD_FAST", argval=name)] for name in params])
        out.append(create_instruction("RETURN_VALUE"))
        return ex.skipped + [ex.stub] + out

    def _layout(self, ex: _Exit) -> ResumeLayout:
        names = self._exit_locals(ex)
        first = None
        if "__class__" in self.code.co_freevars and self.code.co_argcount:
            # Zero-argument super() reads the frame's first local: it stays first.
            first = self.code.co_varnames[0]
            if first in self.code.co_cellvars or first not in self.state.bound_locals:
                raise unsupported("super() after a graph break with its first argument in a cell")
            if first not in names:
                names.insert(0, first)
        return ResumeLayout(ex.depth, ex.nulls, self._derived(ex, names), tuple(names), first)

    def _derived(self, ex: _Exit, names: list[str]) -> tuple[tuple[int, str, str], ...]:
        """Bound methods on the stack whose object a passed local holds: the prologue
        rebuilds them from the local, so the object reaches the resume function by one
        path only (side effects on it are then tracked as in any frame)."""
        out = []
        for method in self.state.methods:
            if method.position < min(ex.depth, self._untouched()):
                holder = next((n for n in names if n in method.holders), None)
                if holder is not None:
                    out.append((method.position, holder, method.attr))
        return tuple(out)

    def _exit_locals(self, ex: _Exit) -> list[str]:
        """Locals the code after the exit may read: each must be bound on every path
        there, or unbound on every path (then the resume function raises as CPython would)."""
        fast = set(self.code.co_varnames) - set(self.code.co_cellvars)  # cells go by closure
        live = live_locals(self.insts, ex.target) & fast
        maybe = set(self.state.bound_locals) | {
            i.argval for i in self.insts[self.region.start:self.region.end + 1]
            if i.opname == "STORE_FAST"}
        unsure = (live & maybe) - ex.bound
        if unsure:
            raise unsupported(f"locals {sorted(unsure)} may be unbound where the frame resumes")
        return sorted(live & ex.bound, key=self._local_order)

    def _local_order(self, name: str) -> int:
        names = self.code.co_varnames
        return names.index(name) if name in names else len(names)

    def _resume_code(self, ex: _Exit, layout: ResumeLayout) -> CodeType:
        assert ex.target.offset is not None  # exits lead to instructions of the original code
        code = resume_code(self.code, ex.target.offset, layout)
        if ex.handler is not None:
            self.mark_skip(code)  # exception paths run as Python
        return code


# ---------------------------------------------------------------- small sequences

def _pop_null() -> list[Instruction]:
    """``POP_TOP`` cannot pop a NULL: call a no-argument builtin over it instead (from
    3.13 the NULL goes above the callable)."""
    swap = [create_instruction("SWAP", arg=2)] if version.NULL_ABOVE_CALLABLE else []
    return [create_load_const(tuple), *swap, *create_call(0), create_instruction("POP_TOP")]


def _reenter_grad_mode(block: ReenterGradMode) -> list[Instruction]:
    """Enter a real grad-mode context as the traced ``with`` did: restore the mode it
    saw at entry, then ``BEFORE_WITH`` leaves the real ``__exit__`` on the stack."""
    factory = torch.enable_grad if block.target else torch.no_grad
    return [*set_grad_mode(block.prior), *create_call_function([create_load_const(factory)], []),
            create_instruction("BEFORE_WITH"), create_instruction("POP_TOP")]


__all__ = ["GraphCall", "Region", "choose_region", "split_frame"]
