"""Plans: what capture hands to code generation, as plain data.

Capture (:mod:`fastdynamo.capture`) produces these; code generation
(:mod:`fastdynamo.transform`) consumes them; neither imports the other, and this module
imports nothing of the package.

An **output plan** says how the rewritten code rebuilds a value after the graph ran::

    GraphOutput(i)                   item i of the tuple the compiled callable returns
    Constant(value)                  a constant (should be immutable: it is shared)
    FromSource(source)               a value read from the frame, e.g. an argument
    BuildTuple/BuildList/BuildSet    containers of plans
    BuildDict([(key, value), ...])   a dict, in insertion order
    BuildSlice(start, stop, step)    a slice
    Call(function, args, kwargs)     a call, e.g. to rebuild a torch.Size
    Shared(key, plan)                one object used in several places (built once)
    FrameCell(name)                  the frame's own cell ``name`` (to rebuild a closure)

**Effects** are the frame's side effects, performed in order after the graph ran and
before the return value is rebuilt::

    StoreAttr(obj, name, value)      obj.name = value
    StoreGlobal(name, value)         a global of the frame
    StoreDeref(name, value)          a free variable of the frame (its closure cell)
    SetCellContents(cell, value)     cell.cell_contents = value (an inlined closure's cell)
    ReplaceList(obj, value)          obj[:] = value
    ReplaceDict(obj, value)          obj.clear(); obj.update(value)

A **break state** (:class:`BreakState`) is the frame's state just before a graph break,
in plans: the stack (with :data:`NULL_VALUE` and :class:`ReenterGradMode` slots), the
locals that changed, the frame's cells, the pending effects and what the code after the
break needs to know about them.

>>> [type(n).__name__ for n in plan_nodes(BuildList([GraphOutput(0), Constant(1)]))]
['BuildList', 'GraphOutput', 'Constant']
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Iterator, Sequence, Union

# ---------------------------------------------------------------- output plans

@dataclass(frozen=True)
class GraphOutput:
    """Item ``index`` of the tuple returned by the compiled callable."""

    index: int


@dataclass(frozen=True)
class Constant:
    value: Any


@dataclass(frozen=True)
class FromSource:
    source: Any  # a fastdynamo.guards.sources.Source (plans import nothing of the package)


def _as_tuple(obj, field: str) -> None:
    object.__setattr__(obj, field, tuple(getattr(obj, field)))


@dataclass(frozen=True)
class BuildTuple:
    items: Sequence["OutputPlan"]

    def __post_init__(self):
        _as_tuple(self, "items")


@dataclass(frozen=True)
class BuildList:
    items: Sequence["OutputPlan"]

    def __post_init__(self):
        _as_tuple(self, "items")


@dataclass(frozen=True)
class BuildSet:
    items: Sequence["OutputPlan"]

    def __post_init__(self):
        _as_tuple(self, "items")


@dataclass(frozen=True)
class BuildDict:
    """``{key: value, ...}``; ``items`` is a sequence of ``(key_plan, value_plan)``."""

    items: Sequence[tuple["OutputPlan", "OutputPlan"]]

    def __post_init__(self):
        object.__setattr__(self, "items", tuple((k, v) for k, v in self.items))


@dataclass(frozen=True)
class BuildSlice:
    start: "OutputPlan" = Constant(None)
    stop: "OutputPlan" = Constant(None)
    step: "OutputPlan | None" = None


@dataclass(frozen=True)
class Call:
    """``function(*args, **kwargs)``; ``kwargs`` is a sequence of ``(name, plan)``."""

    function: "OutputPlan"
    args: Sequence["OutputPlan"] = ()
    kwargs: Sequence[tuple[str, "OutputPlan"]] = ()

    def __post_init__(self):
        _as_tuple(self, "args")
        object.__setattr__(self, "kwargs", tuple((k, v) for k, v in self.kwargs))


@dataclass(frozen=True)
class Shared:
    """An object the frame made once and left in several places (a new list stored in an
    attribute and returned): built at its first use, kept in a local, reloaded after.
    ``key`` identifies it among the plans emitted together."""

    key: int
    plan: "OutputPlan"


@dataclass(frozen=True)
class FrameCell:
    """The cell of the frame's own cell or free variable ``name`` (``LOAD_CLOSURE``), to
    rebuild a closure the frame made."""

    name: str


OutputPlan = Union[GraphOutput, Constant, FromSource, BuildTuple, BuildList, BuildSet,
                   BuildDict, BuildSlice, Call, Shared, FrameCell]


# ---------------------------------------------------------------- effects

@dataclass(frozen=True)
class StoreAttr:
    """``obj.name = value``."""

    obj: OutputPlan
    name: str
    value: OutputPlan


@dataclass(frozen=True)
class StoreGlobal:
    """``global name; name = value`` in the frame's globals."""

    name: str
    value: OutputPlan


@dataclass(frozen=True)
class StoreDeref:
    """``nonlocal name; name = value`` for a free variable of the compiled frame."""

    name: str
    value: OutputPlan


