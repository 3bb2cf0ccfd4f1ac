"""The dispatcher's direct path: a cache hit whose entry is only a graph call calls the
compiled graph with no frame; anything else takes the transformed code or the frame."""
from __future__ import annotations

import pytest
import torch

import fastdynamo
from fastdynamo._runtime import native

from .helpers import compile_recorded, counts, entries, same


def relu_add(x, y):
    return torch.relu(x + y)


def test_compile_returns_the_native_dispatcher_wrapping_the_function():
    compiled = fastdynamo.compile(relu_add, backend="eager")
    assert type(compiled) is native().Dispatcher
    assert compiled.__name__ == "relu_add" and compiled.__wrapped__ is relu_add
    assert compiled.__doc__ == relu_add.__doc__ and compiled.target is relu_add
    assert callable(compiled)


def test_first_call_compiles_through_the_frame_then_hits_call_the_graph_directly():
    compiled, recorder = compile_recorded(relu_add)
    x, y = torch.randn(4), torch.randn(4)
    same(compiled(x, y), relu_add(x, y))
    assert counts(compiled) == (0, 0, 1) and len(recorder.captures) == 1
    for _ in range(3):
        same(compiled(x, y), relu_add(x, y))
    assert counts(compiled) == (3, 0, 1)
    (entry,) = entries(relu_add)
    assert entry.direct is not None and entry.direct.hits == 3 and entry.hits == 3
    assert len(recorder.captures) == 1


def test_tuple_of_graph_outputs_is_a_new_tuple_like_the_transformed_codes():
    def two(x):
        return x + 1, x * 2

    compiled, recorder = compile_recorded(two)
    x = torch.randn(3)
    compiled(x)
    first, second = compiled(x), compiled(x)
    same(first, two(x))
    assert first is not second and counts(compiled)[0] == 2 and len(recorder.captures) == 1


def test_failing_guard_recompiles_then_each_entry_is_called_directly():
    compiled, recorder = compile_recorded(relu_add)
    small, large = torch.randn(4), torch.randn(2, 3)
    compiled(small, small)
    compiled(large, large)  # shape guard fails: a miss goes through the frame, compiles
    assert len(recorder.captures) == 2 and len(entries(relu_add)) == 2
    assert counts(compiled) == (0, 0, 2)
    same(compiled(small, small), relu_add(small, small))
    same(compiled(large, large), relu_add(large, large))
    assert counts(compiled) == (2, 0, 2)
    assert all(entry.direct.hits == 1 for entry in entries(relu_add))


def test_grad_mode_is_guarded_on_the_direct_path():
    compiled, recorder = compile_recorded(relu_add)
    x = torch.randn(3)
    compiled(x, x)
    with torch.no_grad():
        compiled(x, x)  # grad-mode guard fails: compiles another entry
        compiled(x, x)
    assert len(recorder.captures) == 2 and counts(compiled) == (1, 0, 2)


def test_keyword_arguments_and_defaults_bind_like_cpython():
    def f(x, y=None, *, scale=2.0, shift):
        return x * scale + shift

    compiled, recorder = compile_recorded(f)
    x, shift = torch.randn(3), torch.randn(3)
    same(compiled(x, shift=shift), f(x, shift=shift))
    for call in (lambda g: g(x, shift=shift), lambda g: g(x, None, shift=shift, scale=2.0),
                 lambda g: g(shift=shift, x=x), lambda g: g(x, y=None, shift=shift)):
        same(call(compiled), call(f))
    assert counts(compiled) == (4, 0, 1) and len(recorder.captures) == 1
    same(compiled(x, shift=shift, scale=3.0), f(x, shift=shift, scale=3.0))  # float guard
    assert len(recorder.captures) == 2


def test_changed_defaults_are_seen_at_the_call():
    def f(x, k=1.0):
        return x * k

    compiled, recorder = compile_recorded(f)
    x = torch.ones(2)
    same(compiled(x), f(x))
    f.__defaults__ = (5.0,)
    same(compiled(x), x * 5.0)
    assert len(recorder.captures) == 2


