"""Compile an FX graph into a callable for one kernel target: the passes, the cache, the fallbacks.

``compile_graph(gm, example_inputs, target)`` decides once, from the example inputs, how
the graph runs:

* kernels, when the target can run them on the inputs' device: a :class:`CompiledGraph`;
* ATen ops: inputs the target cannot run (its ``device_reason``, said once per process
  when it holds for every graph), inputs that need autograd (grad mode on and an input or
  parameter requiring grad), non-tensor inputs, mixed devices, a graph lowering cannot
  express (one that writes to a graph input...), or a machine where the target cannot
  build its kernels (no C++ compiler). The callable is then the graph's own forward as
  plain Python (what the ``eager`` backend returns), so this path costs nothing per call;
  ``fallback_reason`` on it says why.

Deciding at compile time is sound under :func:`fastdynamo.compile`, whose guards pin
each input's device, dtype, shape, strides and ``requires_grad`` and the grad mode.
There the frame calls :attr:`CompiledGraph.fastdynamo_guarded`: the generated ``forward`` itself,
with no check of its own. Called directly with other inputs, a :class:`CompiledGraph`
specialises per input metadata and runs ATen ops per call when autograd is needed.

A graph captured with symbolic sizes gets one module whose kernels take the sizes as
arguments (:mod:`symbolic`), cached under the symbolic graph; sizes the trace would have
to branch on, or that no input gives, make its kernels per concrete size instead.

>>> import torch
>>> from fastdynamo.backends.triton import TritonTarget
>>> gm = torch.fx.symbolic_trace(lambda x: (x * 2).sum(-1))
>>> compiled = compile_graph(gm, [torch.randn(2, 3)], TritonTarget())
>>> torch.allclose(compiled(torch.ones(2, 3)), torch.full((2,), 6.0))
True
"""
from __future__ import annotations

import functools
import hashlib
import logging
import os
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

import torch
from torch._subclasses.fake_tensor import FakeTensor
from torch.utils import _pytree as pytree

from ..training import PartitionRefused, compile_training
from . import cache, runtime, sizes
from .choice import Choice, choose
from .fusion import fuse
from .lowering import UnsupportedGraph, attribute_names, attribute_values, lower, trace_aten
from .sizes import SymbolicRefused
from .symbolic import SizePattern, has_symbolic_sizes, signature_of
from .target import KernelTarget
from .wrapper import fallback_module, generate_module, static_only_module

FORMAT_VERSION = 3
NEEDS_AUTOGRAD = "inputs require grad with grad mode on"
_said_for_process: set = set()  # (target, reason) already logged as process-wide


class TargetUnavailable(Exception):
    """The target cannot build or load kernels on this machine (raised by its runtime
    while loading a generated module); the graph runs as ATen ops with this reason."""


def strict() -> bool:
    """Internal errors of a pass raise instead of falling back (the test suite)."""
    return os.environ.get("FASTDYNAMO_KERNELS_STRICT", os.environ.get("FASTDYNAMO_TRITON_STRICT")) == "1"


def _tensor_meta(t: torch.Tensor) -> tuple:
    return (tuple(t.shape), tuple(t.stride()), t.dtype, t.device)


def inputs_key(inputs: list) -> tuple:
    """What generated code depends on besides the graph: each tensor's metadata and which
    earlier input shares its storage (kernels are generated for that aliasing), each other
    value itself, and the torch state read while tracing (factory functions without a
    dtype or device follow the defaults; grad mode and deterministic algorithms change the
    ops traced)."""
    storages: dict[int, int] = {}
    parts: list = []
    for index, value in enumerate(inputs):
        if isinstance(value, torch.Tensor):
            storage = value.untyped_storage().data_ptr() if value.device.type != "meta" else id(value)
            shares = storages.setdefault(storage, index) if value.numel() else index
            parts.append((_tensor_meta(value), shares, value.storage_offset()))
        else:
            parts.append(("value", type(value), repr(value)))
    return (tuple(parts), _trace_time_state())


