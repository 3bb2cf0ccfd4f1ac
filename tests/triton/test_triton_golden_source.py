"""Golden generated source for small cases (FASTDYNAMO_UPDATE_GOLDEN=1 rewrites them).

The whole module is compared: kernel, launch configurations and wrapper. A change here
is a change in what users run; review the diff.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from fastdynamo.backends.triton import compile_graph

GOLDEN = Path(__file__).parent / "golden"


def scale_shift(x):
    return x * 2 + 1


def row_softmax(x):
    return torch.softmax(x, -1)


CASES = {
    "pointwise_scale_shift": (scale_shift, [torch.randn(4, 8)]),
    "persistent_softmax": (row_softmax, [torch.randn(4, 8)]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_generated_source_matches_golden(name):
    fn, inputs = CASES[name]
    compiled = compile_graph(torch.fx.symbolic_trace(fn), inputs)
    source = Path(compiled.source_path).read_text()
    golden = GOLDEN / f"{name}.py.txt"
    if os.environ.get("FASTDYNAMO_UPDATE_GOLDEN") == "1":
        golden.write_text(source)
    assert source == golden.read_text()