def test_calls_cpython_must_bind_raise_its_errors():
    compiled = fastdynamo.compile(relu_add, backend="eager")
    x = torch.randn(2)
    compiled(x, x)
    assert_same_type_errors(compiled, relu_add, lambda g: g(x), lambda g: g(x, x, x), lambda g: g(x, x, y=x),
                            lambda g: g(x, z=x))


def assert_same_type_errors(compiled, original, *bad_calls):
    """Each call raises TypeError with the same message on the compiled function and the
    original (CPython's own binding error)."""
    for bad in bad_calls:
        with pytest.raises(TypeError) as compiled_error:
            bad(compiled)
        with pytest.raises(TypeError) as eager_error:
            bad(original)
        assert str(compiled_error.value) == str(eager_error.value)


def test_star_args_and_kwargs_are_bound_and_served_directly():
    def f(x, *rest, **options):
        return x + rest[0] * options["k"]

    compiled, recorder = compile_recorded(f)
    x = torch.randn(3)
    for _ in range(3):
        same(compiled(x, x, k=2), f(x, x, k=2))
    assert counts(compiled) == (2, 0, 1)
    assert len(recorder.captures) == 1 and entries(f)[0].hits == 2


def test_star_args_guards_fail_and_recompile_like_the_frame():
    def f(x, *rest):
        total = x
        for item in rest:
            total = total + item
        return total

    compiled, recorder = compile_recorded(f)
    x = torch.randn(3)
    for count in (1, 2, 1, 3, 2):  # len(rest) is guarded: one entry per length
        same(compiled(x, *[x] * count), f(x, *[x] * count))
    assert len(recorder.captures) == 3 and counts(compiled) == (2, 0, 3)
    same(compiled(x, x), f(x, x))
    assert counts(compiled)[0] == 3
    same(compiled(x), f(x))  # an empty *args: no tensor op, the frame runs as Python


def test_star_args_with_defaults_and_keyword_only_parameters():
    def f(x, y=None, *rest, scale=2.0, **options):
        out = x * scale
        if y is not None:
            out = out + y
        for item in rest:
            out = out - item
        return out + options.get("shift", 0)

    compiled, recorder = compile_recorded(f)
    x = torch.randn(3)
    calls = (lambda g: g(x), lambda g: g(x, x), lambda g: g(x, None, x, x), lambda g: g(x, scale=3.0),
             lambda g: g(x, x, x, shift=1), lambda g: g(y=x, x=x))
    for call in calls:
        same(call(compiled), call(f))
    graphs, direct = len(recorder.captures), counts(compiled)[0]
    for call in calls:
        same(call(compiled), call(f))
    assert len(recorder.captures) == graphs and counts(compiled)[0] - direct == len(calls)


def test_keywords_to_positional_only_parameters_go_into_kwargs():
    def f(x, /, **options):
        return x * options["x"]

    compiled, recorder = compile_recorded(f)
    a, b = torch.randn(2), torch.randn(2)
    for _ in range(2):
        same(compiled(a, x=b), f(a, x=b))
    assert counts(compiled) == (1, 0, 1)


def test_star_args_binding_errors_are_cpythons():
    def f(x, *rest, k):
        return x + k

    compiled, _ = compile_recorded(f)
    x = torch.randn(2)
    same(compiled(x, x, k=x), f(x, x, k=x))
    assert_same_type_errors(compiled, f, lambda g: g(x), lambda g: g(x, k=x, z=1), lambda g: g(x, x=x, k=x),
                            lambda g: g(k=x))


def test_the_star_args_tuple_and_kwargs_dict_are_new_each_call():
    import types

    box = types.SimpleNamespace(value=None)

    def f(x, *rest, **options):
        box.value = (rest, options)  # a side effect: the transformed code runs with them
        return x + 1

    compiled = fastdynamo.compile(f, backend="eager")
    x = torch.randn(2)
    seen = []
    for _ in range(3):
        compiled(x, 1, k=2)
        seen.append(box.value)
    assert counts(compiled) == (0, 2, 1)  # served without the frame, from the bound slots
    assert [(type(r), r, type(o), o) for r, o in seen] == [(tuple, (1,), dict, {"k": 2})] * 3
    assert len({id(o) for _, o in seen}) == 3  # each call its own dict, as in CPython