def _symbolic_inputs_key(inputs: list, attributes: list) -> tuple:
    """What a symbolic module depends on besides its signature: which earlier input
    shares each tensor's storage, the (static) attributes' metadata, the torch state."""
    key = inputs_key([*inputs, *attributes])
    sharing = tuple(part[1] if part[0] != "value" else None for part in key[0])
    return (sharing, tuple(key[0][len(inputs):]), key[1])


def _trace_time_state() -> tuple:
    default_device = torch.get_default_device() if hasattr(torch, "get_default_device") else None
    return (torch.get_default_dtype(), default_device, torch.is_grad_enabled(),
            torch.are_deterministic_algorithms_enabled())


def compile_graph(gm: torch.fx.GraphModule, example_inputs: list, target: KernelTarget):
    """``backend(gm, example_inputs)`` for ``target`` (see module docstring): a
    :class:`CompiledGraph`, or the graph's forward when it runs as ATen ops."""
    example_inputs = list(example_inputs)
    compiled = CompiledGraph(gm, target)
    reason = compiled.aten_reason(example_inputs, size_inputs=compiled.signature is not None)
    if reason is None and compiled.needs_autograd(example_inputs + attribute_values(gm, compiled.attribute_names)):
        return _training(gm, example_inputs, compiled, target)
    if reason is None:
        compiled.specialise(example_inputs)
        if compiled.fallback_reason is None:
            return compiled
        reason = compiled.fallback_reason
    else:
        say_runs_aten(target, reason)
    return aten_forward(gm, reason)


def _training(gm: torch.fx.GraphModule, example_inputs: list, compiled: "CompiledGraph", target: KernelTarget):
    """A graph that needs autograd: the joint forward/backward graph, partitioned, both
    halves compiled by :func:`compile_graph` (:mod:`fastdynamo.backends.training`); the
    ATen ops through autograd where that is refused, with the reason."""
    reason = _training_refusal(gm, compiled)
    if reason is None:
        try:
            return compile_training(gm, example_inputs, functools.partial(compile_graph, target=target), target,
                                    strict=strict(), signature=compiled.signature)
        except (PartitionRefused, SymbolicRefused) as why:
            reason = f"training graph: {why}"
        except Exception as error:  # a bug in the joint trace or the partition: never a wrong result
            if strict():
                raise
            target_logger(target).warning("%s backend failed on a training graph, running ATen ops: %r",
                                          target.name, error, exc_info=True)
            reason = f"training graph: internal error: {error!r}"
    say_runs_aten(target, reason)
    return aten_forward(gm, reason)


def _training_refusal(gm: torch.fx.GraphModule, compiled: "CompiledGraph") -> str | None:
    """Why a graph needing autograd runs as ATen ops through autograd."""
    if compiled.enables_grad and not torch.is_grad_enabled():
        return f"{NEEDS_AUTOGRAD}: the graph switches grad mode on"
    if not _flat_tuple(compiled.out_spec):
        return f"{NEEDS_AUTOGRAD}: the graph does not return a flat tuple"
    return None


def aten_forward(gm: torch.fx.GraphModule, reason: str):
    """The graph as plain generated Python (the ``eager`` backend's callable), marked
    with why it runs as ATen ops: ``fallback_reason``, and ``kernel_count`` 0."""
    from ..eager import graph_to_function

    forward = graph_to_function(gm)
    # a bound method reads attributes of its function
    forward.__func__.__dict__.update(fallback_reason=reason, kernel_count=0)
    return forward


def _all_ops_without_grad(gm: torch.fx.GraphModule, start: bool) -> bool:
    """Every op of ``gm`` runs with grad mode off (or is a ``detach``) when the graph
    starts in grad mode ``start``, and the mode it ends in is ``start`` (the generated
    module does not switch modes)."""
    mode = start
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target is torch._C._set_grad_enabled:
            mode = bool(node.args[0])
        elif node.op in ("call_function", "call_method", "call_module") and mode \
                and node.target not in _GRAD_FREE:
            return False
    return mode == start


