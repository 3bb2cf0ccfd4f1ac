"""Softmax, norms, a GELU-bias-residual chain and pointwise chains over broadcast vectors:
correctness and kernel counts.

Counts are golden (``golden/kernel_counts.json``): each pattern is one kernel, the
minimum its reduction structure needs. Regenerate with FASTDYNAMO_UPDATE_GOLDEN=1.
"""
from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from fastdynamo.backends.kernels import fusion
from fastdynamo.backends.triton import TritonOptions
from fastdynamo.backends.kernels.fusion import fuse
from fastdynamo.backends.kernels.lowering import lower, trace_aten

GOLDEN_COUNTS = Path(__file__).parent / "golden" / "kernel_counts.json"
LOOPED = TritonOptions(persistent_max=8, config_overrides=(("looped_reduction", ({"XBLOCK": 2, "RBLOCK": 8},)),))


def softmax(x):
    return torch.softmax(x, -1)


def softmax_dim0(x):
    return torch.softmax(x, 0)


def log_softmax(x):
    return torch.log_softmax(x, -1)


def layer_norm(x, weight, bias):
    return F.layer_norm(x, (x.shape[-1],), weight, bias)


def rms_norm(x, weight):
    return F.rms_norm(x, (x.shape[-1],), weight)


def gelu_bias_residual(x, bias, residual):
    return F.gelu(x + bias) + residual


def linear_gelu_residual(x, weight, bias, residual):
    return F.gelu(x @ weight + bias) + residual


def pointwise_chain_broadcast(x, y):
    # benches/gpu_check.py's chain: tanh(y) over a broadcast vector is inlined, not a kernel
    return torch.sigmoid((x * 1.5 + y).exp().clamp(max=4.0)) * torch.tanh(y) + x


def centered_gated_rows(x, gate, bias):
    return (x - x.mean(-1, keepdim=True)) * torch.sigmoid(gate * 2) + bias.tanh()


def _cases(rows=6, cols=20):
    x = torch.randn(rows, cols)
    weight, bias = torch.randn(cols), torch.randn(cols)
    return {
        "softmax": (softmax, (x,)),
        "softmax_dim0": (softmax_dim0, (x,)),
        "log_softmax": (log_softmax, (x,)),
        "layer_norm": (layer_norm, (x, weight, bias)),
        "rms_norm": (rms_norm, (x, weight)),
        "gelu_bias_residual": (gelu_bias_residual, (x, bias, torch.randn(rows, cols))),
        "linear_gelu_residual": (linear_gelu_residual, (x, torch.randn(cols, 12), torch.randn(12), torch.randn(rows, 12))),
        "pointwise_chain_broadcast": (pointwise_chain_broadcast, (x, weight)),
        "centered_gated_rows": (centered_gated_rows, (x, weight, bias)),
    }


def _golden_counts() -> dict:
    return json.loads(GOLDEN_COUNTS.read_text())


@pytest.mark.parametrize("options", [None, LOOPED], ids=["persistent", "looped"])
@pytest.mark.parametrize("name", sorted(_cases()))
def test_pattern_matches_eager_in_golden_kernel_count(compare, name, options):
    fn, inputs = _cases()[name]
    compiled = compare(fn, *inputs, options=options)
    if os.environ.get("FASTDYNAMO_UPDATE_GOLDEN") == "1":
        counts = _golden_counts() if GOLDEN_COUNTS.exists() else {}
        counts[name] = compiled.kernel_count
        GOLDEN_COUNTS.write_text(json.dumps(counts, indent=2, sort_keys=True) + "\n")
    assert compiled.kernel_count == _golden_counts()[name]


def test_golden_counts_are_one_kernel_each():
    assert set(_golden_counts().values()) == {1}


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_norms_in_half_types(compare, float32_reference, dtype):
    x = torch.randn(4, 24, dtype=dtype)
    weight, bias = torch.randn(24, dtype=dtype), torch.randn(24, dtype=dtype)
    compare(layer_norm, x, weight, bias, reference=float32_reference, expect_kernels=1)
    compare(rms_norm, x, weight, reference=float32_reference, expect_kernels=1)
    compare(softmax, x, reference=float32_reference, expect_kernels=1)


STORES = {"triton": r"tl\.store\(", "cpp": r"\bbuf\d+\[[^\]]*\] = "}  # a store, in each language
ALLOCATIONS = {"triton": "torch.empty_strided(", "cpp": " = _empty("}


def test_intermediates_inside_a_group_are_never_written(compare, target):
    compiled = compare(softmax, torch.randn(3, 10))
    source = Path(compiled.source_path).read_text()
    assert len(re.findall(STORES[target], source)) == 1, source
    assert source.count(ALLOCATIONS[target]) == 1


def test_values_crossing_groups_are_written(compare):
    # The row sums are needed by a transposed read in a second kernel: written once.
    def fn(x):
        total = x.sum(1, keepdim=True)
        return (x / total) @ x.t(), total * 2

    compiled = compare(fn, torch.rand(4, 4) + 0.5)
    assert compiled.kernel_count >= 1


def test_mixed_externs(compare):
    def fn(x, w, idx):
        h = torch.relu(x @ w) * 2
        s = torch.sort(h, dim=-1).values
        g = torch.gather(h, 1, idx)
        return torch.softmax(s + 1, -1), g.cumsum(1), torch.conv1d(h.unsqueeze(1), torch.ones(1, 1, 3)).sum(-1)

    compare(fn, torch.randn(5, 6), torch.randn(6, 7), torch.randint(0, 7, (5, 3)))


def test_broadcast_values_read_by_an_output_or_an_extern_are_still_written(compare):
    def returned(x, y):
        scale = y.tanh()
        return x * scale, scale

    def extern_argument(x, y):
        scale = y.tanh()
        return x * scale + (x @ scale).unsqueeze(1)

    x, y = torch.randn(5, 8), torch.randn(8)
    assert compare(returned, x, y).kernel_count == 2
    compare(extern_argument, x, y)


def test_inlining_stops_before_a_consumer_body_grows_too_large(compare, monkeypatch):
    # The sum reads y's chain at 8 positions: inlining all of it would put 8 copies of
    # the chain into one expression, past INLINE_MAX_OPS.
    def fn(x, y):
        t = y
        for _ in range(6):
            t = (t * 1.01).exp().clamp(max=2.0)
        return x * sum(t[shift:shift + 8] for shift in range(8))

    x, y = torch.randn(3, 8), torch.randn(16)
    assert compare(fn, x, y).kernel_count == 2
    graph = lower(trace_aten(torch.fx.symbolic_trace(fn), [x, y]).graph_module)
    monkeypatch.setattr(fusion, "INLINE_MAX_OPS", 10**6)
    assert fuse(graph).kernel_count == 1
