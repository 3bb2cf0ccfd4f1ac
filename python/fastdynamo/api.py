"""The public entry points: compile, disable, reset.

>>> import torch, fastdynamo
>>> @fastdynamo.compile
... def f(x):
...     return torch.sin(x) + 1
>>> bool((f(torch.zeros(2)) == 1).all())
True
"""
from __future__ import annotations

import functools
import types
from typing import Any, Callable

import torch

from ._runtime import native
from .backends import DEFAULT_BACKEND, Backend, lookup_backend
from .capture.variables.optimizers import optimizer_of_step


def _entry_code(fn: Any):
    fn = getattr(fn, "__func__", fn)
    return getattr(fn, "__code__", None)


def _torch_compile_hooks() -> tuple[Callable, Callable] | None:
    """torch.compile's per-thread frame-callback getter and setter, if this torch has them."""
    eval_frame = getattr(getattr(torch._C, "_dynamo", None), "eval_frame", None)
    getter = getattr(eval_frame, "get_eval_frame_callback", None)
    setter = getattr(eval_frame, "set_eval_frame", None)
    return (getter, setter) if getter is not None and setter is not None else None


_TORCH_COMPILE_HOOKS = _torch_compile_hooks()
# torch.compile's callback on this thread (None outside its regions), read per region entry.
_torch_compile_callback: Callable[[], Any] = _TORCH_COMPILE_HOOKS[0] if _TORCH_COMPILE_HOOKS else (lambda: None)


class _CompiledRegion:
    """Runs a callable with this thread's frame callback set to ``callback``.

    A region entered while torch.compile intercepts this thread's frames (a compiled
    function called from a ``torch.compile``d one) turns torch.compile's callback off for
    its duration: each compiler owns the frames of its own region (torch.compile's
    wrappers, in turn, run with ours suspended: ``ConvertFrame.skip_action``). Turning it
    off before ours is installed, and back on after ours is removed, keeps the two
    evaluators' install and removal nested.
    """

    def __init__(self, callback: Any):
        self.callback = callback

    def run(self, fn: Callable, args: tuple, kwargs: dict) -> Any:
        runtime = native()
        if _torch_compile_callback() is not None:
            return self._run_inside_torch_compile(runtime, fn, args, kwargs)
        prior = runtime.set_callback(self.callback)
        try:
            return fn(*args, **kwargs)
        finally:
            runtime.set_callback(prior)

    def _run_inside_torch_compile(self, runtime: Any, fn: Callable, args: tuple, kwargs: dict) -> Any:
        set_torch_callback = _TORCH_COMPILE_HOOKS[1]  # type: ignore[index]
        torch_prior = set_torch_callback(None)
        try:
            prior = runtime.set_callback(self.callback)
            try:
                return fn(*args, **kwargs)
            finally:
                runtime.set_callback(prior)
        finally:
            set_torch_callback(torch_prior)

    def run_with(self, fn: Callable, *args: Any, **kwargs: Any) -> Any:
        return self.run(fn, args, kwargs)


def _check_dynamic(dynamic: Any) -> None:
    if dynamic not in (None, True, False) or not isinstance(dynamic, (bool, type(None))):
        raise TypeError(f"dynamic must be None, True or False, got {dynamic!r}")


def _check_fullgraph(fullgraph: Any) -> None:
    if not isinstance(fullgraph, bool):
        raise TypeError(f"fullgraph must be True or False, got {fullgraph!r}")


def _make_callback(backend: str | Backend, fullgraph: bool, entry_codes: set, recorder=None,
                   dynamic: bool | None = None):
    from . import config
    from .convert_frame import ConvertFrame

    try:
        native().set_recompile_limit(config.recompile_limit)
    except ImportError:
        pass  # calling the compiled function reports the missing runtime
    return ConvertFrame(lookup_backend(backend), fullgraph=fullgraph, entry_codes=entry_codes,
                        recorder=recorder, dynamic=dynamic)


def _dispatcher(target: Any, callback: Any, module: bool) -> Any:
    """The native dispatcher over a function or module (``rust/dispatch``): cache hits
    checked against the call's arguments, the compiled graph called without the frame
    when the entry allows it; None when the native runtime is missing (calls then report
    it)."""
    try:
        runtime = native()
    except ImportError:
        return None
    make = runtime.Dispatcher.over_module if module else runtime.Dispatcher.over_function
    return make(target, callback)


def _optimizer_step(optimizer: Any, closure: Any = None) -> Any:
    return optimizer.step(closure)