def _grad_free_ops() -> frozenset:
    """Ops whose result never requires grad, whatever the mode (``loss.detach()`` after a
    step): a module returns such a view of an input through ``runtime.reinterpret``,
    which must then not record autograd either (torch's C++ fast path does not; the
    ``as_strided`` fallback would)."""
    with torch.enable_grad():
        if runtime.reinterpret(torch.zeros(1, requires_grad=True), (1,), (1,), 0).requires_grad:
            return frozenset()
    return frozenset({"detach", torch.detach, torch.Tensor.detach, torch.ops.aten.detach.default})


_GRAD_FREE = _grad_free_ops()


def _enables_grad(gm: torch.fx.GraphModule) -> bool:
    return any(node.op == "call_function" and node.target is torch._C._set_grad_enabled
               and node.args[0] for node in gm.graph.nodes)


def target_logger(target: KernelTarget) -> logging.Logger:
    return logging.getLogger(f"fastdynamo.backends.{target.name}")


def say_runs_aten(target: KernelTarget, reason: str) -> None:
    """Log why a graph runs as ATen ops: once per process for a reason that holds for
    every graph (no GPU, no compiler), at INFO for a reason about this graph."""
    if target.process_wide(reason):
        if (target.name, reason) not in _said_for_process:
            target_logger(target).warning("%s backend: graphs run as ATen ops: %s", target.name, reason)
            _said_for_process.add((target.name, reason))
    else:
        target_logger(target).info("%s backend runs a graph as ATen ops: %s", target.name, reason)


