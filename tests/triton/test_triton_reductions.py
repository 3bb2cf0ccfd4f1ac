"""Reductions vs eager: every dim position, keepdim, persistent and looped kernels."""
from __future__ import annotations

import pytest
import torch

from fastdynamo.backends.triton import TritonOptions

# Rows above 8 elements take the looped template, in blocks of 4 rows x 8 elements, so
# small test shapes exercise several passes with a partial last block.
LOOPED = TritonOptions(persistent_max=8, config_overrides=(("looped_reduction", ({"XBLOCK": 4, "RBLOCK": 8},)),))
PERSISTENT = TritonOptions(config_overrides=(("persistent_reduction", ({"XBLOCK": 2},)),))
OPTIONS = pytest.mark.parametrize("options", [PERSISTENT, LOOPED], ids=["persistent", "looped"])


@OPTIONS
@pytest.mark.parametrize("dim", [0, 1, 2, -1, (0, 2)])
@pytest.mark.parametrize("keepdim", [False, True])
def test_sum_max_min_over_each_dim(compare, options, dim, keepdim):
    x = torch.randn(5, 11, 13)

    def fn(x):
        return x.sum(dim, keepdim=keepdim), x.amax(dim, keepdim=keepdim), x.amin(dim, keepdim=keepdim)

    compare(fn, x, options=options, expect_kernels=1)


@OPTIONS
@pytest.mark.parametrize("dim", [0, 1, 2])
def test_argmax_argmin_first_index_wins(compare, options, dim):
    x = torch.randint(0, 3, (4, 10, 9)).float()  # many ties

    def fn(x):
        return x.argmax(dim), x.argmin(dim, keepdim=True)

    compare(fn, x, options=options)


@OPTIONS
def test_mean_var_std(compare, options):
    x = torch.randn(6, 21)

    def fn(x):
        return x.mean(1), x.var(1), x.var(0, keepdim=True, correction=0), x.std(1), x.mean()

    compare(fn, x, options=options)


@OPTIONS
def test_full_reductions(compare, options):
    x = torch.randn(7, 9)
    compare(lambda x: (x.sum(), x.max(), x.argmax(), (x * 2).min()), x, options=options)


def test_nan_wins_max_and_argmax(compare):
    x = torch.randn(3, 6)
    x[1, 4] = float("nan")
    compare(lambda x: (x.amax(1), x.argmax(1), x.amin(1)), x)


def test_integer_and_half_reductions(compare, float32_reference):
    compare(lambda x: (x.sum(1), x.amax(0)), torch.randint(-100, 100, (5, 17), dtype=torch.int32))
    x = torch.randn(6, 40, dtype=torch.float16)
    compare(lambda x: (x.sum(1), x.amax(1), x.mean(0)), x, reference=float32_reference)


@OPTIONS
def test_reduction_of_strided_and_sliced_input(compare, options):
    base = torch.randn(12, 20)
    compare(lambda x: x.sum(1), base.t(), options=options)
    compare(lambda x: x.amax(0), base[1:10:2, 3:], options=options)


@OPTIONS
def test_pointwise_producers_fuse_into_the_reduction(compare, options):
    compare(lambda x, y: ((x * y).exp() + 1).sum(-1), torch.randn(5, 19), torch.randn(19),
            options=options, expect_kernels=1)
