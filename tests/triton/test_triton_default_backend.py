"""The default backend (``"kernels"``: C++ kernels for CPU tensors, Triton for CUDA) of
fastdynamo.compile, explain and OptimizedModule; ``backend="triton"`` on CPU without the
interpreter (ATen ops, said once, no per-call cost); and the TRITON_INTERPRET ordering,
in fresh processes so that nothing here can import triton early."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
import torch

import fastdynamo
from fastdynamo.backends import DEFAULT_BACKEND, lookup_backend
from fastdynamo.backends.cpp import CppTarget
from fastdynamo.backends.training import TrainingGraph
from fastdynamo.backends.triton import CompiledGraph
from fastdynamo.convert_frame import Recorder

pytestmark = pytest.mark.usefixtures("fresh_cache")


def _compiled_fns(recorder: Recorder) -> list:
    return [capture.compiled_fn for capture in recorder.captures]


def test_compile_defaults_to_kernels_and_runs_cpp_kernels_on_cpu():
    assert DEFAULT_BACKEND == "kernels" and lookup_backend("inductor") is lookup_backend("kernels")
    recorder = Recorder()

    def f(x, y):
        return torch.softmax(x * y, -1)

    x, y = torch.randn(3, 5), torch.randn(5)
    torch.testing.assert_close(fastdynamo.compile(f, _recorder=recorder)(x, y), f(x, y))
    (compiled_fn,) = _compiled_fns(recorder)
    assert isinstance(compiled_fn, CompiledGraph) and compiled_fn.kernel_count == 1
    assert isinstance(compiled_fn.target, CppTarget)


def test_eager_backend_stays_available():
    recorder = Recorder()
    compiled = fastdynamo.compile(lambda x: x.relu() + 1, backend="eager", _recorder=recorder)
    x = torch.randn(4)
    torch.testing.assert_close(compiled(x), x.relu() + 1)
    (compiled_fn,) = _compiled_fns(recorder)
    assert not isinstance(compiled_fn, CompiledGraph) and not hasattr(compiled_fn, "fallback_reason")


def test_module_defaults_to_kernels_without_grad_and_autograd_with_it():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU(), torch.nn.LayerNorm(8))
    recorder = Recorder()
    compiled = fastdynamo.compile(model, _recorder=recorder)
    x = torch.randn(4, 8)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x))
    out = compiled(x)  # grad mode on, parameters require grad: a new entry, a training graph
    out.sum().backward()
    assert model[0].weight.grad is not None
    kernels, training = _compiled_fns(recorder)
    assert isinstance(kernels, CompiledGraph) and kernels.kernel_count >= 1
    assert isinstance(training, TrainingGraph) and training.backward_half.kernel_count >= 1


def test_explain_uses_the_default_backend_and_takes_another():
    seen = []

    def spy(gm, example_inputs):
        seen.append(gm)
        return gm.forward

    report = fastdynamo.explain(lambda x: x.sin() * 2)(torch.ones(3))
    assert report.graph_count == 1
    assert fastdynamo.explain(lambda x: x.cos(), backend=spy)(torch.ones(3)).graph_count == 1 and len(seen) == 1


def test_another_device_fails_the_guard_and_the_backend_decides_again():
    # Guards pin the device, so a graph compiled for one device is never called with
    # another: CPU (C++ kernels) then meta (ATen ops, its own entry).
    # On a CUDA machine the same path gives CUDA inputs kernels after a CPU entry.
    recorder = Recorder()

    def f(x):
        return (x + 1).exp()

    compiled = fastdynamo.compile(f, _recorder=recorder)
    torch.testing.assert_close(compiled(torch.zeros(3)), torch.full((3,), torch.e))
    assert compiled(torch.zeros(3, device="meta")).device.type == "meta"
    cpu, meta = _compiled_fns(recorder)
    assert isinstance(cpu, CompiledGraph) and cpu.kernel_count == 1
    assert meta.fallback_reason == "device meta (the C++ target runs CPU tensors)"


def _run(script: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    """Run ``script`` in a fresh process without TRITON_INTERPRET (so that nothing imports
    triton early), kernels cached in the test's tmp_path."""
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], env=env, capture_output=True,
                            text=True, timeout=240)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "OK", result.stdout
    return result


