"""A graph that raises at run time: the frame runs again as Python (fallback.py), so the
error, and what the frame does about it, are eager's."""
from __future__ import annotations

import pytest
import torch

import fastdynamo
from fastdynamo.transform.fallback import can_rerun

from .break_helpers import assert_matches_eager, call, compile_recorded, vec

pytestmark = pytest.mark.usefixtures("fresh_cache")


def gather(x, index):
    return x.index_select(0, index) * 2


def test_error_raised_by_the_graph_is_eagers_and_not_chained():
    compiled = fastdynamo.compile(gather, backend="eager")
    x = torch.arange(3.0)
    torch.testing.assert_close(compiled(x, torch.tensor([0, 2])), gather(x, torch.tensor([0, 2])))
    with pytest.raises(IndexError) as info:
        compiled(x, torch.tensor([0, 9]))  # same guards: the compiled graph raises
    assert info.value.__context__ is None  # no "during handling of the above exception"


def test_frame_catching_the_graphs_error_runs_its_handler():
    def f(x, index, log):
        try:
            y = x.index_select(0, index)
        except IndexError:
            log.append("caught")
            y = x - 1
        return y

    compiled = fastdynamo.compile(f, backend="eager")
    x, log = torch.arange(3.0), []
    compiled(x, torch.tensor([1]), log)
    torch.testing.assert_close(compiled(x, torch.tensor([5]), log), x - 1)
    assert log == ["caught"]


def test_graph_that_writes_an_input_is_not_run_twice():
    def f(x, index):
        x.add_(1)
        return x.index_select(0, index)

    compiled = fastdynamo.compile(f, backend="eager")
    x = torch.zeros(2)
    compiled(x, torch.tensor([0]))
    with pytest.raises(IndexError):
        compiled(x, torch.tensor([7]))
    torch.testing.assert_close(x, torch.full((2,), 2.0))  # once per call, as eager


def test_graph_that_draws_random_numbers_is_not_run_twice():
    def f(x, index):
        y = torch.nn.functional.dropout(x, 0.5, training=True)
        return y.index_select(0, index)

    compiled = fastdynamo.compile(f, backend="eager")
    compiled(torch.ones(4), torch.tensor([0]))
    torch.manual_seed(0)
    with pytest.raises(IndexError):
        f(torch.ones(4), torch.tensor([9]))
    expected = torch.rand(3)
    torch.manual_seed(0)
    with pytest.raises(IndexError):
        compiled(torch.ones(4), torch.tensor([9]))
    torch.testing.assert_close(torch.rand(3), expected)  # the generator advanced once


def test_which_graphs_can_run_again():
    assert can_rerun(mutates_inputs=False, draws_random=False)
    assert not can_rerun(mutates_inputs=True, draws_random=False)
    assert not can_rerun(mutates_inputs=False, draws_random=True)


# ---------------------------------------------------------------- what a rerun must not repeat

def _rerun_state(fn, make):
    """Per call (good index, then out-of-range index): outcome, next random number,
    tensor arguments after the call."""
    states = []
    for index in ([0], [99]):
        torch.manual_seed(0)
        args = make(index)
        try:
            fn(*args)
            outcome = "ok"
        except IndexError:
            outcome = "IndexError"
        states.append((outcome, torch.rand(1).item(), [a.clone() for a in args]))
    return states


def _assert_rerun_matches(fn, make):
    eager = _rerun_state(fn, make)
    compiled, recorder = compile_recorded(fn)
    compiled_states = _rerun_state(compiled, make)
    for i, ((eo, er, ea), (co, cr, ca)) in enumerate(zip(eager, compiled_states)):
        assert co == eo, f"call {i}: {co} != {eo}"
        assert cr == er, f"call {i}: random stream differs after the call ({cr} != {er})"
        for k, (e, c) in enumerate(zip(ea, ca)):
            torch.testing.assert_close(c, e, msg=f"call {i}: argument {k} after the call")
    # one graph, compiled by the first call; the second call's raises
    assert len(recorder.captures) == 1 and not recorder.breaks, [str(b) for b in recorder.breaks]


def batch_norm_then_gather(x, running_mean, running_var, index):
    y = torch.nn.functional.batch_norm(x, running_mean, running_var, training=True, momentum=0.5)
    return y.index_select(0, index)  # out of range: only the real data shows it


def sdpa_dropout_then_gather(q, index):
    y = torch.nn.functional.scaled_dot_product_attention(q, q, q, dropout_p=0.5)
    return y.sum(-1).reshape(-1).index_select(0, index)


def fractional_pool_then_gather(x, index):
    y = torch.nn.functional.fractional_max_pool2d(x, 2, output_size=(2, 2))
    return y.reshape(-1).index_select(0, index)


def test_fallback_rerun_batch_norm_running_stats_updated_once():
    # batch_norm(training=True) updates running_mean/var in place inside the ATen op: the
    # graph writes its inputs, so its error is not answered by running the frame again
    _assert_rerun_matches(batch_norm_then_gather, lambda index: (
        torch.randn(4, 3), torch.zeros(3), torch.ones(3), torch.tensor(index)))


@pytest.mark.parametrize("fn, make", [
    (sdpa_dropout_then_gather, lambda index: (torch.randn(2, 4, 8), torch.tensor(index))),
    (fractional_pool_then_gather, lambda index: (torch.randn(1, 1, 5, 5), torch.tensor(index))),
], ids=["sdpa_dropout", "fractional_max_pool2d"])
def test_fallback_rerun_draws_random_numbers_once(fn, make):
    # random ops without a name that says so (dropout_p of SDPA, fractional pooling) are
    # found by their ATen tags
    _assert_rerun_matches(fn, make)


def fallback_many_parameters(x, /, index, *rest, scale=2, **opts):
    y = x * scale + sum(rest) + opts.get("b", 0)
    return y.index_select(0, index)


def test_fallback_rerun_passes_every_kind_of_parameter():
    # pos-only, *args, kw-only and **kwargs reach the Python re-run
    assert_matches_eager(fallback_many_parameters,
                         lambda i: call(vec(i), torch.tensor([0 if i == 0 else 9]), 1, 2, scale=3, b=4),
                         graphs=1, breaks=0)
