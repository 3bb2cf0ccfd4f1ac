"""Threads calling compiled and uncompiled code at once; chaining to another evaluator."""
from __future__ import annotations

import threading

from native_helpers import entry_for, only


def work(x):
    return x + 1


def work_transformed(x):
    return x + 1000


def untouched(x):
    return x * 2


def test_eight_threads_compiled_and_uncompiled(native):
    errors, barrier = [], threading.Barrier(8)
    compiled_results, plain_results = [], []

    def compiled_thread():
        native.set_callback(only(work, lambda f: entry_for(native, work_transformed, [(("local", 0, "x"), ("type_is", int))])))
        try:
            barrier.wait()
            compiled_results.append(sum(work(i) for i in range(20_000)))
        except Exception as err:  # noqa: BLE001 - reported below
            errors.append(err)
        finally:
            native.set_callback(None)

    def plain_thread():
        try:
            barrier.wait()
            plain_results.append((sum(untouched(i) for i in range(20_000)), sum(work(i) for i in range(20_000))))
        except Exception as err:  # noqa: BLE001
            errors.append(err)

    threads = [threading.Thread(target=compiled_thread if i % 2 else plain_thread) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    expected = sum(i + 1000 for i in range(20_000))
    assert compiled_results == [expected] * 4
    # Threads without a callback never see cached entries.
    assert plain_results == [(sum(i * 2 for i in range(20_000)), sum(i + 1 for i in range(20_000)))] * 4
    assert native.installed_evaluator() == "default"
    (entry,) = native.cache_entries(work.__code__)
    assert entry.hits >= 4 * 20_000 - 4


def test_callbacks_are_per_thread(native):
    native.set_callback(False)
    seen = []
    t = threading.Thread(target=lambda: seen.append(native.get_callback()))
    t.start()
    t.join()
    assert seen == [None] and native.get_callback() is False
    native.set_callback(None)


def test_chains_to_and_restores_the_previous_evaluator(native):
    native._set_passthrough_evaluator(True)
    try:
        assert native.installed_evaluator() == "passthrough"
        native.set_callback(only(work, lambda f: entry_for(native, work_transformed, [])))
        assert native.installed_evaluator() == "fastdynamo"
        before = native._passthrough_frames()
        assert untouched(2) == 4  # not ours to run: handed to the pass-through evaluator
        assert native._passthrough_frames() > before
        assert work(1) == 1001
        native.set_callback(None)
        assert native.installed_evaluator() == "passthrough"
        before = native._passthrough_frames()
        assert work(1) == 2
        assert native._passthrough_frames() > before
    finally:
        native.set_callback(None)
        native._set_passthrough_evaluator(False)
    assert native.installed_evaluator() == "default"


def test_leaves_an_evaluator_installed_on_top_of_ours(native):
    native.set_callback(False)
    native._set_passthrough_evaluator(True)  # someone else installs on top of us
    try:
        native.set_callback(None)
        assert native.installed_evaluator() == "passthrough"
    finally:
        native._set_passthrough_evaluator(False)
