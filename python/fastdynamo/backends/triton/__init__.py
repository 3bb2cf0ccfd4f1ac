"""The ``"triton"`` backend: captured FX graphs -> fused, generated Triton kernels.

The pipeline is the shared kernel generator (:mod:`fastdynamo.backends.kernels`:
lowering to the kernel IR, fusion, the wrapper module, the cache); this package is its
Triton half: :mod:`render` with :mod:`templates` and :mod:`op_rules` (Triton source),
:mod:`runtime` (launchers, the interpreter check) and :mod:`target` (which inputs get
kernels, the cache key).

>>> import torch
>>> from fastdynamo.backends import lookup_backend
>>> backend = lookup_backend("triton")
>>> compiled = backend(torch.fx.symbolic_trace(lambda x: x + 1), [torch.zeros(3)])
>>> compiled(torch.zeros(3)).tolist()
[1.0, 1.0, 1.0]
"""
from __future__ import annotations

from .. import register_backend
from ..kernels import compiler
from ..kernels.compiler import CompiledGraph
from .target import CPU_WITHOUT_INTERPRETER, TritonOptions, TritonTarget

__all__ = ["CPU_WITHOUT_INTERPRETER", "CompiledGraph", "TritonOptions", "TritonTarget", "compile_graph",
           "triton_backend"]


def compile_graph(gm, example_inputs, options: TritonOptions | None = None):
    """``backend(gm, example_inputs)`` with explicit options: a :class:`CompiledGraph`, or
    the graph's forward when it runs as ATen ops (see :mod:`fastdynamo.backends.kernels.compiler`)."""
    return compiler.compile_graph(gm, list(example_inputs), TritonTarget(options or TritonOptions.from_env()))


@register_backend("triton")
def triton_backend(graph_module, example_inputs):
    """Compile ``graph_module`` for inputs like ``example_inputs`` with Triton kernels."""
    return compile_graph(graph_module, list(example_inputs))
