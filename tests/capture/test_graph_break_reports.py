"""What graph breaks report: ``fullgraph=True`` raises at the first break naming its
``file:line``; the ``breaks`` and ``recompiles`` logs (set at runtime or from
``FASTDYNAMO_LOGS``) name every break and the recompiles of resume functions; explain's
text lists every break."""
from __future__ import annotations

import importlib
import io
import re

import pytest

import fastdynamo
from fastdynamo import logs
from fastdynamo._runtime import native

from .break_helpers import PRINT_BREAK, assert_matches_eager, call, explain, line_of, vec
from .test_graph_breaks import branch_on_sum, caller, class_inside, item_then_use, print_text

pytestmark = pytest.mark.usefixtures("fresh_cache")


# ---------------------------------------------------------------- fullgraph and logs

@pytest.mark.parametrize("fn, make", [
    (branch_on_sum, lambda: call(vec(0))),
    (item_then_use, lambda: call(vec(0))),
    (print_text, lambda: call(vec(0), io.StringIO())),
    (class_inside, lambda: call(vec(0))),
], ids=lambda v: getattr(v, "__name__", ""))
def test_fullgraph_raises_at_first_break(fn, make):
    arguments = make()
    with pytest.raises(fastdynamo.FullGraphError) as info:
        fastdynamo.compile(fn, fullgraph=True)(*arguments.args)
    assert line_of(fn, "# BREAK") in str(info.value)
    assert fn.__name__ in str(info.value)


def print_then_sin(x, buf):
    y = x * 2
    print("between", file=buf)  # BREAK
    return y.sin()


def test_logs_name_breaks_and_resume_recompiles(capsys):
    logs.set_logs("breaks,recompiles")
    compiled = fastdynamo.compile(print_then_sin)
    buf = io.StringIO()
    compiled(vec(0), buf)
    compiled(vec(1), buf)  # cache hit: nothing logged
    err = capsys.readouterr().err
    assert err.count("[fastdynamo:breaks]") == 1, err
    assert f"graph break in print_then_sin: {line_of(print_then_sin, '# BREAK')}: {PRINT_BREAK}" in err
    assert "[fastdynamo:recompiles]" not in err
    compiled(vec(0, n=5), buf)
    compiled(vec(0).double(), buf)
    err = capsys.readouterr().err
    resume = re.findall(r"recompiling (print_then_sin\.<resume at line \d+>) \(.*\): (.*)", err)
    assert len(resume) == 2, err
    assert "size()[0] == 3, got 5" in resume[0][1]
    assert "dtype == torch.float32, got torch.float64" in resume[1][1]
    assert err.count("recompiling print_then_sin (") == 2
    assert err.count("[fastdynamo:breaks]") == 2


def test_logs_from_environment(monkeypatch, capsys):
    monkeypatch.setenv("FASTDYNAMO_LOGS", "breaks,recompiles")
    importlib.reload(logs)
    try:
        assert logs.enabled("breaks") and logs.enabled("recompiles") and not logs.enabled("graph")
        fastdynamo.compile(print_then_sin)(vec(0), io.StringIO())
    finally:
        monkeypatch.delenv("FASTDYNAMO_LOGS")
        importlib.reload(logs)
    assert line_of(print_then_sin, "# BREAK") in capsys.readouterr().err


def write_item(x, buf):
    return buf.write(str(x.sum().item()))  # BREAK


def test_logs_and_explain_when_a_frame_cannot_resume(capsys):
    # a break at LOAD_METHOD (the stack after it depends on the object) is not resumed
    logs.set_logs("breaks")
    assert_matches_eager(write_item, lambda i: call(vec(i), io.StringIO()), graphs=0, breaks=1)
    err = capsys.readouterr().err
    assert f"write_item runs as Python: {line_of(write_item, '# BREAK')}" in err
    report = explain(write_item, vec(0), io.StringIO())
    assert report.break_reasons[0].location == line_of(write_item, "# BREAK")


def test_explain_text_lists_every_break():
    report = explain(caller, vec(0), io.StringIO())
    text = str(report)
    assert f"Graph break count: {report.graph_break_count}" in text
    for brk in report.break_reasons:
        assert f"{brk.location}: {brk.reason}" in text
    assert "<resume at line" in text


def test_cache_entries_of_resume_functions():
    compiled = fastdynamo.compile(print_then_sin)
    for i in range(3):
        compiled(vec(i), io.StringIO())
    assert len(native().cache_entries(print_then_sin.__code__)) == 1
