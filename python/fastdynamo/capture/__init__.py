"""Capture: the symbolic bytecode interpreter. A frame in; plans, an FX graph and
guards out. It never calls a backend and never hands out a translator.

:func:`translate` returns :class:`Captured` (the whole frame is one graph) or
:class:`Broken` (the reason it is not). :func:`translate_to_break` traces again up to a
chosen step and returns the graph so far and the frame's state there, as plans
(:class:`~fastdynamo.plans.BreakState`), for :mod:`fastdynamo.transform.graph_break`.

>>> import torch
>>> def f(x):
...     return torch.relu(x) + 1
>>> result = translate(f.__code__, [torch.ones(2)], f.__globals__, __builtins__, None)
>>> [n.op for n in result.graph_module.graph.nodes]
['placeholder', 'call_function', 'call_function', 'output']
"""
from __future__ import annotations

import builtins as _builtins
from dataclasses import dataclass, field
from types import CodeType
from typing import Any

import torch

from ..bytecode import parameter_names
from ..exc import FullGraphError, Unsupported, unsupported
from ..fx import count_ops
from ..guards import Guard, autocast, default_dtype, grad_mode, inference_mode
from ..guards.sources import ClosureSource, LocalSource, Source
from ..plans import BreakState, Effect, OutputPlan
from .break_state import break_state, frame_cells
from .builder import ROOT_GLOBALS
from .dynamic import DynamicPolicy
from .output import OutputPlanBuilder
from .output_graph import OutputGraph
from .translator import (
    SUPPORTED_OPCODES,
    InstructionTranslator,
    LazyArgument,
    StopTranslation,
)
from .variables.functions import CellVariable


@dataclass
class Captured:
    """A graph and everything code generation needs to run it in the frame's place.

    ``graph_module`` is None for the part of a frame before a graph break that holds no
    tensor work. ``output`` is the plan of the return value (None before a break).
    """

    graph_module: torch.fx.GraphModule | None
    graph_inputs: list[Source] = field(default_factory=list)
    example_inputs: list[torch.Tensor] = field(default_factory=list)
    output: OutputPlan | None = None
    effects: list[Effect] = field(default_factory=list)  # performed after the graph
    guards: list[Guard] = field(default_factory=list)
    mutates_inputs: bool = False  # the graph writes to an input: it cannot run twice
    draws_random: bool = False  # the graph consumes random numbers: nor can it
    traced_handlers: bool = True  # traced code had try/with blocks (could catch errors)

    @property
    def op_count(self) -> int:
        return count_ops(self.graph_module.graph) if self.graph_module is not None else 0


@dataclass
class Broken:
    """A frame that is not one graph: ``reason`` says why and where (its ``root_index``,
    ``root_step`` and ``first_steps`` locate the break). From :func:`translate_to_break`,
    ``graph`` is what was captured before the stop and ``state`` the frame there."""

    reason: Unsupported
    graph: Captured | None = None
    state: BreakState | None = None


def translate(code: CodeType, localsplus: list, f_globals: dict, f_builtins: Any,
              closure: tuple | None, policy: DynamicPolicy | None = None) -> Captured | Broken:
    """Translate one frame; ``localsplus`` holds the argument values in parameter order.
    Never raises :class:`Unsupported`: it is returned in a :class:`Broken`. ``policy``
    picks the input dims traced with symbolic sizes (None: all static); a symbolic
    trace whose shape guards have no native form raises ``ShapeLoweringError``."""
    run = _Run(code, localsplus, f_globals, f_builtins, closure, policy=policy)
    try:
        with run:
            returned = run.tx.run()
            assert returned is not None, "frames of generators are not translated"
            plans = OutputPlanBuilder(size_node=run.output.size_node)
            output = plans.plan(returned)
            effects = run.output.side_effects.plans(plans)
            return run.captured(plans, output, effects)
    except Unsupported as err:
        return Broken(err)


