"""The kernel cache of a symbolic graph is keyed by the graph with its sizes as symbols:
a second process with the same cache directory calls with another size and finds the
module on disk (no code generation); the golden source of one such module."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import fastdynamo
from fastdynamo.backends.kernels import cache

from .helpers import compiled

pytestmark = pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1",
                                reason="kernels on CPU need Triton's interpreter (set by the root conftest.py)")

GOLDEN = Path(__file__).parent.parent / "triton" / "golden"

SCRIPT = textwrap.dedent("""
    import json, sys, torch
    import fastdynamo
    from fastdynamo.backends.kernels import cache
    from fastdynamo.convert_frame import Recorder

    def fn(x, bias):
        return torch.softmax(x * bias, -1) + x.sum(0)

    rows, columns = int(sys.argv[1]), int(sys.argv[2])
    recorder = Recorder()
    compiled = fastdynamo.compile(fn, backend="triton", dynamic=True, _recorder=recorder)
    x, bias = torch.randn(rows, columns), torch.randn(columns)
    ok = torch.allclose(compiled(x, bias), fn(x, bias), atol=1e-5)
    graph = recorder.captures[0].compiled_fn
    print(json.dumps({"stats": dict(cache.STATS), "ok": ok, "path": graph.source_path,
                      "sizes": graph.module.SIZE_ARGUMENTS, "graphs": len(recorder.captures)}))
""")


def _run(env: dict[str, str], rows: int, columns: int) -> dict:
    result = subprocess.run([sys.executable, "-c", SCRIPT, str(rows), str(columns)], env=env,
                            capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_second_process_reuses_the_symbolic_kernels_for_another_size(tmp_path, subprocess_env):
    first = _run(subprocess_env(cache_dir=tmp_path), 3, 5)
    assert first["ok"] and first["graphs"] == 1 and first["sizes"] == ["s0", "s1"]
    assert first["stats"].get("codegen") == 1 and first["stats"].get("writes") == 1
    written = sorted((tmp_path / "modules").iterdir())

    second = _run(subprocess_env(cache_dir=tmp_path), 6, 11)
    assert second["ok"] and second["graphs"] == 1 and second["path"] == first["path"]
    assert second["stats"].get("codegen", 0) == 0 and second["stats"].get("writes", 0) == 0
    assert second["stats"].get("disk_hits") == 1
    assert sorted((tmp_path / "modules").iterdir()) == written


def scale_softmax(x, bias):
    return torch.softmax(x * bias, -1) + x.sum(0)


def test_symbolic_key_differs_by_dtype_and_layout_not_by_size(fresh_cache):
    fresh_cache.disk()
    cache.clear_memory()
    keys = []
    for x in (torch.randn(3, 5), torch.randn(7, 4), torch.randn(3, 5, dtype=torch.float64), torch.randn(5, 3).t()):
        fastdynamo.reset()  # a new capture each time, with its own ShapeEnv and symbol names
        compiled_fn, recorder = compiled(scale_softmax, backend="triton", dynamic=True)
        bias = torch.randn(x.shape[1], dtype=x.dtype)
        torch.testing.assert_close(compiled_fn(x, bias), scale_softmax(x, bias))
        keys.append(Path(recorder.captures[0].compiled_fn.source_path).stem)
    assert keys[0] == keys[1] and len(set(keys)) == 3  # sizes share a key; dtype, layout do not


def test_symbolic_module_matches_golden_source(fresh_cache):
    fresh_cache.disk()
    cache.clear_memory()
    compiled_fn, recorder = compiled(scale_softmax, backend="triton", dynamic=True)
    x, bias = torch.randn(3, 5), torch.randn(5)
    torch.testing.assert_close(compiled_fn(x, bias), scale_softmax(x, bias))
    source = Path(recorder.captures[0].compiled_fn.source_path).read_text()
    golden = GOLDEN / "symbolic_scale_softmax.py.txt"
    if os.environ.get("FASTDYNAMO_UPDATE_GOLDEN") == "1":
        golden.write_text(source)
    assert source == golden.read_text()
