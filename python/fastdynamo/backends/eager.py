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
    whole call, so they free nothing). Intermediates are freed no later than FX frees
    them, with fewer stores (:func:`_reuse_slots`). A function that does not read its
    module (no ``get_attr``) is returned unbound, without the ``self`` parameter, so the
    dispatcher can pass the call's own argument array. Line numbers and the file name are
    the original's, so tracebacks show its lines.

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
    reads_module = _drop_unused_self(forward)
    namespace = dict(function.__globals__)
    exec(compile(tree, function.__code__.co_filename, "exec"), namespace)  # noqa: S102
    return namespace["forward"].__get__(gm) if reads_module else namespace["forward"]


def _drop_unused_self(forward: ast.FunctionDef) -> bool:
    """Removes the first parameter (the module, ``self``) when the body never reads it;
    returns whether it is kept (the function is then bound to its module)."""
    if not forward.args.args:
        return False
    name = forward.args.args[0].arg
    if any(isinstance(node, ast.Name) and node.id == name for node in ast.walk(ast.Module(forward.body, []))):
        return True
    forward.args.args = forward.args.args[1:]
    return False


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
    forward.body = _reuse_slots([*kept, ast.copy_location(ast.Return(value), last)])
    return True


def _reuse_slots(body: list[ast.stmt]) -> list[ast.stmt]:
    """Stores each value in the local of an intermediate that dies where it is made.

    FX frees an intermediate after its last use with a store, ``add = None`` (on the line
    of the statement that last uses it). Here the value that statement makes is stored
    in that intermediate's local instead (``add = torch.relu(add)``), which frees the old
    value at the same point, right after the operation, one store earlier than FX does;
    the ``add = None`` store goes. A chain of operations then runs in one local and stores
    nothing else. Only memory depends on when an intermediate is freed (it is the graph's
    own, nothing else refers to it), and no value here lives longer than in FX's code.
    FX's code is in SSA form (each name assigned once), so one renaming of every name is
    exact. Bodies with nested scopes (which could read a renamed name) are left as they
    are."""
    nested = (ast.Lambda, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.ListComp, ast.SetComp,
              ast.DictComp, ast.GeneratorExp)
    if any(isinstance(node, nested) for node in ast.walk(ast.Module(body, []))):
        return body
    local: dict[str, str] = {}  # a name -> the local that holds its value
    made: set[str] = set()  # the names statements so far have assigned
    kept: list[ast.stmt] = []
    index = 0
    while index < len(body):
        statement = body[index]
        clear = body[index + 1] if index + 1 < len(body) else None
        target = _single_target(statement)
        cleared = _cleared_names(clear)
        if target is not None and target not in made and cleared:
            dead = [name for name in cleared if name in made]
            if dead:
                local[target] = local.get(dead[0], dead[0])
                remaining = [name for name in cleared if name != dead[0]]
                kept.append(statement)
                if remaining:
                    kept.append(_clear_statement(remaining, clear))
                made.add(target)
                index += 2
                continue
        if target is not None:
            made.add(target)
        kept.append(statement)
        index += 1
    for node in ast.walk(ast.Module(kept, [])):
        if isinstance(node, ast.Name) and node.id in local:
            node.id = local[node.id]
    return kept


def _single_target(statement: ast.stmt) -> str | None:
    """``name`` for ``name = <not None>``, else None."""
    if (isinstance(statement, ast.Assign) and len(statement.targets) == 1
            and isinstance(statement.targets[0], ast.Name)
            and not (isinstance(statement.value, ast.Constant) and statement.value.value is None)):
        return statement.targets[0].id
    return None


def _cleared_names(statement: ast.stmt | None) -> list[str]:
    """The names ``a = b = None`` stores None into (empty for any other statement)."""
    if not (isinstance(statement, ast.Assign) and isinstance(statement.value, ast.Constant)
            and statement.value.value is None):
        return []
    if not all(isinstance(target, ast.Name) for target in statement.targets):
        return []
    return [target.id for target in statement.targets if isinstance(target, ast.Name)]


def _clear_statement(names: list[str], like: ast.stmt | None) -> ast.stmt:
    statement = ast.Assign([ast.Name(name, ast.Store()) for name in names], ast.Constant(None))
    return ast.fix_missing_locations(ast.copy_location(statement, like) if like is not None else statement)


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