def _optimizer_step_entry(target: Any) -> types.FunctionType | None:
    """For ``opt.step`` of an optimizer whose step capture models (SGD, Adam, AdamW): a
    function of the optimizer that calls it (compiled, then bound to ``opt``); torch's own
    ``step`` frame is a profiler wrapper over ``*args``, library code the frame hook
    skips (``opt.step`` after an LR scheduler patched it is its wrapper, modelled too).
    A new code object per compiled step, so each keeps its own cache entries. None for
    anything else.

    >>> opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)
    >>> _optimizer_step_entry(opt.step).__name__
    'SGD.step'
    """
    owner = optimizer_of_step(target)
    if owner is None:
        return None
    name = f"{type(owner).__name__}.step"
    step = types.FunctionType(_optimizer_step.__code__.replace(co_name=name), _optimizer_step.__globals__,
                              name, _optimizer_step.__defaults__)
    step.__qualname__ = name
    return step


def compile(fn_or_module: Any = None, *, backend: str | Backend = DEFAULT_BACKEND, fullgraph: bool = False,
            dynamic: bool | None = None, _recorder: Any = None) -> Any:
    """Compile a function or an ``nn.Module``; usable as a decorator with or without
    arguments.

    ``backend`` is a registered name or a callable ``(GraphModule, example_inputs) ->
    callable``. The default, ``"kernels"`` (also named ``"inductor"``), generates fused C++
    kernels for CPU tensors and Triton kernels for CUDA tensors where they are faster than
    the graph's ATen ops, and runs the ATen ops where they are not or where it cannot:
    inputs that need autograd, graphs it cannot lower, a machine without a C++ compiler
    (``explain()`` says which, per graph). ``backend="cpp"`` and ``backend="triton"``
    always generate their kernels; ``backend="eager"`` always runs the captured graph as
    ATen ops. With ``fullgraph=True`` a frame that cannot be captured whole
    raises :class:`fastdynamo.FullGraphError` naming the construct and its ``file:line``.

    ``dynamic`` is torch.compile's: ``None`` (automatic: a frame compiled again because a
    tensor size changed gets that dimension symbolic, and other sizes reuse the entry),
    ``True`` (every dimension of the inputs symbolic from the first call, parameters
    aside), ``False`` (every size static, except dims given to
    :func:`fastdynamo.mark_dynamic`). Sizes 0 and 1 are always specialised.

    >>> import torch, fastdynamo
    >>> @fastdynamo.compile(backend="eager")
    ... def g(x, y):
    ...     return x @ y
    >>> g(torch.eye(2), torch.ones(2, 2)).shape
    torch.Size([2, 2])
    """
    _check_dynamic(dynamic)
    _check_fullgraph(fullgraph)
    if fn_or_module is None:
        return functools.partial(compile, backend=backend, fullgraph=fullgraph, dynamic=dynamic,
                                 _recorder=_recorder)
    lookup_backend(backend)  # fail early on an unknown name
    fn_or_module = _innermost(fn_or_module)
    if isinstance(fn_or_module, torch.nn.Module):
        return OptimizedModule(fn_or_module, backend=backend, fullgraph=fullgraph, dynamic=dynamic,
                               recorder=_recorder)
    if not callable(fn_or_module):
        raise TypeError(f"fastdynamo.compile expects a function or an nn.Module, got "
                        f"{type(fn_or_module).__name__}")
    step = _optimizer_step_entry(fn_or_module)
    if step is not None:
        compiled_step = compile(step, backend=backend, fullgraph=fullgraph, dynamic=dynamic, _recorder=_recorder)
        compiled_step._fastdynamo_original = fn_or_module
        return types.MethodType(compiled_step, optimizer_of_step(fn_or_module))
    entry = _entry_code(fn_or_module)
    callback = _make_callback(backend, fullgraph, {entry} if entry else set(), _recorder, dynamic)
    fn = fn_or_module
    if isinstance(fn, types.FunctionType):
        dispatcher = _dispatcher(fn, callback, module=False)
        if dispatcher is not None:
            functools.update_wrapper(dispatcher, fn)
            dispatcher._fastdynamo_original = fn
            return dispatcher
    region = _CompiledRegion(callback)

    def compiled(*args, **kwargs):
        return region.run(fn, args, kwargs)

    _mark_region_wrapper(compiled.__code__)
    compiled = functools.wraps(fn)(compiled)
    compiled._fastdynamo_original = fn  # type: ignore[attr-defined]
    compiled._fastdynamo_region = region  # type: ignore[attr-defined]
    return compiled


def _innermost(target: Any) -> Any:
    """What ``target`` compiles, when it is itself a compiled function or module (as
    torch.compile unwraps its own): compiling it again, or explaining it, works on the
    original with the new settings instead of wrapping a wrapper whose frames the inner
    settings would own."""
    while True:
        if isinstance(target, OptimizedModule):
            target = object.__getattribute__(target, "_orig_mod")
            continue
        try:
            attributes = object.__getattribute__(target, "__dict__")
        except AttributeError:
            return target
        original = attributes.get("_fastdynamo_original") if isinstance(attributes, dict) else None
        if original is None:
            return target
        target = original


