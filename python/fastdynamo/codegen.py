"""Bytecode for the transformed code of a captured frame.

When the translator captured a whole frame into one FX graph, the frame's new code
is: load the compiled callable (stored in the frame's globals under
``compiled_fn_name``), call it with the graph inputs (each a :mod:`~fastdynamo.sources`
source), rebuild the function's return value from an *output plan* and return it.

An output plan is a tree of small dataclasses::

    GraphOutput(i)                   item i of the tuple the compiled callable returns
    Constant(value)                  a constant (should be immutable: it is shared)
    FromSource(source)               a value read from the frame, e.g. an argument
    BuildTuple/BuildList/BuildSet    containers of plans
    BuildDict([(key, value), ...])   a dict, in insertion order
    BuildSlice(start, stop, step)    a slice
    Call(function, args, kwargs)     a call, e.g. to rebuild a torch.Size

The native runtime runs the result as ``FunctionType(new_code, frame_globals, name,
None, original_function.__closure__)`` with the frame's arguments, so the parameter
list and ``co_freevars`` are the original's, and filename, names and first line are
kept so tracebacks point at user source.

>>> def f(x, y):
...     return (x + y, [x, 3])
>>> from fastdynamo.sources import LocalSource
>>> code = transformed_code(
...     f.__code__, compiled_fn_name="__compiled_fn_0",
...     graph_inputs=[LocalSource(0, "x"), LocalSource(1, "y")],
...     output=BuildTuple([GraphOutput(0), BuildList([FromSource(LocalSource(0, "x")),
...                                                    Constant(3)])]))
>>> g = type(f)(code, {"__compiled_fn_0": lambda x, y: (x + y,)}, "f", None, None)
>>> g(1, 2)
(3, [1, 3])
"""
from __future__ import annotations

import dis
from dataclasses import dataclass
from types import CodeType
from typing import Any, Sequence, Union

from .bytecode import (
    Instruction,
    assemble,
    create_call,
    create_instruction,
    create_load_attr,
    create_load_const,
    create_load_global,
    create_push_null,
    instructions_from_code,
)
from .bytecode import version
from .sources import (
    AttrSource,
    BuiltinSource,
    ClosureSource,
    GlobalSource,
    ItemSource,
    LocalSource,
    Source,
    TypeSource,
)

# Local holding the tuple returned by the compiled callable; the leading
# underscores keep it clear of user parameter names.
GRAPH_OUTPUTS_LOCAL = "___graph_outputs"


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
    source: Source


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


OutputPlan = Union[GraphOutput, Constant, FromSource, BuildTuple, BuildList, BuildSet,
                   BuildDict, BuildSlice, Call]


# ---------------------------------------------------------------- emitting rules

