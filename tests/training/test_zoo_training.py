"""Issue #22 item 6: every zoo model in a training step on the DEFAULT backend (forward
compiled, ``loss.backward()`` through our backward graph, an SGD step outside), several
steps: loss, gradients, updated weights and buffers equal eager's within tolerance, one
graph, and kernels ran in both halves (C++ kernels on CPU).

Tolerances: the kernels sum reductions in another order than ATen's, so gradients are
compared with an absolute tolerance relative to each tensor's largest gradient
(``SCALE``); mobilenet's batch norms over a batch of two at 1x1 spatial size amplify the
rounding, so it gets a looser one, and each step starts from eager's weights: over
several steps its loss drifts by several per cent from eager's under Inductor too
(0.000343 eager, 0.000326 Inductor, 0.000319 ours at the second step), a property of
the model, not of a compiler.
"""
from __future__ import annotations

import pytest
import torch
from tests.models.zoo import BY_NAME

import fastdynamo
from fastdynamo.convert_frame import Recorder

from .helpers import assert_same_grads, training_graphs

pytestmark = pytest.mark.usefixtures("fresh_cache")

SCALE = {"mobilenet_v3_small": 1e-2}
RESYNC = {"mobilenet_v3_small"}
NAMES = ["gpt2", "bert", "t5", "llama", "transformer_encoder", "lstm", "mobilenet_v3_small"]
CASES = [pytest.param(name, marks=[pytest.mark.models] if name == "mobilenet_v3_small" else []) for name in NAMES]


def build(name: str):
    case = BY_NAME[name]
    model, args = case.build()
    model.train()
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0  # the same (no) masks in both runs
    return case, model, args


def step(case, model, forward, args, optimizer):
    optimizer.zero_grad()
    loss = case.loss(forward(*args))
    loss.backward()
    got = [p.grad for p in model.parameters()]
    optimizer.step()
    return loss.detach(), got


@pytest.mark.parametrize("name", CASES)
def test_training_steps_match_eager(name):
    case, eager_model, args = build(name)
    _, model, _ = build(name)
    recorder = Recorder()
    compiled = fastdynamo.compile(model, _recorder=recorder)
    eager_opt = torch.optim.SGD(eager_model.parameters(), lr=0.1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scale = SCALE.get(name, 1e-4)
    for _ in range(3):
        want_loss, want = step(case, eager_model, eager_model, args, eager_opt)
        got_loss, got = step(case, model, compiled, args, opt)
        torch.testing.assert_close(got_loss, want_loss, atol=scale * abs(float(want_loss)) + 1e-5, rtol=1e-4)
        assert_same_grads(got, want, scale)
        for (key, value), expected in zip(model.state_dict().items(), eager_model.state_dict().values(), strict=True):
            torch.testing.assert_close(value, expected, atol=scale * float(expected.abs().max()) + 1e-5, rtol=1e-3,
                                       msg=lambda m, k=key: f"{k}: {m}")
        if name in RESYNC:
            model.load_state_dict(eager_model.state_dict())  # in place: the graph's guards still hold
    assert (len(recorder.captures), len(recorder.breaks)) == (1, 0), [str(b) for b in recorder.breaks]
    (graph,) = training_graphs(recorder)
    assert graph.forward_half.kernel_count > 0, graph.forward_half.fallback_reason
    assert graph.backward_half is not None and graph.backward_half.kernel_count > 0, graph.backward_half.fallback_reason
