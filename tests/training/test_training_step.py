"""Training with compiled models (issue #12): the zoo's mobilenet_v3_small, LSTM and
TransformerEncoder compiled in grad mode, then ``loss.backward()`` and an SGD step
outside: loss, gradients, updated weights and buffers equal to eager's, one graph. And a
compiled whole training step (forward, loss, ``loss.backward()``, ``opt.step()``,
``opt.zero_grad()`` inside the compiled function): the backward is a clean graph break,
``opt.step()`` and ``opt.zero_grad()`` are captured (tests/training/test_compiled_optimizer.py),
the result is eager's over several steps.
"""
from __future__ import annotations

import pytest
import torch
from tests.models.zoo import BY_NAME

import fastdynamo
from fastdynamo.convert_frame import Recorder

pytestmark = pytest.mark.usefixtures("fresh_cache")

def build(name: str):
    """The zoo's model and inputs."""
    case = BY_NAME[name]
    model, args = case.build()
    return case, model, args


def state(model: torch.nn.Module) -> dict:
    return {name: value.detach().clone() for name, value in model.state_dict().items()}


def one_step(case, model, forward, args):
    """Forward (``forward``), loss, backward and an SGD step outside the compiled code."""
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    torch.manual_seed(1)  # the same dropout masks in both runs (train mode)
    loss = case.loss(forward(*args))
    loss.backward()
    grads = {name: p.grad.clone() for name, p in model.named_parameters()}
    opt.step()
    return loss.detach(), grads, state(model)


# mobilenet takes tens of seconds a case on two cores: the ``models`` marker (-m "not models")
SLOW = pytest.mark.models
CASES = [pytest.param(name, train, id=f"{name}-{'train' if train else 'eval'}",
                      marks=[SLOW] if name == "mobilenet_v3_small" else [])
         for name in ("mobilenet_v3_small", "lstm", "transformer_encoder") for train in (False, True)]


@pytest.mark.parametrize(("name", "train"), CASES)
def test_compiled_forward_then_backward_and_step_outside(name, train):
    case, eager_model, args = build(name)
    _, model, _ = build(name)
    eager_model.train(train)
    model.train(train)
    recorder = Recorder()
    compiled = fastdynamo.compile(model, backend="eager", _recorder=recorder)
    expected = one_step(case, eager_model, eager_model, args)
    got = one_step(case, model, compiled, args)
    torch.testing.assert_close(got[0], expected[0])
    torch.testing.assert_close(got[1], expected[1])  # gradients
    torch.testing.assert_close(got[2], expected[2])  # updated weights and buffers
    assert (len(recorder.captures), len(recorder.breaks)) == (1, 0), [str(b) for b in recorder.breaks]
    # the next step reuses the graph with the updated weights
    expected = one_step(case, eager_model, eager_model, args)
    got = one_step(case, model, compiled, args)
    torch.testing.assert_close(got[1], expected[1])
    torch.testing.assert_close(got[2], expected[2])
    assert len(recorder.captures) == 1


def whole_step(case):
    def train_step(model, opt, *args):
        loss = case.loss(model(*args))
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss
    return train_step


@pytest.mark.parametrize("name", [pytest.param("mobilenet_v3_small", marks=SLOW), "lstm",
                                  "transformer_encoder"])
