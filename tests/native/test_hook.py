"""The evaluator: installation, what it intercepts, and running transformed code."""
from __future__ import annotations

import asyncio
import sys
import traceback

import pytest

from native_helpers import Recorder, entry_for, only


def plain(x, y=2):
    return x + y


def plain_transformed(x, y=2):
    return ("transformed", x + y)


def test_installed_only_while_a_callback_is_set(native):
    assert native.installed_evaluator() == "default"
    assert native.set_callback(False) is None
    assert native.installed_evaluator() == "fastdynamo"
    assert native.get_callback() is False
    assert native.set_callback(None) is False
    assert native.installed_evaluator() == "default"


def test_non_callable_callback_is_a_type_error(native):
    with pytest.raises(TypeError, match="callback must be None, False or a callable, not int"):
        native.set_callback(42)
    assert native.installed_evaluator() == "default"


def test_miss_calls_back_then_hits(native):
    rec = Recorder(only(plain, lambda frame: entry_for(native, plain_transformed, [(("local", 0, "x"), ("equals", 1))])))
    native.set_callback(rec)
    assert plain(1) == ("transformed", 3)
    assert plain(1, y=5) == ("transformed", 6)
    native.set_callback(None)
    assert rec.names == ["plain"]
    frame = rec.frames[0]
    assert frame.f_locals == {"x": 1, "y": 2}
    assert frame.localsplus == [1, 2]
    assert frame.f_globals is globals()
    assert frame.f_func is plain
    (entry,) = native.cache_entries(plain.__code__)
    assert (entry.hits, entry.misses) == (1, 0)  # the first call compiled


def test_callback_none_runs_the_frame_normally(native):
    rec = Recorder(lambda frame: None)
    native.set_callback(rec)
    assert plain(1) == 3 and plain(1) == 3
    native.set_callback(None)
    assert rec.names == ["plain", "plain"]
    assert native.cache_entries(plain.__code__) == []


def test_run_only_never_compiles(native):
    native.set_callback(False)
    assert plain(3) == 5
    native.set_callback(None)
    assert native.cache_entries(plain.__code__) == []


def test_run_only_uses_cached_entries(native):
    native.set_callback(only(plain, lambda f: entry_for(native, plain_transformed, [(("local", 0, "x"), ("equals", 1))])))
    plain(1)
    native.set_callback(False)
    assert plain(1) == ("transformed", 3)
    assert plain(2) == 4
    native.set_callback(None)


def test_bad_callback_result_raises(native):
    native.set_callback(only(plain, lambda frame: "nonsense"))
    with pytest.raises(TypeError, match="must return None, SKIP, SKIP_RECURSIVE or a CacheEntry, not str"):
        plain(1)
    native.set_callback(None)


def test_callback_exception_propagates_to_the_caller(native):
    def fail(frame):
        raise RuntimeError("compile failed")

    native.set_callback(only(plain, fail))
    with pytest.raises(RuntimeError, match="compile failed"):
        plain(1)
    native.set_callback(None)


def helper_called_by_callback():
    return 7


def test_runtime_frames_are_not_intercepted(native):
    seen = []

    def callback(frame):
        seen.append(frame.f_code.co_name)
        helper_called_by_callback()  # would recurse into the callback if intercepted
        return None

    native.set_callback(callback)
    plain(1)
    native.set_callback(None)
    assert seen == ["plain"]


def generator(n):
    yield from range(n)


async def coroutine(x):
    return x * 2


def test_generators_and_coroutines_are_not_intercepted(native):
    rec = Recorder(lambda frame: None)
    native.set_callback(rec)
    assert list(generator(3)) == [0, 1, 2]
    assert asyncio.run(coroutine(4)) == 8
    native.set_callback(None)
    assert "generator" not in rec.names and "coroutine" not in rec.names


def test_frames_thrown_into_are_not_intercepted(native):
    rec = Recorder(lambda frame: None)
    gen = generator(5)
    next(gen)
    native.set_callback(rec)
    with pytest.raises(ValueError):
        gen.throw(ValueError("into the generator"))
    native.set_callback(None)
    assert "generator" not in rec.names


def test_already_started_frames_are_not_intercepted(native):
    rec = Recorder(lambda frame: None)

    def outer():
        native.set_callback(rec)  # this frame is already running when the hook appears
        value = plain(1)
        native.set_callback(None)
        return value

    assert outer() == 3
    assert rec.names == ["plain"]


