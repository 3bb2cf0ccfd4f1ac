"""A frame that runs as Python because the compiler failed on it is counted and named by
``explain()`` (``ExplainOutput.internal_errors``, shown by ``str(report)``), when
``config.fallback_on_internal_error`` is on; off (the suite's setting), the error is
raised. Two kinds: the compiler raised while compiling the frame, and the frame's graph
raised where the frame, run as Python, did not (the backend's bug, found at run time).
An error of the program itself (the frame raises as Python too) is never one.
"""
from __future__ import annotations

import warnings

import pytest
import torch

import fastdynamo
from fastdynamo import config, convert_frame
from fastdynamo.convert_frame import InternalError, Recorder, frame_name
from fastdynamo.transform.fallback import graph_errors_reported_to

pytestmark = pytest.mark.usefixtures("fresh_cache")


def cos_plus_one(x):
    return x.cos() + 1


def raising_backend(gm, example_inputs):
    def run(*args):
        raise RuntimeError("simulated backend bug")
    return run


def broken_translate(*args, **kwargs):
    raise AttributeError("simulated translator bug")


def explain_quietly(fn, backend, *args):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        report = fastdynamo.explain(fn, backend=backend)(*args)
    return report, [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]


def test_compile_error_is_counted_and_named(monkeypatch):
    monkeypatch.setattr(config, "fallback_on_internal_error", True)
    monkeypatch.setattr(convert_frame, "translate", broken_translate)
    report, warned = explain_quietly(cos_plus_one, "eager", torch.ones(2))
    assert report.internal_errors == [InternalError(
        frame_name(cos_plus_one.__code__), "AttributeError: simulated translator bug", "compiling")]
    assert report.internal_error_count == 1 and report.graph_count == 0
    assert report.graph_break_count == 1  # the frame ran as Python: still a break, as before
    text = str(report)
    assert "Internal errors (1), frames run as Python:" in text
    assert f"1. cos_plus_one ({__file__}:" in text and "compiling: AttributeError: simulated translator bug" in text
    assert any("simulated translator bug" in w for w in warned)  # the warning stays


@pytest.mark.internal_errors
def test_compile_error_is_raised_in_strict_mode(monkeypatch):
    monkeypatch.setattr(config, "fallback_on_internal_error", False)
    monkeypatch.setattr(convert_frame, "translate", broken_translate)
    with pytest.raises(AttributeError, match="simulated translator bug"):
        fastdynamo.explain(cos_plus_one, backend="eager")(torch.ones(2))


def test_graph_error_at_run_time_is_counted_and_named(monkeypatch):
    monkeypatch.setattr(config, "fallback_on_internal_error", True)
    report, warned = explain_quietly(cos_plus_one, raising_backend, torch.ones(2))
    assert report.internal_errors == [InternalError(
        frame_name(cos_plus_one.__code__), "RuntimeError: simulated backend bug", "running its graph")]
    assert report.graph_count == 1 and report.graph_break_count == 0  # compiled; its graph failed
    assert "running its graph: RuntimeError: simulated backend bug" in str(report)
    assert any("simulated backend bug" in w for w in warned)


def test_graph_error_result_is_eagers(monkeypatch):
    monkeypatch.setattr(config, "fallback_on_internal_error", True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        out = fastdynamo.compile(cos_plus_one, backend=raising_backend)(torch.ones(2))
    torch.testing.assert_close(out, torch.ones(2).cos() + 1)


def test_graph_error_is_raised_in_strict_mode(monkeypatch):
    monkeypatch.setattr(config, "fallback_on_internal_error", False)
    with pytest.raises(RuntimeError, match="simulated backend bug"):
        fastdynamo.explain(cos_plus_one, backend=raising_backend)(torch.ones(2))


def test_program_error_raised_by_the_graph_is_not_an_internal_error(monkeypatch):
    # the index is out of range: the graph raises, and so does the frame run as Python
    monkeypatch.setattr(config, "fallback_on_internal_error", True)

    def pick(x, index):
        return x[index] * 2

    recorder, reported = Recorder(), []
    compiled = fastdynamo.compile(pick, backend="eager", _recorder=recorder)
    with graph_errors_reported_to(lambda code, error: reported.append((code, error))):
        with pytest.raises(IndexError):
            compiled(torch.ones(2), torch.tensor([5]))
    assert len(recorder.captures) == 1 and not recorder.breaks
    assert reported == [] and recorder.internal_errors == []


def test_clean_report_has_no_internal_errors():
    report = fastdynamo.explain(cos_plus_one, backend="eager")(torch.ones(2))
    assert report.internal_errors == [] and report.graph_count == 1
    assert "Internal errors" not in str(report)


def test_reporter_is_removed_after_the_block(monkeypatch):
    monkeypatch.setattr(config, "fallback_on_internal_error", True)
    reported = []
    with graph_errors_reported_to(lambda code, error: reported.append(code)):
        pass
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        fastdynamo.compile(cos_plus_one, backend=raising_backend)(torch.ones(2))
    assert reported == []
