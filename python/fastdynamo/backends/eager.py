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


def graph_to_function(gm: torch.fx.GraphModule) -> types.MethodType:
    """Python source for ``gm``'s graph, compiled into a function of the graph inputs
    (bound to ``gm`` for its ``get_attr`` nodes). The source is kept on the function
    (``_fastdynamo_source``): :func:`graph_function_returning` narrows it."""
    python_code = gm.graph.python_code(root_module="self")
    filename = f"{GENERATED_FILENAME_PREFIX}{next(_counter)}>"
    source = python_code.src
    # register the source so tracebacks into graph code show lines
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace = dict(python_code.globals)
    exec(compile(source, filename, "exec"), namespace)  # noqa: S102 - our own generated code
    forward = namespace["forward"]
    forward._fastdynamo_source = source
    return forward.__get__(gm)


def graph_function_returning(compiled_fn: Any, output: int | tuple[int, ...]) -> Any:
    """The graph function ``compiled_fn`` made by this backend, returning only graph output
    ``output`` (or a new tuple of the outputs at those indices) instead of the tuple of all
    of them: what the native dispatcher calls for a frame whose result is just that. None
    when ``compiled_fn`` is not such a function.

    It is the same source, narrowed in one pass over its syntax tree (no second FX code
    generation): the ``return`` picks the outputs, and the ``input = None`` stores after
    an input's last use are dropped (the dispatcher's caller holds the inputs for the
    whole call, so they free nothing; intermediates are still cleared). Line numbers and
    the file name are the original's, so tracebacks show its lines.

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
    source = getattr(function, "_fastdynamo_source", None)
    if not isinstance(source, str) or type(gm.graph._codegen) is not torch.fx.graph.CodeGen:
        return None  # not made here, or inputs/outputs rearranged by the graph's own codegen
    tree = ast.parse(source)
    forward = tree.body[-1] if tree.body else None
    if not isinstance(forward, ast.FunctionDef) or not _narrow(forward, output):
        return None
    namespace = dict(function.__globals__)
    exec(compile(tree, function.__code__.co_filename, "exec"), namespace)  # noqa: S102
    return namespace["forward"].__get__(gm)


def _narrow(forward: ast.FunctionDef, output: int | tuple[int, ...]) -> bool:
    """Rewrites ``forward`` in place (see :func:`graph_function_returning`); False when it
    is not the shape FX generates: statements, then ``return (a, b, ...)`` of names."""
    *body, last = forward.body
    if not isinstance(last, ast.Return) or not isinstance(last.value, (ast.Tuple, ast.List)):
        return False
    items = last.value.elts
    picked = [output] if isinstance(output, int) else list(output)
    if any(not 0 <= i < len(items) for i in picked) or not all(isinstance(e, (ast.Name, ast.Constant)) for e in items):
        return False
    value = items[output] if isinstance(output, int) else ast.copy_location(
        ast.Tuple([items[i] for i in output], ast.Load()), last.value)
    inputs = {a.arg for a in forward.args.posonlyargs + forward.args.args + forward.args.kwonlyargs}
    kept = [statement for statement in body if _without_inputs(statement, inputs)]
    forward.body = [*kept, ast.copy_location(ast.Return(value), last)]
    return True


def _without_inputs(statement: ast.stmt, inputs: set[str]) -> bool:
    """Drops ``inputs`` from an ``a = b = None`` statement; False when none is left."""
    if not (isinstance(statement, ast.Assign) and isinstance(statement.value, ast.Constant)
            and statement.value.value is None):
        return True
    statement.targets = [t for t in statement.targets if not (isinstance(t, ast.Name) and t.id in inputs)]
    return bool(statement.targets)


@register_backend("eager")
def eager(gm: torch.fx.GraphModule, example_inputs: list) -> Callable[..., Any]:
    """Run the graph as generated Python code."""
    return graph_to_function(gm)
