"""The state of a frame stopped just before a graph break, as plans.

A translator stopped at ``stop_at_step`` holds the symbolic stack and locals CPython
would have there. :func:`break_state` turns them into a :class:`~fastdynamo.plans.BreakState`
(tensors become graph outputs, values the frame received are reloaded from their
source, containers and bound methods are rebuilt), which
:mod:`fastdynamo.transform.graph_break` turns into code without seeing a tracker.
"""
from __future__ import annotations

from typing import Any

from ..bytecode import parameter_names
from ..exc import unsupported
from ..guards.sources import LocalSource
from ..plans import NULL_VALUE, BoundMethodOnStack, BreakState, ReenterGradMode, StackValue
from .output import OutputPlanBuilder
from .translator import InstructionTranslator, LazyArgument
from .variables.base import NULL, MethodCallVariable, VariableTracker
from .variables.containers import IteratorVariable
from .variables.tensor import TensorMethodVariable
from .variables.torch_functions import GradModeExitVariable


def break_state(tx: InstructionTranslator, plans: OutputPlanBuilder, *,
                grad_mode_at_start: bool, grad_mode_at_stop: bool) -> BreakState:
    """Plan everything the code after the break reads; ``plans`` collects the graph
    outputs those plans use (the caller finishes the graph with ``plans.nodes``)."""
    if tx.handled_exceptions:
        # CPython's "exception being handled" (bare raise, sys.exc_info) cannot be set
        # again in a resume function.
        raise unsupported("graph break inside an except block")
    stack = tuple(_stack_value(plans, value) for value in tx.stack)
    local_plans = tuple((name, plans.plan(value)) for name, value in _changed_locals(tx))
    cell_plans = tuple((name, plans.plan(cell.contents)) for name, cell in _own_cells(tx))
    effects = tuple(tx.output.side_effects.plans(plans))
    top = tx.stack[-1] if tx.stack else None
    return BreakState(
        index=tx.index,
        stack=stack,
        locals=local_plans,
        cells=cell_plans,
        effects=effects,
        bound_locals=frozenset(tx.locals),
        deleted_arguments=_deleted_arguments(tx),
        methods=_methods_on_stack(tx),
        kw_names=tuple(tx.kw_names or ()),
        iterator_has_items=isinstance(top, IteratorVariable) and top.has_items_left(),
        grad_mode_at_start=grad_mode_at_start,
        grad_mode_at_stop=grad_mode_at_stop,
    )


def frame_cells(tx: InstructionTranslator) -> dict[int, str]:
    """``id(CellVariable) -> name`` for the frame's own cell and free variables: closures
    made over them can be rebuilt (``FrameCell`` plans)."""
    own = tx.code.co_cellvars + tx.code.co_freevars
    return {id(cell): name for name, cell in tx.cells.items() if name in own}


def _stack_value(plans: OutputPlanBuilder, value: VariableTracker) -> StackValue:
    if value is NULL:
        return NULL_VALUE
    if isinstance(value, GradModeExitVariable):
        return ReenterGradMode(target=bool(value.ctx.target), prior=bool(value.ctx.prior))
    return plans.plan(value)


def _changed_locals(tx: InstructionTranslator) -> list[tuple[str, Any]]:
    """Locals whose value differs from what the frame started with."""
    code = tx.code
    params = set(parameter_names(code))
    changed = []
    for name, value in tx.locals.items():
        if isinstance(value, LazyArgument) or name in code.co_cellvars:
            continue  # unread argument, or a variable that lives in a cell
        source = getattr(value, "source", None)
        if name in params and isinstance(source, LocalSource) and source.local_name == name:
            continue
        changed.append((name, value))
    return changed


def _own_cells(tx: InstructionTranslator) -> list[tuple[str, Any]]:
    """The frame's cell variables that hold a value at the break."""
    cells = [(name, tx.cells.get(name)) for name in tx.code.co_cellvars]
    return [(name, cell) for name, cell in cells if cell is not None and cell.contents is not None]


def _deleted_arguments(tx: InstructionTranslator) -> tuple[str, ...]:
    """Arguments the frame deleted (``del x``) before the break."""
    deleted = []
    for name in parameter_names(tx.code):
        if name in tx.code.co_cellvars:
            cell = tx.cells.get(name)
            if cell is not None and cell.contents is None:
                deleted.append(name)
        elif name not in tx.locals:
            deleted.append(name)
    return tuple(deleted)


def _methods_on_stack(tx: InstructionTranslator) -> tuple[BoundMethodOnStack, ...]:
    """Bound methods on the stack, with the locals that hold their object."""
    out = []
    for position, value in enumerate(tx.stack):
        if isinstance(value, (MethodCallVariable, TensorMethodVariable)):
            owner = value.obj if isinstance(value, MethodCallVariable) else value.tensor
            holders = tuple(name for name, local in tx.locals.items() if local is owner)
            if holders:
                out.append(BoundMethodOnStack(position, value.name, holders))
    return tuple(out)


__all__ = ["break_state", "frame_cells"]