def translate_to_break(code: CodeType, localsplus: list, f_globals: dict, f_builtins: Any,
                       closure: tuple | None, reason: Unsupported, stop_at_step: int,
                       policy: DynamicPolicy | None = None) -> Broken:
    """Trace again and stop just before the frame's step ``stop_at_step`` (the trace is
    deterministic, so this reaches the state the first trace had there). The result's
    ``graph`` and ``state`` are None when the trace does not reach the step."""
    run = _Run(code, localsplus, f_globals, f_builtins, closure, stop_at_step, policy)
    try:
        with run:
            try:
                run.tx.run()
            except StopTranslation:
                return run.stopped(reason)
    except Unsupported as err:
        return Broken(err)
    return Broken(unsupported("the second trace returned before the graph break"))


class _Run:
    """One translation of a frame: the translator and its graph, entered with the torch
    state guards in place; leaving restores the grad mode the trace may have changed."""

    def __init__(self, code: CodeType, localsplus: list, f_globals: dict, f_builtins: Any,
                 closure: tuple | None, stop_at_step: int | None = None,
                 policy: DynamicPolicy | None = None):
        if not isinstance(f_builtins, dict):
            f_builtins = vars(f_builtins) if f_builtins is not None else vars(_builtins)
        self.output = OutputGraph(policy, code.co_qualname)
        self.output.frame = (localsplus, f_globals, f_builtins, closure)
        self.prior_grad = torch.is_grad_enabled()
        self.output.add_guard(None, grad_mode(self.prior_grad))
        # Factories, Python scalars and type promotion take the default dtype, and the
        # trace folds what it gave (FakeTensor dtypes, `.dtype` read as a constant).
        self.output.add_guard(None, default_dtype(torch.get_default_dtype()))
        # Frames are not compiled under autocast or inference mode (convert_frame.py); the
        # guards keep entries compiled outside them from running inside them.
        self.output.add_guard(None, autocast(False))
        self.output.add_guard(None, inference_mode(False))
        f_locals = {name: LazyArgument(value, LocalSource(i, name))
                    for i, (name, value) in enumerate(zip(parameter_names(code), localsplus, strict=False))}
        cells = {}
        for i, name in enumerate(code.co_freevars):
            cell = closure[i] if closure is not None else None
            cells[name] = CellVariable(real_cell=cell, contents_source=ClosureSource(i, name))
        self.tx = InstructionTranslator(code, f_locals, cells, f_globals, f_builtins, ROOT_GLOBALS,
                                        self.output, root_globals=f_globals, stop_at_step=stop_at_step)

    def __enter__(self) -> _Run:
        return self

    def __exit__(self, *exc: object) -> None:
        torch._C._set_grad_enabled(self.prior_grad)

    def captured(self, plans: OutputPlanBuilder, output: OutputPlan | None,
                 effects: list[Effect]) -> Captured:
        graph = self.output
        return Captured(graph_module=graph.finish(plans.nodes),
                        graph_inputs=[inp.source for inp in graph.inputs],
                        example_inputs=graph.example_inputs(), output=output, effects=effects,
                        guards=graph.guards, mutates_inputs=graph.mutates_inputs,
                        draws_random=graph.draws_random, traced_handlers=graph.traced_handlers)

    def stopped(self, reason: Unsupported) -> Broken:
        plans = OutputPlanBuilder(frame_cells=frame_cells(self.tx), size_node=self.output.size_node)
        state = break_state(self.tx, plans, grad_mode_at_start=self.prior_grad,
                            grad_mode_at_stop=torch.is_grad_enabled())
        graph = self.captured(plans, None, list(state.effects))
        if graph.op_count == 0 and not plans.nodes:
            graph.graph_module = None  # nothing to run before the break
        return Broken(reason, graph, state)


__all__ = ["Broken", "Captured", "DynamicPolicy", "FullGraphError", "SUPPORTED_OPCODES", "Unsupported", "translate",
           "translate_to_break"]
