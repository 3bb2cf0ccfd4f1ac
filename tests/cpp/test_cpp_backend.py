"""The C++ backend end to end: golden generated sources, the module and binary caches
shared by processes (a changed flag set builds its own binary), and the machine without
a compiler or with a generator bug, where graphs run as ATen ops and say why."""
from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import fastdynamo
from fastdynamo.backends.cpp import compile_graph, op_rules
from fastdynamo.backends.kernels.opset import PointwiseOp
from fastdynamo.convert_frame import Recorder

GOLDEN = Path(__file__).parent / "golden"


def scale_shift(x):
    return x * 2 + 1


def row_softmax(x):
    return torch.softmax(x, -1)


def column_sum_of_transposed(x, y):
    return (x.t() * y).sum(0, keepdim=True)


def layer_norm_half(x, w):
    return torch.nn.functional.layer_norm(x, (16,), w).to(torch.bfloat16)


CASES = {
    "pointwise_scale_shift": (scale_shift, [torch.randn(4, 8)]),
    "row_softmax": (row_softmax, [torch.randn(4, 8)]),
    "transposed_column_sum": (column_sum_of_transposed, [torch.randn(6, 5), torch.randn(5, 6)]),
    "layer_norm_to_bfloat16": (layer_norm_half, [torch.randn(3, 16), torch.randn(16)]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_generated_source_matches_golden(name):
    """The whole module: kernels, their declarations and the wrapper. A change here is a
    change in what users run (FASTDYNAMO_UPDATE_GOLDEN=1 rewrites them); review the diff."""
    fn, inputs = CASES[name]
    compiled = compile_graph(torch.fx.symbolic_trace(fn), inputs)
    torch.testing.assert_close(compiled(*inputs), fn(*inputs))
    source = Path(compiled.source_path).read_text()
    golden = GOLDEN / f"{name}.py.txt"
    if os.environ.get("FASTDYNAMO_UPDATE_GOLDEN") == "1":
        golden.write_text(source)
    assert source == golden.read_text()


SCRIPT = """
import json, torch, fastdynamo
from fastdynamo.backends.cpp import binary_cache
from fastdynamo.backends.kernels import cache
from fastdynamo.convert_frame import Recorder
def f(x, w):
    return torch.nn.functional.layer_norm(x, (8,), w).relu() @ w.expand(8, 8), torch.softmax(x * 3, 0)
x, w = torch.randn(4, 8), torch.randn(8)
recorder = Recorder()
with torch.no_grad():
    out = fastdynamo.compile(f, _recorder=recorder)(x, w)
ok = all(torch.allclose(a, b, atol=1e-5) for a, b in zip(out, f(x, w)))
(capture,) = recorder.captures
print(json.dumps({"ok": ok, "modules": dict(cache.STATS), "binaries": dict(binary_cache.STATS),
                  "kernels": capture.compiled_fn.kernel_count}))
"""


def _run(env: dict) -> dict:
    result = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_processes_share_modules_and_binaries_and_a_new_flag_set_builds_its_own(tmp_path, subprocess_env):
    env = subprocess_env(cache_dir=tmp_path, FASTDYNAMO_KERNELS_CHOICE="kernels")
    first = _run(env)
    assert first["ok"] and first["kernels"] >= 2
    assert first["modules"].get("codegen") == 1 and first["binaries"].get("compiles") == 1
    second = _run(env)  # nothing generated, nothing compiled
    assert second["ok"] and second["kernels"] == first["kernels"]
    assert second["modules"].get("codegen", 0) == 0 and second["binaries"].get("compiles", 0) == 0
    assert second["binaries"].get("disk_hits") == 1
    other = _run({**env, "FASTDYNAMO_CPP_ISA": "none"})  # the same module, another binary
    assert other["ok"] and other["modules"].get("codegen", 0) == 0 and other["binaries"].get("compiles") == 1
    assert len(list((tmp_path / "cpp").glob("*.so"))) == 2


NO_COMPILER = """
import logging, torch, fastdynamo
from fastdynamo.convert_frame import Recorder
logging.basicConfig(level=logging.WARNING, format="%(name)s:%(message)s")
recorder = Recorder()
with torch.no_grad():
    for fn in (lambda x: torch.softmax(x * 2, -1), lambda x: x.exp() + 1):
        compiled = fastdynamo.compile(fn, _recorder=recorder)
        x = torch.randn(3, 4)
        assert torch.allclose(compiled(x), fn(x))
for capture in recorder.captures:
    assert capture.compiled_fn.kernel_count == 0
    assert capture.compiled_fn.fallback_reason.startswith("no C++ toolchain"), capture.compiled_fn.fallback_reason
print("OK")
"""


def test_without_a_compiler_graphs_run_as_aten_ops_said_once(tmp_path, subprocess_env):
    env = subprocess_env(cache_dir=tmp_path, CXX="/nonexistent/c++", FASTDYNAMO_KERNELS_CHOICE="kernels")
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(NO_COMPILER)], env=env, capture_output=True,
                            text=True, timeout=240)
    assert result.returncode == 0 and result.stdout.strip().endswith("OK"), result.stderr[-3000:]
    said = [line for line in result.stderr.splitlines() if line.startswith("fastdynamo.backends.cpp:")]
    assert len(said) == 1 and "no C++ toolchain" in said[0] and "/nonexistent/c++" in said[0], said


@pytest.mark.usefixtures("fresh_cache")
def test_a_generator_bug_that_fails_to_compile_runs_aten_ops_and_warns(monkeypatch, caplog, fresh_cache):
    fresh_cache.disk()
    monkeypatch.setitem(op_rules.POINTWISE_RULES, PointwiseOp.EXP, "no_such_function({0})")
    monkeypatch.setenv("FASTDYNAMO_KERNELS_STRICT", "0")
    monkeypatch.setenv("FASTDYNAMO_TRITON_STRICT", "0")
    recorder = Recorder()
    x = torch.randn(5)
    with caplog.at_level(logging.WARNING, logger="fastdynamo.backends.cpp"):
        out = fastdynamo.compile(lambda x: x.exp() * 2, backend="cpp", _recorder=recorder)(x)
    torch.testing.assert_close(out, x.exp() * 2)
    (capture,) = recorder.captures
    assert capture.compiled_fn.kernel_count == 0
    assert capture.compiled_fn.fallback_reason.startswith("generated C++ failed to compile")
    assert any("failed to compile" in record.message for record in caplog.records)


@pytest.mark.usefixtures("fresh_cache")
def test_in_strict_mode_a_compile_error_is_raised(monkeypatch, fresh_cache):
    from fastdynamo.backends.cpp import binary_cache

    fresh_cache.disk()
    monkeypatch.setitem(op_rules.POINTWISE_RULES, PointwiseOp.EXP, "no_such_function({0})")
    with pytest.raises(binary_cache.CompileError, match="no_such_function"):
        compile_graph(torch.fx.symbolic_trace(lambda x: x.exp()), [torch.randn(3)])
