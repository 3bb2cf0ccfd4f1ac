"""Issue #22 item 4, generated: ``opt.step`` of SGD, Adam and AdamW compiled on the default
backend, with drawn options (momentum, Nesterov, dampening, weight decay, maximize; betas,
eps; foreach left to torch or on), one or two parameter groups over 1-4 parameters of
drawn shapes (0-d and size-0 ones included) and dtypes, gradients that are ``None`` on
drawn steps (eager skips the parameter), and a learning rate changed between steps.
Eager and the compiled step run side by side on the same gradients; after every step the
parameters, every ``opt.state`` tensor (step counters exactly), the state's identity (the
user's tensors, written in place) and the param groups equal eager's. The graphs are
counted: one per distinct set of what the step's guards read (which parameters have a
gradient, and, where the update reads state, which of them have state yet); a changed
``lr`` recompiles nothing. Every graph that updates a parameter runs generated kernels.
``--hypothesis-profile=long`` runs a few hundred.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import pytest
import torch
from examples_budget import share_of_profile
from hypothesis import given
from hypothesis import strategies as st

import fastdynamo

from .helpers import compile_recorded

pytestmark = pytest.mark.usefixtures("fresh_cache")

# The fused kernels round the update in another order than ATen's ops (a multiply then an
# add for ``add_(alpha=...)``/``addcdiv_``, the bias corrections as exp(step * log(beta))
# in double): a few ulps of each value.
TOLERANCES = {torch.float32: {"rtol": 1e-5, "atol": 1e-6}, torch.float64: {"rtol": 1e-12, "atol": 1e-14}}

lrs = st.sampled_from([0.0, 1e-3, 0.01, 0.1]) | st.floats(1e-4, 0.5)
weight_decays = st.sampled_from([0.0, 0.01, 0.1])
foreach = st.sampled_from([None, True])  # None: torch's default (the single-tensor path on CPU)


@st.composite
def sgd_options(draw) -> dict[str, Any]:
    momentum = draw(st.sampled_from([0.0, 0.5, 0.9]))
    nesterov = momentum != 0 and draw(st.booleans())  # (torch: Nesterov needs momentum, no dampening)
    return {"momentum": momentum, "nesterov": nesterov,
            "dampening": 0.0 if nesterov else draw(st.sampled_from([0.0, 0.1, 0.5])),
            "weight_decay": draw(weight_decays), "maximize": draw(st.booleans()), "foreach": draw(foreach)}


@st.composite
def adam_options(draw) -> dict[str, Any]:
    # a beta of 0 makes its bias correction ``0 ** step``: ``torch.pow``, not exp(log)
    return {"betas": (draw(st.sampled_from([0.0, 0.5, 0.9])), draw(st.sampled_from([0.0, 0.9, 0.999]))),
            "eps": draw(st.sampled_from([1e-8, 1e-6, 1e-3])), "weight_decay": draw(weight_decays),
            "maximize": draw(st.booleans()), "foreach": draw(foreach)}


OPTIONS = {torch.optim.SGD: sgd_options(), torch.optim.Adam: adam_options(), torch.optim.AdamW: adam_options()}


@dataclass
class Step:
    has_grad: list[bool]  # per parameter: False leaves its .grad None
    new_lrs: list[float | None]  # per group, set after the step (None: kept)


@dataclass
class Plan:
    cls: type
    options: dict[str, Any]
    shapes: list[tuple[int, ...]]
    dtypes: list[torch.dtype]
    split: int  # parameters [:split] in group 0, the rest in group 1 (with its own lr and weight decay)
    second_group: dict[str, Any]
    steps: list[Step]
    via: str  # "bound step": compile(opt.step); "function": a compiled function calling opt.step()

    def groups(self) -> list[list[int]]:
        n = len(self.shapes)
        return [list(range(n))] if self.split in (0, n) else [list(range(self.split)), list(range(self.split, n))]


shapes = st.lists(st.sampled_from([1, 2, 3, 5, 0]), max_size=3).map(tuple)  # () is a 0-d parameter


@st.composite
def plans(draw) -> Plan:
    cls = draw(st.sampled_from([torch.optim.SGD, torch.optim.Adam, torch.optim.AdamW]))
    options = {"lr": draw(lrs), **draw(OPTIONS[cls])}
    n = draw(st.integers(1, 4))
    split = draw(st.integers(0, n - 1))
    groups = 1 if split == 0 else 2
    has_grad = st.lists(st.sampled_from([True, True, True, False]), min_size=n, max_size=n)
    new_lrs = st.lists(st.none() | lrs, min_size=groups, max_size=groups)
    return Plan(cls, options, draw(st.lists(shapes, min_size=n, max_size=n)),
                draw(st.lists(st.sampled_from([torch.float32, torch.float32, torch.float64]), min_size=n, max_size=n)),
                split, {"lr": draw(lrs), "weight_decay": draw(weight_decays)},
                draw(st.lists(st.builds(Step, has_grad, new_lrs), min_size=2, max_size=4)),
                draw(st.sampled_from(["bound step", "function"])))


def build(plan: Plan) -> tuple[list[torch.nn.Parameter], torch.optim.Optimizer]:
    generator = torch.Generator().manual_seed(0)
    params = [torch.nn.Parameter(torch.randn(shape, generator=generator, dtype=dtype))
              for shape, dtype in zip(plan.shapes, plan.dtypes, strict=True)]
    groups = plan.groups()
    param_groups = [{"params": [params[i] for i in groups[0]]}]
    if len(groups) == 2:
        param_groups.append({"params": [params[i] for i in groups[1]], **plan.second_group})
    return params, plan.cls(param_groups, **plan.options)


def set_grads(params: list[torch.nn.Parameter], step: Step, seed: int) -> None:
    generator = torch.Generator().manual_seed(seed)
    for p, has_grad in zip(params, step.has_grad, strict=True):
        grad = torch.randn(p.shape, generator=generator, dtype=p.dtype)  # drawn either way: same stream
        p.grad = grad if has_grad else None


def step_in_function(opt: torch.optim.Optimizer) -> None:
    opt.step()


def reads_state(plan: Plan) -> bool:
    return plan.cls is not torch.optim.SGD or plan.options["momentum"] != 0


def guard_keys(plan: Plan) -> list[tuple]:
    """What each step's guards read, in the order first seen (one graph each): per
    parameter whether it has a gradient and, where the update reads state, whether it has
    state yet (made by its first step with a gradient). The ``lr`` is an input, not a key."""
    keys: list[tuple] = []
    has_state = [False] * len(plan.shapes)
    for step in plan.steps:
        key = tuple((grad, grad and reads_state(plan) and state) for grad, state in zip(step.has_grad, has_state, strict=True))
        if key not in keys:
            keys.append(key)
        has_state = [state or grad for state, grad in zip(has_state, step.has_grad, strict=True)]
    return keys


def kernels_a_parameter(plan: Plan) -> int:
    """At most: the update and Adam's step counter, and two more for each beta of 0 (its
    bias correction ``0 ** step`` is ATen's ``pow``, between kernels)."""
    zero_betas = 0 if plan.cls is torch.optim.SGD else plan.options["betas"].count(0.0)
    return 2 + 2 * zero_betas


