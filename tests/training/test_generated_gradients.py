"""Issue #22 item 6: generated programs over inputs that require grad, compiled on the
default backend (joint graph, our partition, C++ kernels for both halves): outputs and
gradients equal eager's. Few examples: each compiles two kernel modules."""
from __future__ import annotations

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fastdynamo

from .helpers import assert_same_grads, compile_recorded, grads, training_graphs

pytestmark = pytest.mark.usefixtures("fresh_cache")

UNARY = {
    "sin": torch.sin, "tanh": torch.tanh, "sigmoid": torch.sigmoid, "exp_half": lambda a: (a * 0.5).exp(),
    "relu": torch.relu, "gelu": torch.nn.functional.gelu, "square": torch.square,
    "softmax": lambda a: torch.softmax(a, -1), "layer_norm": lambda a: torch.nn.functional.layer_norm(a, a.shape[-1:]),
}
BINARY = {"add": torch.add, "mul": torch.mul, "sub": torch.sub, "matmul": lambda a, b: a @ b.transpose(-1, -2)}
REDUCE = {"sum": lambda a: a.sum(-1, keepdim=True), "mean": lambda a: a.mean(0, keepdim=True),
          "amax": lambda a: a.amax(-1, keepdim=True)}

steps = st.lists(st.one_of(st.tuples(st.just("unary"), st.sampled_from(sorted(UNARY))),
                           st.tuples(st.just("binary"), st.sampled_from(sorted(BINARY)), st.integers(0, 2)),
                           st.tuples(st.just("reduce"), st.sampled_from(sorted(REDUCE)))),
                 min_size=1, max_size=6)


def program(plan):
    def fn(x, y, z):
        values = [x, y, z]
        for step in plan:
            last = values[-1]
            if step[0] == "unary":
                values.append(UNARY[step[1]](last))
            elif step[0] == "binary":
                other = values[step[2]]
                values.append(BINARY[step[1]](last, other))
            else:
                values.append(last - REDUCE[step[1]](last))  # stays 4x4
        return values[-1] * 2 + (x + y + z).sum()
    return fn


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps, st.lists(st.booleans(), min_size=3, max_size=3))
def test_generated_program_gradients_equal_eager(plan, requires):
    requires = requires if any(requires) else [True, False, False]
    fastdynamo.reset()  # every example's program shares one code object: compile it afresh
    fn = program(plan)

    def make():
        torch.manual_seed(0)
        return [torch.randn(4, 4, requires_grad=r) for r in requires]

    eager_inputs, inputs = make(), make()
    want = fn(*eager_inputs)
    want.square().sum().backward()
    compiled, recorder = compile_recorded(fn)
    got = compiled(*inputs)
    got.square().sum().backward()
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
    assert_same_grads(grads(inputs), grads(eager_inputs), 1e-4)
    assert len(training_graphs(recorder)) == 1
