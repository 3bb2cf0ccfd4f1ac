"""Bad input to the public API gets a clear error naming what was wrong (torch.compile's
conventions): arguments of the wrong kind, and a user backend that raises while
compiling a graph or returns something that cannot be called."""
from __future__ import annotations

import logging
import pytest
import torch

import fastdynamo


def plus_one(x):
    return x + 1


@pytest.mark.parametrize("value", ["yes", 1, None])
def test_fullgraph_must_be_a_bool(value):
    with pytest.raises(TypeError, match="fullgraph must be True or False"):
        fastdynamo.compile(plus_one, fullgraph=value)
    with pytest.raises(TypeError, match="fullgraph must be True or False"):
        fastdynamo.compile(torch.nn.ReLU(), fullgraph=value)


def test_a_backend_that_raises_while_compiling_is_reported_not_run_around():
    def broken(gm, example_inputs):
        raise ValueError("no kernel for this graph")

    compiled = fastdynamo.compile(plus_one, backend=broken)
    with pytest.raises(fastdynamo.BackendCompilerFailed, match="backend .*broken raised ValueError .*plus_one") as err:
        compiled(torch.ones(2))
    assert isinstance(err.value.__cause__, ValueError)


def test_a_backend_that_returns_no_callable_is_reported():
    compiled = fastdynamo.compile(plus_one, backend=lambda gm, example_inputs: 3)
    with pytest.raises(fastdynamo.BackendCompilerFailed, match="returned int .*not a callable"):
        compiled(torch.ones(2))


def test_the_backends_error_after_a_graph_break_is_reported_too():
    def breaks(x):
        y = x * 2
        print("", end="")  # a graph break: the graph before it goes to the backend
        return y + 1

    def broken(gm, example_inputs):
        raise KeyError("op")

    with pytest.raises(fastdynamo.BackendCompilerFailed, match="KeyError"):
        fastdynamo.compile(breaks, backend=broken)(torch.ones(2))


def test_a_built_in_backend_failing_is_an_internal_error_not_the_users(monkeypatch):
    """Our own backend raising is a compiler bug: explain counts it and, with the fallback
    on, the frame runs as Python (the user's backend raising is theirs to fix)."""
    from fastdynamo import config
    from fastdynamo.backends import eager

    def broken_eager(gm, example_inputs):
        raise RuntimeError("simulated eager backend bug")

    broken_eager.__module__ = eager.__name__
    monkeypatch.setattr(config, "fallback_on_internal_error", True)
    with pytest.warns(RuntimeWarning, match="simulated eager backend bug"):
        report = fastdynamo.explain(plus_one, backend=broken_eager)(torch.ones(2))
    assert report.internal_error_count == 1 and report.graph_count == 0


def test_mismatched_shapes_raise_eagers_error_without_torchs_meta_log(caplog):
    def add(x, y):
        return x + y

    compiled = fastdynamo.compile(add, backend="eager")
    with pytest.raises(RuntimeError) as eager_error:
        add(torch.ones(2), torch.ones(3))
    with caplog.at_level(logging.DEBUG), pytest.raises(RuntimeError) as compiled_error:
        compiled(torch.ones(2), torch.ones(3))
    assert str(compiled_error.value) == str(eager_error.value)
    assert not [r for r in caplog.records if "attempting to run meta" in r.getMessage()]
    # the filter is only there while a frame compiles
    assert not logging.getLogger("torch._subclasses.fake_tensor").filters
