"""The default backend, ``"kernels"`` (``"inductor"`` is accepted for it, as users of
torch.compile write): generated kernels where they pay, for the inputs' device.

* CUDA tensors: Triton kernels (:mod:`fastdynamo.backends.triton`).
* CPU tensors: C++ kernels (:mod:`fastdynamo.backends.cpp`).
* Anything else: the graph's ATen ops (what ``"eager"`` runs).

Either way only where they pay: a graph whose kernels are not faster than its ATen ops
runs the ATen ops (:mod:`fastdynamo.backends.kernels.choice`; explain() says which and
why). ``backend="cpp"`` or ``backend="triton"`` always run the kernels.
"""
from __future__ import annotations

import torch

from . import register_backend
from .kernels import compiler


def _device(example_inputs: list) -> torch.device:
    devices = {t.device.type for t in example_inputs if isinstance(t, torch.Tensor)}
    return torch.device("cuda") if "cuda" in devices else torch.device("cpu")


@register_backend("kernels")
def kernels_backend(graph_module, example_inputs):
    """Triton kernels on CUDA, C++ kernels on CPU (see the module docstring)."""
    example_inputs = list(example_inputs)
    if _device(example_inputs).type == "cuda":
        from .triton import TritonTarget

        return compiler.compile_graph(graph_module, example_inputs, TritonTarget(choose=True))
    from .cpp import CppTarget

    return compiler.compile_graph(graph_module, example_inputs, CppTarget(choose=True))


register_backend("inductor")(kernels_backend)
