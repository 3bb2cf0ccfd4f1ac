"""``self.__class__`` in a module's forward (Hugging Face code reads it in decorators and
for names) stays in the graph; swapping a module's class recompiles."""
from __future__ import annotations

import torch

import fastdynamo


class Scaled(torch.nn.Module):
    SCALE = 2.0

    def forward(self, x):
        return x * self.__class__.SCALE + len(self.__class__.__name__)


class Tripled(Scaled):
    SCALE = 3.0


def test_module_class_in_one_graph_and_class_swap_recompiles():
    module = Scaled()
    x = torch.ones(2)
    report = fastdynamo.explain(module, backend="eager")(x)
    assert (report.graph_count, report.graph_break_count) == (1, 0)
    fastdynamo.reset()
    compiled = fastdynamo.compile(module, backend="eager", fullgraph=True)
    assert torch.equal(compiled(x), module(x))
    module.__class__ = Tripled
    assert torch.equal(compiled(x), module(x))  # 3.0 * x + 7: a new entry, not Scaled's
