"""``opt.step()`` of torch's SGD, Adam and AdamW, captured into the graph.

torch's ``step`` is Python the translator should not walk: a profiler context, hook
tables, ``torch._dynamo.graph_break()`` calls, lazy state in a ``defaultdict`` keyed by
parameters, and ``.item()`` on the step counters. It is modelled instead: the call reads
the real optimizer at trace time (every read guarded), and records the update of every
parameter with a gradient as the same in-place tensor ops torch's single-tensor path
runs on CPU (:mod:`.optimizer_updates`), under ``no_grad`` as ``step`` runs them. The
tensors stay the user's: parameters, gradients and state tensors are graph inputs read
from their sources (``opt.param_groups[0]['params'][3]``, its ``.grad``, and the state
through :class:`~fastdynamo.guards.sources.CallSource`: ``opt.state.get(param)``, the
parameter pinned by identity at its position), and
the ops write them in place. State made by a first step is a graph output that the
transformed code stores as ``opt.state[param]`` (``SideEffects.add_keyed_entry``); that
call's guards say the state was absent, so the next step compiles once more, with the
state as inputs.

The learning rate changes between steps (schedulers): a float ``lr`` is a graph input,
the 0-d float64 tensor :func:`float_as_tensor` makes of it at each call (its type is
guarded, not its value), so a new ``lr`` does not recompile. Every other option is
guarded by value. Anything not modelled (``fused``, ``capturable``, ``differentiable``,
``amsgrad``, a closure, hooks, sparse or complex gradients, a tensor ``lr``, a subclass)
is :class:`~fastdynamo.exc.Unsupported`: the call runs as Python, with the reason.
``opt.zero_grad()`` (``set_to_none=True``) is modelled too: ``p.grad = None`` for every
parameter, replayed after the graph.

>>> float_as_tensor(0.1).dtype
torch.float64
"""
from __future__ import annotations

import collections
import functools
import inspect
import operator
import types
import weakref
from typing import Any, Callable

import torch
from torch.optim.optimizer import _global_optimizer_post_hooks, _global_optimizer_pre_hooks

from ...exc import unsupported
from ...guards import equals, id_is, len_is, type_is
from ...guards.sources import AttrSource, CallSource, ItemSource, Source
from ..side_effects import where_of
from .base import VariableTracker
from .constant import ConstantVariable
from .optimizer_updates import OPTIONS, READS_STATE, UPDATES, GroupUpdate, Ops, ParameterUpdate
from .torch_functions import TorchFunctionVariable


def _original_step(cls: type) -> Callable:
    # the class's own ``step`` below torch's wrappers (profile_hook_step, _use_grad)
    return inspect.unwrap(cls.__dict__["step"]) if "step" in cls.__dict__ else None  # type: ignore[return-value]


# exact types, and the function their ``step`` ends in when modelled (AdamW runs Adam's)
_STEPS = {torch.optim.SGD: _original_step(torch.optim.SGD), torch.optim.Adam: _original_step(torch.optim.Adam),
          torch.optim.AdamW: _original_step(torch.optim.Adam)}


def is_modelled_optimizer(value: Any) -> bool:
    """An instance of exactly SGD, Adam or AdamW (type looked up without ``isinstance``)."""
    return type(value) in _STEPS


def instance_step(opt: Any) -> str:
    """What ``opt.__dict__`` holds as ``step``: nothing, an LR scheduler's wrapper of the
    class's step over this optimizer (``patch_track_step_called``: it sets
    ``opt._opt_called = True``, then steps), or something else."""
    step = opt.__dict__.get("step")
    if step is None:
        return "none"
    if getattr(step, "_wrapped_by_lr_sched", False) and getattr(step, "__wrapped__", None) is type(opt).step \
            and [cell.cell_contents() for cell in step.__closure__ or ()
                 if isinstance(cell.cell_contents, weakref.ReferenceType)] == [opt]:
        return "lr_scheduler"
    return "other"


