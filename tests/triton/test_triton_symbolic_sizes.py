"""Size arithmetic over symbols (``sizes``) and index expressions with symbolic extents:
a simplification happens only when it holds for every value of the symbols."""
from __future__ import annotations

import pytest
import sympy
from torch.utils._sympy.functions import FloorDiv

from fastdynamo.backends.kernels import indexing, sizes
from fastdynamo.backends.kernels.indexing import Var, render

s0, s1, s2 = (sizes.size_symbol(i) for i in range(3))
v0 = sizes.value_symbol(0)


@pytest.mark.parametrize(("a", "b", "expected"), [
    (s1, s0 * s1, True),  # s0 >= 2
    (2, s0, True),
    (3, s0, False),  # s0 may be 2
    (s0, s1, False),
    (s0 * s1 - s1 + 1, s0 * s1, True),
    (s0, s0 + v0, False),  # an int input may be negative
    (1, FloorDiv(s0, 2), True),  # interval arithmetic beyond polynomials
    (s0 * s1, 2**31 - 1, False),  # no upper bound: 64-bit addresses
    (5, 4, False),
    (sympy.Min(s0, s1), s0, True),  # the bound of (i % s0) for an i of unknown extent s1
])
def test_provably_le(a, b, expected):
    assert sizes.provably_le(a, b) is expected


def test_exact_quotient_and_ceil_div():
    assert sizes.exact_quotient(4 * s0 * s1, 2 * s1) == 2 * s0
    assert sizes.exact_quotient(s0 * s1, 4) is None  # not an integer for every value
    assert sizes.exact_quotient(12, 4) == 3 and sizes.exact_quotient(12, 5) is None
    assert sizes.ceil_div(s0 * s1, s1) == s0 and sizes.ceil_div(7, 2) == 4


def test_kernel_sizes_render_only_what_triton_spells():
    assert sizes.render_kernel_size(s0) == "s0"
    assert sizes.render_kernel_size(s0 * s1 - 1) == "((-1) + s0*s1)"
    assert sizes.render_kernel_size(FloorDiv(s0, 2)) == "(s0 // 2)"
    for unspellable in (sympy.Max(s0, 3), 1 / s0, s0 / 2):
        with pytest.raises(sizes.SymbolicRefused, match="no kernel spelling"):
            sizes.render_kernel_size(unspellable)


def test_row_major_index_over_symbolic_shape_folds_back_to_the_linear_index():
    xindex = Var("xindex", s0 * s1)
    index = indexing.unravel(xindex, (s0, s1))
    assert [render(e) for e in index] == ["xindex // s1", "xindex % s1"]
    assert indexing.linear_offset(index, (s1, 1)) == xindex
    assert render(indexing.linear_offset(index, (1, s0))) == "xindex // s1 + (xindex % s1) * s0"


def test_bounds_with_symbols_are_used_only_when_proved():
    row = Var("x", s1)
    assert indexing.mod(row, s1) == row and indexing.floordiv(row, s1) == indexing.ZERO
    assert isinstance(indexing.mod(row, s0), indexing.Mod)  # s1 may exceed s0
    assert isinstance(indexing.floordiv(row, 2), indexing.FloorDiv)
    column = Var("y", 4)
    assert indexing.floordiv(indexing.add(indexing.mul(row, 4), column), 4) == row
    assert indexing.upper_bound(indexing.add(indexing.mul(row, s2), Var("z", s2))) == s1 * s2


def test_static_index_arithmetic_is_unchanged():
    i, j = Var("i0", 4), Var("j0", 8)
    assert render(indexing.add(indexing.mul(i, 8), j)) == "i0 * 8 + j0"
    assert render(indexing.mod(j, 8)) == "j0"
    assert indexing.contiguous_strides((2, 0, 3)) == (3, 3, 1)
    assert indexing.contiguous_strides((s0, 1, s1)) == (s1, s1, 1)
