"""The Triton backend with symbolic graphs: correct for every size, the frame compiles
once, and one generated module (kernels with sizes as launch arguments) serves every
size (more in ``test_triton_symbolic_kernels.py``)."""
from __future__ import annotations

import os

import pytest
import torch

from .helpers import assert_same, compiled

pytestmark = pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1",
                                reason="kernels on CPU need Triton's interpreter (set by tests/conftest.py)")


def scale_rows(x, y):
    return torch.relu(x + y) * x.shape[0] + x.sum(1, keepdim=True)


def test_symbolic_graph_runs_one_kernel_set_for_every_size():
    fn, rec = compiled(scale_rows, backend="triton", dynamic=True)
    for n in (3, 5, 7, 5):
        torch.manual_seed(n)
        x, y = torch.randn(n, 4), torch.randn(n, 4)
        torch.testing.assert_close(fn(x, y), scale_rows(x, y))
    assert len(rec.captures) == 1
    assert "sym_size" in rec.captures[0].result.graph_module.code
    graph = rec.captures[0].compiled_fn
    assert getattr(graph, "fallback_reason", None) is None
    assert graph.kernel_count >= 1
    # the frame calls the symbolic module's forward for every size (its guards hold the
    # sizes): one module, specialised once, no per-call metadata dispatch
    assert len(graph.specialisations) == 1
    assert rec.captures[0].result is not None and graph.fastdynamo_guarded is graph.module.forward
    assert graph.module.SIZE_ARGUMENTS == ["s0", "s1"]


def test_automatic_dynamic_with_triton_matches_eager():
    fn, rec = compiled(scale_rows, backend="triton")
    for n in (2, 3, 4, 6):
        x, y = torch.randn(n, 4), torch.randn(n, 4)
        assert_same(fn(x, y).shape, scale_rows(x, y).shape)
        torch.testing.assert_close(fn(x, y), scale_rows(x, y))
    assert len(rec.captures) == 2
