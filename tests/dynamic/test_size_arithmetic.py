"""``torch.Size`` concatenation and repetition with symbolic sizes (GPT2's
``x.size()[:-1] + (self.nf,)``): a Size, as eager's ``Size.__add__``/``__radd__``/
``__mul__`` return, in one graph under ``dynamic=True``."""
from __future__ import annotations

import torch

import fastdynamo

from .helpers import assert_same, compiled


def size_arithmetic(x):
    s = x.size()
    split = x.view(s[:-1] + (2, 2))
    lifted = x.reshape((1,) + s)
    doubled = s * 2
    return split, lifted, type(s[:-1] + (4,)), type((1,) + s), doubled, type(doubled)


def test_size_concatenation_is_a_size_in_one_graph():
    fn, rec = compiled(size_arithmetic, dynamic=True, fullgraph=True)
    for n in (3, 5, 7):
        x = torch.randn(n, 4)
        got, want = fn(x), size_arithmetic(x)
        assert_same(got, want)
        assert [type(v) for v in got] == [type(v) for v in want]
    # no break (Size.__add__ broke before), and the sliced Size passed to view() stays
    # symbolic: one graph serves every size (test_size_slices.py has the automatic path)
    assert not rec.breaks and len(rec.captures) == 1
    report = fastdynamo.explain(size_arithmetic, backend="eager", dynamic=True)(torch.randn(3, 4))
    assert (report.graph_count, report.graph_break_count) == (1, 0)
