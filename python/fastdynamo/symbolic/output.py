"""Turning the symbolic return value into graph outputs and a codegen output plan.

Tensors become graph outputs (``GraphOutput(i)``); constants are baked in; containers
are rebuilt; values the frame received unchanged are reloaded from their source.
"""
from __future__ import annotations

import types

import torch

from ..codegen import (BuildDict, BuildList, BuildTuple, Call, Constant, FromSource, GraphOutput,
                       OutputPlan)
from .exc import unsupported
from .builder import ROOT_GLOBALS
from .variables.base import MethodCallVariable, VariableTracker
from .variables.constant import ConstantVariable
from .variables.containers import DictVariable, IteratorVariable, ListVariable, TupleVariable
from .variables.functions import NestedFunctionVariable, UserMethodVariable
from .variables.tensor import TensorMethodVariable, TensorVariable


class OutputPlanBuilder:
    """Collects the FX nodes the rewritten code needs, in order, without duplicates."""

    def __init__(self) -> None:
        self.nodes: list[torch.fx.Node] = []

    def plan(self, value: VariableTracker) -> OutputPlan:
        if isinstance(value, TensorVariable):
            if value.node.op == "placeholder" and value.source is not None:
                return FromSource(value.source)  # the input itself, as eager returns it
            if value.node not in self.nodes:
                self.nodes.append(value.node)
            return GraphOutput(self.nodes.index(value.node))
        if isinstance(value, (ListVariable, DictVariable)) and value.source is not None:
            return FromSource(value.source)  # the caller's own (unmutated) object
        if isinstance(value, TupleVariable):
            items = [self.plan(item) for item in value.items]
            if value.tuple_type is tuple:
                return BuildTuple(items)
            return Call(Constant(value.tuple_type), [BuildTuple(items)])
        if isinstance(value, ListVariable):
            return BuildList([self.plan(item) for item in value.items])
        if isinstance(value, DictVariable):
            return BuildDict([(Constant(k), self.plan(v)) for k, v in value.items.items()])
        if isinstance(value, ConstantVariable):
            return _constant_plan(value.value)
        if value.source is not None:
            return FromSource(value.source)
        if value.is_python_constant():
            return Constant(value.as_python_constant())
        rebuilt = self._rebuild_callable_or_iterator(value)
        if rebuilt is not None:
            return rebuilt
        raise unsupported(f"returning {value.describe()}, which the rewritten code cannot rebuild")


    def _rebuild_callable_or_iterator(self, value: VariableTracker) -> OutputPlan | None:
        """Values only seen mid-frame (a graph break's stack): bound methods, iterators,
        functions made by the frame."""
        if isinstance(value, (MethodCallVariable, TensorMethodVariable)):
            owner = value.obj if isinstance(value, MethodCallVariable) else value.tensor
            return Call(Constant(getattr), [self.plan(owner), Constant(value.name)])
        if isinstance(value, UserMethodVariable):
            return Call(Constant(types.MethodType), [self.plan(value.fn), self.plan(value.self_var)])
        if isinstance(value, IteratorVariable):
            rest = value.remaining()
            if isinstance(rest, range):
                return Call(Constant(iter), [Constant(rest)])
            return Call(Constant(iter), [BuildTuple([self.plan(item) for item in rest])])
        if isinstance(value, NestedFunctionVariable) and not value.closure \
                and not value.kwdefaults and value.globals_source is ROOT_GLOBALS:
            defaults = BuildTuple([self.plan(d) for d in value.defaults]) if value.defaults \
                else Constant(None)
            # globals() called by the rewritten frame is the frame's own globals dict.
            return Call(Constant(types.FunctionType),
                        [Constant(value.code), Call(Constant(globals)),
                         Constant(value.code.co_name), defaults])
        return None


def _constant_plan(value) -> OutputPlan:
    # Mutable constants must be rebuilt per call: the caller may mutate the result.
    if type(value) is list:
        return BuildList([_constant_plan(v) for v in value])
    if type(value) is dict:
        return BuildDict([(Constant(k), _constant_plan(v)) for k, v in value.items()])
    if type(value) is set:
        return Call(Constant(set), [Constant(tuple(value))])
    return Constant(value)