def optimizer_of_step(target: Any) -> Any:
    """The optimizer (SGD, Adam, AdamW) whose ``opt.step`` ``target`` is (the bound
    class method, or an LR scheduler's wrapper of it), else None."""
    if isinstance(target, types.MethodType):
        owner: Any = target.__self__
        return owner if is_modelled_optimizer(owner) and target.__func__ is type(owner).step else None
    if getattr(target, "_wrapped_by_lr_sched", False):
        owners = [cell.cell_contents() for cell in getattr(target, "__closure__", None) or ()
                  if isinstance(cell.cell_contents, weakref.ReferenceType)]
        if len(owners) == 1 and is_modelled_optimizer(owners[0]) and instance_step(owners[0]) == "lr_scheduler" \
                and owners[0].__dict__["step"] is target:
            return owners[0]
    return None


@functools.lru_cache(maxsize=64)
def _unwrapped(function: Callable) -> Callable:
    # (read at every call by the guard: ``inspect.unwrap`` walks two wrappers)
    return inspect.unwrap(function)


def step_conditions(opt: Any) -> tuple:
    """What must hold for the modelled step to be the real one, read at each call by a
    guard: the class's ``step`` still ends in torch's, what the instance holds as
    ``step`` (:func:`instance_step`; not modelled when "other"), no hooks (the
    optimizer's or global), no ``GradScaler`` fields, ``state`` a defaultdict."""
    return (_unwrapped(type(opt).step) is _STEPS.get(type(opt)), instance_step(opt),
            len(opt._optimizer_step_pre_hooks), len(opt._optimizer_step_post_hooks),
            len(_global_optimizer_pre_hooks), len(_global_optimizer_post_hooks),
            getattr(opt, "grad_scale", None) is None, getattr(opt, "found_inf", None) is None,
            type(opt.state) is collections.defaultdict)


def _modelled(conditions: tuple) -> bool:
    return conditions[0] and conditions[1] != "other" and conditions[2:] == (0, 0, 0, 0, True, True, True)


def float_as_tensor(value: float) -> torch.Tensor:
    """A float option (``lr``) as the 0-d float64 tensor the graph reads: the float's
    exact value, so ops with it round as eager's Python scalar does (cast to the
    tensor's dtype)."""
    return torch.tensor(value, dtype=torch.float64)


class OptimizerVariable(TorchFunctionVariable):
    """An SGD/Adam/AdamW from outside the frame (pinned by identity): ``step`` is
    modelled, other attributes are read as any torch object's."""

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if name == "step":
            return OptimizerStepVariable(self)
        if name == "zero_grad":
            return OptimizerZeroGradVariable(self)
        return super().var_getattr(tx, name)

    def describe(self) -> str:
        return f"OptimizerVariable({type(self.fn).__name__})"


class OptimizerStepVariable(VariableTracker):
    """``opt.step`` before it is called."""

    def __init__(self, optimizer: OptimizerVariable):
        self.optimizer = optimizer

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        closure = args[0] if args else kwargs.get("closure")
        if len(args) + len(kwargs) > 1 or (closure is not None and not (
                closure.is_python_constant() and closure.as_python_constant() is None)):
            raise unsupported("step: a closure (or other arguments) is not modelled")
        source = self.optimizer.source
        if source is None:
            raise unsupported("step: the optimizer cannot be guarded (no source)")
        _StepTrace(tx, self.optimizer.fn, source).run()
        if instance_step(self.optimizer.fn) == "lr_scheduler":  # (guarded by step_conditions)
            tx.output.side_effects.store_attr(self.optimizer, self.optimizer.fn, "_opt_called",
                                              ConstantVariable(True), pinned=True, where=where_of(tx))
        return ConstantVariable(None)

    def describe(self) -> str:
        return f"OptimizerStepVariable({type(self.optimizer.fn).__name__})"


def zero_grad_conditions(opt: Any) -> tuple:
    """``zero_grad`` is torch's (the class's, none on the instance), read by a guard."""
    return (_unwrapped(type(opt).zero_grad) is _ZERO_GRAD, "zero_grad" not in opt.__dict__)


_ZERO_GRAD = inspect.unwrap(torch.optim.Optimizer.zero_grad)


