"""100k calls through the hook leak no references and no memory."""
from __future__ import annotations

import gc
import sys

import psutil

from native_helpers import entry_for, only


def add(x, y, *, z=1):
    return x + y + z


def add_transformed(x, y, *, z=1):
    return x - y - z


def packed(x, *args, **kwargs):
    return x


def packed_transformed(x, *args, **kwargs):
    return (x, len(args), len(kwargs))


def _rss():
    gc.collect()
    return psutil.Process().memory_info().rss


def _refcounts(*objects):
    # Compare counts taken under the same evaluator: while one is installed, calls are
    # not inlined and the callee's frame holds its own reference to each argument.
    gc.collect()
    return [sys.getrefcount(o) for o in objects]


def test_cache_hits_leak_nothing(native):
    x, y = object(), 5
    native.set_callback(only(add, lambda f: entry_for(native, add_transformed, [(("local", 1, "y"), ("equals", 5))])))
    add(1, y)
    native.set_callback(False)
    for _ in range(1000):  # warm up allocator pools
        add(2, y, z=3)
    before, rss_before = _refcounts(add, add.__code__, x, add_transformed.__code__), _rss()
    for _ in range(100_000):
        add(2, y, z=3)
    for _ in range(1000):
        packed(x)
    after = _refcounts(add, add.__code__, x, add_transformed.__code__)  # not inside assert:
    assert after == before  # pytest's assert rewriting would hold extra references
    assert _rss() - rss_before < 4 * 1024 * 1024
    native.set_callback(None)


def test_varargs_path_leaks_nothing(native):
    x, extra = object(), object()
    native.set_callback(only(packed, lambda f: entry_for(native, packed_transformed, [])))
    assert packed(x, extra, extra, k=extra) == (x, 2, 1)
    before, rss_before = _refcounts(packed, packed.__code__, x, extra), _rss()
    for _ in range(100_000):
        packed(x, extra, extra, k=extra)
    after = _refcounts(packed, packed.__code__, x, extra)
    assert after == before
    assert _rss() - rss_before < 4 * 1024 * 1024
    native.set_callback(None)


def test_misses_that_run_normally_leak_nothing(native):
    x = object()
    native.set_callback(only(packed, lambda f: None))
    packed(x)
    before = _refcounts(packed, packed.__code__, x)
    for _ in range(20_000):
        packed(x)
    after = _refcounts(packed, packed.__code__, x)
    assert after == before
    native.set_callback(None)


def raising(x):
    return x


def raising_transformed(x):
    raise KeyError(x)


def test_cache_hits_that_raise_leak_nothing(native):
    """The answered frame is released on the error path too (3.12+: by the hook)."""
    x = object()
    native.set_callback(only(raising, lambda f: entry_for(native, raising_transformed, [])))
    for _ in range(1000):
        try:
            raising(x)
        except KeyError as err:
            assert err.args == (x,)
        else:
            raise AssertionError("the cache entry did not run")
    before = _refcounts(raising, raising.__code__, x, raising_transformed.__code__)
    for _ in range(50_000):
        try:
            raising(x)
        except KeyError:
            pass
    after = _refcounts(raising, raising.__code__, x, raising_transformed.__code__)
    assert after == before
    native.set_callback(None)


def _nested(depth, x, y):
    return add(x, y) if depth == 0 else _nested(depth - 1, x, y)


def test_cache_hits_at_every_stack_depth_leak_nothing(native):
    """Answered frames at depths that cross the thread's data-stack chunks: a frame that
    began a chunk gives the chunk back when it is popped (3.12's pop is ours)."""
    x, y = 7, 5
    native.set_callback(only(add, lambda f: entry_for(native, add_transformed, [(("local", 1, "y"), ("equals", 5))])))
    assert add(x, y) == x - y - 1
    before, rss_before = _refcounts(add, add.__code__, add_transformed.__code__), _rss()
    results = {_nested(depth, x, y) for _ in range(20) for depth in range(400)}
    after = _refcounts(add, add.__code__, add_transformed.__code__)
    assert results == {x - y - 1}
    assert after == before
    assert _rss() - rss_before < 4 * 1024 * 1024
    native.set_callback(None)
