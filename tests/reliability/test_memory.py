"""Memory: compile + reset cycles leave nothing behind (gc-tracked objects, linecache and
torch.fx source entries), and cache entries never keep a closure's tensors, a user
function's globals or a compiled module alive after the user dropped them."""
from __future__ import annotations

import gc
import linecache
import weakref

import pytest
import torch

import fastdynamo
from fastdynamo._runtime import native


def _fx_source_cache() -> dict:
    """torch.fx's cache of generated module sources (what its linecache entries read)."""
    return getattr(getattr(torch.fx.graph_module, "_loader", None), "eval_cache", {})


@pytest.fixture(autouse=True)
def _fresh():
    fastdynamo.reset()
    yield
    fastdynamo.reset()


def _make_function():
    def f(x):
        return x * 2 + 1
    return f


def _compile_and_reset(count: int, x) -> None:
    for _ in range(count):
        fn = _make_function()
        assert torch.equal(fastdynamo.compile(fn, backend="eager")(x), x * 2 + 1)
        fastdynamo.reset()


def _sizes() -> tuple[int, int, int]:
    gc.collect()
    return len(gc.get_objects()), len(linecache.cache), len(_fx_source_cache())


def test_compile_reset_soak_does_not_grow():
    x = torch.ones(3)
    _compile_and_reset(20, x)  # warm: imports, lazily built tables
    objects, lines, fx_sources = _sizes()
    _compile_and_reset(150, x)
    objects_after, lines_after, fx_sources_after = _sizes()
    # was +5 objects and +2 linecache entries per cycle
    assert objects_after - objects < 30
    assert lines_after == lines and fx_sources_after == fx_sources


def _closure_over(tensor):
    def add(x):
        return x + tensor
    return add


def test_closure_tensors_die_with_the_closure_without_reset():
    big = torch.ones(1000)
    watch = weakref.ref(big)
    add = _closure_over(big)
    del big
    compiled = fastdynamo.compile(add, backend="eager")
    for _ in range(3):
        assert torch.equal(compiled(torch.ones(1000)), torch.full((1000,), 2.0))
    (entry,) = native().cache_entries(add.__code__)
    assert entry.hits >= 2
    del add, compiled
    gc.collect()
    assert watch() is None  # the entry's function cache held the closure's cells
    # the code keeps its entry; a new closure of the same code still runs it
    other = _closure_over(torch.zeros(1000))
    assert torch.equal(fastdynamo.compile(other, backend="eager")(torch.ones(1000)), torch.ones(1000))
    assert native().cache_entries(other.__code__)[0] is entry


class Small(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)

    def forward(self, x):
        return self.linear(x).relu()


def test_compiled_module_dies_without_reset():
    module = Small()
    watch = weakref.ref(module)
    compiled = fastdynamo.compile(module, backend="eager")
    x = torch.ones(2, 4)
    with torch.no_grad():
        expected = module(x)
        assert torch.equal(compiled(x), expected)
        assert torch.equal(compiled(x), expected)
    assert len(native().cache_entries(Small.forward.__code__)) == 1
    del module, compiled
    gc.collect()
    assert watch() is None  # an identity guard held it strongly
    # a new module of the same class fails the dead guard and compiles afresh
    again = Small()
    with torch.no_grad():
        assert torch.equal(fastdynamo.compile(again, backend="eager")(x), again(x))


def test_identity_guard_on_a_freed_object_fails():
    rt = native()

    def target():
        pass

    code = (lambda f: f).__code__
    guards = rt.GuardSet([(("local", 0, "f"), ("id_is", target))])
    assert guards.check(rt.Frame(code, [target], {}))
    reference = weakref.ref(target)
    del target
    gc.collect()
    assert reference() is None
    assert "freed" in guards.failure_reason(rt.Frame(code, [lambda: None], {}))
