"""The graph being captured: FX nodes, FakeTensor metadata, graph inputs and guards.

Every tensor operation the translator meets is recorded generically: one FX node whose
metadata comes from running the same call on FakeTensors. Calls whose result depends on
tensor data (``nonzero``, ``bool(t)``) fail under FakeTensorMode and become
:class:`~fastdynamo.exc.Unsupported`.

>>> import torch
>>> from fastdynamo.guards.sources import LocalSource
>>> out = OutputGraph()
>>> x = out.add_tensor_input(torch.ones(2, 3), LocalSource(0, "x"))
>>> y = out.record_call("call_function", torch.relu, [x], {})
>>> tuple(y.example.shape)
(2, 3)
"""
from __future__ import annotations

import contextlib
import functools
import operator
import re
from dataclasses import dataclass
from typing import Any, Callable

import torch
import torch.fx
from torch._dispatch.python import enable_python_dispatcher
from torch._subclasses.fake_tensor import (
    DataDependentOutputException,
    DynamicOutputShapeException,
    FakeTensorMode,
)
from torch.utils._python_dispatch import TorchDispatchMode

from .. import config
from ..exc import unsupported
from ..fx.passes import eliminate_dead_code, mutates_first_argument
from ..guards import Guard, tensor_match
from ..guards.sources import Source, resolve
from .fake_args import check_fake_arguments
from .shape_rules import run_rule


@dataclass
class GraphInput:
    """A placeholder of the graph and the source the rewritten code loads it from."""

    source: Source
    node: torch.fx.Node
    example: torch.Tensor  # the real tensor seen at trace time