class _Located(VariableTracker):
    """Only a source: the parameter whose ``grad`` a modelled ``zero_grad`` stores."""

    def __init__(self, source: Source):
        self.source = source


class OptimizerZeroGradVariable(VariableTracker):
    """``opt.zero_grad`` before it is called: with ``set_to_none=True`` (torch's default)
    it is ``p.grad = None`` for every parameter of every group, replayed after the graph
    (setting ``None`` where it already is changes nothing, so the gradients need no
    guard); the parameters are pinned by identity at their positions."""

    def __init__(self, optimizer: OptimizerVariable):
        self.optimizer = optimizer

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        flag = args[0] if args else kwargs.get("set_to_none")
        if len(args) + len(kwargs) > 1 or (flag is not None and not (
                flag.is_python_constant() and flag.as_python_constant() is True)):
            raise unsupported("zero_grad: only set_to_none=True is modelled")
        opt, source = self.optimizer.fn, self.optimizer.source
        conditions = zero_grad_conditions(opt)
        if source is None or conditions != (True, True):
            raise unsupported(f"zero_grad of {type(opt).__name__}: a changed zero_grad is not modelled")
        tx.output.add_guard(CallSource(source, zero_grad_conditions), equals(conditions))
        groups = AttrSource(source, "param_groups")
        tx.output.add_guard(groups, type_is(list))
        tx.output.add_guard(groups, len_is(len(opt.param_groups)))
        for index, group in enumerate(opt.param_groups):
            params_source = ItemSource(ItemSource(groups, index), "params")
            if type(group) is not dict or type(group.get("params")) is not list:
                raise unsupported("zero_grad: a parameter group that is not a dict of a list")
            tx.output.add_guard(ItemSource(groups, index), type_is(dict))
            tx.output.add_guard(params_source, type_is(list))
            tx.output.add_guard(params_source, len_is(len(group["params"])))
            for position, param in enumerate(group["params"]):
                param_source = ItemSource(params_source, position)
                tx.output.add_guard(param_source, id_is(param))
                tx.output.side_effects.store_attr(_Located(param_source), param, "grad", ConstantVariable(None),
                                                  pinned=True, where=where_of(tx))
        return ConstantVariable(None)

    def describe(self) -> str:
        return f"OptimizerZeroGradVariable({type(self.optimizer.fn).__name__})"


