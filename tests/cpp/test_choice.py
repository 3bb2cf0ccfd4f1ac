"""The default backend keeps a graph's kernels only where they pay (kernels/choice.py):
a module without kernels runs the ATen ops; with ``FASTDYNAMO_KERNELS_CHOICE=measure``
(the default outside the test suite) both are timed on the example inputs; explain()
says which was chosen and why. ``backend="cpp"`` always runs the kernels."""
from __future__ import annotations

import time

import pytest
import torch

import fastdynamo
from fastdynamo.backends.kernels import choice
from fastdynamo.backends.kernels.compiler import CompiledGraph
from fastdynamo.convert_frame import Recorder

pytestmark = pytest.mark.usefixtures("fresh_cache")


def _slow(seconds: float):
    def run(*args):
        time.sleep(seconds)
    return run


def test_choose_keeps_the_faster_callable(monkeypatch):
    monkeypatch.setenv(choice.VARIABLE, "measure")
    fast, slow = (lambda *args: None), _slow(0.002)
    assert choice.choose(1, fast, lambda: slow, []).kernels
    lost = choice.choose(1, slow, lambda: fast, [])
    assert not lost.kernels and lost.why.startswith("measured: kernels")
    assert not choice.choose(0, fast, lambda: slow, []).kernels  # nothing to run: ATen ops


def test_a_long_aten_run_is_not_measured(monkeypatch):
    monkeypatch.setenv(choice.VARIABLE, "measure")
    calls = []
    result = choice.choose(2, lambda: calls.append("kernels"), lambda: _slow(choice.MEASURE_MAX_SECONDS * 1.5), [])
    assert result.kernels and result.why.startswith("not measured") and calls == []


def test_the_mode_is_checked(monkeypatch):
    monkeypatch.setenv(choice.VARIABLE, "sometimes")
    with pytest.raises(ValueError, match="FASTDYNAMO_KERNELS_CHOICE='sometimes'"):
        choice.choose(1, lambda: None, lambda: (lambda: None), [])
    monkeypatch.setenv(choice.VARIABLE, "aten")
    assert not choice.choose(1, lambda: None, lambda: (lambda: None), []).kernels


def test_a_measured_choice_is_kept_for_the_next_time(monkeypatch, tmp_path):
    monkeypatch.setenv(choice.VARIABLE, "measure")
    kept = tmp_path / "module.choice.json"
    first = choice.choose(1, lambda: None, lambda: _slow(0.002), [], kept)
    assert first.kernels and kept.exists()
    calls = []
    again = choice.choose(1, lambda: calls.append(1), lambda: (lambda: calls.append(2)), [], kept)
    assert again.kernels and calls == [] and again.why == f"{first.why}, in an earlier process"


def chain(x):
    for _ in range(12):
        x = torch.relu(x * 1.01 + 0.1)
    return x


def test_measured_kernels_that_pay_are_kept_and_explained(monkeypatch):
    monkeypatch.setenv(choice.VARIABLE, "measure")
    x = torch.randn(64, 64)
    recorder = Recorder()
    with torch.no_grad():
        torch.testing.assert_close(fastdynamo.compile(chain, _recorder=recorder)(x), chain(x))
    (capture,) = recorder.captures
    compiled = capture.compiled_fn  # 12 fused ops in one kernel against 36 ATen calls
    assert isinstance(compiled, CompiledGraph) and compiled.kernel_count == 1
    assert compiled.choice.why.startswith("measured: kernels")
    report = fastdynamo.explain(chain)(x)
    assert "Backend: 1 cpp kernel (measured: kernels" in str(report), str(report)


def test_a_graph_without_kernels_runs_its_aten_ops_and_says_so():
    def matmuls(a, b):
        return (a @ b) @ b

    a, b = torch.randn(4, 4), torch.randn(4, 4)
    report = fastdynamo.explain(matmuls)(a, b)
    assert report.graph_count == 1
    assert report.backend_notes == ["ATen ops: the kernels do not pay (no kernels: every op is an ATen call)"]
    recorder = Recorder()
    torch.testing.assert_close(fastdynamo.compile(matmuls, _recorder=recorder)(a, b), matmuls(a, b))
    (capture,) = recorder.captures
    assert capture.compiled_fn.kernel_count == 0


def test_the_cpp_backend_always_runs_its_kernels(monkeypatch):
    monkeypatch.setenv(choice.VARIABLE, "aten")
    recorder = Recorder()
    x = torch.randn(8)
    torch.testing.assert_close(fastdynamo.compile(chain, backend="cpp", _recorder=recorder)(x), chain(x))
    (capture,) = recorder.captures
    assert capture.compiled_fn.kernel_count == 1
    assert capture.compiled_fn.choice.why == "the kernels, as the backend was asked for"
