"""Turning the symbolic return value into graph outputs and a codegen output plan.

Tensors become graph outputs (``GraphOutput(i)``); constants are baked in; containers
are rebuilt; values the frame received (graph inputs included) are reloaded from their
source.
"""
from __future__ import annotations

import itertools
import types
import weakref

import torch

from ..exc import unsupported
from ..plans import (
    BuildDict,
    BuildList,
    BuildTuple,
    Call,
    Constant,
    FrameCell,
    FromSource,
    GraphOutput,
    OutputPlan,
    Shared,
)
from .builder import ROOT_GLOBALS
from .variables.base import MethodCallVariable, VariableTracker
from .variables.constant import ConstantVariable
from .variables.containers import (
    DictVariable,
    IteratorVariable,
    ListIteratorVariable,
    ListVariable,
    SetVariable,
    TupleVariable,
)
from .variables.dict_views import VIEW_METHODS, DictIteratorVariable, DictViewVariable, advanced
from .variables.functions import NestedFunctionVariable, UserMethodVariable
from .variables.iterators import LazyIteratorVariable
from .variables.misc import ExceptionVariable
from .variables.symbolic import SymbolicValue
from .variables.tensor import TensorMethodVariable, TensorVariable
from .variables.user_objects import NewObjectVariable, WeakRefVariable, rebuild_object, set_attributes


