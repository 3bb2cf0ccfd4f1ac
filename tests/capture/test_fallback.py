"""A graph that raises at run time: the frame runs again as Python (fallback.py), so the
error, and what the frame does about it, are eager's."""
from __future__ import annotations

import pytest
import torch

import fastdynamo
from fastdynamo.transform.fallback import can_rerun


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
