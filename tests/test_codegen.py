"""Transformed code of fully captured frames, run the way the native runtime runs it:
``FunctionType(new_code, frame_globals, name, None, closure)`` called with the
frame's argument values."""
from __future__ import annotations

import inspect
import math
import traceback
import types

import pytest
import torch

from fastdynamo.bytecode import format_side_by_side, instructions_from_code, max_stack_depth
from fastdynamo.transform.codegen import (
    BuildDict,
    BuildList,
    BuildSet,
    BuildSlice,
    BuildTuple,
    Call,
    Constant,
    FromSource,
    GraphOutput,
    load_source,
    parameter_names,
    transformed_code,
)
from fastdynamo.guards.sources import (
    AttrSource,
    BuiltinSource,
    ClosureSource,
    GlobalSource,
    ItemSource,
    LocalSource,
    TypeSource,
)

SCALE = 10
FN_NAME = "__compiled_fn_3"


def run_like_runtime(fn, code, compiled, *args, **kwargs):
    """Call ``code`` as the runtime would: frame globals with the compiled callable,
    no defaults (the frame already has every argument), the original closure."""
    frame_globals = dict(fn.__globals__)
    frame_globals[FN_NAME] = compiled
    new_fn = types.FunctionType(code, frame_globals, fn.__name__, None, fn.__closure__)
    bound = inspect.signature(fn).bind(*args, **kwargs)
    bound.apply_defaults()
    positional, keyword = [], {}
    for name, param in inspect.signature(fn).parameters.items():
        value = bound.arguments[name]
        if param.kind in (param.POSITIONAL_ONLY, param.POSITIONAL_OR_KEYWORD):
            positional.append(value)
        elif param.kind is param.VAR_POSITIONAL:
            positional.extend(value)
        elif param.kind is param.KEYWORD_ONLY:
            keyword[name] = value
        else:
            keyword.update(value)
    return new_fn(*positional, **keyword)


def capture(fn, graph_inputs, output):
    return transformed_code(fn.__code__, compiled_fn_name=FN_NAME, graph_inputs=graph_inputs,
                            output=output)


def local(fn, name):
    return LocalSource(fn.__code__.co_varnames.index(name), name)


def check_structure(original, new):
    for field in ("co_argcount", "co_posonlyargcount", "co_kwonlyargcount", "co_freevars",
                  "co_filename", "co_name", "co_qualname", "co_firstlineno"):
        assert getattr(new, field) == getattr(original, field), field
    assert new.co_flags & 0x0C == original.co_flags & 0x0C  # VARARGS, VARKEYWORDS
    assert new.co_flags & 0x3A0 == 0  # no generator/coroutine flags
    assert new.co_varnames[:len(parameter_names(original))] == parameter_names(original)
    assert new.co_cellvars == ()
    assert new.co_stacksize == max_stack_depth(instructions_from_code(new))
    opnames = [i.opname for i in instructions_from_code(new)]
    prelude = opnames[:opnames.index("RESUME") + 1]
    assert prelude == (["COPY_FREE_VARS"] if original.co_freevars else []) + ["RESUME"]


# ---------------------------------------------------------------- basic shapes

def basic(x, y):
    return (x + y, [x, 3], {"a": y})


def test_basic_tuple_list_dict():
    x, y = local(basic, "x"), local(basic, "y")
    plan = BuildTuple([GraphOutput(0), BuildList([FromSource(x), Constant(3)]),
                       BuildDict([(Constant("a"), FromSource(y))])])
    code = capture(basic, [x, y], plan)
    check_structure(basic.__code__, code)
    assert run_like_runtime(basic, code, lambda a, b: (a + b,), 4, 5) == basic(4, 5)


def params(a, /, b=2, *, c, d=4):
    return a * b + c * d


def test_positional_only_keyword_only_and_defaults():
    inputs = [local(params, n) for n in "abcd"]
    code = capture(params, inputs, GraphOutput(0))
    check_structure(params.__code__, code)
    compiled = lambda a, b, c, d: (a * b + c * d,)  # noqa: E731
    assert run_like_runtime(params, code, compiled, 1, c=3) == params(1, c=3)
    assert run_like_runtime(params, code, compiled, 1, 5, c=3, d=7) == params(1, 5, c=3, d=7)


