"""Values leaving the tensor world (``tolist``, ``item``, ``numpy``) are clean graph
breaks, also inside loops: one break, not one per iteration, and eager's results."""
from __future__ import annotations

import pytest
import torch

import fastdynamo

pytestmark = pytest.mark.usefixtures("fresh_cache")


def tolist_loop(x, y):
    total = 0.0
    for v in (x + 1).tolist():
        total += v
    return y * total


def item_loop(x, y):
    out = []
    for i in range(3):
        out.append(x[i].item() * 2)
    return y * sum(out)


def numpy_sum(x, y):
    a = (x * 2).numpy()
    return y + float(a.sum())


@pytest.mark.parametrize("fn, breaks", [(tolist_loop, 1), (item_loop, 1), (numpy_sum, 2)])
def test_leaving_the_tensor_world_is_one_clean_break(fn, breaks):
    compiled = fastdynamo.compile(fn, backend="eager")
    for i in range(3):
        x = torch.arange(3.0) + i
        assert torch.equal(compiled(x, torch.ones(2)), fn(x, torch.ones(2)))
    fastdynamo.reset()
    report = fastdynamo.explain(fn, backend="eager")(torch.arange(3.0), torch.ones(2))
    assert report.graph_break_count == breaks, [str(b) for b in report.break_reasons]
    assert report.graph_count >= 1
    with pytest.raises(fastdynamo.FullGraphError, match="leaves the graph"):
        fastdynamo.reset()
        fastdynamo.compile(fn, backend="eager", fullgraph=True)(torch.arange(3.0), torch.ones(2))
