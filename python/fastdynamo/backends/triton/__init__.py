"""The ``"triton"`` backend: captured FX graphs -> fused, generated Triton kernels.

Pipeline (one module each): :mod:`lowering` (FX -> ATen through decompositions ->
kernel IR, :mod:`ir`), :mod:`fusion` (greedy grouping into kernels), :mod:`render`
with :mod:`templates` and :mod:`ops` (Triton source), :mod:`wrapper` (the Python module
that allocates and launches), :mod:`cache` (on-disk, keyed by graph hash) and
:mod:`runtime` (launchers). :mod:`compiler` ties them together.

>>> import torch
>>> from fastdynamo.backends import lookup_backend
>>> backend = lookup_backend("triton")
>>> compiled = backend(torch.fx.symbolic_trace(lambda x: x + 1), [torch.zeros(3)])
>>> compiled(torch.zeros(3)).tolist()
[1.0, 1.0, 1.0]
"""
from __future__ import annotations

from .. import register_backend
from .compiler import CompiledGraph, TritonOptions, compile_graph

__all__ = ["CompiledGraph", "TritonOptions", "compile_graph", "triton_backend"]


@register_backend("triton")
def triton_backend(graph_module, example_inputs) -> CompiledGraph:
    """Compile ``graph_module`` for inputs like ``example_inputs``; see :mod:`compiler`."""
    return compile_graph(graph_module, list(example_inputs))