def _mark_region_wrapper(code: Any) -> None:
    """Called from inside its own region, a wrapper is skipped by the runtime, which calls
    the wrapped function directly (``REGION_WRAPPER``): a compiled recursive function
    then costs eager's recursion depth per level. (Every wrapper has the same code: that of
    ``compiled`` in :func:`compile`; ``reset`` clears actions, so it marks it again.)"""
    global _wrapper_code
    _wrapper_code = code
    try:
        runtime = native()
    except ImportError:
        return  # calling the compiled function reports the missing runtime
    runtime.set_code_action(code, runtime.REGION_WRAPPER)


# Methods that OptimizedModule forwards to the original module, so that its parameters,
# state_dict, mode and device are the original's.
_DELEGATED = ("state_dict", "load_state_dict", "parameters", "named_parameters", "buffers",
              "named_buffers", "children", "named_children", "modules", "named_modules",
              "zero_grad", "get_submodule", "get_parameter", "get_buffer", "extra_repr",
              "register_forward_hook", "register_forward_pre_hook")
_RETURNS_SELF = ("train", "eval", "to", "cpu", "cuda", "float", "double", "half", "bfloat16",
                 "requires_grad_", "apply", "type")


class OptimizedModule(torch.nn.Module):
    """An ``nn.Module`` whose forward runs compiled; everything else is the original's
    (``state_dict`` keys, parameters, ``train()``/``eval()``, attributes)."""

    def __init__(self, module: torch.nn.Module, *, backend: str | Backend = DEFAULT_BACKEND,
                 fullgraph: bool = False, dynamic: bool | None = None, recorder: Any = None):
        _check_dynamic(dynamic)
        _check_fullgraph(fullgraph)
        super().__init__()
        # Not registered as a submodule: state_dict keys must not gain a prefix.
        object.__setattr__(self, "_orig_mod", module)
        forward = type(module).forward
        callback = _make_callback(backend, fullgraph, {forward.__code__}, recorder, dynamic)
        region = _CompiledRegion(callback)
        # Calls go through the native dispatcher (its class's forward called directly when
        # the module has no hooks); without the native runtime, through the region.
        dispatch = _dispatcher(module, callback, module=True) or functools.partial(
            region.run_with, module)
        object.__setattr__(self, "_region", region)
        object.__setattr__(self, "_dispatch", dispatch)

    def __call__(self, *args, **kwargs):
        return self._dispatch(*args, **kwargs)

    def forward(self, *args, **kwargs):
        return self._dispatch(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(object.__getattribute__(self, "_orig_mod"), name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._orig_mod, name, value)

    def __repr__(self) -> str:
        return f"OptimizedModule({self._orig_mod!r})"

    @property
    def training(self) -> bool:
        return self._orig_mod.training

    @training.setter
    def training(self, mode: bool) -> None:
        # nn.Module.__init__ sets this before _orig_mod exists; afterwards it is the original's
        if "_orig_mod" in self.__dict__:
            self._orig_mod.training = mode


def _delegate(name: str, returns_self: bool):
    def method(self, *args, **kwargs):
        result = getattr(self._orig_mod, name)(*args, **kwargs)
        return self if returns_self else result

    method.__name__ = name
    return method


for _name in _DELEGATED:
    setattr(OptimizedModule, _name, _delegate(_name, False))
for _name in _RETURNS_SELF:
    setattr(OptimizedModule, _name, _delegate(_name, True))


def disable(fn: Callable) -> Callable:
    """Run ``fn`` as ordinary Python, always, even when called from compiled code.

    >>> import fastdynamo
    >>> @fastdynamo.disable
    ... def log(x):
    ...     return x
    >>> log(3)
    3
    """
    @functools.wraps(fn)
    def disabled(*args, **kwargs):
        try:
            runtime = native()
        except ImportError:
            return fn(*args, **kwargs)
        prior = runtime.set_callback(None)
        try:
            return fn(*args, **kwargs)
        finally:
            runtime.set_callback(prior)

    disabled._fastdynamo_disabled = True  # type: ignore[attr-defined]
    return disabled


def reset() -> None:
    """Drop every compiled entry and skip mark, and the compiled graphs stored in user
    globals; the next calls compile afresh."""
    from .convert_frame import forget_compiled_fns, forget_frame_sizes

    forget_compiled_fns()
    forget_frame_sizes()
    try:
        runtime = native()
    except ImportError:
        return
    runtime.reset()
    if _wrapper_code is not None:
        _mark_region_wrapper(_wrapper_code)


_wrapper_code: Any = None