def _backend_log(result: subprocess.CompletedProcess) -> list:
    return [line for line in result.stderr.splitlines() if line.startswith("fastdynamo.backends.triton:")]


def test_cpu_without_interpreter_runs_the_plain_graph_and_says_so_once(tmp_path, subprocess_env):
    result = _run("""
        import logging, torch, fastdynamo
        from fastdynamo.convert_frame import Recorder
        from fastdynamo.backends.triton import CompiledGraph
        logging.basicConfig(level=logging.INFO, format="%(name)s:%(message)s")
        recorder = Recorder()
        cases = [(lambda x: torch.softmax(x, -1), (torch.randn(2, 3),)),
                 (lambda x: (x * 2).relu().sum(0), (torch.randn(4, 3),)),
                 (lambda x, y: x @ y + 1, (torch.randn(2, 3), torch.randn(3, 2)))]
        for fn, args in cases:
            compiled = fastdynamo.compile(fn, backend="triton", _recorder=recorder)
            for _ in range(2):
                assert torch.equal(compiled(*args), fn(*args))
        model = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.ReLU())
        with torch.no_grad():
            assert torch.equal(fastdynamo.compile(model, backend="triton", _recorder=recorder)(torch.ones(2, 3)),
                               model(torch.ones(2, 3)))
        assert len(recorder.captures) == 4
        for capture in recorder.captures:
            fn = capture.compiled_fn
            # decided at compile time: the eager backend's plain function, no per-call checks
            assert not isinstance(fn, CompiledGraph) and fn.kernel_count == 0
            assert fn.__func__.__code__.co_filename.startswith("<fastdynamo-graph-")
            assert fn.fallback_reason.startswith("CPU tensors without TRITON_INTERPRET=1"), fn.fallback_reason
        print("OK")
    """, subprocess_env(interpreter=False))
    (message,) = _backend_log(result)
    assert "graphs run as ATen ops: CPU tensors without TRITON_INTERPRET=1" in message
    assert not (tmp_path / "modules").exists()  # no code generated


def test_using_the_backend_early_does_not_import_triton(tmp_path, subprocess_env):
    # The backend imports triton only to generate or run kernels, so a process that used
    # it on CPU can still turn the interpreter on afterwards.
    _run("""
        import os, sys, torch
        from fastdynamo.backends import lookup_backend
        backend = lookup_backend("triton")
        gm = torch.fx.symbolic_trace(lambda x: torch.softmax(x * 2, -1))
        x = torch.randn(3, 5)
        early = backend(gm, [x])
        assert torch.allclose(early(x), torch.softmax(x * 2, -1)) and early.kernel_count == 0
        assert "triton" not in sys.modules
        os.environ["TRITON_INTERPRET"] = "1"
        late = backend(gm, [x])
        assert late.fallback_reason is None and late.kernel_count == 1
        assert torch.allclose(late(x), torch.softmax(x * 2, -1))
        import triton.language
        assert type(triton.language.standard.sigmoid).__name__ == "InterpretedFunction"
        print("OK")
    """, subprocess_env(interpreter=False))


def test_interpreter_flag_set_after_triton_was_imported_runs_aten_and_says_why(tmp_path, subprocess_env):
    # torch imports triton on the first capture (FakeTensorMode loads torch._dynamo), so
    # the flag must be set before that. Set too late, it cannot take effect: ATen ops,
    # said once, never a failing kernel.
    result = _run("""
        import logging, os, torch, fastdynamo
        from fastdynamo.convert_frame import Recorder
        logging.basicConfig(level=logging.INFO, format="%(name)s:%(message)s")
        import triton  # as torch._dynamo does on the first capture
        os.environ["TRITON_INTERPRET"] = "1"
        recorder = Recorder()
        for fn in (lambda x: x * 3, lambda x: x.exp()):
            compiled = fastdynamo.compile(fn, backend="triton", _recorder=recorder)
            assert torch.equal(compiled(torch.ones(2)), fn(torch.ones(2)))
        for capture in recorder.captures:
            assert "set after triton was imported" in capture.compiled_fn.fallback_reason
        print("OK")
    """, subprocess_env(interpreter=False))
    (message,) = _backend_log(result)
    assert "TRITON_INTERPRET=1 was set after triton was imported" in message
