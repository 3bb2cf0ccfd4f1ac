"""Training graphs: one joint forward/backward trace, our partition, kernels for both halves.

A captured graph whose inputs or parameters require grad (grad mode on) is traced
forward and backward together by AOTAutograd (functionalized ATen ops: input and buffer
mutations such as batch norm's running statistics become outputs the runtime copies
back, ``detach`` and ``no_grad`` regions are traced as eager runs them). Our
:func:`~.partition.partition` splits the joint graph; each half is compiled by the
caller's ``compile_half`` (the kernel compiler for the target: C++ or Triton kernels, or
the half's ATen ops when kernels do not pay) on its first call, with real inputs, so the
kernels' choice measures real tensors. AOTAutograd wraps both in one
``torch.autograd.Function``: ``loss.backward()`` runs our backward.

What AOTAutograd keeps of eager's semantics: ``retain_graph=True`` (the saved tensors
stay), inputs that do not require grad (no gradient), shared parameters (one input,
gradients summed). Double backward (``create_graph=True``) is refused by its backward
with a clear error, never a wrong gradient.

>>> import torch
>>> gm = torch.fx.symbolic_trace(lambda x, w: ((x * w).sin(),))
>>> x, w = torch.randn(3), torch.randn(3, requires_grad=True)
>>> run = compile_training(gm, [x, w], lambda half, inputs: half.forward)
>>> run(x, w)[0].sum().backward()
>>> torch.allclose(w.grad, (x * w).cos() * x)
True
"""
from __future__ import annotations

import contextlib
import logging
from typing import Any, Callable

import torch

from ..kernels.decompositions import decomposition_table
from .gates import GatePlan
from .partition import PARTITION_KEY, partition

log = logging.getLogger(__name__)

# Stands for an undefined tensor (None) saved for the backward; see CompiledHalf.__call__.
UNDEFINED = torch.empty(0)

CompileHalf = Callable[[torch.fx.GraphModule, list], Callable[..., Any]]


class CompiledHalf:
    """The forward or the backward graph, compiled on its first call (AOTAutograd gives
    the compilers FakeTensors; the kernels' choice wants real ones). A boxed callable:
    AOTAutograd calls it with the list of inputs."""

    _boxed_call = True

    def __init__(self, gm: torch.fx.GraphModule, compile_half: CompileHalf, role: str, strict: bool = False):
        self.gm = gm
        self.role = role
        self.strict = strict
        self.failure: str | None = None  # why the kernels were given up at run time
        self._compile_half = compile_half
        self._aten = gm.forward
        self.compiled: Callable[..., Any] | None = None
        self._fast: Callable[..., Any] | None = None
        self._tangents_from = 0
        self._tangent_layout: tuple | None = None

    def __call__(self, args: list) -> Any:
        if self.role == "backward" and any(arg is UNDEFINED for arg in args):
            args = [None if arg is UNDEFINED else arg for arg in args]
        if self.compiled is None:
            self._compile(args)
        # The fast callable needs inputs with the metadata it was compiled for: the
        # forward's are the frame's guarded inputs, the saved tensors come from our own
        # forward; the tangents (the caller's gradients) are checked.
        fits = self._tangent_layout is None or _layout(args[self._tangents_from:]) == self._tangent_layout
        try:
            result = (self._fast if fits else self.compiled)(*args)  # type: ignore[misc]
        except Exception as error:
            # The backward runs outside the frame, where no fallback reruns it: a half
            # whose kernels raise runs its own ATen graph (halves write no input, so a
            # second run is exact). In strict mode (the tests) the error is raised.
            if self.strict or self.compiled is self._aten:
                raise
            log.warning("the %s half of a training graph raised, running its ATen ops: %r", self.role, error,
                        exc_info=True)
            self.compiled = self._fast = self._aten
            self.failure = f"internal error: {error!r}"
            result = self._aten(*args)
        if self.role == "forward" and any(value is None for value in result):
            # An op may return an undefined tensor that its fake kernel made a tensor (the
            # LSTM's workspace): AOTAutograd saves only tensors, so it travels as UNDEFINED.
            result = tuple(UNDEFINED if value is None else value for value in result)
        return result

    def _compile(self, args: list) -> None:
        compiled = self.compiled = self._compile_half(self.gm, list(args))
        log.debug("%s graph: %s", self.role, getattr(compiled, "fallback_reason", None) or "kernels")
        self._fast = getattr(compiled, "fastdynamo_guarded", compiled)
        if self.role == "backward" and self._fast is not compiled:
            tangents = sum(1 for node in self.gm.graph.find_nodes(op="placeholder") if "tangents" in str(node.target))
            self._tangents_from = len(args) - tangents
            self._tangent_layout = _layout(args[self._tangents_from:])

    @property
    def kernel_count(self) -> int:
        return getattr(self.compiled, "kernel_count", 0)

    @property
    def fallback_reason(self) -> str | None:
        if self.compiled is None:
            return "not compiled yet"
        if self.failure is not None:
            return self.failure
        return getattr(self.compiled, "fallback_reason", None)