class OutputGraph:
    """Graph, fake mode, inputs and guards of one capture (shared by inlined translators)."""

    def __init__(self, policy: Any = None, where: str = "") -> None:
        from .side_effects import SideEffects

        self.graph = torch.fx.Graph()
        self.side_effects = SideEffects(self.add_guard)
        self.fake_mode = FakeTensorMode()
        self.inputs: list[GraphInput] = []
        self._inputs_by_source: dict[Source, Any] = {}
        self._input_storages: set[int] = set()
        self._guards: dict[tuple, Guard] = {}
        self._names: set[str] = set()
        self.steps = 0  # instructions run by every translator of this capture
        self.mutates_inputs = False  # an op writes to a graph input (or a view of one)
        self.draws_random = False  # an op consumes the random number generator
        self.traced_handlers = False  # some traced code has try/with blocks (fallback.py)
        self.wrapping: set[int] = set()  # ids of the containers wrap_value is inside
        # (argument values, globals, builtins, closure) of the compiled frame at entry
        self.frame: tuple[list, dict, dict, tuple | None] | None = None
        self.policy = policy  # dynamic.DynamicPolicy: which input dims are symbolic
        self.where = where  # the code's qualified name, for logs
        self.shapes: Any = None  # dynamic.SymbolicShapes, from the first symbolic input

    def count_step(self) -> None:
        """One more instruction traced; past ``config.max_trace_steps`` the trace gives up
        (a long Python loop is cheaper to run than to unroll)."""
        self.steps += 1
        if self.steps > config.max_trace_steps:
            raise unsupported(f"trace longer than {config.max_trace_steps} instructions "
                              "(config.max_trace_steps)")

    def resolve(self, source: Source) -> Any:
        """The object at ``source`` now (at frame entry: the trace has changed nothing)."""
        if self.frame is None:
            raise unsupported(f"{source.name()} cannot be read in this trace")
        try:
            return resolve(source, *self.frame)
        except Exception as err:  # noqa: BLE001 - the guard would fail the same way
            raise unsupported(f"{source.name()} could not be read: {type(err).__name__}") from err

    # -- guards -----------------------------------------------------------------
    def add_guard(self, source: Source | None, check: tuple) -> None:
        """Record that the trace assumed ``check`` on ``source`` (deduplicated)."""
        key = (source, check[0]) if check[0] == "tensor" else (source, check[0], _hashable(check[1:]))
        if key not in self._guards:
            self._guards[key] = Guard(source, check)

    @property
    def guards(self) -> list[Guard]:
        """Every guard of the capture: those recorded, then the relations between objects
        that the side effects relied on (known only once the trace is over). Symbolic
        inputs: their tensor guards leave symbolic dims unchecked, and one shape guard
        relates those dims (ShapeLoweringError: no native form)."""
        relations = self.side_effects.relation_guards()
        if self.shapes is None:
            return list(self._guards.values()) + relations
        symbolic = {g.source: g for g in self.shapes.guards()}
        guards = [symbolic.pop(g.source, g) if g.check[0] == "tensor" else g for g in self._guards.values()]
        return guards + list(symbolic.values()) + relations

    # -- inputs -----------------------------------------------------------------
    def add_tensor_input(self, tensor: torch.Tensor, source: Source):
        """A placeholder for a tensor read from ``source``, guarded on its metadata."""
        from .variables.tensor import TensorVariable

        if source in self._inputs_by_source:
            return self._inputs_by_source[source]
        if type(tensor) not in (torch.Tensor, torch.nn.Parameter):
            raise unsupported(f"tensor subclass {type(tensor).__qualname__} at {source.name()}")
        self.add_guard(source, tensor_match(tensor))
        node = self._placeholder(source)
        fake = self._fake_input(tensor, source)
        node.meta["example_value"] = node.meta["val"] = fake
        if self.shapes is not None:
            self.shapes.add_input(source, tensor, fake, node)
        self.inputs.append(GraphInput(source, node, tensor))
        self._input_storages.add(fake.untyped_storage()._cdata)
        var = TensorVariable(node, fake, source=source, python_type=type(tensor))
        self._inputs_by_source[source] = var
        return var

    def add_int_input(self, value: int, source: Source):
        """An int argument traced as a symbol (automatic dynamic), or None: then it is a
        constant guarded by value, as before."""
        if self.policy is None or not self.policy.symbolic_int(value, source, self.where):
            return None
        if source in self._inputs_by_source:
            return self._inputs_by_source[source]
        from .variables.symbolic import SymbolicValue

        shapes = self._symbolic_shapes()
        node = self._placeholder(source)
        sym = shapes.int_symbol(value, source, node)
        self.inputs.append(GraphInput(source, node, value))  # type: ignore[arg-type]
        var = SymbolicValue(sym)
        var.source = source
        self._inputs_by_source[source] = var
        return var

    def _placeholder(self, source: Source) -> torch.fx.Node:
        placeholders = [n for n in self.graph.nodes if n.op == "placeholder"]
        if placeholders:
            ctx = self.graph.inserting_after(placeholders[-1])
        else:
            ctx = self.graph.inserting_before(next(iter(self.graph.nodes), None))
        with ctx:
            return self.graph.placeholder(self._unique_name(source.name()))

    def _symbolic_shapes(self) -> Any:
        if self.shapes is None:
            from .dynamic import SymbolicShapes

            self.shapes = SymbolicShapes()
            # Inputs converted so far keep their static FakeTensors; from now on the
            # mode makes symbols (what FakeTensorMode(shape_env=...) would have set).
            self.fake_mode.shape_env = self.shapes.env
            self.fake_mode.static_shapes = False
            # With symbols the mode's dispatch cache costs more than it saves: a miss builds
            # an entry and synthesises an output from it to check it, a hit synthesises one
            # (empty_strided and set_ on symbolic sizes: SymNode arithmetic either way), and
            # the ShapeEnv, with its cache, is new in every trace. Off, each op runs its
            # meta path, as the cache's own fallback does (the same result and guards).
            self.fake_mode.cache_enabled = False
        return self.shapes

    def _fake_input(self, tensor: torch.Tensor, source: Source) -> torch.Tensor:
        """The input's FakeTensor: symbolic sizes in the dims the policy picks."""
        dims = self.policy.symbolic_dims(tensor, source, self.where) if self.policy is not None else {}
        if not dims and self.shapes is None:
            return self.fake_mode.from_tensor(tensor)
        return self._symbolic_shapes().fake_tensor(self.fake_mode, tensor, source, dims)

    def aliases_input(self, fake: torch.Tensor) -> bool:
        """True when ``fake`` shares storage with a graph input."""
        return fake.untyped_storage()._cdata in self._input_storages

    # -- recording --------------------------------------------------------------
    def record_call(self, kind: str, target: Any, args: list, kwargs: dict):
        """Record ``target(*args, **kwargs)`` (``kind`` is ``call_function`` or
        ``call_method``) as one node and return the wrapped result."""
        node_args = tuple(a.graph_arg(False) for a in args)
        node_kwargs = {k: v.graph_arg(False) for k, v in kwargs.items()}
        fake_args = [a.graph_arg(True) for a in args]
        fake_kwargs = {k: v.graph_arg(True) for k, v in kwargs.items()}
        self._check_mutation(kind, target, fake_args, fake_kwargs)
        input_layout = (_layout(fake_args[0]) if mutates_first_argument(kind, target, fake_kwargs)
                        and args and self.is_input(args[0]) else None)
        name = target if isinstance(target, str) else getattr(target, "__name__", repr(target))
        check_fake_arguments(name, fake_args[1:] if kind == "call_method" else fake_args, fake_kwargs,
                             target=None if kind == "call_method" else target)
        try:
            with self.fake_mode, _AtenEffects(self), self._symbolic_kernels():
                if kind == "call_method":
                    result = getattr(fake_args[0], target)(*fake_args[1:], **fake_kwargs)
                else:
                    result = target(*fake_args, **fake_kwargs)
        except (DataDependentOutputException, DynamicOutputShapeException) as err:
            raise unsupported(f"{name}: result depends on tensor data ({type(err).__name__})") from err
        except Exception as err:  # noqa: BLE001 - the eager run will raise the real error
            raise unsupported(f"{name} raised {type(err).__name__} during tracing: {err}") from err
        self._check_input_metadata(target, fake_args, input_layout)
        if self.shapes is not None:
            self.shapes.check_result(name, result)
            node_args = self.shapes.graph_value(self.graph, node_args)
            node_kwargs = self.shapes.graph_value(self.graph, node_kwargs)
        node = self.graph.create_node(kind, target, node_args, node_kwargs)
        node.meta["example_value"] = node.meta["val"] = result
        if mutates_first_argument(kind, target, fake_kwargs):
            node.meta["inplace"] = True
            if self.is_input(args[0]) and result is fake_args[0]:
                # ``x.add_(1)`` / ``x += 1`` on an input is the input itself: later uses
                # read the placeholder (mutated when this node runs) and returning it
                # returns the caller's tensor, as in eager.
                return args[0]
        wrapped = self.wrap_result(node, result)
        if not node.users and not _contains_tensor(result) and not node.meta.get("inplace"):
            self.graph.erase_node(node)  # a metadata query: keep the constant, drop the node
        return wrapped

    def _symbolic_kernels(self) -> Any:
        """With symbolic sizes, composite ops run their Python kernels (``py_impl``):
        the C++ ones of some (``torch.lstm``) call ``numel()``, which symbolic sizes
        refuse. Static traces keep the C++ kernels (faster)."""
        return enable_python_dispatcher() if self.shapes is not None else contextlib.nullcontext()

    def wrap_result(self, node: torch.fx.Node, value: Any):
        """Wrap a FakeTensor-run result: tensors become TensorVariables, tuples are split
        with ``getitem`` nodes, anything else is a constant."""
        from .variables.constant import ConstantVariable
        from .variables.containers import ListVariable, TupleVariable
        from .variables.tensor import TensorVariable

        if isinstance(value, torch.Tensor):
            return TensorVariable(node, value)
        if isinstance(value, (tuple, list)) and not isinstance(value, torch.Size) and _contains_tensor(value):
            items = []
            for i, item in enumerate(value):
                item_node = self.graph.call_function(operator.getitem, (node, i))
                item_node.meta["example_value"] = item_node.meta["val"] = item
                items.append(self.wrap_result(item_node, item))
            if isinstance(value, list):
                return ListVariable(items)
            return TupleVariable(items, tuple_type=type(value))
        if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            from .variables.symbolic import wrap_symbolic

            return wrap_symbolic(value)  # a symbolic size: nodes are made where it is used
        if isinstance(value, (int, float, bool, complex, str, type(None), torch.Size, torch.dtype,
                              torch.device, torch.memory_format, torch.layout)):
            return ConstantVariable(value)
        if isinstance(value, (tuple, list)):
            return ConstantVariable(type(value)(value) if isinstance(value, tuple) else value)
        raise unsupported(f"result of type {type(value).__qualname__} from {node.target}")

    def input_tensor(self, source: Source) -> torch.Tensor:
        """The real tensor (seen at trace time) of the graph input read from ``source``."""
        return next(graph_input.example for graph_input in self.inputs if graph_input.source == source)

    def is_input(self, value: Any) -> bool:
        """True for the variable of a graph input (a placeholder)."""
        return getattr(value, "source", None) is not None and value.source in self._inputs_by_source \
            and self._inputs_by_source[value.source] is value

    def _check_mutation(self, kind: str, target: Any, fake_args: list, fake_kwargs: dict) -> None:
        """In-place ops stay in the graph, which the backend runs on the real inputs (on
        a leaf that requires grad the FakeTensor run raises, as eager does); ``out=`` is
        not captured."""
        if "out" in fake_kwargs:
            raise unsupported(f"{getattr(target, '__name__', target)}(..., out=...) writes outside the graph")

    def _check_input_metadata(self, target: Any, fake_args: list, before: tuple | None) -> None:
        """An in-place op may change an input's values, not its size, strides or autograd
        state (other sources of the same tensor share its FakeTensor)."""
        if before is not None and before != _layout(fake_args[0]):
            name = target if isinstance(target, str) else getattr(target, "__name__", repr(target))
            raise unsupported(f"in-place {name} changes the size, strides or autograd state of a graph input")

    # -- finishing --------------------------------------------------------------
    def set_grad_enabled(self, enabled: bool) -> None:
        """Record a grad-mode switch in the graph and apply it to the tracing state."""
        self.graph.call_function(torch._C._set_grad_enabled, (enabled,))
        torch._C._set_grad_enabled(enabled)

    def set_grad_enabled_now(self, enabled: bool) -> bool:
        """``torch.set_grad_enabled(b)`` called as a function: switch now, return the
        previous mode."""
        prior = torch.is_grad_enabled()
        self.set_grad_enabled(enabled)
        return prior

    def finish(self, outputs: list[torch.fx.Node]) -> torch.fx.GraphModule:
        """Add the output node, clean up and build the GraphModule."""
        self.graph.output(tuple(outputs))
        if self.shapes is not None:
            self._symbolic_args_to_nodes()
        eliminate_dead_code(self.graph)
        self.graph.lint()
        return torch.fx.GraphModule(torch.nn.Module(), self.graph)

    def size_node(self, sym: Any) -> Any:
        """A symbolic size the rewritten code needs: a node computing it (a graph output),
        or its value (specialised) when the graph cannot compute it."""
        if self.shapes is None:
            from .variables.symbolic import concrete

            return concrete(sym)
        return self.shapes.graph_value(self.graph, sym)

    def _symbolic_args_to_nodes(self) -> None:
        """Symbolic sizes recorded as node arguments become nodes computing them from
        the inputs' sizes (``sym_size``), inserted before their first use."""
        from .variables.symbolic import has_symbolic

        for node in list(self.graph.nodes):
            if not (has_symbolic(node.args) or has_symbolic(dict(node.kwargs))):
                continue
            with self.graph.inserting_before(node):
                node.args = self.shapes.graph_value(self.graph, node.args)
                node.kwargs = self.shapes.graph_value(self.graph, dict(node.kwargs))

    def example_inputs(self) -> list[torch.Tensor]:
        return [inp.example for inp in self.inputs]

    def _unique_name(self, text: str) -> str:
        base = re.sub(r"\W+", "_", text).strip("_") or "input"
        if base[0].isdigit():
            base = "_" + base
        name, i = base, 1
        while name in self._names:
            name, i = f"{base}_{i}", i + 1
        self._names.add(name)
        return name


