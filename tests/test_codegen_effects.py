"""Effects in transformed code: each rule run the way the native runtime runs the code,
values read from sources are the frame's entry values, shared objects are built once."""
from __future__ import annotations

import types

import pytest

from fastdynamo.bytecode import instructions_from_code
from fastdynamo.transform.codegen import (
    BuildDict,
    BuildList,
    BuildTuple,
    Constant,
    FromSource,
    GraphOutput,
    ReplaceDict,
    ReplaceList,
    SetCellContents,
    Shared,
    StoreAttr,
    StoreDeref,
    StoreGlobal,
    effect_instructions,
    transformed_code,
    uses_graph_outputs,
)
from fastdynamo.guards.sources import AttrSource, ClosureSource, GlobalSource, ItemSource, LocalSource

from test_codegen import FN_NAME, check_structure, run_like_runtime

OBJ = FromSource(LocalSource(0, "obj"))


class Obj:
    pass


def target(obj, x):
    return obj


def compile_with(fn, effects, output, graph_inputs=()):
    code = transformed_code(fn.__code__, compiled_fn_name=FN_NAME, graph_inputs=list(graph_inputs),
                            output=output, effects=effects)
    check_structure(fn.__code__, code)
    return code


def opnames(code):
    return [i.opname for i in instructions_from_code(code)]


def test_store_attr_in_order_after_the_graph():
    calls = []

    def graph(x):
        calls.append(("graph", x))
        return (x * 2,)

    obj = Obj()
    effects = [StoreAttr(OBJ, "a", GraphOutput(0)), StoreAttr(OBJ, "b", Constant("k")),
               StoreAttr(OBJ, "c", FromSource(LocalSource(1, "x")))]
    code = compile_with(target, effects, OBJ, [LocalSource(1, "x")])
    assert run_like_runtime(target, code, graph, obj, 5) is obj
    assert vars(obj) == {"a": 10, "b": "k", "c": 5} and calls == [("graph", 5)]


def test_store_global_writes_the_frame_globals():
    def fn(x):
        return x

    code = compile_with(fn, [StoreGlobal("NEW_NAME", GraphOutput(0))], Constant(None), [LocalSource(0, "x")])
    frame_globals = {FN_NAME: lambda x: (x + 1,)}
    types.FunctionType(code, frame_globals, "fn")(1)
    assert frame_globals["NEW_NAME"] == 2


def make_closure():
    count = 0

    def inner(x):
        nonlocal count
        count += x
        return count

    return inner


def test_store_deref_writes_the_frames_own_cell():
    inner = make_closure()
    code = compile_with(inner, [StoreDeref("count", Constant(7))], FromSource(ClosureSource(0, "count")))
    # the return value is read before the store: the value the frame started with
    assert run_like_runtime(inner, code, lambda: (), 1) == 0
    assert inner.__closure__[0].cell_contents == 7
    with pytest.raises(ValueError, match="not a free variable"):
        compile_with(inner, [StoreDeref("x", Constant(1))], Constant(None))


def test_set_cell_contents_of_another_functions_cell():
    inner = make_closure()

    def fn(x):
        return x

    cell = FromSource(ItemSource(AttrSource(GlobalSource("INNER"), "__closure__"), 0))
    code = compile_with(fn, [SetCellContents(cell, Constant(3))], Constant(None))
    types.FunctionType(code, {FN_NAME: lambda: (), "INNER": inner}, "fn")(0)
    assert inner.__closure__[0].cell_contents == 3


def test_replace_list_and_dict_keep_identity():
    def fn(xs, d):
        return xs, d

    xs, d = [1, 2, 3], {"z": 0, "a": 1}
    xs_source, d_source = FromSource(LocalSource(0, "xs")), FromSource(LocalSource(1, "d"))
    effects = [ReplaceList(xs_source, BuildList([Constant(9), xs_source])),
               ReplaceDict(d_source, BuildDict([(Constant("a"), Constant(2)), (Constant("b"), d_source)]))]
    code = compile_with(fn, effects, BuildTuple([xs_source, d_source]))
    out = run_like_runtime(fn, code, lambda: (), xs, d)
    assert out[0] is xs and out[1] is d
    assert xs == [9, xs] and xs[1] is xs
    assert list(d) == ["a", "b"] and d["b"] is d


def test_sources_are_read_before_any_effect():
    # box.a, box.b = box.b, box.a
    obj_a = FromSource(AttrSource(LocalSource(0, "obj"), "a"))
    obj_b = FromSource(AttrSource(LocalSource(0, "obj"), "b"))
    code = compile_with(target, [StoreAttr(OBJ, "a", obj_b), StoreAttr(OBJ, "b", obj_a)],
                        BuildTuple([obj_a, obj_b]))
    obj = Obj()
    obj.a, obj.b = "A", "B"
    assert run_like_runtime(target, code, lambda: (), obj, 0) == ("A", "B")  # entry values
    assert (obj.a, obj.b) == ("B", "A")


def test_shared_plan_is_built_once():
    shared = Shared(0, BuildList([GraphOutput(0)]))
    code = compile_with(target, [StoreAttr(OBJ, "a", shared), StoreAttr(OBJ, "b", shared)], shared,
                        [LocalSource(1, "x")])
    obj = Obj()
    out = run_like_runtime(target, code, lambda x: (x,), obj, 4)
    assert out == [4] and out is obj.a is obj.b
    assert opnames(code).count("BUILD_LIST") == 1


def test_shared_plan_used_once_needs_no_local():
    code = compile_with(target, [], Shared(3, BuildList([Constant(1)])))
    assert "___shared_3" not in code.co_varnames
    assert run_like_runtime(target, code, lambda: (), Obj(), 0) == [1]


def test_no_effects_is_the_plain_return_path():
    plan = BuildTuple([FromSource(AttrSource(LocalSource(0, "obj"), "a")), GraphOutput(0)])
    with_nothing = compile_with(target, [], plan, [LocalSource(1, "x")])
    assert not any(name.startswith("___entry_value") for name in with_nothing.co_varnames)
    assert effect_instructions(target.__code__, [], then=[Constant(1)])[0].opname == "LOAD_CONST"


def test_graph_outputs_are_kept_for_effects_only():
    code = compile_with(target, [StoreAttr(OBJ, "a", GraphOutput(0))], Constant(None), [LocalSource(1, "x")])
    assert "___graph_outputs" in code.co_varnames
    assert uses_graph_outputs(StoreAttr(OBJ, "a", Shared(0, BuildList([GraphOutput(0)]))))
    assert not uses_graph_outputs(StoreGlobal("g", Constant(1)))
