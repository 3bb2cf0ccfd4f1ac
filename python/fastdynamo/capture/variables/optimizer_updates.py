"""The per-parameter updates of SGD and Adam/AdamW, as recorded tensor ops.

Each update is torch's ``_single_tensor_sgd`` / ``_single_tensor_adam`` (the path torch
takes on CPU, where foreach kernels are not used; the foreach path does the same
arithmetic on lists) with the scalars that change between steps kept as 0-d float64
tensors instead of Python floats: the learning rate (a graph input) and, for Adam, the
bias corrections computed from the step counter (torch reads it with ``.item()``; the
graph cannot). Each such tensor is what eager's Python float is, exactly or to a
double's rounding, and meets float32 data the way a Python scalar does (cast to the
data's dtype), so the results are eager's up to the fused kernels' rounding.

Updates return the state a first step makes (``{"step": ..., "exp_avg": ...}``, in
torch's key order), stored as ``opt.state[param]`` after the graph; ``{}`` otherwise.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import torch

from ...exc import unsupported
from ...guards.sources import Source
from .base import VariableTracker
from .constant import ConstantVariable


def _var(value: Any) -> VariableTracker:
    return value if isinstance(value, VariableTracker) else ConstantVariable(value)


class Ops:
    """Recording torch calls and tensor methods on trackers (constants wrapped)."""

    def __init__(self, tx):
        self.output = tx.output

    def call(self, fn: Callable, *args: Any, **kwargs: Any) -> VariableTracker:
        return self.output.record_call("call_function", fn, [_var(a) for a in args],
                                       {k: _var(v) for k, v in kwargs.items()})

    def method(self, tensor: VariableTracker, name: str, *args: Any, **kwargs: Any) -> VariableTracker:
        return self.output.record_call("call_method", name, [tensor, *(_var(a) for a in args)],
                                       {k: _var(v) for k, v in kwargs.items()})


@dataclass
class GroupUpdate:
    """What the parameters of one group share: its options and its ``lr`` tensor."""

    ops: Ops
    options: dict[str, Any]
    lr: VariableTracker
    _negated_lr: VariableTracker | None = None

    def negated_lr(self) -> VariableTracker:
        if self._negated_lr is None:
            self._negated_lr = self.ops.call(torch.neg, self.lr)
        return self._negated_lr


@dataclass
class ParameterUpdate:
    """One parameter with a gradient: its tracker, its gradient's, its source (the key of
    its state), its state tensors (empty before its first step) and the source of its
    state dict (None when it has none yet)."""

    param: VariableTracker
    grad: VariableTracker
    source: Source
    state: dict[str, VariableTracker]
    state_source: Source | None


def sgd_update(group: GroupUpdate, p: ParameterUpdate) -> dict[str, VariableTracker]:
    """``_single_tensor_sgd`` for one parameter (``param.add_(grad, alpha=-lr)`` as
    ``param.add_(grad * -lr)``: ``alpha`` must be a number)."""
    ops, o = group.ops, group.options
    grad = ops.call(torch.neg, p.grad) if o["maximize"] else p.grad
    if o["weight_decay"] != 0:
        grad = ops.call(torch.add, grad, p.param, alpha=o["weight_decay"])
    new_state: dict[str, VariableTracker] = {}
    if o["momentum"] != 0:
        buf = p.state.get("momentum_buffer")
        if buf is None and p.state_source is not None:
            raise unsupported("step: SGD state without a momentum_buffer is not modelled")
        if buf is None:
            buf = ops.method(ops.method(grad, "detach"), "clone")
            new_state["momentum_buffer"] = buf
        else:
            ops.method(ops.method(buf, "mul_", o["momentum"]), "add_", grad, alpha=1 - o["dampening"])
        grad = ops.call(torch.add, grad, buf, alpha=o["momentum"]) if o["nesterov"] else buf
    ops.method(p.param, "add_", ops.call(torch.mul, grad, group.negated_lr()))
    return new_state


def adam_update(group: GroupUpdate, p: ParameterUpdate) -> dict[str, VariableTracker]:
    """``_single_tensor_adam`` for one parameter, not capturable: torch's bias
    corrections are Python floats from ``step.item()``; here they are float64 0-d
    tensors from the step counter, and ``addcdiv_(..., value=-step_size)`` is
    ``add_(exp_avg * -step_size / denom)`` (``value`` must be a number)."""
    ops, o = group.ops, group.options
    new_state: dict[str, VariableTracker] = {}
    state = dict(p.state)
    if not state:  # Adam._init_group's lazy initialisation (step on the CPU, float32)
        state["step"] = ops.call(torch.zeros, (), dtype=_scalar_dtype(), device=torch.device("cpu"))
        for key in ("exp_avg", "exp_avg_sq"):
            state[key] = ops.call(torch.zeros_like, p.param, memory_format=torch.preserve_format)
        new_state = dict(state)
    elif set(state) != {"step", "exp_avg", "exp_avg_sq"}:
        raise unsupported(f"step: Adam state with keys {sorted(state)} is not modelled")
    beta1, beta2 = o["betas"]
    step = state["step"]
    # (the counter first: the kernels fuse in program order, and the 0-d counter's kernel
    # must not come between the gradient's negation and its readers)
    ops.method(step, "add_", 1)
    grad = ops.call(torch.neg, p.grad) if o["maximize"] else p.grad
    if o["weight_decay"] != 0:
        if o["decoupled_weight_decay"]:
            # param.mul_(1 - lr * weight_decay): 1 + (-(lr * wd)) is that double exactly
            ops.method(p.param, "mul_", ops.call(torch.add, ops.call(torch.mul, group.lr, -o["weight_decay"]), 1))
        else:
            grad = ops.call(torch.add, grad, p.param, alpha=o["weight_decay"])
    exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
    ops.method(exp_avg, "lerp_", grad, 1 - beta1)
    ops.method(ops.method(exp_avg_sq, "mul_", beta2), "addcmul_", grad, grad, value=1 - beta2)
    step64 = ops.method(step, "to", torch.float64)
    bias_correction1 = ops.call(torch.rsub, _power(ops, beta1, step64), 1)
    bias_correction2 = ops.call(torch.rsub, _power(ops, beta2, step64), 1)
    negated_step_size = ops.call(torch.neg, ops.call(torch.div, group.lr, bias_correction1))
    denom = ops.call(torch.div, ops.call(torch.sqrt, exp_avg_sq), ops.call(torch.sqrt, bias_correction2))
    denom = ops.method(denom, "add_", o["eps"])
    ops.method(p.param, "add_", ops.call(torch.div, ops.call(torch.mul, exp_avg, negated_step_size), denom))
    return new_state


def _power(ops: Ops, base: float, exponent: VariableTracker) -> VariableTracker:
    """``base ** exponent`` (a float64 tensor) as ``exp(exponent * log(base))``: a
    pointwise op the kernels fuse (ATen's ``pow(Scalar, Tensor)`` is an extern there),
    within a few double ulps of the Python float torch computes."""
    if not 0 < base:
        return ops.call(torch.pow, base, exponent)
    return ops.call(torch.exp, ops.call(torch.mul, exponent, math.log(base)))


def _scalar_dtype() -> torch.dtype:
    # torch.optim.optimizer._get_scalar_dtype(): the default dtype's width; guarded with
    # the frame's default dtype like every trace
    return torch.float64 if torch.get_default_dtype() == torch.float64 else torch.float32


_SGD_OPTIONS = ("momentum", "dampening", "weight_decay", "nesterov", "maximize", "foreach", "fused",
                "differentiable")
_ADAM_OPTIONS = ("betas", "eps", "weight_decay", "amsgrad", "maximize", "foreach", "capturable",
                 "differentiable", "fused", "decoupled_weight_decay")
# the options each optimizer's update reads (guarded by value); lr is an input
OPTIONS = {torch.optim.SGD: _SGD_OPTIONS, torch.optim.Adam: _ADAM_OPTIONS, torch.optim.AdamW: _ADAM_OPTIONS}


# whether an update reads the parameter's state (SGD without momentum never touches it)
READS_STATE: dict[type, Callable[[dict], bool]] = {
    torch.optim.SGD: lambda options: options["momentum"] != 0,
    torch.optim.Adam: lambda options: True, torch.optim.AdamW: lambda options: True}


def _checked(update: Callable, refused: tuple[str, ...]) -> Callable:
    def checked(group: GroupUpdate, p: ParameterUpdate) -> dict[str, VariableTracker]:
        for option in refused:
            if group.options.get(option):
                raise unsupported(f"step: {option}=True is not modelled")
        return update(group, p)
    return checked


UPDATES = {torch.optim.SGD: _checked(sgd_update, ("fused", "differentiable")),
           torch.optim.Adam: _checked(adam_update, ("fused", "differentiable", "capturable", "amsgrad")),
           torch.optim.AdamW: _checked(adam_update, ("fused", "differentiable", "capturable", "amsgrad"))}

__all__ = ["GroupUpdate", "OPTIONS", "Ops", "READS_STATE", "ParameterUpdate", "UPDATES", "adam_update", "sgd_update"]
