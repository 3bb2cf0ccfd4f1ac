"""Recursion: a compiled function calling its compiled self costs the recursion depth of
an eager call per level (a plain function compiles to the native dispatcher, which adds
no Python frame; the Python wrapper of a bound method or partial is skipped inside its
own region), so depth 500 works under the default limit of 1000, and runaway recursion
still raises RecursionError, also with the limit raised past what the C stack holds. On
3.12 the hook gives back the C recursion that its presence costs (every call enters the
evaluator from C), so recursion under it reaches the eager depth."""
from __future__ import annotations

import sys
import threading
import warnings

import pytest
import torch

import fastdynamo
from fastdynamo._runtime import native


@pytest.fixture(autouse=True)
def _fresh():
    fastdynamo.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", native().RecompileLimitWarning)  # n differs per level
        yield
    fastdynamo.reset()


def eager_countdown(x, n):
    if n == 0:
        return x
    return eager_countdown(x + 1, n - 1)


def countdown(x, n):
    if n == 0:
        return x
    return compiled_countdown(x + 1, n - 1)


compiled_countdown = fastdynamo.compile(countdown, backend="eager")


def _deepest(fn) -> int:
    low, high = 1, 3000
    while low < high:
        middle = (low + high + 1) // 2
        try:
            fn(torch.zeros(1), middle)
            low = middle
        except RecursionError:
            high = middle - 1
    return low


def test_depth_500_under_the_default_limit():
    assert sys.getrecursionlimit() == 1000
    out = compiled_countdown(torch.zeros(2), 500)
    assert torch.equal(out, torch.full((2,), 500.0))
    entries = native().cache_entries(countdown.__code__)
    assert 1 <= len(entries) <= native().get_recompile_limit()  # compiled levels, then run-only


def test_compiled_depth_is_close_to_eager_depth():
    eager = _deepest(eager_countdown)
    compiled = _deepest(compiled_countdown)
    assert compiled >= eager - 10, (eager, compiled)  # was a third of eager's depth


def test_depth_500_in_a_thread():
    results = []
    thread = threading.Thread(target=lambda: results.append(compiled_countdown(torch.zeros(1), 500)))
    thread.start()
    thread.join()
    assert len(results) == 1 and results[0].item() == 500.0


def runaway(x):
    return compiled_runaway(x + 1)


compiled_runaway = fastdynamo.compile(runaway, backend="eager")


def test_runaway_recursion_raises_recursion_error():
    with pytest.raises(RecursionError):
        compiled_runaway(torch.zeros(1))
    assert native().installed_evaluator() == "default"


def python_depth(n):
    return 0 if n == 0 else 1 + python_depth(n - 1)


def tensor_and_deep_python(x, n):
    return x * 2 + python_depth(n)


def test_python_recursion_beside_compiled_code_reaches_the_eager_depth():
    # Past the inliner's depth the recursion runs as Python, with the evaluator installed:
    # every level enters CPython's evaluator from C. 3.12 charged two units of its C
    # budget (1500) per entry and stopped at about 750 levels; eager reaches 900.
    x = torch.ones(2)
    report = fastdynamo.explain(tensor_and_deep_python, backend="eager")(x, 900)
    assert report.graph_count >= 1 and report.graph_break_count >= 1
    fastdynamo.reset()
    compiled = fastdynamo.compile(tensor_and_deep_python, backend="eager")
    assert torch.equal(compiled(x, 900), tensor_and_deep_python(x, 900))
    assert len(native().cache_entries(tensor_and_deep_python.__code__)) >= 1


_RUNAWAY_WITH_A_HIGH_LIMIT = """
import sys, threading, torch, fastdynamo
from fastdynamo._runtime import native
sys.setrecursionlimit(20_000)
def runaway(x):
    return compiled(x + 1)
compiled = fastdynamo.compile(runaway, backend="eager") if sys.argv[1] == "compiled" else runaway
def run():
    try:
        compiled(torch.zeros(1))
    except RecursionError as error:
        print("RecursionError:", error, len(native().cache_entries(runaway.__code__)))
if len(sys.argv) > 2:
    threading.stack_size(int(sys.argv[2]))
    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
else:
    run()
"""


