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

import ast
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


def graph_to_function(gm: torch.fx.GraphModule, graph: torch.fx.Graph | None = None,
                      keep_inputs: bool = False) -> types.MethodType:
    """Python source for ``gm``'s graph (or ``graph``, whose attributes are ``gm``'s),
    compiled into a function of the graph inputs. ``keep_inputs``: without FX's
    ``input = None`` stores after an input's last use (they free nothing when the caller
    holds the inputs anyway)."""
    graph = gm.graph if graph is None else graph
    python_code = graph.python_code(root_module="self")
    filename = f"{GENERATED_FILENAME_PREFIX}{next(_counter)}>"
    source = python_code.src
    if keep_inputs:
        source = _without_clearing(source, {n.name for n in graph.nodes if n.op == "placeholder"})
    # register the source so tracebacks into graph code show lines
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace = dict(python_code.globals)
    exec(compile(source, filename, "exec"), namespace)  # noqa: S102 - our own generated code
    forward = namespace["forward"]
    return forward.__get__(gm)  # bound to the module only for get_attr nodes


class _KeepNames(ast.NodeTransformer):
    """Drops ``names`` from ``a = b = None`` statements (and the statement when none is left)."""

    def __init__(self, names: set[str]) -> None:
        self.names = names

    def visit_Assign(self, node: ast.Assign) -> ast.Assign | None:
        if not (isinstance(node.value, ast.Constant) and node.value.value is None):
            return node
        kept = [t for t in node.targets if not (isinstance(t, ast.Name) and t.id in self.names)]
        if not kept:
            return None
        node.targets = kept
        return node


def _without_clearing(source: str, names: set[str]) -> str:
    tree = _KeepNames(names).visit(ast.parse(source))
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"


def graph_function_returning(compiled_fn: Any, output: int | tuple[int, ...]) -> Any:
    """The graph function ``compiled_fn`` made by this backend, returning only graph output
    ``output`` (or a new tuple of the outputs at those indices) instead of the tuple of all
    of them: what the native dispatcher calls for a frame whose result is just that. None
    when ``compiled_fn`` is not such a function.

    >>> import operator
    >>> g = torch.fx.Graph(); x = g.placeholder("x")
    >>> _ = g.output((g.call_function(operator.add, (x, 1)), x))
    >>> fn = eager(torch.fx.GraphModule(torch.nn.Module(), g), [torch.ones(1)])
    >>> graph_function_returning(fn, 0)(torch.ones(1))
    tensor([2.])
    >>> graph_function_returning(fn, (1, 0))(torch.ones(1))
    (tensor([1.]), tensor([2.]))
    """
    gm = getattr(compiled_fn, "__self__", None)
    function = getattr(compiled_fn, "__func__", None)
    if not isinstance(gm, torch.fx.GraphModule) or not isinstance(function, types.FunctionType):
        return None
    if not function.__code__.co_filename.startswith(GENERATED_FILENAME_PREFIX):
        return None
    if type(gm.graph._codegen) is not torch.fx.graph.CodeGen:
        return None  # inputs or outputs rearranged by the graph's own codegen
    graph = torch.fx.Graph()
    outputs = graph.graph_copy(gm.graph, {})
    if not isinstance(outputs, (tuple, list)):
        return None
    graph.output(outputs[output] if isinstance(output, int) else tuple(outputs[i] for i in output))
    # The dispatcher's caller holds the inputs for the whole call: clearing them frees nothing.
    return graph_to_function(gm, graph, keep_inputs=True)


@register_backend("eager")
def eager(gm: torch.fx.GraphModule, example_inputs: list) -> Callable[..., Any]:
    """Run the graph as generated Python code."""
    return graph_to_function(gm)