class CompiledGraph:
    """The callable the backend returns when kernels run; one compiled module per input metadata."""

    def __init__(self, gm: torch.fx.GraphModule, target: KernelTarget):
        self.gm = gm
        self.target = target
        self.out_spec = pytree.tree_flatten(_output_value(gm))[1]
        self.attribute_names = attribute_names(gm)
        self.enables_grad = _enables_grad(gm)
        # per grad mode at the start: every op runs under the graph's own no_grad (an
        # optimizer step), read once here rather than on every call
        self._grad_free = {start: _all_ops_without_grad(gm, start) for start in (False, True)}
        self.specialisations: dict = {}
        self.module: ModuleType | None = None
        self.fallback_reason: str | None = None
        self._aten_forward: Callable[..., Any] | None = None
        self.signature = signature_of(gm)  # None: static sizes (kernels per input metadata)
        # why a symbolic graph has kernels per size: its fast path must then check sizes
        self.symbolic_refused: str | None = None
        self._symbolic_sizes = has_symbolic_sizes(gm)
        if self._symbolic_sizes and self.signature is None:
            self.symbolic_refused = "no symbolic signature (kernels per size)"
        self.choice: Choice | None = None  # kernels or ATen ops, decided on the first inputs

    def needs_autograd(self, tensors: list) -> bool:
        """An input requires grad and grad mode is on when the graph starts, or the graph
        switches it on (``enables_grad``: a graph resumed inside ``no_grad`` leaves the
        block); unless every op runs under ``no_grad`` the graph itself enters and leaves
        (an optimizer step: ``_set_grad_enabled(False)`` ... ``_set_grad_enabled(True)``)."""
        if not any(isinstance(t, torch.Tensor) and t.requires_grad for t in tensors):
            return False
        start = torch.is_grad_enabled()
        return (self.enables_grad or start) and not self._grad_free[start]

    def _aten(self, *args: Any) -> Any:
        """The graph as ATen ops, for calls whose inputs need autograd or have no kernels."""
        if self._aten_forward is None:
            self._aten_forward = aten_forward(self.gm, "chosen per call")
        return self._aten_forward(*args)

    @property
    def kernel_count(self) -> int:
        return getattr(self.module, "KERNEL_COUNT", 0) if self.module else 0

    @property
    def source_path(self) -> str | None:
        return getattr(self.module, "__file__", None) if self.module else None

    @property
    def fastdynamo_guarded(self) -> Callable[..., Any]:
        """What the frame calls under its guards (the inputs have the metadata the module
        was generated for): the module's ``forward`` with no check of its own, returning
        the graph's outputs as the graph does. A symbolic graph whose kernels are per size
        (``symbolic_refused``) is itself: the frame's guards admit other sizes."""
        module = self.module
        if module is None or module.FALLBACK_REASON or not _flat_tuple(self.out_spec) or self.symbolic_refused:
            return self
        attributes = attribute_values(self.gm, self.attribute_names)
        if not attributes:
            return module.forward
        forward = module.forward
        return lambda *args: forward(*args, *attributes)

    def aten_reason(self, example_inputs: list, size_inputs: bool = False) -> str | None:
        """Why these inputs run as ATen ops whatever the graph is; None: kernels can run.
        ``size_inputs``: an int input the symbolic signature reads as a size is allowed."""
        if not all(isinstance(t, torch.Tensor) or (size_inputs and self._is_size_input(position))
                   for position, t in enumerate(example_inputs)):
            return "an input is not a tensor"
        tensors = [t for t in example_inputs if isinstance(t, torch.Tensor)]
        tensors += attribute_values(self.gm, self.attribute_names)
        devices = {t.device for t in tensors}
        if len(devices) > 1:
            return f"inputs on several devices {sorted(map(str, devices))}"
        device = devices.pop() if devices else torch.device("cpu")
        return self.target.device_reason(device)

    def _is_size_input(self, position: int) -> bool:
        patterns = self.signature.patterns if self.signature is not None else ()
        return position < len(patterns) and isinstance(patterns[position], SizePattern)

    def specialise(self, example_inputs: list) -> "CompiledGraph":
        """Compile (or load from the cache) the module for inputs like these: the
        symbolic graph's module when its signature matches them, else one for these sizes."""
        try:
            module = self._symbolic_module(example_inputs)
            if module is None and self._symbolic_sizes and self.symbolic_refused is None:
                # a module for these sizes only: the frame's guards admit others
                self.symbolic_refused = "the inputs do not match the symbolic signature (kernels per size)"
            if module is None:
                reason = self.aten_reason(example_inputs)
                if reason is not None:
                    say_runs_aten(self.target, reason)
                    return self._use_aten(reason, example_inputs)
                tensors = list(example_inputs) + attribute_values(self.gm, self.attribute_names)
                key = cache.hash_key(*self._key_prefix(tensors), inputs_key(tensors))
                module = cache.load_or_build(key, lambda: self._generate(example_inputs))
        except TargetUnavailable as why:
            say_runs_aten(self.target, str(why))
            return self._use_aten(str(why), example_inputs)
        if module.FALLBACK_REASON:
            say_runs_aten(self.target, module.FALLBACK_REASON)
        elif self.choice is None:
            self.choice = self._choose(module, example_inputs)
            if not self.choice.kernels:
                reason = f"the kernels do not pay ({self.choice.why})"
                say_runs_aten(self.target, reason)
                return self._use_aten(reason, example_inputs)
        if getattr(module, "WRITES_INPUTS", False) and getattr(module, "ATEN_FORWARD", None) is None:
            # (a module serves one graph code: any graph that loads it runs the same ops)
            aten = aten_forward(self.gm, "inputs share memory")
            # (returning the flat tuple of outputs, as the module's forward does)
            setattr(module, "ATEN_FORWARD", lambda *args: tuple(pytree.tree_leaves(aten(*args))))  # noqa: B010
        self.specialisations[inputs_key(example_inputs)] = module
        self.module = module
        self.fallback_reason = module.FALLBACK_REASON
        return self

    def _choose(self, module: ModuleType, example_inputs: list) -> Choice:
        device = next((t.device for t in example_inputs if isinstance(t, torch.Tensor)), torch.device("cpu"))
        attributes = attribute_values(self.gm, self.attribute_names)
        if not self.target.chooses(device):
            return Choice(True, "the kernels, as the backend was asked for")
        file = getattr(module, "__file__", None)
        kept = Path(file).with_suffix(".choice.json") if file else None
        inputs = _copies(example_inputs) if getattr(module, "WRITES_INPUTS", False) else list(example_inputs)
        return choose(module.KERNEL_COUNT, lambda *args: module.forward(*args, *attributes),
                      lambda: aten_forward(self.gm, "measured"), inputs, kept)

    def _key_prefix(self, tensors: list) -> tuple:
        """The parts of a cache key that do not depend on the inputs."""
        device = next((t.device for t in tensors if isinstance(t, torch.Tensor)), torch.device("cpu"))
        return (FORMAT_VERSION, source_fingerprint(type(self.target).__module__), self.target.name,
                self.target.key_parts(device), self.target.options, self.gm.code, _targets(self.gm))

    def _symbolic_module(self, example_inputs: list) -> ModuleType | None:
        """The module whose kernels take sizes as arguments, if it serves these inputs."""
        signature = self.signature
        if signature is None or not signature.matches(list(example_inputs)):
            return None
        if self.aten_reason(example_inputs, size_inputs=True) is not None:
            return None  # the per-size path says why
        attributes = attribute_values(self.gm, self.attribute_names)
        key = cache.hash_key(*self._key_prefix([*example_inputs, *attributes]), "symbolic", signature.key(),
                             _symbolic_inputs_key(list(example_inputs), attributes))
        module = cache.load_or_build(key, lambda: self._generate_symbolic(example_inputs))
        refused = getattr(module, "STATIC_ONLY", None)
        if refused is not None:
            target_logger(self.target).info("%s backend: kernels per concrete size for a symbolic graph: %s",
                                            self.target.name, refused)
            self.signature, self.symbolic_refused = None, refused
            return None
        return module

    def _generate_symbolic(self, example_inputs: list) -> str:
        """Source of the module for every size of the signature, or a per-size marker."""
        signature = self.signature
        assert signature is not None, "only called with a signature"
        try:
            with signature.no_new_guards(), sizes.symbol_ranges(signature.ranges):
                traced = trace_aten(self.gm, signature.values)
                graph = lower(traced.graph_module, traced.input_names, signature)
                source = self._passes(graph, traced.attribute_names)
        except (SymbolicRefused, UnsupportedGraph, RecursionError) as why:
            # the per-size path decides for itself (kernels, or ATen ops with its reason)
            return static_only_module(str(why) or type(why).__name__)
        except Exception as error:  # a bug in a pass: never a wrong result, but say so
            if strict():
                raise
            target_logger(self.target).warning("%s backend failed on a symbolic graph, kernels per size: %r",
                                               self.target.name, error, exc_info=True)
            return static_only_module(f"internal error: {error!r}")
        refusal = _eager_refusal(self.gm, example_inputs, copy=bool(graph.input_writes))
        return fallback_module(refusal) if refusal else source

    def _passes(self, graph, attribute_names: list) -> str:
        graph.verify()
        schedule = fuse(graph)
        schedule.verify()
        return generate_module(schedule, attribute_names, self.target.renderer())

    def _use_aten(self, reason: str, example_inputs: list) -> "CompiledGraph":
        self.fallback_reason = reason
        self.specialisations[inputs_key(example_inputs)] = None
        return self

    def _generate(self, example_inputs: list) -> str:
        try:
            traced = trace_aten(self.gm, example_inputs, self.target.channels_last)
            graph = lower(traced.graph_module, traced.input_names)
            source = self._passes(graph, traced.attribute_names)
            refusal = _eager_refusal(self.gm, example_inputs, copy=bool(graph.input_writes))
            return fallback_module(refusal) if refusal else source
        except UnsupportedGraph as reason:
            return fallback_module(str(reason))
        except RecursionError:
            # The passes recurse over expression trees: a chain of hundreds of fused
            # pointwise ops is deeper than the interpreter allows. A limit, not a bug.
            return fallback_module("expression chain too deep for the kernel generator")
        except Exception as error:  # a bug in a pass: never a wrong result, but say so
            # unless eager refuses these inputs too (an amax over an empty dim: the trace
            # raises RuntimeError, eager IndexError): the ATen ops raise eager's error
            # (on copies: whether the graph writes its inputs is not known here)
            refusal = _eager_refusal(self.gm, example_inputs, copy=True)
            if refusal:
                return fallback_module(refusal)
            if strict():
                raise
            target_logger(self.target).warning("%s backend failed to compile a graph, running ATen ops: %r",
                                               self.target.name, error, exc_info=True)
            return fallback_module(f"internal error: {error!r}")

    def __call__(self, *args: Any) -> Any:
        if self.gm is None:
            raise RuntimeError("compiled graph was released")
        metadata = inputs_key(list(args))
        if metadata not in self.specialisations:
            self.specialise(list(args))
        module = self.specialisations[metadata]
        if module is None or module.FALLBACK_REASON:
            return self._aten(*args)
        attributes = attribute_values(self.gm, self.attribute_names)
        if self.needs_autograd([*args, *attributes]):
            # compiled for inputs that needed no autograd: the ATen ops record it
            return self._aten(*args)
        flat = module.call(list(args) + attributes)
        return pytree.tree_unflatten(flat, self.out_spec)