@dataclass(frozen=True)
class SetCellContents:
    """``cell.cell_contents = value`` (a closure cell of an inlined function)."""

    cell: OutputPlan
    value: OutputPlan


@dataclass(frozen=True)
class ReplaceList:
    """``obj[:] = value``: the list keeps its identity and gets its final items."""

    obj: OutputPlan
    value: OutputPlan


@dataclass(frozen=True)
class ReplaceDict:
    """``obj.clear(); obj.update(value)``: the dict keeps its identity and gets its final
    items in their final order. With ``deleted`` (a tuple of keys), ``obj.pop(key, None)``
    for each instead of the clear: keys never deleted keep the caller's order and the
    keys (re)inserted follow in ``value``'s order, as CPython's dict would have them
    whatever the caller's order was."""

    obj: OutputPlan
    value: OutputPlan
    deleted: Sequence[Any] | None = None

    def __post_init__(self):
        if self.deleted is not None:
            _as_tuple(self, "deleted")


Effect = Union[StoreAttr, StoreGlobal, StoreDeref, SetCellContents, ReplaceList, ReplaceDict]
_NODE_TYPES = (GraphOutput, Constant, FromSource, BuildTuple, BuildList, BuildSet, BuildDict,
               BuildSlice, Call, Shared, FrameCell, StoreAttr, StoreGlobal, StoreDeref, SetCellContents,
               ReplaceList, ReplaceDict)



def plan_nodes(node: OutputPlan | Effect) -> Iterator[OutputPlan | Effect]:
    """``node`` and every plan below it, depth first (not into constants or sources).

    >>> [type(n).__name__ for n in plan_nodes(BuildList([GraphOutput(0), Constant(1)]))]
    ['BuildList', 'GraphOutput', 'Constant']
    """
    yield node
    if isinstance(node, (Constant, FromSource, GraphOutput)):
        return
    for item in fields(node):
        yield from _nodes_in(getattr(node, item.name))


def _nodes_in(value: Any) -> Iterator[OutputPlan | Effect]:
    if isinstance(value, _NODE_TYPES):
        yield from plan_nodes(value)
    elif isinstance(value, tuple):
        for item in value:
            yield from _nodes_in(item)


def uses_graph_outputs(plan: OutputPlan | Effect) -> bool:
    """Whether ``plan`` (or an effect) reads any item of the compiled callable's result."""
    return any(isinstance(node, GraphOutput) for node in plan_nodes(plan))


# ---------------------------------------------------------------- the state at a graph break

@dataclass(frozen=True)
class NullValue:
    """The NULL that CPython pushes below a callable (``PUSH_NULL``, ``LOAD_GLOBAL``'s bit)."""


NULL_VALUE = NullValue()


@dataclass(frozen=True)
class ReenterGradMode:
    """A traced ``with torch.no_grad()/enable_grad():`` block open at the break: the
    rewritten code restores ``prior`` (the mode the block saw at entry) and enters a
    real context that sets ``target``, so the real ``__exit__`` is on the stack."""

    target: bool
    prior: bool


StackValue = Union[OutputPlan, NullValue, ReenterGradMode]


@dataclass(frozen=True)
class BoundMethodOnStack:
    """A bound method at stack ``position`` whose object the locals ``holders`` hold:
    a resume function can rebuild it from one of them (``holder.attr``), so the object
    reaches it by one path only."""

    position: int
    attr: str
    holders: tuple[str, ...]


@dataclass
class BreakState:
    """The frame just before instruction ``index`` (of the decoded code) ran.

    ``locals`` are the locals whose value differs from the frame's argument of the same
    name; ``cells`` the frame's cell variables holding a value; ``bound_locals`` every
    local bound at the break (changed or not); ``deleted_arguments`` the arguments the
    frame deleted. ``iterator_has_items`` says the value on top of the stack is an
    iterator with items left (a ``for`` loop entered there runs its body).
    """

    index: int
    stack: tuple[StackValue, ...]
    locals: tuple[tuple[str, OutputPlan], ...]
    cells: tuple[tuple[str, OutputPlan], ...]
    effects: tuple[Effect, ...]
    bound_locals: frozenset[str]
    deleted_arguments: tuple[str, ...] = ()
    methods: tuple[BoundMethodOnStack, ...] = ()
    kw_names: tuple[str, ...] = ()
    iterator_has_items: bool = False
    grad_mode_at_start: bool = True
    grad_mode_at_stop: bool = True


__all__ = [
    "BoundMethodOnStack", "BreakState", "BuildDict", "BuildList", "BuildSet", "BuildSlice",
    "BuildTuple", "Call", "Constant", "Effect", "FrameCell", "FromSource", "GraphOutput",
    "NULL_VALUE", "NullValue", "OutputPlan", "ReenterGradMode", "ReplaceDict", "ReplaceList",
    "SetCellContents", "Shared", "StackValue", "StoreAttr", "StoreDeref", "StoreGlobal",
    "plan_nodes", "uses_graph_outputs",
]
