"""The backend as the registry exposes it: fallbacks, autograd, specialisation, logs."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import torch

from fastdynamo.backends import lookup_backend
from fastdynamo.backends.triton import CompiledGraph, compile_graph

PYTHON_DIR = Path(__file__).resolve().parents[2] / "python"


def test_registered_under_triton_and_callable_directly():
    backend = lookup_backend("triton")
    compiled = backend(torch.fx.symbolic_trace(lambda x: x * 3), [torch.ones(4)])
    assert isinstance(compiled, CompiledGraph)
    assert compiled(torch.ones(4)).tolist() == [3.0] * 4


def test_module_parameters_are_inputs_not_constants(compare):
    model = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.GELU(), torch.nn.LayerNorm(5))
    gm = torch.fx.symbolic_trace(model)
    x = torch.randn(3, 6)
    with torch.no_grad():
        compiled = compare(gm, x)
        model[0].weight.mul_(2)  # an in-place update must be seen: weights are not baked in
        torch.testing.assert_close(compiled(x), model(x))


def test_grad_mode_with_requires_grad_runs_autograd():
    x = torch.randn(4, 5, requires_grad=True)
    compiled = compile_graph(torch.fx.symbolic_trace(lambda x: torch.softmax(x, -1).sum()), [x])
    out = compiled(x)
    out.backward()
    assert x.grad is not None and out.grad_fn is not None
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), torch.softmax(x, -1).sum())


def test_new_shapes_get_their_own_specialisation():
    compiled = compile_graph(torch.fx.symbolic_trace(lambda x: x.sum(-1)), [torch.randn(2, 3)])
    for shape in [(2, 3), (4, 7), (1, 1)]:
        x = torch.randn(shape)
        torch.testing.assert_close(compiled(x), x.sum(-1))
    assert len(compiled.specialisations) == 3


def test_input_mutation_falls_back_to_aten_with_a_reason():
    def fn(x):
        x.add_(1)
        return x * 2

    x = torch.zeros(3)
    compiled = compile_graph(torch.fx.symbolic_trace(fn), [x.clone()])
    assert "mutates a graph input" in compiled.fallback_reason
    assert compiled(x).tolist() == [2.0] * 3 and x.tolist() == [1.0] * 3


def test_outputs_that_view_inputs_alias_them():
    compiled = compile_graph(torch.fx.symbolic_trace(lambda x: (x.t(), x + 1)), [torch.randn(2, 3)])
    x = torch.randn(2, 3)
    view, _ = compiled(x)
    assert view.data_ptr() == x.data_ptr() and view.shape == (3, 2)


def test_cpu_without_interpreter_runs_aten_and_logs_once(tmp_path):
    script = textwrap.dedent("""
        import logging, torch
        logging.basicConfig(level=logging.INFO, format="%(name)s:%(message)s")
        from fastdynamo.backends import lookup_backend
        backend = lookup_backend("triton")
        for _ in range(3):
            compiled = backend(torch.fx.symbolic_trace(lambda x: torch.softmax(x, -1)), [torch.randn(2, 3)])
            x = torch.randn(2, 3)
            assert torch.equal(compiled(x), torch.softmax(x, -1))
        assert compiled.kernel_count == 0
        print("OK")
    """)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.update(PYTHONPATH=str(PYTHON_DIR), FASTDYNAMO_CACHE_DIR=str(tmp_path))
    result = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "OK" in result.stdout
    messages = [line for line in result.stderr.splitlines() if line.startswith("fastdynamo.backends.triton:")]
    assert len(messages) == 1 and "run as ATen ops" in messages[0]
    assert not (tmp_path / "triton").exists()  # no code generated


def test_non_tensor_inputs_fall_back():
    gm = torch.fx.symbolic_trace(lambda x, n: x * n)
    compiled = compile_graph(gm, [torch.ones(2), 3])
    assert compiled.fallback_reason and compiled(torch.ones(2), 3).tolist() == [3.0, 3.0]
