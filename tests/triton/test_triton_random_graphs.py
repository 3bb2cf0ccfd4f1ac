"""Property test: random op graphs through the backend match eager.

Each example builds a small program over two inputs from unary/binary pointwise ops,
broadcasting (scalars, and vectors computed from an input along rows or columns),
views, reductions (any dim, keepdim or not), softmax and matmul (an extern), then
compiles its FX graph. Examples: FASTDYNAMO_HYPOTHESIS_EXAMPLES (25).
"""
from __future__ import annotations

import os

import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from torch.fx.experimental.proxy_tensor import make_fx

from fastdynamo.backends.triton import TritonOptions

from kernel_targets import TARGETS

EXAMPLES = int(os.environ.get("FASTDYNAMO_HYPOTHESIS_EXAMPLES", "25"))
UNARY = {
    "exp": lambda a: torch.exp(a.clamp(-5, 5)), "neg": torch.neg, "abs": torch.abs, "relu": torch.relu,
    "sigmoid": torch.sigmoid, "tanh": torch.tanh, "sqrt_abs": lambda a: torch.sqrt(a.abs() + 1),
    "square": lambda a: a * a, "t": lambda a: a.transpose(-1, -2), "slice": lambda a: a[..., ::2],
    "erf": torch.erf,
}
BINARY = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "max": torch.maximum,
          "where": lambda a, b: torch.where(a > b, a, b - 1)}
REDUCE = {"sum": torch.sum, "amax": torch.amax, "amin": torch.amin, "mean": torch.mean}

SHAPES = st.sampled_from([(3, 5), (4, 4), (2, 7), (6, 1)])
OPTIONS = st.sampled_from([
    None,
    TritonOptions(persistent_max=4, config_overrides=(("looped_reduction", ({"XBLOCK": 2, "RBLOCK": 4},)),
                                                      ("pointwise", ({"XBLOCK": 8},)))),
])


def _step(draw_op, values, shape):
    kind, name, *rest = draw_op
    a = values[rest[0] % len(values)]
    if kind == "unary":
        if a.dim() < {"t": 2, "slice": 1}.get(name, 0):
            return a  # a transpose needs two dims, a slice one
        return UNARY[name](a)
    if kind == "binary":
        b = values[rest[1] % len(values)]
        if b.shape != a.shape:
            b = b.sum() if b.dim() else b  # a scalar tensor broadcasts against anything
        return BINARY[name](a, b)
    if kind == "reduce":
        dim = rest[1] % a.dim() if a.dim() else None
        keepdim = bool(rest[2])
        if dim is None:
            return REDUCE[name](a)
        return REDUCE[name](a, dim, keepdim=keepdim)
    if kind == "softmax":
        return torch.softmax(a, -1) if a.dim() else a
    if kind == "matmul":
        return a @ a.transpose(-1, -2) if a.dim() == 2 else a
    if kind == "broadcast":
        # a vector computed from the input y, broadcast along a's rows or columns
        # (fusion inlines such values into their consumers); a 0-dim value has neither
        if not a.dim():
            return a
        size = a.shape[-1] if rest[1] or a.dim() < 2 else a.shape[0]
        vector = UNARY[name](values[1].reshape(-1)[:size]) if 0 < size <= values[1].numel() else None
        if vector is None or vector.shape != (size,):
            return a
        return a * vector if rest[1] or a.dim() < 2 else a + vector.unsqueeze(-1)
    raise AssertionError(kind)


OPS = st.one_of(
    st.tuples(st.just("unary"), st.sampled_from(sorted(UNARY)), st.integers(0, 9)),
    st.tuples(st.just("binary"), st.sampled_from(sorted(BINARY)), st.integers(0, 9), st.integers(0, 9)),
    st.tuples(st.just("reduce"), st.sampled_from(sorted(REDUCE)), st.integers(0, 9), st.integers(0, 3), st.integers(0, 1)),
    st.tuples(st.just("softmax"), st.just(""), st.integers(0, 9)),
    st.tuples(st.just("matmul"), st.just(""), st.integers(0, 9)),
    st.tuples(st.just("broadcast"), st.sampled_from(sorted(set(UNARY) - {"t", "slice"})), st.integers(0, 9),
              st.integers(0, 1)),
)


def make_program(ops, shape):
    def program(x, y):
        values = [x, y]
        for op in ops:
            values.append(_step(op, values, shape))
        return tuple(values[2:][-3:])

    return program


@settings(max_examples=EXAMPLES, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(ops=st.lists(OPS, min_size=1, max_size=6), shape=SHAPES, options=OPTIONS, seed=st.integers(0, 2**16),
       target=st.sampled_from(sorted(TARGETS)))
def test_random_graph_matches_eager(ops, shape, options, seed, target):
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=generator)
    y = torch.randn(shape, generator=generator)
    program = make_program(ops, shape)
    expected = program(x, y)
    gm = make_fx(program)(x, y)  # shape-dependent Python control flow: trace for real
    compiled = TARGETS[target](gm, [x, y], options)
    assert compiled.fallback_reason is None, compiled.fallback_reason
    actual = compiled(x, y)
    for a, e in zip(actual, expected):
        assert a.shape == e.shape and a.dtype == e.dtype
        torch.testing.assert_close(a, e, atol=1e-4, rtol=1e-4, equal_nan=True)
