"""The ``eager`` backend: the captured graph as a plain Python function.

The function is generated from the FX graph (as ``GraphModule.code`` is) and called
directly, without ``nn.Module.__call__``, so a cache hit costs little more than the ops.

>>> import torch, operator
>>> g = torch.fx.Graph(); x = g.placeholder("x")
>>> _ = g.output((g.call_function(operator.add, (x, 1)),))
>>> fn = eager(torch.fx.GraphModule(torch.nn.Module(), g), [torch.ones(1)])
>>> fn(torch.ones(1))
(tensor([2.]),)
"""
from __future__ import annotations

import itertools
import linecache
import types
from typing import Any, Callable

import torch

from . import register_backend

_counter = itertools.count()
# Generated files start with this, so the runtime can recognise (and never compile)
# frames of generated graph code.
GENERATED_FILENAME_PREFIX = "<fastdynamo-graph-"


def graph_to_function(gm: torch.fx.GraphModule) -> types.MethodType:
    """Python source for ``gm``'s graph, compiled into a function of the graph inputs."""
    python_code = gm.graph.python_code(root_module="self")
    filename = f"{GENERATED_FILENAME_PREFIX}{next(_counter)}>"
    source = python_code.src
    # register the source so tracebacks into graph code show lines
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace = dict(python_code.globals)
    exec(compile(source, filename, "exec"), namespace)  # noqa: S102 - our own generated code
    forward = namespace["forward"]
    return forward.__get__(gm)  # bound to the module only for get_attr nodes


@register_backend("eager")
def eager(gm: torch.fx.GraphModule, example_inputs: list) -> Callable[..., Any]:
    """Run the graph as generated Python code."""
    return graph_to_function(gm)
