"""The ``"cpp"`` backend: captured FX graphs -> fused C++ kernels for CPU tensors.

The pipeline is the shared kernel generator (:mod:`fastdynamo.backends.kernels`); this
package is its C++ half: :mod:`render` with :mod:`loops`, :mod:`op_rules` and
:mod:`sizes_cpp` (C++ source), the runtime header (``include/``), :mod:`runtime` (the
compiled library and its kernel launchers) and :mod:`target`. The toolchain under it:
:mod:`cxx` finds the C++ compiler (``$CXX``, else ``c++``, ``g++``, ``clang++``),
:mod:`isa` the vector instruction set the CPU and the compiler both support,
:mod:`openmp` how to link so that the process keeps the one OpenMP runtime torch
loaded, :mod:`toolchain` probes them once per process, and :mod:`binary_cache`
compiles a translation unit to ``<cache dir>/cpp/<key>.so`` and loads it.

>>> import torch
>>> from fastdynamo.backends import lookup_backend
>>> compiled = lookup_backend("cpp")(torch.fx.symbolic_trace(lambda x: x * 2 + 1), [torch.zeros(3)])
>>> compiled(torch.ones(3)).tolist(), compiled.kernel_count
([3.0, 3.0, 3.0], 1)
"""
from __future__ import annotations

from .. import register_backend
from ..kernels import compiler
from .target import CppOptions, CppTarget

__all__ = ["CppOptions", "CppTarget", "compile_graph", "cpp_backend"]


def compile_graph(gm, example_inputs, options: CppOptions | None = None):
    """``backend(gm, example_inputs)`` with explicit options: a ``CompiledGraph`` with C++
    kernels, or the graph's forward when it runs as ATen ops."""
    return compiler.compile_graph(gm, list(example_inputs), CppTarget(options or CppOptions()))


@register_backend("cpp")
def cpp_backend(graph_module, example_inputs):
    """Compile ``graph_module`` for inputs like ``example_inputs`` with C++ kernels."""
    return compile_graph(graph_module, list(example_inputs))