def test_compiled_whole_training_step(name):
    case, eager_model, args = build(name)
    _, model, _ = build(name)
    eager_opt = torch.optim.SGD(eager_model.parameters(), lr=0.1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    step = whole_step(case)
    recorder = Recorder()
    compiled = fastdynamo.compile(step, backend="eager", _recorder=recorder)
    for _ in range(3):
        expected = step(eager_model, eager_opt, *args)
        got = compiled(model, opt, *args)
        torch.testing.assert_close(got, expected)
        torch.testing.assert_close(state(model), state(eager_model))
        assert all(p.grad is None for p in model.parameters())  # zero_grad(set_to_none=True) ran once
    reasons = [b.reason for b in recorder.breaks]
    # two graphs: forward and loss; after the backward (Python), the SGD step (no
    # momentum: no state, so no recompilation) and zero_grad
    assert [c.code.co_name.split("_resume")[0] for c in recorder.captures] == ["train_step"] * 2, reasons
    expected_breaks = ["Tensor.backward() leaves the graph"]
    # (torch's first optimizer step may import modules whose frames are recorded too)
    assert [r for r in reasons if r in expected_breaks] == expected_breaks, reasons


def test_optimizer_step_in_a_frame_updates_each_parameter_once():
    # The FakeTensor run of a recorded call got the real optimizer: SGD.step updated the
    # first parameter during the trace, then again when the frame ran as Python. Now the
    # step is modelled (capture/variables/optimizers.py): one graph with the ``x + 1``.
    def step_then_add(opt, x):
        opt.step()
        return x + 1

    def make():
        torch.manual_seed(0)
        params = [torch.nn.Parameter(torch.randn(3)), torch.nn.Parameter(torch.randn(2))]
        for p in params:
            p.grad = torch.ones_like(p)
        return params, torch.optim.SGD(params, lr=0.5)

    expected_params, expected_opt = make()
    expected = step_then_add(expected_opt, torch.zeros(2))
    params, opt = make()
    recorder = Recorder()
    got = fastdynamo.compile(step_then_add, backend="eager", _recorder=recorder)(opt, torch.zeros(2))
    torch.testing.assert_close(got, expected)
    for p, q in zip(params, expected_params, strict=True):
        torch.testing.assert_close(p, q)
    assert recorder.breaks == []
    assert [c.code.co_name for c in recorder.captures] == ["step_then_add"]


def test_optimizer_method_not_modelled_is_not_run_in_the_trace():
    def zero_then_add(opt, x):
        opt.zero_grad(set_to_none=False)
        return x + 1

    params = [torch.nn.Parameter(torch.randn(3))]
    params[0].grad = torch.ones(3)
    opt = torch.optim.SGD(params, lr=0.5)
    recorder = Recorder()
    got = fastdynamo.compile(zero_then_add, backend="eager", _recorder=recorder)(opt, torch.zeros(2))
    torch.testing.assert_close(got, torch.ones(2))
    assert params[0].grad is not None and not params[0].grad.any()
    assert recorder.breaks[0].reason == "zero_grad: only set_to_none=True is modelled"


STATE = torch.zeros(2)


def bump_state():
    STATE.add_(1)
    return STATE


def apply_function(f):
    return f()


apply_function.__module__ = "torch.module_for_this_test"  # recorded as a torch function


def test_torch_function_given_a_python_function_is_not_run_in_the_trace():
    # the function reaches a real tensor: the FakeTensor run bumped it once more than eager
    def fn(x):
        return apply_function(bump_state) + x

    STATE.zero_()
    expected = fn(torch.ones(2))
    STATE.zero_()
    recorder = Recorder()
    got = fastdynamo.compile(fn, backend="eager", _recorder=recorder)(torch.ones(2))
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close(STATE, torch.ones(2))  # bumped once
    assert [b.reason for b in recorder.breaks] == [
        "apply_function: an argument of type function is not run in the trace (it may hold real tensors)"]
    # apply_function's own frame (the bump, in place on the global tensor) and the ``+ x``
    names = [c.code.co_name for c in recorder.captures]
    assert names[0] == "apply_function" and names[1].startswith("fn_resume") and len(names) == 2, names


def test_backward_inside_a_frame_is_a_clean_break():
    w = torch.nn.Parameter(torch.randn(3))

    def fn(x):
        loss = (w * x).sum()
        loss.backward()
        return w.grad * 2, loss.detach()

    expected = fn(torch.ones(3))
    w.grad = None
    recorder = Recorder()
    got = fastdynamo.compile(fn, backend="eager", _recorder=recorder)(torch.ones(3))
    torch.testing.assert_close(got, expected)
    assert recorder.breaks[0].reason == "Tensor.backward() leaves the graph"
    assert len(recorder.captures) >= 1
