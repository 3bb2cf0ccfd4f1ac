"""Compile an FX graph into a callable: the passes in order, the cache, the fallbacks.

``compile_graph`` decides per graph how it runs:

* kernels (CUDA tensors, or CPU tensors with Triton's interpreter on);
* ATen ops: CPU tensors without the interpreter (logged once), non-tensor inputs,
  mixed devices, or a graph lowering cannot express (the reason is logged and cached).

Per call, inputs that need autograd run the graph eagerly, and inputs with other
shapes, strides or dtypes get a specialisation of their own.

>>> import torch
>>> gm = torch.fx.symbolic_trace(lambda x: (x * 2).sum(-1))
>>> compiled = compile_graph(gm, [torch.randn(2, 3)])
>>> torch.allclose(compiled(torch.ones(2, 3)), torch.full((2,), 6.0))
True
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import logging
import os
from pathlib import Path
from typing import Any

import torch
from torch.utils import _pytree as pytree

from . import cache, runtime
from .fusion import fuse
from .lowering import UnsupportedGraph, attribute_names, attribute_values, lower, trace_aten
from .wrapper import fallback_module, generate_module

logger = logging.getLogger("fastdynamo.backends.triton")
FORMAT_VERSION = 2
_said_cpu_runs_aten = False


@dataclasses.dataclass(frozen=True)
class TritonOptions:
    """Knobs that change generated code (they are part of the cache key).

    ``persistent_max``: rows up to this many elements reduce in one block.
    ``config_overrides``: template kind -> candidate launch configs (tests force small blocks).
    """

    persistent_max: int = 1024
    config_overrides: tuple = ()

    @staticmethod
    def from_env() -> "TritonOptions":
        return TritonOptions(persistent_max=int(os.environ.get("FASTDYNAMO_TRITON_PERSISTENT_MAX", "1024")))


def _tensor_meta(t: torch.Tensor) -> tuple:
    return (tuple(t.shape), tuple(t.stride()), t.dtype, t.device)


def compile_graph(gm: torch.fx.GraphModule, example_inputs: list, options: TritonOptions | None = None) -> "CompiledGraph":
    """``backend(gm, example_inputs)`` with explicit options (see module docstring)."""
    options = options or TritonOptions.from_env()
    return CompiledGraph(gm, options).specialise(list(example_inputs))


class CompiledGraph:
    """The callable the backend returns; holds one compiled module per input metadata."""

    def __init__(self, gm: torch.fx.GraphModule, options: TritonOptions):
        self.gm = gm
        self.options = options
        self.out_spec = pytree.tree_flatten(_output_value(gm))[1]
        self.attribute_names = attribute_names(gm)
        self.specialisations: dict = {}
        self.module = None
        self.fallback_reason: str | None = None

    @property
    def kernel_count(self) -> int:
        return getattr(self.module, "KERNEL_COUNT", 0) if self.module else 0

    @property
    def source_path(self) -> str | None:
        return getattr(self.module, "__file__", None) if self.module else None

    def specialise(self, example_inputs: list) -> "CompiledGraph":
        if not all(isinstance(t, torch.Tensor) for t in example_inputs):
            return self._use_aten("an input is not a tensor", example_inputs)
        attributes = attribute_values(self.gm, self.attribute_names)
        tensors = list(example_inputs) + attributes
        devices = {t.device for t in tensors}
        if len(devices) > 1:
            return self._use_aten(f"inputs on several devices {sorted(map(str, devices))}", example_inputs)
        device = devices.pop() if devices else torch.device("cpu")
        if device.type == "cpu" and not runtime.interpreter_enabled():
            global _said_cpu_runs_aten
            if not _said_cpu_runs_aten:
                logger.warning("triton backend: CPU tensors without TRITON_INTERPRET=1 run as ATen ops")
                _said_cpu_runs_aten = True
            return self._use_aten("CPU tensors without the Triton interpreter", example_inputs, log=False)
        if device.type not in ("cpu", "cuda"):
            return self._use_aten(f"device {device.type}", example_inputs)
        key = cache.hash_key(FORMAT_VERSION, _source_fingerprint(), _versions(), runtime.interpreter_enabled(),
                             _device_key(device), self.options, self.gm.code, _targets(self.gm),
                             [_tensor_meta(t) for t in tensors])
        module = cache.load_or_build(key, lambda: self._generate(example_inputs))
        self.specialisations[tuple(_tensor_meta(t) for t in example_inputs)] = module
        self.module = module
        self.fallback_reason = module.FALLBACK_REASON
        if module.FALLBACK_REASON:
            logger.info("triton backend runs a graph as ATen ops: %s", module.FALLBACK_REASON)
        return self

    def _use_aten(self, reason: str, example_inputs: list, log: bool = True) -> "CompiledGraph":
        if log:
            logger.info("triton backend runs a graph as ATen ops: %s", reason)
        self.fallback_reason = reason
        key = tuple(_tensor_meta(t) if isinstance(t, torch.Tensor) else ("value", type(t)) for t in example_inputs)
        self.specialisations[key] = None
        return self

    def _generate(self, example_inputs: list) -> str:
        try:
            traced = trace_aten(self.gm, example_inputs)
            graph = lower(traced.graph_module, traced.input_names)
            graph.verify()
            schedule = fuse(graph)
            schedule.verify()
            return generate_module(schedule, traced.attribute_names, self.options.persistent_max,
                                   dict(self.options.config_overrides))
        except UnsupportedGraph as reason:
            return fallback_module(str(reason))
        except Exception as error:  # a bug in a pass: never a wrong result, but say so
            if os.environ.get("FASTDYNAMO_TRITON_STRICT") == "1":
                raise
            logger.warning("triton backend failed to compile a graph, running ATen ops: %r", error, exc_info=True)
            return fallback_module(f"internal error: {error!r}")

    def __call__(self, *args: Any) -> Any:
        if self.gm is None:
            raise RuntimeError("compiled graph was released")
        metadata = tuple(_tensor_meta(t) if isinstance(t, torch.Tensor) else ("value", type(t)) for t in args)
        if metadata not in self.specialisations:
            self.specialise(list(args))
        module = self.specialisations[metadata]
        if module is None or module.FALLBACK_REASON:
            return self.gm(*args)
        attributes = attribute_values(self.gm, self.attribute_names)
        if torch.is_grad_enabled() and any(t.requires_grad for t in (*args, *attributes)):
            # Until training support exists, autograd needs the ATen ops.
            return self.gm(*args)
        flat = module.call(list(args) + attributes)
        return pytree.tree_unflatten(flat, self.out_spec)


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
def _source_fingerprint() -> str:
    """A hash of this package's source: a changed pass never reuses code generated by the old one."""
    digest = hashlib.sha256()
    for path in sorted(Path(__file__).parent.glob("*.py")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def _versions() -> tuple:
    import triton

    return (torch.__version__, triton.__version__)


def _device_key(device: torch.device) -> tuple:
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        return ("cuda", index, torch.cuda.get_device_capability(index))
    return (device.type,)