def assert_same_state(eager_params, eager_opt, params, opt) -> None:
    assert len(opt.state) == len(eager_opt.state)
    for index, (p, q) in enumerate(zip(eager_params, params, strict=True)):
        tolerance = TOLERANCES[p.dtype]
        torch.testing.assert_close(q, p, **tolerance, msg=lambda m, i=index: f"parameter {i}: {m}")
        assert (q in opt.state) == (p in eager_opt.state), index
        expected, got = eager_opt.state.get(p, {}), opt.state.get(q, {})
        assert list(got) == list(expected), index  # the same keys, in torch's order
        for key, value in expected.items():
            exact = {"rtol": 0.0, "atol": 0.0} if key == "step" else tolerance  # a count: exact
            torch.testing.assert_close(got[key], value, **exact, msg=lambda m, i=index, k=key: f"{k} of {i}: {m}")
            assert got[key].device == value.device


def assert_same_groups(eager_opt, opt, params, plan: Plan) -> None:
    assert len(opt.param_groups) == len(eager_opt.param_groups) == len(plan.groups())
    for group, eager_group, indices in zip(opt.param_groups, eager_opt.param_groups, plan.groups(), strict=True):
        assert {k: v for k, v in group.items() if k != "params"} == \
            {k: v for k, v in eager_group.items() if k != "params"}
        assert len(group["params"]) == len(indices) and all(
            q is params[i] for q, i in zip(group["params"], indices, strict=True))


def assert_state_kept(held: dict, params, opt) -> None:
    """State tensors, once made, stay the same objects (written in place, as eager's)."""
    for index, q in enumerate(params):
        for key, value in opt.state.get(q, {}).items():
            assert held.setdefault((index, key), value) is value, (index, key)


@share_of_profile(0.1)  # an example is up to four compiled steps, two to four graphs
@given(plans())
def test_generated_optimizer_steps_equal_eager(plan):
    fastdynamo.reset()  # torch's step wrapper (and step_in_function) is one code object for every example
    eager_params, eager_opt = build(plan)
    params, opt = build(plan)
    if plan.via == "bound step":
        step, recorder = compile_recorded(opt.step)
    else:
        compiled, recorder = compile_recorded(step_in_function)
        step = functools.partial(compiled, opt)
    held: dict = {}
    for index, step_plan in enumerate(plan.steps):
        set_grads(eager_params, step_plan, index)
        set_grads(params, step_plan, index)
        assert eager_opt.step() is None and step() is None
        assert_same_state(eager_params, eager_opt, params, opt)
        assert_state_kept(held, params, opt)
        for group_index, lr in enumerate(step_plan.new_lrs):
            if lr is not None:
                eager_opt.param_groups[group_index]["lr"] = opt.param_groups[group_index]["lr"] = lr
        assert_same_groups(eager_opt, opt, params, plan)
    keys = guard_keys(plan)
    assert not recorder.breaks, [str(b) for b in recorder.breaks]
    assert len(recorder.captures) == len(keys), (keys, len(recorder.captures))
    for key, capture in zip(keys, recorder.captures, strict=True):
        updated = sum(grad for grad, _ in key)
        compiled_fn = capture.compiled_fn
        if updated == 0:  # nothing to update: an empty graph
            assert compiled_fn.kernel_count == 0
            continue
        # one graph over every updated parameter and its gradient (and state, lr), run as
        # generated kernels, each parameter's update fused
        assert len(capture.result.graph_inputs) >= 2 * updated
        assert compiled_fn.fallback_reason is None, compiled_fn.fallback_reason
        assert 1 <= compiled_fn.kernel_count <= kernels_a_parameter(plan) * updated, (compiled_fn.kernel_count, key)
