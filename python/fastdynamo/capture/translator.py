"""The symbolic instruction loop.

:class:`InstructionTranslator` walks a code object's instructions (the
:class:`~fastdynamo.bytecode.Instruction` form code generation uses too, decoded once
per code object, so both sides share one index space) with a symbolic stack and locals
of VariableTrackers. Each opcode has one handler method named after it, jumps after
their direction-free name (``JUMP``, ``POP_JUMP_IF_TRUE``: :func:`version.generic_opname`);
the families live in :mod:`fastdynamo.capture.opcodes`. An opcode without a handler goes
to :meth:`InstructionTranslator.unsupported_opcode`, which records the reason. Calls to user functions are inlined by a child translator sharing the same
:class:`~fastdynamo.fx.OutputGraph`.

>>> sorted(SUPPORTED_OPCODES)[:2]
['BEFORE_WITH', 'BINARY_OP']
"""
from __future__ import annotations

import weakref
from types import CodeType
from typing import Any, NoReturn

from .. import config
from ..bytecode import Instruction, instructions_from_code, version
from ..exc import Unsupported, unsupported
from .opcodes import (
    BuildOpcodes,
    CallOpcodes,
    ContextOpcodes,
    ExceptionOpcodes,
    ImportOpcodes,
    IterationOpcodes,
    JumpOpcodes,
    LoadStoreOpcodes,
    MatchingOpcodes,
    OperatorOpcodes,
    StackOpcodes,
)
from .opcodes.exceptions import RaisedInTrace
from .output_graph import OutputGraph
from .variables.base import VariableTracker
from .variables.functions import CellVariable
from .variables.generators import GeneratorVariable


class LazyArgument:
    """An argument of the compiled frame not read yet: wrapped (and guarded) on first
    load, so unused arguments add no guards."""

    def __init__(self, value: Any, source):
        self.value = value
        self.source = source


class StopTranslation(Exception):
    """Raised by the compiled frame's translator when it reaches ``stop_at_step``: the
    state before that instruction is what a graph break resumes from."""


