"""``import`` statements inside compiled code: modules already imported are read in the
graph (no break); attribute reads from a user module stay guarded; a first import
breaks the graph (it runs module code)."""
from __future__ import annotations

import sys

import pytest
import torch

import fastdynamo

from . import imported_helper

pytestmark = pytest.mark.usefixtures("fresh_cache")


def _compile(fn):
    fastdynamo.reset()
    return fastdynamo.compile(fn, backend="eager", fullgraph=True)


def test_standard_library_and_torch_imports_stay_in_the_graph():
    def f(x):
        import math as m
        import os.path
        from os import sep

        import torch.nn.functional as F
        return F.relu(x) * m.pi, os.path.sep, sep

    out, joined, sep = _compile(f)(torch.ones(2))
    expected, *rest = f(torch.ones(2))
    assert torch.equal(out, expected) and [joined, sep] == rest
    report = fastdynamo.explain(f, backend="eager")(torch.ones(2))
    assert (report.graph_count, report.graph_break_count) == (1, 0)


def test_user_module_import_reads_are_guarded():
    def f(x):
        from . import imported_helper as helper
        return x * helper.SCALE

    compiled = _compile(f)
    assert torch.equal(compiled(torch.ones(2)), torch.full((2,), 2.0))
    imported_helper.SCALE = 5.0
    try:
        assert torch.equal(compiled(torch.ones(2)), torch.full((2,), 5.0))  # recompiled
    finally:
        imported_helper.SCALE = 2.0


def test_a_first_import_breaks_the_graph():
    assert not any(name.endswith("never_imported_before") for name in sys.modules)

    def f(x):
        from . import never_imported_before  # noqa: F401 - the module does not exist
        return x + 1

    fastdynamo.reset()
    with pytest.raises(fastdynamo.FullGraphError, match="not an attribute yet"):
        fastdynamo.compile(f, backend="eager", fullgraph=True)(torch.ones(2))
    fastdynamo.reset()
    with pytest.raises(ImportError):  # eager's error, from the frame run as Python
        fastdynamo.compile(f, backend="eager")(torch.ones(2))