def _run_runaway(*args: str) -> str:
    import os
    import subprocess

    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    done = subprocess.run([sys.executable, "-W", "ignore", "-c", _RUNAWAY_WITH_A_HIGH_LIMIT, *args],
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])  # -11: the C stack overflowed
    return done.stdout.strip()


@pytest.mark.parametrize("thread_stack", [None, 2 << 20], ids=["main-thread", "2MB-thread"])
def test_runaway_recursion_above_the_python_limit_raises_before_the_c_stack_ends(thread_stack):
    # With the Python limit out of the way, every level under the hook enters CPython's
    # evaluator from C (~1.9 KB of C stack). The hook hands a deep frame on with the entry
    # budget shown as spent once less than an eighth of the thread's stack is left, so
    # CPython raises RecursionError (ffi/c_recursion.rs). Before, 3.13 (whose C budget
    # allows 5000 entries) segfaulted, and 3.12 (1250 entries) did in a 2 MB thread.
    # Without fastdynamo the same program raises RecursionError at the Python limit.
    args = ["compiled"] if thread_stack is None else ["compiled", str(thread_stack)]
    compiled = _run_runaway(*args)
    assert compiled.startswith("RecursionError: maximum recursion depth exceeded"), compiled
    assert int(compiled.rsplit(" ", 1)[1]) >= 1, compiled  # runaway was compiled (cache entries)
    if thread_stack is None:
        eager = _run_runaway("eager")
        assert eager.startswith("RecursionError: maximum recursion depth exceeded"), eager
        assert eager.endswith(" 0"), eager


def _dispatched_calls(dispatcher) -> int:
    return dispatcher.direct_calls + dispatcher.code_calls + dispatcher.frame_calls


def test_dispatcher_runs_its_own_region_when_entered_from_another():
    # A plain function compiles to the native dispatcher: no Python wrapper frame per level
    # to skip, and each call sets its own callback, also inside another region.
    assert isinstance(compiled_countdown, native().Dispatcher)
    other = fastdynamo.compile(lambda x, n: compiled_countdown(x, n) * 2, backend="eager")
    before = _dispatched_calls(compiled_countdown)
    assert torch.equal(other(torch.zeros(1), 5), torch.full((1,), 10.0))
    assert _dispatched_calls(compiled_countdown) - before == 6  # levels 5..0
    assert len(native().cache_entries(countdown.__code__)) >= 1


class Counter:
    """A bound method compiles to the Python wrapper (not a plain function)."""

    def countdown(self, x, n):
        if n == 0:
            return x
        return self.compiled(x + 1, n - 1)


def _counter():
    counter = Counter()
    counter.compiled = fastdynamo.compile(counter.countdown, backend="eager")
    return counter


def test_wrapped_bound_method_depth_500_under_the_default_limit():
    counter = _counter()
    assert not isinstance(counter.compiled, native().Dispatcher)
    out = counter.compiled(torch.zeros(2), 500)
    assert torch.equal(out, torch.full((2,), 500.0))
    assert len(native().cache_entries(Counter.countdown.__code__)) >= 1
    assert native().get_code_action(counter.compiled.__code__) == native().REGION_WRAPPER


def test_wrapper_runs_when_entered_from_another_region():
    counter = _counter()
    other = fastdynamo.compile(lambda x, n: counter.compiled(x, n) * 2, backend="eager")
    assert torch.equal(other(torch.zeros(1), 5), torch.full((1,), 10.0))
    assert len(native().cache_entries(Counter.countdown.__code__)) >= 1
    assert native().get_code_action(counter.compiled.__code__) == native().REGION_WRAPPER
