"""zip(..., strict=True) inside a captured frame: Python raises ValueError when the
iterables' lengths differ, so the translator must not silently truncate them."""
from __future__ import annotations

import pytest
import torch

import fastdynamo
from fastdynamo.convert_frame import Recorder

pytestmark = pytest.mark.usefixtures("fresh_cache")


def pairs_strict(x, scales):
    out = x
    for s, t in zip(scales, (x, x + 1), strict=True):
        out = out + s * t
    return out


def test_equal_lengths_compile_into_one_graph():
    x = torch.randn(4)
    report = fastdynamo.explain(pairs_strict)(x, [1.0, 2.0])
    assert report.graph_count == 1
    assert report.break_reasons == []
    compiled = fastdynamo.compile(backend="eager")(pairs_strict)
    torch.testing.assert_close(compiled(x, [1.0, 2.0]), pairs_strict(x, [1.0, 2.0]))


def test_unequal_lengths_raise_like_python():
    x = torch.randn(4)
    with pytest.raises(ValueError, match="zip"):
        pairs_strict(x, [1.0, 2.0, 3.0])
    recorder = Recorder()
    compiled = fastdynamo.compile(pairs_strict, backend="eager", _recorder=recorder)
    with pytest.raises(ValueError, match="zip"):
        compiled(x, [1.0, 2.0, 3.0])
    # the loop runs in Python from the zip on (the frame breaks there), not in a graph
    assert any("zip(strict=True)" in brk.reason for brk in recorder.breaks)