def _layout(values: list) -> tuple:
    return tuple((v.shape, v.stride(), v.dtype) if isinstance(v, torch.Tensor) else v for v in values)


class TrainingGraph:
    """What the backend returns for a training graph: call it as the captured graph.

    ``forward_half`` and ``backward_half`` are the two :class:`CompiledHalf` (the
    backward's is None until AOTAutograd compiled it, or when no output needs a
    gradient); ``kernel_count`` counts both halves' kernels."""

    fallback_reason = None
    choice = None

    def __init__(self, run: Callable[..., Any], halves: dict[str, CompiledHalf], target: Any):
        self.run = run
        self.halves = halves
        self.target = target

    def __call__(self, *args: Any) -> Any:
        return self.run(*args)

    @property
    def fastdynamo_guarded(self) -> Callable[..., Any]:
        return self.run

    @property
    def forward_half(self) -> CompiledHalf | None:
        return self.halves.get("forward") or self.halves.get("inference")

    @property
    def backward_half(self) -> CompiledHalf | None:
        return self.halves.get("backward")

    @property
    def kernel_count(self) -> int:
        return sum(half.kernel_count for half in self.halves.values())

    @property
    def fastdynamo_description(self) -> str:
        """explain()'s line: each half's kernels or why it runs ATen ops."""
        target = getattr(self.target, "name", "generated")

        def half(role: str, compiled: CompiledHalf | None) -> str:
            if compiled is None or compiled.compiled is None:
                return f"{role} not compiled yet"
            if compiled.fallback_reason:
                return f"{role} ATen ops: {compiled.fallback_reason}"
            return f"{role} {compiled.kernel_count} {target} kernels"
        return f"training graph: {half('forward', self.forward_half)}; {half('backward', self.backward_half)}"

    @property
    def partition(self) -> Any:
        forward = self.halves.get("forward")
        return getattr(forward, "partition", None)


def compile_training(gm: torch.fx.GraphModule, example_inputs: list, compile_half: CompileHalf,
                     target: Any = None, strict: bool = False, signature: Any = None) -> TrainingGraph:
    """Trace ``gm`` forward and backward, partition, and compile each half with
    ``compile_half(half_graph_module, real_inputs)`` on its first call. ``strict``: a
    half whose compiled code raises re-raises instead of running its ATen graph.

    ``signature`` (the graph's :class:`~fastdynamo.backends.kernels.symbolic.SymbolicSignature`,
    None for static sizes): the joint graph is traced from the capture's symbolic
    FakeTensors, so both halves are symbolic graphs over the same ShapeEnv, without a
    shape guard the frame's guards do not already check (one raises SymbolicRefused)."""
    halves: dict[str, CompiledHalf] = {}
    partitions: list = []

    def compiler(role: str):
        def compile_one(half: torch.fx.GraphModule, _fake_inputs: list) -> CompiledHalf:
            compiled = halves[role] = CompiledHalf(half, compile_half, role, strict)
            if role == "forward" and partitions:
                compiled.partition = partitions[-1]  # type: ignore[attr-defined]
            return compiled
        return compile_one

    def partition_recorded(joint: torch.fx.GraphModule, joint_inputs: Any, **kwargs: Any):
        forward, backward = partition(joint, joint_inputs, **kwargs)
        partitions.append(joint.meta.get(PARTITION_KEY))
        return forward, backward

    # Traced without oneDNN's fused RNN: its op's trace says train=False and returns no
    # workspace, so its backward cannot run; the composite LSTM is ATen matmuls and
    # pointwise ops, which our kernels fuse in both halves.
    # imported here: torch._functorch.aot_autograd imports triton, which must wait until
    # a process has chosen TRITON_INTERPRET (the triton backend reads it at first use)
    from torch._functorch.aot_autograd import aot_module_simplified

    trace_inputs = list(example_inputs) if signature is None else list(signature.values)
    mkldnn_enabled = torch._C._get_mkldnn_enabled()
    torch._C._set_mkldnn_enabled(False)
    try:
        with contextlib.nullcontext() if signature is None else signature.no_new_guards():
            run = aot_module_simplified(gm, trace_inputs, fw_compiler=compiler("forward"),
                                        bw_compiler=compiler("backward"), inference_compiler=compiler("inference"),
                                        partition_fn=partition_recorded, decompositions=decomposition_table())
    finally:
        torch._C._set_mkldnn_enabled(mkldnn_enabled)
    # eager's None gradients for inputs the loss does not reach (AOTAutograd gives zeros)
    return TrainingGraph(GatePlan.of(gm).wrap(run, list(example_inputs)), halves, target)