def _flat_tuple(spec: pytree.TreeSpec) -> bool:
    """The graph returns a flat tuple (what captures give): ``forward``'s own result."""
    return spec.type is tuple and all(child.is_leaf() for child in spec.children())


def _eager_refusal(gm: torch.fx.GraphModule, example_inputs: list, copy: bool = False) -> str | None:
    """Why eager raises on these inputs (an op it does not implement for a dtype, such as
    ``abs`` on bool or ``softmax`` on int8, which meta kernels and the decompositions
    accept): the graph is run once on them, as ATen ops. The kernels would compute a value
    where eager raises, so such a graph runs as ATen ops, raising eager's error. Run only
    for graphs that lowered to kernels, with the RNG state kept (on copies of the inputs
    with ``copy``, for a graph that writes some: :func:`_copies`)."""
    if any(isinstance(t, FakeTensor) for t in example_inputs):
        return None
    if copy:
        example_inputs = _copies(example_inputs)
    devices = [t.device for t in example_inputs if isinstance(t, torch.Tensor) and t.device.type == "cuda"]
    try:
        with torch.random.fork_rng(devices=devices), torch.no_grad():
            gm(*example_inputs)
    except Exception as error:  # noqa: BLE001 - whatever eager raises, the kernels must not hide
        return f"eager raises {type(error).__name__}: {str(error).splitlines()[0][:200] if str(error) else ''}"
    return None


