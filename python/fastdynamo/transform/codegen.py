"""Bytecode for the transformed code of a captured frame.

When the translator captured a whole frame into one FX graph, the frame's new code
is: load the compiled callable (stored in the frame's globals under
``compiled_fn_name``), call it with the graph inputs (each a
:mod:`~fastdynamo.guards.sources` source), perform the side effects and rebuild the
function's return value from an *output plan* (:mod:`fastdynamo.plans`), and return it.
Each plan, effect and source type has one emitting rule (``_PLAN_RULES``, ...).

The native runtime runs the result as ``FunctionType(new_code, frame_globals, name,
None, original_function.__closure__)`` with the frame's arguments, so the parameter
list and ``co_freevars`` are the original's, and filename, names and first line are
kept so tracebacks point at user source.

>>> def f(x, y):
...     return (x + y, [x, 3])
>>> from fastdynamo.guards.sources import LocalSource
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
from collections import Counter
from types import CodeType
from typing import Any, Sequence

from ..bytecode import (
    Instruction,
    assemble,
    create_call,
    create_call_function,
    create_instruction,
    create_load_attr,
    create_load_closure,
    create_load_const,
    create_load_global,
    instructions_from_code,
    parameter_names,
    version,
)
from ..guards.sources import (
    AttrSource,
    BuiltinSource,
    CallSource,
    ClosureSource,
    DictItemsSource,
    GenericAttrSource,
    GlobalSource,
    ItemSource,
    LocalSource,
    Source,
    TypeSource,
    WeakRefCallSource,
    dict_items_of,
)
from ..plans import (
    BuildDict,
    BuildList,
    BuildSet,
    BuildSlice,
    BuildTuple,
    Call,
    Constant,
    Effect,
    FrameCell,
    FromSource,
    GraphOutput,
    OutputPlan,
    ReplaceDict,
    ReplaceList,
    SetCellContents,
    Shared,
    StoreAttr,
    StoreDeref,
    StoreGlobal,
    plan_nodes,
    uses_graph_outputs,
)

# Local holding the tuple returned by the compiled callable; the leading
# underscores keep it clear of user parameter names.
GRAPH_OUTPUTS_LOCAL = "___graph_outputs"


# ---------------------------------------------------------------- emitting rules

class _Emitter:
    """Turns sources and plans into instructions for one transformed code object.

    Each node type has one rule in ``_SOURCE_RULES`` / ``_PLAN_RULES`` / ``_EFFECT_RULES``.
    ``entry_values`` maps sources to the locals holding the values they had before any
    effect ran; ``shared_locals`` maps the keys of :class:`Shared` plans used more than
    once to the locals that keep them.
    """

    def __init__(self, original: CodeType, cells_made: bool = False):
        self.original = original
        self.parameters = parameter_names(original)
        # With ``cells_made`` the code runs MAKE_CELL first (graph_break.py): an argument
        # captured by a closure is then read from its cell.
        self.cell_parameters = frozenset(original.co_cellvars) & set(self.parameters) \
            if cells_made else frozenset()
        self.entry_values: dict[Source, str] = {}
        self.shared_locals: dict[int, str] = {}
        self._shared_seen: set[int] = set()

    def source(self, source: Source) -> list[Instruction]:
        return _rule_for(_SOURCE_RULES, source)(self, source)

    def plan(self, plan: OutputPlan) -> list[Instruction]:
        return _rule_for(_PLAN_RULES, plan)(self, plan)

    def effect(self, effect: Effect) -> list[Instruction]:
        return _rule_for(_EFFECT_RULES, effect)(self, effect)

    def plans(self, plans: Sequence[OutputPlan]) -> list[Instruction]:
        return [inst for plan in plans for inst in self.plan(plan)]

    # sources ---------------------------------------------------------------
    def local(self, source: LocalSource) -> list[Instruction]:
        name = source.local_name
        if name in self.cell_parameters:
            return [create_instruction("LOAD_DEREF", argval=name)]
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

    def generic_attr(self, source: GenericAttrSource) -> list[Instruction]:
        # ``object.__getattribute__`` as a constant, like ``type`` below.
        return create_call_function([create_load_const(object.__getattribute__)],
                                    [self.source(source.base), [create_load_const(source.attr)]])

    def item(self, source: ItemSource) -> list[Instruction]:
        return self.source(source.base) + [create_load_const(source.key),
                                           create_instruction("BINARY_SUBSCR")]

    def dict_items_of(self, source: DictItemsSource) -> list[Instruction]:
        return create_call_function([create_load_const(dict_items_of)], [self.source(source.base)])

    def call_of(self, source: CallSource) -> list[Instruction]:
        return create_call_function([create_load_const(source.function)], [self.source(source.base)])

    def type_of(self, source: TypeSource) -> list[Instruction]:
        # The builtin ``type`` itself as a constant: a global named ``type`` in user
        # code must not change what the guard saw.
        return create_call_function([create_load_const(type)], [self.source(source.base)])

    def weakref_call(self, source: WeakRefCallSource) -> list[Instruction]:
        # the guard checked that the base is exactly a weakref.ref: calling it runs no user code
        return create_call_function(self.source(source.base), [])

    # plans -----------------------------------------------------------------
    def graph_output(self, plan: GraphOutput) -> list[Instruction]:
        return [create_instruction("LOAD_FAST", argval=GRAPH_OUTPUTS_LOCAL),
                create_load_const(plan.index), create_instruction("BINARY_SUBSCR")]

    def constant(self, plan: Constant) -> list[Instruction]:
        return [create_load_const(plan.value)]

    def from_source(self, plan: FromSource) -> list[Instruction]:
        if plan.source in self.entry_values:
            return [create_instruction("LOAD_FAST", argval=self.entry_values[plan.source])]
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
        return create_call_function(self.plan(plan.function), [self.plan(v) for v in values], names)

    def frame_cell(self, plan: FrameCell) -> list[Instruction]:
        return [create_load_closure(plan.name)]

    def shared(self, plan: Shared) -> list[Instruction]:
        local = self.shared_locals.get(plan.key)
        if plan.key in self._shared_seen:
            if local is None:
                raise ValueError(f"Shared plan {plan.key} used again but not counted in advance")
            return [create_instruction("LOAD_FAST", argval=local)]
        self._shared_seen.add(plan.key)
        insts = self.plan(plan.plan)
        if local is not None:
            insts += [create_instruction("COPY", arg=1), create_instruction("STORE_FAST", argval=local)]
        return insts

    # effects ---------------------------------------------------------------
    def store_attr(self, effect: StoreAttr) -> list[Instruction]:
        return [*self.plan(effect.value), *self.plan(effect.obj),
                create_instruction("STORE_ATTR", argval=effect.name)]

    def store_global(self, effect: StoreGlobal) -> list[Instruction]:
        return [*self.plan(effect.value), create_instruction("STORE_GLOBAL", argval=effect.name)]

    def store_deref(self, effect: StoreDeref) -> list[Instruction]:
        if effect.name not in self.original.co_freevars:
            raise ValueError(f"{effect!r}: not a free variable of {self.original.co_name}")
        return [*self.plan(effect.value), create_instruction("STORE_DEREF", argval=effect.name)]

    def set_cell_contents(self, effect: SetCellContents) -> list[Instruction]:
        return self.store_attr(StoreAttr(effect.cell, "cell_contents", effect.value))

    def replace_list(self, effect: ReplaceList) -> list[Instruction]:
        whole = BuildSlice(Constant(None), Constant(None))
        return [*self.plan(effect.value), *self.plan(effect.obj), *self.plan(whole),
                create_instruction("STORE_SUBSCR")]

    def replace_dict(self, effect: ReplaceDict) -> list[Instruction]:
        # dict.clear / dict.pop / dict.update as constants: the target is an exact dict (guarded).
        removals = [Call(Constant(dict.clear), [effect.obj])] if effect.deleted is None else \
            [Call(Constant(dict.pop), [effect.obj, Constant(key), Constant(None)]) for key in effect.deleted]
        code = []
        for call in [*removals, Call(Constant(dict.update), [effect.obj, effect.value])]:
            code += [*self.plan(call), create_instruction("POP_TOP")]
        return code


_SOURCE_RULES = {
    LocalSource: _Emitter.local,
    ClosureSource: _Emitter.closure,
    GlobalSource: _Emitter.global_,
    BuiltinSource: _Emitter.builtin,
    AttrSource: _Emitter.attr,
    GenericAttrSource: _Emitter.generic_attr,
    ItemSource: _Emitter.item,
    TypeSource: _Emitter.type_of,
    WeakRefCallSource: _Emitter.weakref_call,
    DictItemsSource: _Emitter.dict_items_of,
    CallSource: _Emitter.call_of,
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
    Shared: _Emitter.shared,
    FrameCell: _Emitter.frame_cell,
}
_EFFECT_RULES = {
    StoreAttr: _Emitter.store_attr,
    StoreGlobal: _Emitter.store_global,
    StoreDeref: _Emitter.store_deref,
    SetCellContents: _Emitter.set_cell_contents,
    ReplaceList: _Emitter.replace_list,
    ReplaceDict: _Emitter.replace_dict,
}


def _rule_for(rules: dict, node: Any):
    for cls in type(node).__mro__:
        if cls in rules:
            return rules[cls]
    raise TypeError(f"no codegen rule for {node!r}")


# ---------------------------------------------------------------- public API

def load_source(source: Source, original: CodeType, cells_made: bool = False) -> list[Instruction]:
    """Instructions that push the value of ``source`` in a transformed version of
    ``original`` (arguments as plain locals, free variables as in ``original``).

    >>> from fastdynamo.guards.sources import AttrSource, LocalSource
    >>> def f(self): pass
    >>> [i.short() for i in load_source(AttrSource(LocalSource(0, "self"), "w"), f.__code__)]
    ["LOAD_FAST 'self'", "LOAD_ATTR 'w'"]
    """
    return _Emitter(original, cells_made).source(source)


# Locals of the transformed code; the leading underscores keep them clear of user names.
ENTRY_VALUE_LOCAL = "___entry_value_{}"
SHARED_LOCAL = "___shared_{}"


def effect_instructions(original: CodeType, effects: Sequence[Effect],
                        then: Sequence[OutputPlan] = (), cells_made: bool = False) -> list[Instruction]:
    """Instructions that perform ``effects`` in order, then push each plan of ``then``.

    Run after the compiled callable, whose result is in the local ``GRAPH_OUTPUTS_LOCAL``
    when a plan reads it. A :class:`FromSource` means the value the source had when the
    frame started, so when there are effects every source they or ``then`` read (other
    than an argument) is loaded first, before any effect can change it (``a.x, a.y =
    a.y, a.x``). A :class:`Shared` plan used more than once is built once.

    >>> from fastdynamo.guards.sources import LocalSource
    >>> def f(obj): pass
    >>> obj = FromSource(LocalSource(0, "obj"))
    >>> [i.short() for i in effect_instructions(f.__code__, [StoreAttr(obj, "n", Constant(1))])]
    ['LOAD_CONST 1', "LOAD_FAST 'obj'", "STORE_ATTR 'n'"]
    """
    emitter = _Emitter(original, cells_made)
    roots = [*effects, *then]
    insts: list[Instruction] = []
    if effects:
        for node in (n for root in roots for n in plan_nodes(root)):
            if (isinstance(node, FromSource) and not isinstance(node.source, LocalSource)
                    and node.source not in emitter.entry_values):
                local = ENTRY_VALUE_LOCAL.format(len(emitter.entry_values))
                insts += emitter.source(node.source)
                insts.append(create_instruction("STORE_FAST", argval=local))
                emitter.entry_values[node.source] = local
    uses = Counter(node.key for root in roots for node in plan_nodes(root) if isinstance(node, Shared))
    emitter.shared_locals = {key: SHARED_LOCAL.format(key) for key, count in uses.items() if count > 1}
    for effect in effects:
        insts += emitter.effect(effect)
    for plan in then:
        insts += emitter.plan(plan)
    return insts


def transformed_code(original: CodeType, *, compiled_fn_name: str,
                     graph_inputs: Sequence[Source], output: OutputPlan,
                     effects: Sequence[Effect] = (), lineno: int | None = None,
                     fallback: CodeType | None = None, grad_mode: bool = True,
                     may_catch: bool = True) -> CodeType:
    """Code that calls ``compiled_fn_name(*graph_inputs)``, performs ``effects`` and
    returns ``output``.

    The result keeps ``original``'s parameters, ``co_freevars``, filename, names and
    first line; it has no cell variables and is never a generator. Every instruction
    is attributed to ``lineno`` (default: the first line of the body), so an error
    raised by the compiled callable shows the user's file and function. With a
    ``fallback`` (:mod:`fastdynamo.transform.fallback`), an exception raised by the graph call
    runs the frame again as Python, in ``grad_mode`` (the frame's). See the module docstring for an example.
    """
    from .fallback import protect

    emitter = _Emitter(original)
    body: list[Instruction] = [create_load_global(compiled_fn_name, push_null=True)]
    for source in graph_inputs:
        body += emitter.source(source)
    body += create_call(len(graph_inputs))
    if any(uses_graph_outputs(node) for node in (*effects, output)):
        body.append(create_instruction("STORE_FAST", argval=GRAPH_OUTPUTS_LOCAL))
    else:
        body.append(create_instruction("POP_TOP"))
    handler = [] if fallback is None else protect(
        list(body), original, fallback, lambda name: [create_instruction("LOAD_FAST", argval=name)],
        grad_mode, may_catch)
    body += effect_instructions(original, effects, then=[output])
    body.append(create_instruction("RETURN_VALUE"))
    body += handler

    line = lineno if lineno is not None else _first_body_line(original)
    for inst in body:
        inst.positions = dis.Positions(line, line, None, None)
    head = prelude(original)
    docstring = original.co_consts[0] if original.co_consts and isinstance(
        original.co_consts[0], str) else None
    return assemble(
        head + body,
        original,
        co_consts=(docstring,) + ((fallback,) if fallback is not None else ()),
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
