"""Per-code caches: MRU order, miss counters, the recompile limit, reset."""
from __future__ import annotations

import warnings

import pytest

from native_helpers import only


def scale(x):
    return x


def scale_by_10(x):
    return x * 10


def compile_exact_match(native):
    """A callback that caches one entry per distinct int argument."""

    def decide(frame):
        value = frame.f_locals["x"]
        return native.CacheEntry(native.GuardSet([(("local", 0, "x"), ("equals", value))]), scale_by_10.__code__)

    return only(scale, decide)


def test_entries_are_most_recently_used_first(native):
    native.set_callback(compile_exact_match(native))
    assert [scale(1), scale(2), scale(3)] == [10, 20, 30]
    assert scale(1) == 10
    native.set_callback(None)
    entries = native.cache_entries(scale.__code__)
    order = [e.guards.failure_reason(native.Frame(scale.__code__, [1], globals())) for e in entries]
    # The entry for x == 1 moved to the front; the others stay newest first.
    assert order == [None, "x == 3, got 1", "x == 2, got 1"]
    assert [e.hits for e in entries] == [1, 0, 0]
    # Lookups: scale(2) missed e1; scale(3) missed e2, e1; scale(1) missed e3, e2.
    assert [e.misses for e in entries] == [2, 1, 2]


def test_miss_counters(native):
    native.set_callback(compile_exact_match(native))
    scale(1)
    scale(2)  # entry(1) misses
    scale(2)  # entry(2) hits first
    scale(1)  # entry(2) misses, entry(1) hits
    native.set_callback(None)
    counts = [(e.hits, e.misses) for e in native.cache_entries(scale.__code__)]
    assert counts == [(1, 1), (1, 1)]  # entry(1) first again, then entry(2)


def test_recompile_limit_runs_eagerly_and_warns_once(native):
    native.set_recompile_limit(3)
    native.set_callback(compile_exact_match(native))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        results = [scale(i) for i in range(6)]
    native.set_callback(None)
    assert results == [0, 10, 20, 3, 4, 5]
    assert len(native.cache_entries(scale.__code__)) == 3
    assert native.get_code_action(scale.__code__) == native.RUN_ONLY
    (warning,) = [w for w in caught if issubclass(w.category, native.RecompileLimitWarning)]
    text = str(warning.message)
    assert "scale" in text and "recompile limit (3)" in text
    assert "Last failing guard: x == 2, got 3" in text


def test_limit_still_uses_cached_entries(native):
    native.set_recompile_limit(1)
    native.set_callback(compile_exact_match(native))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert [scale(5), scale(6), scale(5)] == [50, 6, 50]
    native.set_callback(None)


def test_limit_validation(native):
    with pytest.raises(ValueError, match="at least 1"):
        native.set_recompile_limit(0)
    assert native.DEFAULT_RECOMPILE_LIMIT == 8


def test_reset_drops_entries_and_marks(native):
    native.set_callback(compile_exact_match(native))
    scale(1)
    native.set_callback(None)
    native.set_code_action(scale_by_10.__code__, native.SKIP)
    native.reset()
    assert native.cache_entries(scale.__code__) == []
    native.set_callback(only(scale, lambda f: None))
    assert scale(1) == 1
    native.set_callback(None)


def test_transformed_code_is_never_itself_intercepted(native):
    seen = []

    def decide(frame):
        seen.append(frame.f_code.co_name)
        return native.CacheEntry(native.GuardSet([]), scale_by_10.__code__)

    def callback(frame):
        return decide(frame) if frame.f_code in (scale.__code__, scale_by_10.__code__) else None

    native.set_callback(callback)
    assert scale(2) == 20
    assert scale_by_10(3) == 30  # scale_by_10's own code is the transformed code
    native.set_callback(None)
    assert seen == ["scale"]
    assert native.get_code_action(scale_by_10.__code__) == native.SKIP


def test_code_state_is_freed_with_the_code(native):
    import gc
    import weakref

    namespace = {}
    exec("def temp(x):\n    return x\n", namespace)
    temp = namespace["temp"]
    transformed = {}
    exec("def temp(x):\n    return -x\n", transformed)
    entry = native.CacheEntry(native.GuardSet([]), transformed["temp"].__code__)
    native.set_callback(only(temp, lambda f: entry))
    assert temp(4) == -4
    native.set_callback(None)
    entry_ref = weakref.ref(transformed["temp"])
    del entry, temp, namespace, transformed
    gc.collect()
    assert entry_ref() is None