class _StepTrace:
    """One modelled ``step``: guards on what it reads, then each group's update."""

    def __init__(self, tx, opt: Any, source: Source):
        self.tx, self.opt, self.source = tx, opt, source
        self.update = UPDATES[type(opt)]

    def guard(self, source: Source, check: tuple) -> None:
        self.tx.output.add_guard(source, check)

    def run(self) -> None:
        opt, name = self.opt, type(self.opt).__name__
        conditions = step_conditions(opt)
        if not _modelled(conditions):
            raise unsupported(f"step of {name}: hooks, a changed step, GradScaler fields or a state that "
                              f"is not a defaultdict are not modelled {conditions}")
        self.guard(CallSource(self.source, step_conditions), equals(conditions))
        groups = AttrSource(self.source, "param_groups")
        self.guard(groups, type_is(list))
        self.guard(groups, len_is(len(opt.param_groups)))
        ops = Ops(self.tx)
        prior = torch.is_grad_enabled()
        if prior:
            self.tx.output.set_grad_enabled(False)  # step runs under no_grad (not differentiable)
        for index, group in enumerate(opt.param_groups):
            self._group(ops, index, group, ItemSource(groups, index))
        if prior:
            self.tx.output.set_grad_enabled(True)

    def _group(self, ops: Ops, index: int, group: Any, source: Source) -> None:
        if type(group) is not dict:
            raise unsupported("step: a parameter group that is not a dict")
        self.guard(source, type_is(dict))
        options = {}
        for key in OPTIONS[type(self.opt)]:
            if key not in group:
                raise unsupported(f"step: the parameter group has no {key!r}")
            value = group[key]
            if not (type(value) in (bool, int, float, type(None))
                    or (type(value) is tuple and all(type(v) in (int, float) for v in value))):
                raise unsupported(f"step: option {key} of type {type(value).__qualname__} is not modelled")
            self.guard(ItemSource(source, key), equals(value))
            options[key] = value
        lr = group.get("lr")
        if type(lr) is not float:
            raise unsupported(f"step: an lr of type {type(lr).__qualname__} is not modelled (a float is)")
        lr_source = ItemSource(source, "lr")
        self.guard(lr_source, type_is(float))
        lr_var = self.tx.output.add_tensor_input(float_as_tensor(lr), CallSource(lr_source, float_as_tensor))
        params = group["params"]
        params_source = ItemSource(source, "params")
        if type(params) is not list:
            raise unsupported("step: a group's params that are not a list")
        self.guard(params_source, type_is(list))
        self.guard(params_source, len_is(len(params)))
        update = GroupUpdate(ops, options, lr_var)
        reads_state = READS_STATE[type(self.opt)](options)
        for position, param in enumerate(params):
            parameter = self._parameter(index, position, param, ItemSource(params_source, position), reads_state)
            if parameter is not None:
                new_state = self.update(update, parameter)
                if new_state:
                    self._store_state(parameter, new_state)

    def _store_state(self, parameter: ParameterUpdate, new_state: dict[str, VariableTracker]) -> None:
        """The state a first step made: into the parameter's (empty) dict when it has one,
        as torch fills ``self.state[p]``, else a new entry of ``opt.state``."""
        side_effects, where = self.tx.output.side_effects, where_of(self.tx)
        if parameter.state_source is not None:
            side_effects.add_keyed_entry(parameter.state_source, None, new_state, where)
        else:
            side_effects.add_keyed_entry(AttrSource(self.source, "state"), parameter.source, new_state, where)

    def _parameter(self, group_index: int, position: int, param: Any, source: Source,
                   reads_state: bool) -> ParameterUpdate | None:
        if type(param) not in (torch.Tensor, torch.nn.Parameter):
            raise unsupported(f"step: a parameter of type {type(param).__qualname__}")
        if self.tx.output.side_effects.load_attr(param, "grad") is not None:
            raise unsupported("step: a gradient the frame changed (zero_grad before step) is not modelled")
        grad_source = AttrSource(source, "grad")
        grad = param.grad
        if grad is None:
            self.guard(grad_source, equals(None))
            return None
        if grad.is_sparse or param.is_complex():
            raise unsupported("step: sparse gradients or complex parameters are not modelled")
        param_var = self.tx.output.add_tensor_input(param, source)
        grad_var = self.tx.output.add_tensor_input(grad, grad_source)
        if not reads_state:
            return ParameterUpdate(param_var, grad_var, source, {}, None)
        # ``opt.state.get(param)`` in C (a methodcaller over this parameter, pinned by
        # identity at its position): 4x cheaper per read than Python reading the
        # position's parameter and then its state (several reads a parameter per call)
        self.guard(source, id_is(param))
        state_source = CallSource(AttrSource(self.source, "state"), operator.methodcaller("get", param),
                                  f"state_of_group{group_index}_param{position}")
        state = self.opt.state.get(param)
        if state is None:
            self.guard(state_source, equals(None))
            return ParameterUpdate(param_var, grad_var, source, {}, None)
        if type(state) is not dict:
            raise unsupported("step: a parameter's state that is not a dict is not modelled")
        self.guard(state_source, type_is(dict))
        self.guard(state_source, len_is(len(state)))  # with each key's read: the same keys
        tensors = {}
        for key, value in state.items():
            if not isinstance(key, str) or not isinstance(value, torch.Tensor):
                raise unsupported(f"step: state entry {key!r} that is not a tensor")
            tensors[key] = self.tx.output.add_tensor_input(value, ItemSource(state_source, key))
        return ParameterUpdate(param_var, grad_var, source, tensors, state_source)


__all__ = ["OptimizerStepVariable", "OptimizerVariable", "OptimizerZeroGradVariable", "float_as_tensor",
           "instance_step", "is_modelled_optimizer", "optimizer_of_step", "step_conditions", "zero_grad_conditions"]
