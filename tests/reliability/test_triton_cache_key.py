"""The Triton backend's kernels (in Triton's interpreter) never reuse code generated for
other inputs: aliasing between inputs, non-tensor values and the default dtype are in
the on-disk cache key, checked with two processes sharing one cache directory; ops that
eager refuses for a dtype raise eager's error instead of returning kernel values."""
from __future__ import annotations

import json

import pytest
import torch

import fastdynamo
from fastdynamo.backends.kernels import cache

from .helpers import run_python

TWO_INPUTS = """
import json, torch, fastdynamo
from fastdynamo.backends.kernels import cache
f = fastdynamo.compile(lambda x, y: x + y)
x = torch.arange(4.0)
y = x if {same} else torch.ones(4)
out = f(x, y)
print(json.dumps({{"ok": torch.equal(out, x + y), "codegen": cache.STATS["codegen"], "kernels": len(
    [p for p in __import__("pathlib").Path(cache.cache_root(), "modules").glob("*.py")])}}))
"""

DEFAULT_DTYPE = """
import json, torch, fastdynamo
from fastdynamo.backends.kernels import cache
if {float64}:
    torch.set_default_dtype(torch.float64)
h = lambda x: x * 2 + torch.ones(3)
x = torch.ones(3, dtype=torch.float32)
out = fastdynamo.compile(h)(x)
print(json.dumps({{"dtype": str(out.dtype), "eager": str(h(x).dtype), "codegen": cache.STATS["codegen"]}}))
"""


def _last_json(source: str, cache_dir) -> dict:
    result = run_python(source, env={"FASTDYNAMO_CACHE_DIR": str(cache_dir), "TRITON_INTERPRET": "1"})
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_aliased_inputs_do_not_share_kernels_across_processes(tmp_path):
    first = _last_json(TWO_INPUTS.format(same=True), tmp_path)
    second = _last_json(TWO_INPUTS.format(same=False), tmp_path)
    assert first["ok"] and second["ok"]  # was y + y: the kernel of f(x, x)
    assert second["codegen"] >= 1 and second["kernels"] > first["kernels"]


def test_default_dtype_is_part_of_the_key_across_processes(tmp_path):
    first = _last_json(DEFAULT_DTYPE.format(float64=False), tmp_path)
    second = _last_json(DEFAULT_DTYPE.format(float64=True), tmp_path)
    assert first["dtype"] == first["eager"] == "torch.float32"
    assert second["dtype"] == second["eager"] == "torch.float64"  # was float32
    assert second["codegen"] >= 1


@pytest.fixture
def fresh_memory_cache():
    fastdynamo.reset()
    cache.clear_memory()
    yield
    fastdynamo.reset()


def test_aliasing_changes_kernels_in_one_process(fresh_memory_cache):
    def add(x, y):
        return x + y

    compiled = fastdynamo.compile(add)
    x = torch.arange(4.0)
    assert torch.equal(compiled(x, x), x + x)
    y = torch.ones(4)
    # the same entry (guards do not relate inputs), specialised again for distinct inputs
    assert torch.equal(compiled(x, y), x + y)
    assert fastdynamo.explain(add)(x, y).graph_count == 1


def test_index_values_each_get_their_result(fresh_memory_cache):
    def pick(x, i):
        return x[i] * 2

    compiled = fastdynamo.compile(pick)
    x = torch.arange(12.0).reshape(3, 4)
    for i in (0, 1, 2, 1, 0):
        assert torch.equal(compiled(x, i), x[i] * 2)
    assert fastdynamo.explain(pick)(x, 1).graph_count == 1


@pytest.mark.parametrize("fn, x", [
    (torch.abs, torch.tensor([True, False])),
    (lambda t: torch.softmax(t, 0), torch.tensor([1, 2], dtype=torch.int8)),
    (lambda t: torch.softmax(t, -1), torch.tensor([1, 2], dtype=torch.uint8)),
    (lambda t: torch.log_softmax(t, 0), torch.tensor([1, 2])),
], ids=["abs-bool", "softmax-int8", "softmax-uint8", "log_softmax-int64"])
def test_ops_eager_refuses_raise_eagers_error(fresh_memory_cache, fn, x):
    def f(t):
        return fn(t) + 0

    with pytest.raises(Exception) as eager:
        f(x)
    with pytest.raises(type(eager.value), match=str(eager.value).split("\n")[0][:40]):
        fastdynamo.compile(f)(x)
