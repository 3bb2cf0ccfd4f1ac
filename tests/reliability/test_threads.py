"""Threads: 8 threads x 2,000 calls of several compiled functions in both grad modes
(eager backend), the Triton backend's kernels in the interpreter from 8 threads, threads
that exit with a callback set, and cache entries reordered by another thread while guards
run Python."""
from __future__ import annotations

import sys
import threading
import time

import pytest
import torch

import fastdynamo
from fastdynamo._runtime import native
from fastdynamo.convert_frame import Recorder


@pytest.fixture(autouse=True)
def _fresh():
    fastdynamo.reset()
    yield
    native().set_callback(None)
    fastdynamo.reset()


def scale(x, y):
    return (x * y).relu() + 1


def mix(x):
    return torch.softmax(x, -1) * 2 - x.mean()


def with_constant(x, c):
    return x * c


def _run_threads(worker, count: int = 8, timeout: float = 240) -> list:
    errors: list = []
    barrier = threading.Barrier(count)

    def body(index):
        try:
            barrier.wait()
            worker(index)
        except BaseException as error:  # noqa: BLE001 - reported by the test
            errors.append(error)

    threads = [threading.Thread(target=body, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout)
    assert not any(thread.is_alive() for thread in threads), "a thread hung"
    return errors


def test_eight_threads_two_thousand_calls_several_functions_and_grad_modes():
    compiled = [fastdynamo.compile(fn, backend="eager") for fn in (scale, mix, with_constant)]
    x, y, z = torch.randn(4), torch.randn(4), torch.randn(2, 8)
    expected = {}
    for grad in (True, False):
        with torch.set_grad_enabled(grad):
            expected[grad] = (scale(x, y), mix(z), with_constant(x, 3.0), with_constant(x, -0.0))
    wrong = []

    def worker(index):
        for call in range(2000):
            grad = (call + index) % 3 != 0
            with torch.set_grad_enabled(grad):
                kind = (call + index) % 4
                got = (compiled[0](x, y) if kind == 0 else compiled[1](z) if kind == 1
                       else compiled[2](x, 3.0) if kind == 2 else compiled[2](x, -0.0))
            want = expected[grad][kind]
            if not (torch.equal(got, want) and got.requires_grad == want.requires_grad):
                wrong.append((index, call, kind))

    assert _run_threads(worker) == []
    assert wrong == []
    rt = native()
    # one entry per (function, grad mode, constant): concurrent misses never duplicate
    assert len(rt.cache_entries(scale.__code__)) == 2
    assert len(rt.cache_entries(mix.__code__)) == 2
    assert len(rt.cache_entries(with_constant.__code__)) == 4
    assert sum(e.hits for e in rt.cache_entries(mix.__code__)) >= 8 * 500 - 16
    assert rt.installed_evaluator() == "default"


def test_triton_interpreter_kernels_from_eight_threads():
    pytest.importorskip("triton")
    from fastdynamo.backends.triton import runtime

    if not runtime.interpreter_enabled() or runtime.interpreter_mismatch():
        pytest.fail("the suite runs the Triton backend in its interpreter (tests/conftest.py)")
    recorder = Recorder()
    compiled = [fastdynamo.compile(scale, backend="triton", _recorder=recorder),
                fastdynamo.compile(mix, backend="triton", _recorder=recorder)]
    x, y, z = torch.randn(4), torch.randn(4), torch.randn(2, 8)
    with torch.no_grad():
        assert torch.allclose(compiled[0](x, y), scale(x, y))
        assert torch.allclose(compiled[1](z), mix(z), atol=1e-6)
    graphs = [capture.compiled_fn for capture in recorder.captures]
    assert len(graphs) == 2 and all(graph.kernel_count >= 1 for graph in graphs)  # kernels, not ATen
    wrong = []

    def worker(index):
        for call in range(6):
            with torch.set_grad_enabled((call + index) % 2 == 0):
                a, b = compiled[0](x, y), compiled[1](z)
            if not (torch.allclose(a, scale(x, y)) and torch.allclose(b, mix(z), atol=1e-6)):
                wrong.append((index, call))

    errors = _run_threads(worker)
    assert errors == [] and wrong == []  # were interpreter errors: the grid index is global


def test_triton_interpreter_kernels_under_a_profiler_in_threads():
    pytest.importorskip("triton")
    compiled = fastdynamo.compile(scale, backend="triton")
    x, y = torch.randn(4), torch.randn(4)
    with torch.no_grad():
        compiled(x, y)  # compiled before profiling starts
    events = []

    def profiler(frame, event, arg):
        events.append(event)

    wrong = []

    def worker(index):
        sys.setprofile(profiler)
        try:
            for _ in range(3):
                with torch.no_grad():
                    if not torch.allclose(compiled(x, y), scale(x, y)):
                        wrong.append(index)
        finally:
            sys.setprofile(None)

    assert _run_threads(worker, count=4) == [] and wrong == []
    assert events and native().cache_entries(profiler.__code__) == []


def test_thread_exiting_with_a_callback_set_releases_the_evaluator():
    rt = native()

    def leave_callback_set():
        rt.set_callback(False)
        assert rt.installed_evaluator() == "fastdynamo"

    thread = threading.Thread(target=leave_callback_set)
    thread.start()
    thread.join()

    def any_python():
        return 1

    # The thread's native state is destroyed after join() returns (the OS thread still
    # runs its thread-local destructors); then the next frame uninstalls the evaluator.
    deadline = time.monotonic() + 5
    while rt.installed_evaluator() != "default" and time.monotonic() < deadline:
        assert any_python() == 1
        time.sleep(0.01)
    assert rt.installed_evaluator() == "default"


class Tagged:
    """An object whose guarded attribute can hand the GIL to another thread mid-guard."""

    pause_once: threading.Event | None = None
    resumed: threading.Event | None = None

    def __init__(self, tag):
        self._tag = tag
        self.reads = 0

    @property
    def tag(self):
        self.reads += 1
        # the second read is b's own guard (the first is a's, the entry before it)
        if self._tag == "b" and self.reads == 2 and Tagged.pause_once is not None:
            pause, Tagged.pause_once = Tagged.pause_once, None
            pause.set()
            assert Tagged.resumed.wait(10)  # another thread pushes an entry meanwhile
        return self._tag


def work(obj):
    return obj


def work_transformed(obj):
    return ("transformed", obj._tag)


def test_lookup_promotes_the_entry_that_passed_when_another_thread_reorders_entries():
    rt = native()

    def entry(tag):
        return rt.CacheEntry(rt.GuardSet([(("attr", ("local", 0, "obj"), "tag"), ("equals", tag))]),
                             work_transformed.__code__)

    made = {tag: entry(tag) for tag in "abc"}

    def callback(frame):
        if frame.f_code is not work.__code__:
            return None
        return made[frame.localsplus[0]._tag]

    rt.set_callback(callback)
    try:
        assert work(Tagged("b")) == ("transformed", "b")
        assert work(Tagged("a")) == ("transformed", "a")
        assert rt.cache_entries(work.__code__) == [made["a"], made["b"]]
        Tagged.pause_once, Tagged.resumed = threading.Event(), threading.Event()
        pause = Tagged.pause_once

        def other_thread():
            assert pause.wait(10)
            rt.set_callback(callback)
            try:
                assert work(Tagged("c")) == ("transformed", "c")  # pushes c to the front
            finally:
                rt.set_callback(None)
            Tagged.resumed.set()

        thread = threading.Thread(target=other_thread)
        thread.start()
        assert work(Tagged("b")) == ("transformed", "b")  # b's guard ran while c was pushed
        thread.join()
    finally:
        rt.set_callback(None)
    # b passed, so b is the most recently used: not whichever entry took its index
    assert rt.cache_entries(work.__code__) == [made["b"], made["c"], made["a"]]
    time.sleep(0)


class _LockThatPausesAfterRelease:
    """The compile lock, except that the first thread through it waits, inside it, until
    a second thread has missed too and arrived at it, then waits again, after releasing
    it, until that thread has been through it: the GIL switch that can happen at any
    eval-breaker check between the release and the callback's return to the hook."""

    def __init__(self):
        self._lock = threading.RLock()
        self._depth = threading.local()
        self.arrivals = 0
        self.entered = threading.Event()
        self.second_arrived = threading.Event()
        self.second_left = threading.Event()

    def __enter__(self):
        self._depth.value = getattr(self._depth, "value", 0) + 1
        if self._depth.value == 1:
            self.arrivals += 1
            self._depth.arrival = self.arrivals
            if self.arrivals == 2:
                self.second_arrived.set()
        self._lock.acquire()
        if self._depth.value == 1 and self._depth.arrival == 1:
            self.entered.set()
            self.second_arrived.wait(5)  # the other thread misses meanwhile
        return self

    def __exit__(self, *exc):
        self._depth.value -= 1
        outermost = self._depth.value == 0
        self._lock.release()
        if outermost and self._depth.arrival == 1:
            self.second_left.wait(5)  # the other thread takes the lock meanwhile
        elif outermost:
            self.second_left.set()
        return False


def added(x, y):
    return x * 2 + y


def test_a_concurrent_miss_finds_the_entry_published_before_the_compile_lock_is_released(monkeypatch):
    from fastdynamo import convert_frame

    lock = _LockThatPausesAfterRelease()
    monkeypatch.setattr(convert_frame, "_compile_lock", lock)
    compiled = fastdynamo.compile(added, backend="eager")
    x, y = torch.randn(3), torch.randn(3)
    results, errors = [], []

    def call(wait_for=None):
        try:
            if wait_for is not None:
                assert wait_for.wait(10)
            results.append(compiled(x, y))
        except BaseException as error:  # noqa: BLE001 - reported by the test
            errors.append(error)

    first = threading.Thread(target=call)
    second = threading.Thread(target=call, args=(lock.entered,))
    first.start()
    second.start()
    first.join(30)
    second.join(30)
    assert errors == [] and len(results) == 2
    assert all(torch.equal(result, added(x, y)) for result in results)
    assert lock.second_left.is_set()  # the second thread missed and went through the lock
    # one entry: the second thread's miss found the first thread's entry under the lock
    assert len(native().cache_entries(added.__code__)) == 1
