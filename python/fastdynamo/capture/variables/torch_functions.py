"""torch.* and torch.nn.functional calls, and grad-mode context managers.

Any torch function called during the trace is recorded as one ``call_function`` node,
its result's metadata computed on FakeTensors. A short deny-list sends functions with
effects outside the graph or data-dependent results to the unsupported path.

>>> import torch
>>> TorchFunctionVariable(torch.relu).describe()
'TorchFunctionVariable(relu)'
"""
from __future__ import annotations

import torch

from ...compiling import is_compiling
from ...exc import unsupported
from ...guards import query_is
from ...guards.sources import AttrSource
from .base import CallableVariable, VariableTracker
from .constant import ConstantVariable, wrap_constant_result

DENIED_FUNCTIONS = {
    torch.nonzero, torch.manual_seed, torch.seed, torch.save, torch.load,
    torch.set_default_dtype, torch.set_default_device, torch.masked_select, torch.unique,
    torch.use_deterministic_algorithms, torch.set_printoptions, torch.is_nonzero,
    torch.equal, torch.allclose, torch.set_num_threads, torch.set_rng_state, torch.get_rng_state,
}
# "Is this code being compiled?": True inside a trace (libraries branch on it).
IS_COMPILING_FUNCTIONS = tuple(
    fn for fn in (getattr(torch.compiler, "is_compiling", None),
                  getattr(torch.compiler, "is_dynamo_compiling", None),
                  getattr(torch._utils, "is_compiling", None), is_compiling)
    if fn is not None)


def is_is_compiling(value) -> bool:
    return any(value is fn for fn in IS_COMPILING_FUNCTIONS)


# Functions of constants only whose result is a Python value: computed for real.
CONSTANT_FOLDED = {
    torch.is_grad_enabled, torch.get_default_dtype, torch.is_tensor, torch.is_floating_point,
    torch.is_complex, torch.finfo, torch.iinfo, torch.Size, torch.device, torch.promote_types,
    torch.result_type, torch.can_cast, torch.is_inference_mode_enabled, torch.numel,
    torch.broadcast_shapes,
}


# Queries whose answer is fixed while a compiled frame runs (no scripting, tracing or
# export happens inside one).
STATE_FREE_QUERIES = {torch.jit.is_scripting, torch.jit.is_tracing, torch._C._get_tracing_state,
                      torch.compiler.is_exporting}


def _queries_global_state(fn, args, kwargs) -> bool:
    """A call whose constant answer comes from torch's global state (thread count,
    deterministic mode, autocast dtypes...), which no guard covers: nothing but
    constants passed, and no arguments at all or a state query's name."""
    if fn in STATE_FREE_QUERIES or not all(v.is_python_constant() for v in (*args, *kwargs.values())):
        return False
    name = getattr(fn, "__name__", "").lstrip("_")  # torch._C's readers: _get_cublas_allow_tf32
    return not (args or kwargs) or name.startswith(("is_", "get_", "are_"))


class TorchFunctionVariable(CallableVariable):
    """A callable from the torch namespace."""

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        fn = self.fn
        if fn in (torch.no_grad, torch.enable_grad):
            if args or kwargs:
                raise unsupported(f"{fn.__name__} used as a decorator inside a compiled frame")
            return GradModeVariable(fn is torch.enable_grad)
        if fn is torch.set_grad_enabled:
            mode = args[0].as_python_constant()
            return GradModeVariable(bool(mode), applied_now=tx.output.set_grad_enabled_now(bool(mode)))
        if is_is_compiling(fn):
            return ConstantVariable(True)
        if fn is torch.is_grad_enabled:
            return ConstantVariable(torch.is_grad_enabled())
        if fn in DENIED_FUNCTIONS:
            raise unsupported(f"torch.{getattr(fn, '__name__', fn)} is not captured")
        if fn is torch.is_tensor and len(args) == 1:
            from .tensor import TensorVariable

            return ConstantVariable(isinstance(args[0], TensorVariable))
        if fn in CONSTANT_FOLDED or isinstance(fn, type):
            if all(a.is_python_constant() for a in args) and all(v.is_python_constant() for v in kwargs.values()):
                return wrap_constant_result(fn(*[a.as_python_constant() for a in args],
                                               **{k: v.as_python_constant() for k, v in kwargs.items()}))
            if isinstance(fn, type):
                raise unsupported(f"constructing {fn.__qualname__} from symbolic values")
        result = tx.output.record_call("call_function", fn, args, kwargs)
        if result.is_python_constant() and _queries_global_state(fn, args, kwargs):
            # an answer from nothing the frame passed: torch's global state, asked again
            # by the guard on later calls
            answer = result.as_python_constant()
            if kwargs or type(answer) not in (bool, int, float, str, type(None), torch.dtype):
                raise unsupported(f"torch.{getattr(fn, '__name__', fn)}() reads global state that is not guarded")
            tx.output.add_guard(None, query_is(fn, tuple(a.as_python_constant() for a in args), answer))
        return result

    def var_getattr(self, tx, name: str) -> VariableTracker:
        attr = getattr(self.fn, name, None)
        if attr is None:
            raise unsupported(f"attribute {name!r} of {self.describe()}")
        if callable(attr):
            return TorchFunctionVariable(attr)
        if not callable(self.fn):
            # data of an instance of a torch class (an optimizer's param_groups, the flags
            # of torch.backends.cuda.matmul): state that changes, read again by a guard
            if self.source is None:
                raise unsupported(f"attribute {name!r} of a {type(self.fn).__qualname__} object "
                                  "that cannot be guarded (no source)")
            from ..builder import wrap_value

            return wrap_value(tx, attr, AttrSource(self.source, name))
        return ConstantVariable(attr)

    def describe(self) -> str:
        return f"TorchFunctionVariable({getattr(self.fn, '__name__', self.fn)})"


class GradModeVariable(VariableTracker):
    """``torch.no_grad()`` / ``torch.enable_grad()`` / ``torch.set_grad_enabled(b)``.

    Entering records a grad-mode switch in the graph (and applies it to the tracing
    state so FakeTensor results get the right ``requires_grad``); exiting restores the
    mode seen at entry."""

    def __init__(self, target: bool, applied_now: bool | None = None):
        self.target = target
        # set_grad_enabled(b) takes effect when called, not at __enter__.
        self.prior = applied_now

    def enter(self, tx) -> VariableTracker:
        if self.prior is None:
            self.prior = torch.is_grad_enabled()
            tx.output.set_grad_enabled(self.target)
        return ConstantVariable(None)

    def exit(self, tx) -> VariableTracker:
        tx.output.set_grad_enabled(bool(self.prior))
        return ConstantVariable(None)

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if name == "__exit__":
            return GradModeExitVariable(self)
        raise unsupported(f"attribute {name!r} of a grad-mode context")

    def describe(self) -> str:
        return f"GradModeVariable(enabled={self.target})"


class GradModeExitVariable(VariableTracker):
    """The bound ``__exit__`` that ``BEFORE_WITH`` leaves on the stack."""

    def __init__(self, ctx: GradModeVariable):
        self.ctx = ctx

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        return self.ctx.exit(tx)