def test_skip_marks(native):
    rec = Recorder(only(plain, lambda frame: native.SKIP))
    native.set_callback(rec)
    plain(1)
    plain(2)
    native.set_callback(None)
    assert rec.names == ["plain"]
    assert native.get_code_action(plain.__code__) == native.SKIP
    native.reset()
    assert native.get_code_action(plain.__code__) == native.DEFAULT


def calls_plain(x):
    return plain(x)


def test_skip_recursive_hides_callees(native):
    rec = Recorder(lambda frame: native.SKIP_RECURSIVE if frame.f_code.co_name == "calls_plain" else None)
    native.set_callback(rec)
    assert calls_plain(1) == 3
    assert calls_plain(1) == 3
    native.set_callback(None)
    assert rec.names == ["calls_plain"]


def test_set_code_action_validates(native):
    with pytest.raises(ValueError, match="unknown action 9"):
        native.set_code_action(plain.__code__, 9)
    with pytest.raises(TypeError, match="expected a code object, got function"):
        native.set_code_action(plain, native.SKIP)


def test_cache_entry_needs_a_code_object(native):
    with pytest.raises(TypeError, match="must be a code object"):
        native.CacheEntry(native.GuardSet([]), plain)


def signature_zoo(a, b=2, /, c=3, *args, d, e=5, **kwargs):
    return ("original",)


def signature_zoo_transformed(a, b=2, /, c=3, *args, d, e=5, **kwargs):
    return (a, b, c, args, d, e, kwargs)


@pytest.mark.parametrize(
    "args, kwargs",
    [
        ((1,), {"d": 4}),
        ((1, 20, 30, 40, 50), {"d": 4, "e": 6, "z": 7}),
        ((1,), {"c": 33, "d": 4, "extra": "x"}),
    ],
)
def test_every_parameter_kind_reaches_the_transformed_code(native, args, kwargs):
    native.set_callback(only(signature_zoo, lambda f: entry_for(native, signature_zoo_transformed, [])))
    compiled = signature_zoo(*args, **kwargs)
    native.set_callback(None)
    native.reset()
    assert compiled == signature_zoo_transformed(*args, **kwargs)


def make_closure(offset):
    scale = offset * 10

    def inner(x):
        return x + offset + scale

    return inner


def make_closure_transformed(offset):
    scale = offset * 10

    def inner(x):
        return ("transformed", x + offset + scale)

    return inner


def test_closures_keep_their_cells(native):
    first, second = make_closure(1), make_closure(2)
    transformed_code = make_closure_transformed(0).__code__
    native.set_callback(only(first, lambda f: native.CacheEntry(native.GuardSet([]), transformed_code)))
    assert first(5) == ("transformed", 16)
    assert second(5) == ("transformed", 27)
    assert first(5) == ("transformed", 16)
    native.set_callback(None)


def cell_argument(x):
    def read():
        return x

    return read() + 1


def cell_argument_transformed(x):
    def read():
        return x * 100

    return read()


def test_arguments_captured_by_inner_functions(native):
    native.set_callback(only(cell_argument, lambda f: entry_for(native, cell_argument_transformed, [])))
    assert cell_argument(3) == 300
    native.set_callback(None)


def raises(x):
    return x


def raises_transformed(x):
    raise ValueError(f"bad {x}")


def test_exceptions_propagate_with_the_user_traceback(native):
    native.set_callback(only(raises, lambda f: entry_for(native, raises_transformed, [])))
    with pytest.raises(ValueError, match="bad 3") as info:
        raises(3)
    native.set_callback(None)
    last = traceback.extract_tb(info.tb)[-1]
    assert last.filename == __file__
    assert last.name == "raises_transformed"
    assert "raise ValueError" in last.line


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def fib_transformed(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def test_recursion_through_cached_entries(native):
    native.set_callback(only(fib, lambda f: entry_for(native, fib_transformed, [])))
    assert fib(15) == 610
    native.set_callback(None)
    (entry,) = native.cache_entries(fib.__code__)
    assert entry.hits > 1000


def deep(n):
    return 0 if n == 0 else 1 + deep(n - 1)


def test_deep_recursion_is_bounded_by_the_recursion_limit(native):
    native.set_callback(lambda f: None)
    with pytest.raises(RecursionError):
        deep(sys.getrecursionlimit() * 2)
    assert deep(200) == 200
    native.set_callback(None)
