"""The symbolic bytecode interpreter: frame in, FX graph + guards + output plan out.

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
from typing import Any, Callable

import torch

from ..fx import OutputGraph, count_ops
from ..guards import Guard, autocast, grad_mode, inference_mode
from ..sources import ClosureSource, LocalSource, Source
from .binding import parameter_names
from .builder import ROOT_GLOBALS
from .exc import FullGraphError, Unsupported
from .output import OutputPlanBuilder
from .translator import SUPPORTED_OPCODES, InstructionTranslator, LazyArgument, StopTranslation
from .variables.functions import CellVariable


@dataclass
class CaptureResult:
    """What one translation produced. ``break_reason`` is set (and the graph fields are
    None) when the frame could not be captured."""

    graph_module: torch.fx.GraphModule | None = None
    graph_inputs: list[Source] = field(default_factory=list)
    example_inputs: list[torch.Tensor] = field(default_factory=list)
    output_plan: Any = None
    effects: list = field(default_factory=list)  # codegen effects, run after the graph
    guards: list[Guard] = field(default_factory=list)
    break_reason: Unsupported | None = None
    compiled_fn: Callable | None = None
    mutates_inputs: bool = False  # the graph writes to an input: it cannot run twice
    draws_random: bool = False  # the graph consumes random numbers: nor can it
    traced_handlers: bool = True  # traced code had try/with blocks (could catch errors)
    # Set instead of the graph fields when translation stopped at ``stop_at_step``:
    # the translator, holding the stack and locals before that step, and its graph.
    stopped: InstructionTranslator | None = None

    @property
    def op_count(self) -> int:
        return count_ops(self.graph_module.graph) if self.graph_module is not None else 0


def translate(code: CodeType, localsplus: list, f_globals: dict, f_builtins: Any,
              closure: tuple | None, backend: Callable | None = None,
              stop_at_step: int | None = None) -> CaptureResult:
    """Translate one frame: ``localsplus`` holds the argument values in parameter order.

    With a ``backend``, the graph is compiled and ``compiled_fn`` set. Never raises
    :class:`Unsupported`: it is returned as ``break_reason``. With ``stop_at_step``
    the translation stops before that instruction of the frame and the result's
    ``stopped`` holds the translator (see :mod:`fastdynamo.graph_break`).
    """
    if not isinstance(f_builtins, dict):
        f_builtins = vars(f_builtins) if f_builtins is not None else vars(_builtins)
    output = OutputGraph()
    prior_grad = torch.is_grad_enabled()
    output.add_guard(None, grad_mode(prior_grad))
    # Frames are not compiled under autocast or inference mode (convert_frame.py); the
    # guards keep entries compiled outside them from running inside them.
    output.add_guard(None, autocast(False))
    output.add_guard(None, inference_mode(False))
    names = parameter_names(code)
    f_locals = {name: LazyArgument(value, LocalSource(i, name))
                for i, (name, value) in enumerate(zip(names, localsplus))}
    cells = {}
    for i, name in enumerate(code.co_freevars):
        cell = closure[i] if closure is not None else None
        cells[name] = CellVariable(real_cell=cell, contents_source=ClosureSource(i, name))
    try:
        tx = InstructionTranslator(code, f_locals, cells, f_globals, f_builtins, ROOT_GLOBALS,
                                   output, root_globals=f_globals, stop_at_step=stop_at_step)
        try:
            returned = tx.run()
        except StopTranslation:
            tx.grad_mode_at_start = prior_grad
            tx.grad_mode_at_stop = torch.is_grad_enabled()
            return CaptureResult(stopped=tx)
        plans = OutputPlanBuilder()
        plan = plans.plan(returned)
        effects = output.side_effects.plans(plans)
        graph_module = output.finish(plans.nodes)
    except Unsupported as err:
        return CaptureResult(break_reason=err)
    finally:
        torch._C._set_grad_enabled(prior_grad)
    result = CaptureResult(graph_module=graph_module,
                           graph_inputs=[inp.source for inp in output.inputs],
                           example_inputs=output.example_inputs(), output_plan=plan,
                           effects=effects, guards=output.guards,
                           mutates_inputs=output.mutates_inputs,
                           draws_random=output.draws_random,
                           traced_handlers=output.traced_handlers)
    if backend is not None:
        result.compiled_fn = backend(graph_module, result.example_inputs)
    return result


__all__ = ["CaptureResult", "FullGraphError", "SUPPORTED_OPCODES", "Unsupported", "translate"]
