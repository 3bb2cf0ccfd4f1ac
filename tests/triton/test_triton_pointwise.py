"""Pointwise kernels vs eager: chains, broadcasting, layouts, block edges, dtypes."""
from __future__ import annotations

import pytest
import torch

from fastdynamo.backends.triton import TritonOptions

SMALL_BLOCKS = TritonOptions(config_overrides=(("pointwise", ({"XBLOCK": 64},)),))


def chain(x):
    return torch.sigmoid((x * 1.5 - 0.25).exp().clamp(max=4.0)) + torch.tanh(x).abs().sqrt()


def test_chain_is_one_kernel(compare):
    compare(chain, torch.randn(7, 9), expect_kernels=1)


@pytest.mark.parametrize("numel", [1, 63, 64, 65, 1000])
def test_sizes_not_multiple_of_block(compare, numel):
    compare(chain, torch.randn(numel), options=SMALL_BLOCKS, expect_kernels=1)


def test_broadcasting(compare):
    def fn(a, b, c):
        return a * b + c - 1.0

    compare(fn, torch.randn(4, 1, 5), torch.randn(3, 1), torch.randn(5), expect_kernels=1)


def test_scalar_tensor_input(compare):
    compare(lambda x, s: x * s + s, torch.randn(6), torch.tensor(3.0), expect_kernels=1)


def test_transposed_and_strided_inputs(compare):
    base = torch.randn(8, 12)
    compare(lambda x: x.exp() * 2, base.t(), options=SMALL_BLOCKS)
    compare(lambda x: x + 1, base[:, ::3], options=SMALL_BLOCKS)
    compare(lambda x, y: x * y, base.t(), torch.randn(12, 8))


def test_sliced_inputs_with_offset(compare):
    base = torch.randn(10, 16)
    compare(lambda x: x.relu() - 0.5, base[2:7, 3:14], options=SMALL_BLOCKS)
    compare(lambda x: x[1:, 2:9:3] * 2, base)


def test_views_inside_the_graph(compare):
    def fn(x):
        return x.t() + 1, x.reshape(2, 3, 8).permute(2, 0, 1) * 2, x.unsqueeze(0).expand(3, 6, 8).exp()

    compare(fn, torch.randn(6, 8))


def test_outputs_keep_eager_strides(compare):
    compiled = compare(lambda x: (x.t() * 2).contiguous(), torch.randn(4, 5))
    assert compiled(torch.randn(4, 5)).is_contiguous()


def test_comparisons_where_and_casts(compare):
    def fn(x, y):
        mask = (x > 0) & (y <= 0.5)
        return torch.where(mask, x, y * 2), mask, (x * 10).to(torch.int32), x.to(torch.float16) + 1

    compare(fn, torch.randn(5, 7), torch.randn(5, 7))


def test_integer_arithmetic_is_exact(compare):
    compare(lambda a, b: a * b + a - 3, torch.randint(-50, 50, (9,)), torch.randint(-5, 5, (9,)))


def test_nan_propagates_like_eager(compare):
    x = torch.tensor([float("nan"), -1.0, 2.0, float("inf")])
    compare(lambda x: torch.relu(x) + torch.maximum(x, torch.zeros_like(x)), x)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_types_compute_in_float32(compare, float32_reference, dtype):
    x = torch.randn(33, 5, dtype=dtype)
    y = torch.randn(5, dtype=dtype)
    fn = lambda x, y: torch.sigmoid(x * y + 1) * 3 - y  # noqa: E731
    compare(fn, x, y, expect_kernels=1, reference=float32_reference)
    # GELU's decomposition casts to float32 and back explicitly: those casts round, so
    # compare with eager in the half type (which also rounds after every op), loosely.
    gelu = lambda x, y: torch.nn.functional.gelu(x * y + 1)  # noqa: E731
    compiled = compare(gelu, x, y, expect_kernels=1, reference=float32_reference)
    torch.testing.assert_close(compiled(x, y).float(), gelu(x, y).float(), rtol=0.05, atol=0.05)


def test_constants_and_arange(compare):
    compare(lambda x: x + torch.ones_like(x) * 3 + torch.arange(6), torch.randn(4, 6))