def star(x, *args, scale=1, **kwargs):
    return x * scale + sum(args), kwargs["k"]


def test_varargs_and_varkeywords():
    args, kwargs = local(star, "args"), local(star, "kwargs")
    inputs = [local(star, "x"), local(star, "scale"), ItemSource(args, 0), ItemSource(args, 1),
              ItemSource(kwargs, "k")]
    code = capture(star, inputs, BuildTuple([GraphOutput(0), GraphOutput(1)]))
    check_structure(star.__code__, code)
    compiled = lambda x, s, a0, a1, k: (x * s + a0 + a1, k)  # noqa: E731
    assert run_like_runtime(star, code, compiled, 2, 3, 4, scale=5, k="kv", z=0) == \
        star(2, 3, 4, scale=5, k="kv", z=0)


# ---------------------------------------------------------------- closures

def make_closure():
    w = 3
    bias = [100]

    def f(x):
        def uses_argument_cell():
            return x + 1
        return x * w + bias[0] + uses_argument_cell()
    return f


def test_free_variables_and_argument_cells():
    f = make_closure()
    code_f = f.__code__
    assert code_f.co_freevars == ("bias", "w") and code_f.co_cellvars == ("x",)
    inputs = [LocalSource(0, "x"), ClosureSource(1, "w"),
              ItemSource(ClosureSource(0, "bias"), 0)]
    code = capture(f, inputs, GraphOutput(0))
    check_structure(code_f, code)
    compiled = lambda x, w, b: (x * w + b + x + 1,)  # noqa: E731
    assert run_like_runtime(f, code, compiled, 7) == f(7)
    # Free variables can also be named through their localsplus slot.
    free_as_local = LocalSource(len(code_f.co_varnames) + 1, "w")
    assert load_source(free_as_local, code_f)[0].opname == "LOAD_DEREF"


def test_closure_source_must_match_freevars():
    f = make_closure()
    with pytest.raises(ValueError):
        capture(f, [ClosureSource(0, "w")], GraphOutput(0))


def test_only_arguments_can_be_local_sources():
    with pytest.raises(ValueError, match="only arguments"):
        capture(basic, [LocalSource(5, "not_an_argument")], GraphOutput(0))


# ---------------------------------------------------------------- sources

class Module:
    def __init__(self):
        self.weight = 2.5
        self.config = {"k": [1, 2, 3]}


def with_sources(m, x):
    return m.weight * x + SCALE + len(m.config["k"]), type(x), math.pi


def test_attribute_item_global_type_sources():
    m = local(with_sources, "m")
    x = local(with_sources, "x")
    inputs = [AttrSource(m, "weight"), x, GlobalSource("SCALE"),
              ItemSource(ItemSource(AttrSource(m, "config"), "k"), 2)]
    plan = BuildTuple([GraphOutput(0), FromSource(TypeSource(x)),
                       FromSource(AttrSource(GlobalSource("math"), "pi"))])
    code = capture(with_sources, inputs, plan)
    compiled = lambda w, x, s, k2: (w * x + s + k2,)  # noqa: E731
    assert run_like_runtime(with_sources, code, compiled, Module(), 4) == \
        (2.5 * 4 + SCALE + 3, int, math.pi)


def test_type_source_ignores_a_global_named_type():
    def f(x):
        return type(x)

    frame_globals = {"type": lambda v: "shadowed", FN_NAME: lambda: ()}
    code = capture(f, [], FromSource(TypeSource(LocalSource(0, "x"))))
    assert types.FunctionType(code, frame_globals, "f")(1.5) is float


def test_builtin_source():
    def f(xs):
        return len(xs)

    code = capture(f, [BuiltinSource("len"), LocalSource(0, "xs")],
                   GraphOutput(0))
    assert run_like_runtime(f, code, lambda fn, xs: (fn(xs),), [1, 2]) == 2


# ---------------------------------------------------------------- nested outputs

def nested(x, y):
    return {"pair": (x, [y, {"deep": x}]), "s": slice(1, x), "set": {x, y}}, None