def test_reset_drops_star_args_entries():
    def f(*tensors):
        return tensors[0] * 2

    compiled, recorder = compile_recorded(f)
    x = torch.randn(2)
    compiled(x)
    compiled(x)
    fastdynamo.reset()
    same(compiled(x), f(x))
    assert len(recorder.captures) == 2 and counts(compiled) == (1, 0, 2)


def test_side_effects_run_the_transformed_code():
    class Holder:
        pass

    def f(holder, x):
        holder.last = x * 2
        return x + 1

    compiled, recorder = compile_recorded(f)
    holder, eager_holder, x = Holder(), Holder(), torch.randn(2)
    compiled(holder, x)
    same(compiled(holder, x), f(eager_holder, x))
    same(holder.last, eager_holder.last)
    assert entries(f)[0].direct is None and counts(compiled) == (0, 1, 1)
    assert len(recorder.captures) == 1


def test_result_that_is_not_a_graph_output_runs_the_transformed_code():
    def f(x):
        return x, x + 1  # the input itself: reloaded from its source

    compiled, recorder = compile_recorded(f)
    x = torch.randn(2)
    compiled(x)
    result = compiled(x)
    assert result[0] is x and counts(compiled) == (0, 1, 1) and len(recorder.captures) == 1


def test_graph_break_goes_through_the_frame():
    def f(x):
        y = x + 1
        print("", end="")  # a graph break
        return y * 2

    compiled, recorder = compile_recorded(f)
    x = torch.randn(2)
    for _ in range(3):
        same(compiled(x), f(x))
    assert recorder.breaks and entries(f)[0].direct is None
    assert counts(compiled)[0] == 0 and counts(compiled)[1] == 2  # the split code, run by the dispatcher
    assert len(recorder.captures) == 2  # before and after the break


def test_reset_drops_entries_and_the_next_call_compiles():
    compiled, recorder = compile_recorded(relu_add)
    x = torch.randn(2)
    compiled(x, x)
    compiled(x, x)
    fastdynamo.reset()
    assert entries(relu_add) == []
    same(compiled(x, x), relu_add(x, x))
    compiled(x, x)
    assert len(recorder.captures) == 2 and counts(compiled) == (2, 0, 2)


def test_graph_error_with_a_fallback_is_eagers():
    def gather(x, index):
        return x.index_select(0, index) * 2

    compiled, recorder = compile_recorded(gather)
    x = torch.arange(3.0)
    compiled(x, torch.tensor([0, 2]))
    assert entries(gather)[0].direct.fallback
    with pytest.raises(IndexError) as info:
        compiled(x, torch.tensor([0, 9]))
    assert info.value.__context__ is None
    assert counts(compiled) == (0, 1, 1) and len(recorder.captures) == 1


def test_frame_that_catches_the_graphs_error_runs_its_handler():
    def f(x, index, log):
        try:
            y = x.index_select(0, index)
        except IndexError:
            log.append("caught")
            y = x - 1
        return y

    compiled, _ = compile_recorded(f)
    x, log = torch.arange(3.0), []
    compiled(x, torch.tensor([1]), log)
    same(compiled(x, torch.tensor([5]), log), x - 1)
    assert log == ["caught"]


def test_graph_without_a_fallback_raises_once():
    def f(x, index):
        x.add_(1)
        return x.index_select(0, index)

    compiled, _ = compile_recorded(f)
    x = torch.zeros(2)
    compiled(x, torch.tensor([0]))
    assert not entries(f)[0].direct.fallback
    with pytest.raises(IndexError):
        compiled(x, torch.tensor([7]))
    torch.testing.assert_close(x, torch.full((2,), 2.0))  # the graph ran once per call


def test_graph_error_restores_the_guarded_grad_mode_before_the_fallback():
    def fails(gm, example_inputs):
        def run(*args):
            torch._C._set_grad_enabled(False)
            raise RuntimeError("backend failure")
        return run

    def f(x):
        return x + 1

    compiled = fastdynamo.compile(f, backend=fails)
    x = torch.ones(2)
    with pytest.raises(RuntimeError, match="backend failure"):
        compiled(x)  # the compiler's error: raised with fallback_on_internal_error off
    assert torch.is_grad_enabled()
    with pytest.raises(RuntimeError, match="backend failure"):
        compiled(x)  # the hit: the direct call fails, the transformed code decides
    assert torch.is_grad_enabled() and counts(compiled) == (0, 1, 1)