def _layout(tensor: torch.Tensor) -> tuple:
    return (tuple(tensor.shape), tensor.stride(), tensor.storage_offset(), tensor.dtype,
            tensor.requires_grad, tensor.grad_fn is None)


_DEVICE = torch.ops.prim.device.default

# ATen ops that write their running statistics without saying so in their schema.
_BATCH_NORMS = frozenset({"native_batch_norm", "_native_batch_norm_legit", "batch_norm",
                          "cudnn_batch_norm", "miopen_batch_norm", "_batch_norm_impl_index"})


class _AtenEffects(TorchDispatchMode):
    """Watches the ATen ops one recorded call runs on FakeTensors: whether any writes to a
    graph input (schema ``Tensor(a!)`` arguments, batch norm's running statistics) or
    draws random numbers (the ``nondeterministic_seeded`` tag). A graph that does either
    cannot be run a second time (fallback.py)."""

    def __init__(self, output: "OutputGraph"):
        super().__init__()
        self.output = output

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is _DEVICE:  # a metadata query the dispatcher makes (~150 a llama trace)
            return func(*args, **kwargs)
        if torch.Tag.nondeterministic_seeded in func.tags:
            self.output.draws_random = True
        for written in self._written(func, args, kwargs):
            if isinstance(written, torch.Tensor) and self.output.aliases_input(written):
                self.output.mutates_inputs = True
        if self.output.shapes is not None and config.symbolic_shape_rules:
            result = run_rule(func, args, kwargs, self.output.fake_mode)
            if result is not None:
                return result
        return func(*args, **kwargs)

    @staticmethod
    def _written(func, args, kwargs) -> list:
        written = [args[i] if i < len(args) else kwargs.get(name) for i, name in _written_arguments(func)]
        return [w for v in written for w in (v if isinstance(v, (list, tuple)) else [v])]


@functools.cache
def _written_arguments(func: Any) -> tuple[tuple[int, str], ...]:
    """(position, name) of the arguments ``func`` writes: ``Tensor(a!)`` in its schema, then
    batch norm's running statistics (computed once an op: the schema does not change)."""
    schema = func._schema.arguments
    written = [(i, a.name) for i, a in enumerate(schema) if a.alias_info is not None and a.alias_info.is_write]
    if func._schema.name.split("::")[-1] in _BATCH_NORMS:
        written += [(i, a.name) for i, a in enumerate(schema) if a.name in ("running_mean", "running_var")]
    return tuple(written)


def _contains_tensor(value: Any) -> bool:
    if isinstance(value, torch.Tensor):
        return True
    if isinstance(value, (tuple, list)):
        return any(_contains_tensor(v) for v in value)
    return False


def _hashable(value: Any) -> Any:
    try:
        hash(value)
        return value
    except TypeError:
        return repr(value)


Recorder = Callable[..., Any]