class _Emitter:
    """Turns sources and plans into instructions for one transformed code object.

    Each node type has one rule in ``_SOURCE_RULES`` / ``_PLAN_RULES``.
    """

    def __init__(self, original: CodeType):
        self.original = original
        self.parameters = parameter_names(original)

    def source(self, source: Source) -> list[Instruction]:
        return _rule_for(_SOURCE_RULES, source)(self, source)

    def plan(self, plan: OutputPlan) -> list[Instruction]:
        return _rule_for(_PLAN_RULES, plan)(self, plan)

    def plans(self, plans: Sequence[OutputPlan]) -> list[Instruction]:
        return [inst for plan in plans for inst in self.plan(plan)]

    # sources ---------------------------------------------------------------
    def local(self, source: LocalSource) -> list[Instruction]:
        name = source.local_name
        if name in self.parameters:
            # The transformed code has no cell variables: a captured argument is a
            # plain local there.
            return [create_instruction("LOAD_FAST", argval=name)]
        if name in self.original.co_freevars:
            return [create_instruction("LOAD_DEREF", argval=name)]
        raise ValueError(f"{source!r}: only arguments are set when a frame starts")

    def closure(self, source: ClosureSource) -> list[Instruction]:
        freevars = self.original.co_freevars
        if not 0 <= source.index < len(freevars) or freevars[source.index] != source.free_name:
            raise ValueError(f"{source!r} does not match co_freevars {freevars}")
        return [create_instruction("LOAD_DEREF", argval=source.free_name)]

    def global_(self, source: GlobalSource) -> list[Instruction]:
        return [create_load_global(source.global_name)]

    def builtin(self, source: BuiltinSource) -> list[Instruction]:
        # LOAD_GLOBAL falls back to the builtins; a BuiltinSource is only made for
        # names the globals lack (and guarded so).
        return [create_load_global(source.builtin_name)]

    def attr(self, source: AttrSource) -> list[Instruction]:
        return self.source(source.base) + [create_load_attr(source.attr)]

    def item(self, source: ItemSource) -> list[Instruction]:
        return self.source(source.base) + [create_load_const(source.key),
                                           create_instruction("BINARY_SUBSCR")]

    def type_of(self, source: TypeSource) -> list[Instruction]:
        # The builtin ``type`` itself as a constant: a global named ``type`` in user
        # code must not change what the guard saw.
        return [create_push_null(), create_load_const(type), *self.source(source.base),
                *create_call(1)]

    # plans -----------------------------------------------------------------
    def graph_output(self, plan: GraphOutput) -> list[Instruction]:
        return [create_instruction("LOAD_FAST", argval=GRAPH_OUTPUTS_LOCAL),
                create_load_const(plan.index), create_instruction("BINARY_SUBSCR")]

    def constant(self, plan: Constant) -> list[Instruction]:
        return [create_load_const(plan.value)]

    def from_source(self, plan: FromSource) -> list[Instruction]:
        return self.source(plan.source)

    def tuple_(self, plan: BuildTuple) -> list[Instruction]:
        return self.plans(plan.items) + [create_instruction("BUILD_TUPLE", arg=len(plan.items))]

    def list_(self, plan: BuildList) -> list[Instruction]:
        return self.plans(plan.items) + [create_instruction("BUILD_LIST", arg=len(plan.items))]

    def set_(self, plan: BuildSet) -> list[Instruction]:
        return self.plans(plan.items) + [create_instruction("BUILD_SET", arg=len(plan.items))]

    def dict_(self, plan: BuildDict) -> list[Instruction]:
        insts = [inst for key, value in plan.items for inst in self.plan(key) + self.plan(value)]
        return insts + [create_instruction("BUILD_MAP", arg=len(plan.items))]

    def slice_(self, plan: BuildSlice) -> list[Instruction]:
        parts = [plan.start, plan.stop] + ([plan.step] if plan.step is not None else [])
        return self.plans(parts) + [create_instruction("BUILD_SLICE", arg=len(parts))]

    def call(self, plan: Call) -> list[Instruction]:
        values = list(plan.args) + [value for _, value in plan.kwargs]
        names = tuple(name for name, _ in plan.kwargs)
        return [create_push_null(), *self.plan(plan.function), *self.plans(values),
                *create_call(len(values), names)]


_SOURCE_RULES = {
    LocalSource: _Emitter.local,
    ClosureSource: _Emitter.closure,
    GlobalSource: _Emitter.global_,
    BuiltinSource: _Emitter.builtin,
    AttrSource: _Emitter.attr,
    ItemSource: _Emitter.item,
    TypeSource: _Emitter.type_of,
}
_PLAN_RULES = {
    GraphOutput: _Emitter.graph_output,
    Constant: _Emitter.constant,
    FromSource: _Emitter.from_source,
    BuildTuple: _Emitter.tuple_,
    BuildList: _Emitter.list_,
    BuildSet: _Emitter.set_,
    BuildDict: _Emitter.dict_,
    BuildSlice: _Emitter.slice_,
    Call: _Emitter.call,
}


def _rule_for(rules: dict, node: Any):
    for cls in type(node).__mro__:
        if cls in rules:
            return rules[cls]
    raise TypeError(f"no codegen rule for {node!r}")


# ---------------------------------------------------------------- public API

def parameter_names(code: CodeType) -> tuple[str, ...]:
    """Names of the parameters, in ``localsplus`` order (positional, keyword-only,
    ``*args``, ``**kwargs``).

    >>> def f(a, /, b, *args, c, **kw): pass
    >>> parameter_names(f.__code__)
    ('a', 'b', 'c', 'args', 'kw')
    """
    count = code.co_argcount + code.co_kwonlyargcount
    count += bool(code.co_flags & 0x04) + bool(code.co_flags & 0x08)  # CO_VARARGS, CO_VARKEYWORDS
    return code.co_varnames[:count]