class OutputPlanBuilder:
    """Collects the FX nodes the rewritten code needs, in order, without duplicates.

    One builder plans everything rebuilt after one graph (the return value, side
    effects), so a container the trace made and left in two places (returned and
    stored in an attribute) is one :class:`Shared` plan: one object, as in eager.
    """

    def __init__(self, frame_cells: dict[int, str] | None = None, size_node=None) -> None:
        self.nodes: list[torch.fx.Node] = []
        # OutputGraph.size_node: a symbolic size as a graph node (a graph output), or
        # its value when it cannot be computed in the graph.
        self.size_node = size_node
        self._shared: dict[int, tuple[VariableTracker, Shared | None]] = {}
        # id(CellVariable) -> name, for the cells of the frame being rewritten: closures
        # over them can be rebuilt (graph_break.py passes them).
        self.frame_cells = frame_cells or {}

    def plan(self, value: VariableTracker) -> OutputPlan:
        if isinstance(value, TensorVariable):
            if value.source is not None:
                return FromSource(value.source)  # a graph input: the caller's own tensor
            if value.node not in self.nodes:
                self.nodes.append(value.node)
            return GraphOutput(self.nodes.index(value.node))
        if isinstance(value, (ListVariable, DictVariable, TupleVariable)) and value.source is not None:
            return FromSource(value.source)  # the caller's own object (mutations are effects)
        if isinstance(value, (TupleVariable, ListVariable, DictVariable)):
            return self._shared_plan(value)
        if isinstance(value, ConstantVariable):
            return _constant_plan(value.value)
        if isinstance(value, SymbolicValue) and self.size_node is not None:
            node = self.size_node(value.sym)
            if not isinstance(node, torch.fx.Node):
                return Constant(node)
            if node not in self.nodes:
                self.nodes.append(node)
            return GraphOutput(self.nodes.index(node))
        container_part = self._view_or_iterator(value)
        if container_part is not None:
            return container_part
        if value.source is not None:
            return FromSource(value.source)
        if value.is_python_constant():
            return Constant(value.as_python_constant())
        if isinstance(value, NewObjectVariable):
            return self._shared_plan(value, self._object_plan)  # one object, as in eager
        if isinstance(value, WeakRefVariable):
            return self._shared_plan(value, lambda ref: Call(Constant(weakref.ref), [self.plan(ref.referent)]))
        rebuilt = self._rebuild_callable_or_iterator(value)
        if rebuilt is not None:
            return rebuilt
        raise unsupported(f"{value.describe()} leaves the frame, and the rewritten code cannot rebuild it")

    def _shared_plan(self, value: VariableTracker, make=None) -> Shared:
        known = self._shared.get(id(value))
        if known is not None:
            if known[1] is None:
                raise unsupported(f"{value.describe()} contains itself")
            return known[1]
        self._shared[id(value)] = (value, None)  # keeps value alive: its id stays its own
        plan = Shared(len(self._shared) - 1, (make or self._container_plan)(value))
        self._shared[id(value)] = (value, plan)
        return plan

    def _container_plan(self, value: VariableTracker) -> OutputPlan:
        if isinstance(value, TupleVariable):
            items = [self.plan(item) for item in value.items]
            if value.tuple_type is tuple:
                return BuildTuple(items)
            if hasattr(value.tuple_type, "_fields"):
                # A namedtuple's own __new__ takes the fields one by one (and a subclass
                # may override it): the traced object is rebuilt as it is.
                return Call(Constant(tuple.__new__), [Constant(value.tuple_type), BuildTuple(items)])
            return Call(Constant(value.tuple_type), [BuildTuple(items)])  # structseq
        if isinstance(value, ListVariable):
            return BuildList([self.plan(item) for item in value.items])
        assert isinstance(value, DictVariable), value.describe()
        return value.rebuilt(BuildDict([(Constant(k), self.plan(v)) for k, v in value.items.items()]), self.plan)


    def _view_or_iterator(self, value: VariableTracker) -> OutputPlan | None:
        """Dict views of the rebuilt dict, and iterators rebuilt in their state (one
        object, shared by every place that holds it)."""
        if isinstance(value, DictViewVariable):
            return Call(Constant(VIEW_METHODS[value.kind]), [self.plan(value.dict_var)])
        if isinstance(value, LazyIteratorVariable):
            return self._shared_plan(value, lambda lazy: lazy.rebuild(self.plan))
        if isinstance(value, DictIteratorVariable):
            return self._shared_plan(value, self._dict_iterator_plan)
        if hasattr(value, "rebuilt_plan"):  # a deque the frame made
            return self._shared_plan(value, lambda made: made.rebuilt_plan(self.plan))
        if isinstance(value, SetVariable) and value.source is None:  # a new set per call
            return self._shared_plan(value, lambda s: Call(Constant(set), [Constant(tuple(s.items))]))
        return None

    def _dict_iterator_plan(self, value: DictIteratorVariable) -> OutputPlan:
        if value.finished:  # exhausted for good, like CPython's
            return Call(Constant(iter), [Call(Constant(VIEW_METHODS[value.kind]), [BuildDict([])])])
        view = Call(Constant(VIEW_METHODS[value.kind]), [self.plan(value.dict_var)])
        fresh = Call(Constant(reversed if value.reverse else iter), [view])
        return Call(Constant(advanced), [fresh, Constant(value.index)])

    def _rebuild_callable_or_iterator(self, value: VariableTracker) -> OutputPlan | None:
        """Values only seen mid-frame (a graph break's stack): bound methods, iterators,
        functions made by the frame."""
        if isinstance(value, (MethodCallVariable, TensorMethodVariable)):
            owner = value.obj if isinstance(value, MethodCallVariable) else value.tensor
            return Call(Constant(getattr), [self.plan(owner), Constant(value.name)])
        if isinstance(value, ExceptionVariable):
            return Call(Constant(value.cls), [Constant(a) for a in value.args])
        if isinstance(value, UserMethodVariable):
            return Call(Constant(types.MethodType), [self.plan(value.fn), self.plan(value.self_var)])
        if isinstance(value, ListIteratorVariable):
            # Over the list itself (shared with any local holding it), read live as
            # CPython's list iterator does: islice skips what the trace consumed.
            return Call(Constant(itertools.islice),
                        [self.plan(value.sequence), Constant(value.index), Constant(None)])
        if isinstance(value, IteratorVariable) and value.live:
            rest = value.remaining()
            if isinstance(rest, range):
                return Call(Constant(iter), [Constant(rest)])
            return Call(Constant(iter), [BuildTuple([self.plan(item) for item in rest])])
        if isinstance(value, NestedFunctionVariable) and not value.kwdefaults \
                and not getattr(value, "has_annotations", False) \
                and value.globals_source is ROOT_GLOBALS \
                and all(id(cell) in self.frame_cells for cell in value.closure):
            return self._shared_plan(value, self._function_plan)  # one function, as in eager
        return None

    def _object_plan(self, value: NewObjectVariable) -> OutputPlan:
        # the class, then its attributes in insertion order (user_objects.rebuild_object)
        return Call(Constant(rebuild_object), [Constant(value.cls), Constant(tuple(value.attrs)),
                                               BuildTuple([self.plan(v) for v in value.attrs.values()])])

    def _function_plan(self, value: NestedFunctionVariable) -> OutputPlan:
        defaults = BuildTuple([self.plan(d) for d in value.defaults]) if value.defaults \
            else Constant(None)
        closure = BuildTuple([FrameCell(self.frame_cells[id(c)]) for c in value.closure]) \
            if value.closure else Constant(None)
        # globals() called by the rewritten frame is the frame's own globals dict.
        function = Call(Constant(types.FunctionType),
                        [Constant(value.code), Call(Constant(globals)), Constant(value.code.co_name),
                         defaults, closure])
        if not value.attrs:
            return function
        # then the attributes the frame set (functools.wraps), in order
        return Call(Constant(set_attributes), [function, Constant(tuple(value.attrs)),
                                               BuildTuple([self.plan(v) for v in value.attrs.values()])])


def _constant_plan(value) -> OutputPlan:
    from .variables.symbolic import concrete, has_symbolic

    if has_symbolic(value):
        # A symbolic size leaving the graph is specialised (a guard on its value).
        value = concrete(value)
    # Mutable constants must be rebuilt per call: the caller may mutate the result.
    if type(value) is list:
        return BuildList([_constant_plan(v) for v in value])
    if type(value) is dict:
        return BuildDict([(Constant(k), _constant_plan(v)) for k, v in value.items()])
    if type(value) is set:
        return Call(Constant(set), [Constant(tuple(value))])
    return Constant(value)