def test_decorated_method_binds_like_a_function():
    class Scaler:
        def __init__(self, k):
            self.k = k

        @fastdynamo.compile(backend="eager")
        def scale(self, x):
            return x * 2

    a, x = Scaler(2), torch.randn(3)
    same(a.scale(x), x * 2)
    same(a.scale(x), x * 2)
    same(Scaler.scale(a, x), x * 2)
    assert Scaler.__dict__["scale"].direct_calls == 2


def test_closure_values_are_guarded():
    def make(k):
        def f(x):
            return x * k
        return f

    f2, f3 = make(2.0), make(3.0)
    c2, recorder2 = compile_recorded(f2)
    c3, recorder3 = compile_recorded(f3)
    x = torch.ones(2)
    for _ in range(2):
        same(c2(x), x * 2.0)
        same(c3(x), x * 3.0)
    assert len(recorder2.captures) == 1 and len(recorder3.captures) == 1
    assert c2.direct_calls == 1 and c3.direct_calls == 1


def test_disable_inside_and_the_callback_restored_after():
    runtime = native()

    @fastdynamo.disable
    def plain(x):
        return x - 1

    def f(x):
        return x + 1

    compiled = fastdynamo.compile(f, backend="eager")
    x = torch.ones(2)
    compiled(x)
    assert runtime.get_callback() is None
    same(plain(compiled(x)), x)
    assert runtime.get_callback() is None and compiled.direct_calls == 1


def test_called_from_the_runtimes_own_python_runs_as_python():
    runtime = native()
    compiled = fastdynamo.compile(relu_add, backend="eager")
    x = torch.ones(2)
    compiled(x, x)
    seen = []

    def callback(frame):
        seen.append(compiled(x, x))  # suspended: no lookup, no compile
        return runtime.SKIP

    def other(t):
        return t * 3

    runtime.set_callback(callback)
    try:
        other(x)
    finally:
        runtime.set_callback(None)
    same(seen[0], relu_add(x, x))
    assert counts(compiled) == (0, 0, 2)


def test_called_through_a_tuple_and_dict_like_a_function():
    compiled = fastdynamo.compile(relu_add, backend="eager")
    x = torch.randn(2)
    compiled(x, x)
    same(compiled(*(x,), **{"y": x}), relu_add(x, x))
    same(type(compiled).__call__(compiled, x, y=x), relu_add(x, x))
    assert compiled.direct_calls == 2


def test_explain_still_counts_graphs():
    report = fastdynamo.explain(relu_add, backend="eager")(torch.ones(2), torch.ones(2))
    assert report.graph_count == 1


def test_no_reference_leaks_on_any_path():
    import sys

    def f(x, y=None, *, k=1.0):
        return x * k

    compiled = fastdynamo.compile(f, backend="eager")
    x = torch.randn(3)
    calls = (lambda: compiled(x), lambda: compiled(x, None, k=1.0), lambda: compiled(y=None, x=x))
    for call in calls:
        call()
        call()
    before = (sys.getrefcount(x), sys.getrefcount(None), sys.getrefcount(compiled))
    for _ in range(2000):
        for call in calls:
            call()
    assert (sys.getrefcount(x), sys.getrefcount(None), sys.getrefcount(compiled)) == before
    assert compiled.direct_calls >= 6000


def test_dispatcher_in_a_cycle_is_collected():
    import gc
    import weakref

    namespace = {"torch": torch}
    exec("def g(x):\n    return x + 1\n", namespace)
    compiled = fastdynamo.compile(namespace["g"], backend="eager")
    namespace["compiled"] = compiled  # dispatcher -> g -> g.__globals__ -> dispatcher
    compiled(torch.ones(2))
    ref = weakref.ref(compiled)
    del compiled, namespace
    fastdynamo.reset()
    gc.collect()
    assert ref() is None