def load_source(source: Source, original: CodeType) -> list[Instruction]:
    """Instructions that push the value of ``source`` in a transformed version of
    ``original`` (arguments as plain locals, free variables as in ``original``).

    >>> from fastdynamo.sources import AttrSource, LocalSource
    >>> def f(self): pass
    >>> [i.short() for i in load_source(AttrSource(LocalSource(0, "self"), "w"), f.__code__)]
    ["LOAD_FAST 'self'", "LOAD_ATTR 'w'"]
    """
    return _Emitter(original).source(source)


def load_plan(plan: OutputPlan, original: CodeType) -> list[Instruction]:
    """Instructions that push the value ``plan`` describes in a transformed version of
    ``original`` (graph outputs are read from ``GRAPH_OUTPUTS_LOCAL``)."""
    return _Emitter(original).plan(plan)


def uses_graph_outputs(plan: OutputPlan) -> bool:
    """Whether ``plan`` reads any item of the compiled callable's result."""
    if isinstance(plan, GraphOutput):
        return True
    if isinstance(plan, (BuildTuple, BuildList, BuildSet)):
        return any(uses_graph_outputs(item) for item in plan.items)
    if isinstance(plan, BuildDict):
        return any(uses_graph_outputs(k) or uses_graph_outputs(v) for k, v in plan.items)
    if isinstance(plan, BuildSlice):
        return any(uses_graph_outputs(p) for p in (plan.start, plan.stop, plan.step)
                   if p is not None)
    if isinstance(plan, Call):
        return any(uses_graph_outputs(p) for p in
                   (plan.function, *plan.args, *(v for _, v in plan.kwargs)))
    return False


def transformed_code(original: CodeType, *, compiled_fn_name: str,
                     graph_inputs: Sequence[Source], output: OutputPlan,
                     lineno: int | None = None) -> CodeType:
    """Code that calls ``compiled_fn_name(*graph_inputs)`` and returns ``output``.

    The result keeps ``original``'s parameters, ``co_freevars``, filename, names and
    first line; it has no cell variables and is never a generator. Every instruction
    is attributed to ``lineno`` (default: the first line of the body), so an error
    raised by the compiled callable shows the user's file and function. See the
    module docstring for an example.
    """
    emitter = _Emitter(original)
    body: list[Instruction] = [create_load_global(compiled_fn_name, push_null=True)]
    for source in graph_inputs:
        body += emitter.source(source)
    body += create_call(len(graph_inputs))
    if uses_graph_outputs(output):
        body.append(create_instruction("STORE_FAST", argval=GRAPH_OUTPUTS_LOCAL))
    else:
        body.append(create_instruction("POP_TOP"))
    body += emitter.plan(output)
    body.append(create_instruction("RETURN_VALUE"))

    line = lineno if lineno is not None else _first_body_line(original)
    for inst in body:
        inst.positions = dis.Positions(line, line, None, None)
    head = prelude(original)
    docstring = original.co_consts[0] if original.co_consts and isinstance(
        original.co_consts[0], str) else None
    return assemble(
        head + body,
        original,
        co_consts=(docstring,),
        co_names=(),
        co_varnames=emitter.parameters,
        co_cellvars=(),
        co_flags=original.co_flags & ~version.GENERATOR_FLAGS,
    )


def prelude(original: CodeType) -> list[Instruction]:
    """``COPY_FREE_VARS`` (the closure is the original function's) and ``RESUME``.

    No ``MAKE_CELL``: the transformed code has no cell variables.
    """
    insts = []
    if original.co_freevars:
        insts.append(create_instruction("COPY_FREE_VARS", arg=len(original.co_freevars)))
        insts[-1].positions = dis.Positions(None, None, None, None)
    resume = create_instruction("RESUME", arg=0)
    resume.positions = dis.Positions(original.co_firstlineno, original.co_firstlineno, None, None)
    return insts + [resume]


def _first_body_line(code: CodeType) -> int:
    insts = instructions_from_code(code)
    body_start = next((i + 1 for i, inst in enumerate(insts) if inst.opname == "RESUME"), 0)
    for inst in insts[body_start:]:
        if inst.lineno is not None:
            return inst.lineno
    return code.co_firstlineno