def _copies(example_inputs: list) -> list:
    """The inputs, each tensor a copy with its strides, for running a graph that writes
    to its inputs at compile time (the eager check, the measured choice) without changing
    the caller's tensors."""
    def copy(value):
        if not isinstance(value, torch.Tensor):
            return value
        detached = value.detach()
        if torch._debug_has_internal_overlap(detached) != 0:
            # elements sharing memory (an expanded input): no tensor of those strides can
            # be written element by element, so the copy is of the storage itself
            twin = torch.empty(0, dtype=value.dtype, device=value.device)
            twin.set_(detached.untyped_storage().clone(), detached.storage_offset(), detached.shape, detached.stride())
        else:
            twin = torch.empty_strided(value.shape, value.stride(), dtype=value.dtype, device=value.device)
            twin.copy_(detached)
        return twin.requires_grad_(value.requires_grad)
    with torch.no_grad():
        return [copy(value) for value in example_inputs]


def _output_value(gm: torch.fx.GraphModule):
    for node in gm.graph.nodes:
        if node.op == "output":
            return node.args[0]
    return None


def _targets(gm: torch.fx.GraphModule) -> list:
    # gm.code names call targets by their short names: add where they come from, so
    # two functions called `f` never share a cache entry.
    return [f"{getattr(n.target, '__module__', '')}.{getattr(n.target, '__qualname__', n.target)}"
            for n in gm.graph.nodes if n.op == "call_function"]


@functools.lru_cache(maxsize=None)
def source_fingerprint(target_module: str) -> str:
    """A hash of the code generator's source (this package and the target's): a changed
    pass never reuses code generated by the old one."""
    digest = hashlib.sha256()
    target_dir = Path(__import__(target_module, fromlist=["_"]).__file__ or ".").parent
    for folder in (Path(__file__).parent, target_dir):
        for path in sorted(folder.glob("*.py")):
            digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()