def test_nested_outputs():
    x, y = local(nested, "x"), local(nested, "y")
    plan = BuildTuple([
        BuildDict([
            (Constant("pair"), BuildTuple([GraphOutput(0),
                                           BuildList([GraphOutput(1),
                                                      BuildDict([(Constant("deep"),
                                                                  GraphOutput(0))])])])),
            (Constant("s"), BuildSlice(Constant(1), GraphOutput(0))),
            (Constant("set"), BuildSet([GraphOutput(0), FromSource(y)])),
        ]),
        Constant(None),
    ])
    code = capture(nested, [x, y], plan)
    assert run_like_runtime(nested, code, lambda a, b: (a, b), 3, 4) == nested(3, 4)


def test_call_in_plan_and_slice_with_step():
    def f(x):
        return tuple([x, x]), slice(None, x, 2), dict(a=x)

    plan = BuildTuple([
        Call(FromSource(GlobalSource("tuple")), [BuildList([GraphOutput(0), GraphOutput(0)])]),
        BuildSlice(Constant(None), GraphOutput(0), Constant(2)),
        Call(FromSource(GlobalSource("dict")), kwargs=[("a", GraphOutput(0))]),
    ])
    code = capture(f, [LocalSource(0, "x")], plan)
    assert run_like_runtime(f, code, lambda x: (x,), 9) == f(9)


def test_outputs_not_from_graph_still_call_it():
    calls = []

    def f(x):
        return x

    code = capture(f, [LocalSource(0, "x")], FromSource(LocalSource(0, "x")))
    assert run_like_runtime(f, code, lambda x: calls.append(x) or (), 5) == 5
    assert calls == [5]


def test_many_graph_inputs_need_extended_args():
    names = [f"a{i}" for i in range(300)]
    namespace = {}
    exec(f"def wide({', '.join(names)}):\n    return sum([{', '.join(names)}])", namespace)
    wide = namespace["wide"]
    inputs = [LocalSource(i, n) for i, n in enumerate(names)]
    code = capture(wide, inputs, GraphOutput(0))
    assert code.co_stacksize >= 302
    assert run_like_runtime(wide, code, lambda *v: (sum(v),), *range(300)) == sum(range(300))


def test_generator_original_becomes_plain_function():
    def gen(x):
        yield x

    code = capture(gen, [LocalSource(0, "x")], GraphOutput(0))
    check_structure(gen.__code__, code)
    assert run_like_runtime(gen, code, lambda x: ([x],), 1) == [1]


def test_tensor_capture_matches_eager():
    def model(x, w, *, bias):
        return torch.relu(x @ w + bias), x.shape[0]

    x, w, bias = torch.randn(4, 3), torch.randn(3, 2), torch.randn(2)
    inputs = [LocalSource(0, "x"), LocalSource(1, "w"), LocalSource(2, "bias")]
    plan = BuildTuple([GraphOutput(0), Constant(4)])
    code = capture(model, inputs, plan)
    got = run_like_runtime(model, code, lambda x, w, b: (torch.relu(x @ w + b),), x, w, bias=bias)
    want = model(x, w, bias=bias)
    assert torch.equal(got[0], want[0]) and got[1] == want[1]


# ---------------------------------------------------------------- errors and listings

USER_SOURCE = '''
def model(x, y):
    z = x * y
    return z + 1
'''


def test_error_in_compiled_callable_points_at_user_source():
    namespace = {}
    exec(compile(USER_SOURCE, "user_model.py", "exec"), namespace)
    model = namespace["model"]
    code = capture(model, [LocalSource(0, "x"), LocalSource(1, "y")], GraphOutput(0))

    def compiled(x, y):
        raise RuntimeError("inside the graph")

    with pytest.raises(RuntimeError, match="inside the graph") as info:
        run_like_runtime(model, code, compiled, 1, 2)
    frames = traceback.extract_tb(info.tb)
    user = [f for f in frames if f.filename == "user_model.py"]
    assert user and user[-1].name == "model"
    assert user[-1].lineno == 3  # the first line of the body
    assert frames[-1].name == "compiled"  # the callable's own frame is last


def test_side_by_side_listing_of_transformed_code():
    x, y = local(basic, "x"), local(basic, "y")
    code = capture(basic, [x, y], GraphOutput(0))
    text = format_side_by_side(basic.__code__, code)
    right = "\n".join(line.split(" | ")[1] for line in text.splitlines() if " | " in line)
    assert FN_NAME in right and "BINARY_OP" not in right