class InstructionTranslator(LoadStoreOpcodes, StackOpcodes, OperatorOpcodes, JumpOpcodes,
                            CallOpcodes, BuildOpcodes, IterationOpcodes, ContextOpcodes,
                            ImportOpcodes, MatchingOpcodes, ExceptionOpcodes):
    """Symbolically runs one code object (the compiled frame or an inlined callee)."""

    def __init__(self, code: CodeType, f_locals: dict[str, Any], cells: dict[str, CellVariable],
                 f_globals: dict, f_builtins: dict, globals_source, output: OutputGraph,
                 root_globals: dict, depth: int = 0, name: str | None = None,
                 stop_at_step: int | None = None):
        self.code = code
        self.name = name or code.co_name
        self.instructions, self.index_of = _decoded(code)
        if code.co_exceptiontable:
            output.traced_handlers = True
        self.locals: dict[str, Any] = dict(f_locals)
        self.cells = dict(cells)
        self.f_globals = f_globals
        self.f_builtins = f_builtins
        self.globals_source = globals_source
        self.output = output
        self.root_globals = root_globals
        self.depth = depth
        self.stack: list[VariableTracker] = []
        self.kw_names: tuple[str, ...] | None = None
        self.handled_exceptions: list[VariableTracker] = []  # innermost last (except blocks)
        self.index = 0
        self.lineno = code.co_firstlineno
        self.return_value: VariableTracker | None = None
        self.is_generator = bool(code.co_flags & version.CO_GENERATOR)
        # Set by YIELD_VALUE: the value a generator's translator hands out (it then
        # pauses, see resume_generator).
        self.yielded: VariableTracker | None = None
        # Steps are instructions run by this translator; the compiled frame's
        # translator (depth 0) stops before step ``stop_at_step`` (a graph break) and
        # remembers the first step at which each instruction ran (loop headers).
        self.steps = 0
        self.stop_at_step = stop_at_step
        self.first_step: dict[int, int] = {}
        self.current_index = 0

    # -- the loop -----------------------------------------------------------------
    def run(self) -> VariableTracker | None:
        """Run to ``RETURN_VALUE``; return the symbolic return value (None when a
        generator's translator stops at a ``yield``).

        An :class:`Unsupported` leaving the compiled frame's translator carries
        ``root_index``/``root_step`` (the instruction of this frame that was running)
        and ``first_steps``, which :mod:`fastdynamo.graph_break` uses to split the frame.
        """
        try:
            while self.return_value is None and self.yielded is None:
                if self.index >= len(self.instructions):
                    raise unsupported("fell off the end of the bytecode")
                if self.steps == self.stop_at_step:
                    raise StopTranslation()
                inst = self.instructions[self.index]
                self.current_index = self.index
                self.first_step.setdefault(self.index, self.steps)
                self.index += 1
                self.steps += 1
                self.output.count_step()
                if inst.positions is not None and inst.positions.lineno is not None:
                    self.lineno = inst.positions.lineno
                handler = _HANDLERS.get(inst.opname)
                if handler is None:
                    self.unsupported_opcode(inst)
                try:
                    handler(self, inst)
                except RaisedInTrace as raised:  # from a callee this instruction inlined
                    self.raise_in_trace(inst, raised.exception)
        except Unsupported as err:
            err.where.insert(0, (self.code.co_filename, self.lineno, self.name))
            if self.depth == 0:
                err.root_index = self.current_index
                err.root_step = self.steps - 1
                err.first_steps = dict(self.first_step)
            raise
        return self.return_value

    def unsupported_opcode(self, inst: Instruction) -> NoReturn:
        """The one place an opcode without a handler ends up."""
        raise unsupported(f"opcode {inst.opname} is not supported")

    # -- stack helpers ------------------------------------------------------------
    def push(self, value: VariableTracker) -> None:
        assert isinstance(value, VariableTracker), value
        self.stack.append(value)

    def pop(self) -> VariableTracker:
        return self.stack.pop()

    def popn(self, n: int) -> list[VariableTracker]:
        if n == 0:
            return []
        values = self.stack[-n:]
        del self.stack[-n:]
        return values

    def jump(self, inst: Instruction) -> None:
        self.index = self.index_of[id(inst.target)]

    # -- inlining -----------------------------------------------------------------
    def inline_call(self, code: CodeType, bound: dict[str, VariableTracker],
                    cells: dict[str, CellVariable], f_globals: dict, globals_source,
                    name: str) -> VariableTracker:
        """Run ``code`` in a child translator with already-bound arguments."""
        if self.depth >= config.max_inline_depth:
            raise unsupported(f"inlining deeper than {config.max_inline_depth} calls ({name})")
        child = InstructionTranslator(code, bound, cells, f_globals, self.f_builtins, globals_source,
                                      self.output, self.root_globals, self.depth + 1, name)
        if child.is_generator:
            return GeneratorVariable(child)  # runs as its items are pulled
        returned = child.run()
        assert returned is not None, "only a generator's translator stops at a yield"
        return returned

    def resume_generator(self) -> VariableTracker | None:
        """Run this generator's translator to its next ``yield`` (the value) or its
        return (None)."""
        if self.return_value is not None:
            return None
        self.run()
        value, self.yielded = self.yielded, None
        return value


_DECODED: "weakref.WeakKeyDictionary[CodeType, tuple]" = weakref.WeakKeyDictionary()


def _decoded(code: CodeType) -> tuple[list[Instruction], dict[int, int]]:
    """The instructions of ``code`` and ``id(instruction) -> index``, decoded once per
    code object (an inlined helper called in a loop is translated once per call). The
    translator only reads them."""
    found = _DECODED.get(code)
    if found is None:
        instructions = instructions_from_code(code)
        found = _DECODED[code] = (instructions, {id(inst): i for i, inst in enumerate(instructions)})
    return found


def _collect_handlers() -> dict[str, Any]:
    """Real opname -> handler (a jump's handler is named after its generic name)."""
    handlers = {}
    for name in version.REAL_OPNAMES:
        method = getattr(InstructionTranslator, version.generic_opname(name), None)
        if method is not None:
            handlers[name] = method
    return handlers


_HANDLERS = _collect_handlers()
SUPPORTED_OPCODES = frozenset(_HANDLERS)
