"""FX graph -> ATen graph -> kernel IR.

:func:`trace_aten` runs ``make_fx`` with the decomposition table over the graph (its
tensor attributes lifted to inputs first, so the compiled code receives them as
arguments). :func:`lower` walks the ATen graph: views become index maps, ops with a
rule in :mod:`aten_rules` become pointwise or reduction nodes, everything else an
extern ATen call. Lowering never guesses: an op it cannot express exactly is an extern,
and a graph it cannot handle at all raises :class:`UnsupportedGraph`.

>>> import torch
>>> gm = torch.fx.symbolic_trace(lambda x: torch.softmax(x * 2, -1))
>>> traced = trace_aten(gm, [torch.randn(2, 3)])
>>> kernel_graph = lower(traced.graph_module)
>>> sorted({node.kind for node in kernel_graph.nodes})
['input', 'pointwise', 'reduction']
"""
from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.proxy_tensor import make_fx
from torch.utils import _pytree as pytree

from . import aten_rules
from .decompositions import decomposition_table
from .externs import fast_spelling
from .indexing import Var
from .ir import BufferArg, ExternNode, ExternOutput, InputNode, KernelGraph, OutputRef
from .opset import DTYPES
from .sizes import Size, SymbolicRefused
from .views import TensorValue

# Largest tensor constant written into a generated module's source.
MAX_CONSTANT_ELEMENTS = 256


class UnsupportedGraph(Exception):
    """The whole graph must run as ATen ops; the message says why."""


@dataclass
class TracedGraph:
    graph_module: torch.fx.GraphModule
    attribute_names: list  # original attribute paths, appended after the user inputs
    input_names: list  # the original graph's placeholders, then the attribute paths


def attribute_names(gm: torch.nn.Module) -> list[str]:
    """Parameters and buffers of ``gm`` (submodules included): the compiled code takes
    them as trailing inputs so that it never bakes a weight into its source.

    >>> attribute_names(torch.fx.symbolic_trace(torch.nn.Linear(2, 3)))
    ['weight', 'bias']
    """
    return [name for name, _ in gm.named_parameters()] + [name for name, _ in gm.named_buffers()]


def attribute_values(gm: torch.nn.Module, names: list[str]) -> list:
    values: dict[str, torch.Tensor] = dict(gm.named_parameters())
    values.update(gm.named_buffers())
    return [values[name] for name in names]


def trace_aten(gm: torch.fx.GraphModule, example_inputs: list, channels_last: bool = False) -> TracedGraph:
    """The graph as ATen ops on FakeTensors, outputs flattened to a list.

    ``example_inputs`` are real tensors, or a symbolic graph's placeholder values
    (FakeTensors with symbolic sizes, SymInts): the trace then runs in their fake mode,
    so sizes stay symbolic (``sym_size`` nodes, SymInt shapes in ``meta["val"]``).
    ``channels_last`` (static graphs with two or more 2-d convolutions): traced again with
    convolutions reading channels-last inputs, each output copied back to the layout of
    the first trace (eager's) where it differs."""
    names = attribute_names(gm)
    attributes = attribute_values(gm, names)
    fake_mode = next((t.fake_mode for t in example_inputs if hasattr(t, "fake_mode")), None)
    if fake_mode is not None:
        attributes = [fake_mode.from_tensor(t, static_shapes=True) for t in attributes]
        inputs = list(example_inputs) + attributes
        channels_last = False
    else:
        inputs = _independent_fakes(list(example_inputs) + attributes)
    user_count = len(example_inputs)

    def flat_forward(*args):
        attributes = dict(zip(names, args[user_count:], strict=True))
        result = torch.func.functional_call(gm, attributes, tuple(args[:user_count]))
        return pytree.tree_flatten(result)[0]

    with torch.no_grad():
        aten_gm = make_fx(flat_forward, decomposition_table=decomposition_table(), tracing_mode="fake")(*inputs)
    if channels_last and _convolutions_2d(aten_gm) >= 2:
        layouts = _output_layouts(aten_gm)

        def restored_forward(*args):
            return [_in_layout(value, layout) for value, layout in zip(flat_forward(*args), layouts, strict=True)]

        with torch.no_grad():
            aten_gm = make_fx(restored_forward, decomposition_table=decomposition_table(channels_last=True),
                              tracing_mode="fake")(*_independent_fakes(inputs))
    placeholders = [node.name for node in gm.graph.nodes if node.op == "placeholder"]
    return TracedGraph(aten_gm, names, placeholders + names)


def _convolutions_2d(aten_gm: torch.fx.GraphModule) -> int:
    return sum(1 for node in aten_gm.graph.nodes if node.target is torch.ops.aten.convolution.default
               and isinstance(node.meta.get("val"), torch.Tensor) and node.meta["val"].dim() == 4)


def _output_layouts(aten_gm: torch.fx.GraphModule) -> list:
    output = next(node for node in aten_gm.graph.nodes if node.op == "output")
    values = [a.meta.get("val") if isinstance(a, torch.fx.Node) else a for a in pytree.tree_leaves(output.args[0])]
    return [tuple(v.stride()) if isinstance(v, torch.Tensor) else None for v in values]


def _in_layout(value, stride):
    if not isinstance(value, torch.Tensor) or stride is None or tuple(value.stride()) == stride:
        return value
    out = torch.empty_strided(value.shape, stride, dtype=value.dtype, device=value.device)
    out.copy_(value)
    return out


def _independent_fakes(values: list) -> list:
    """FakeTensors with the metadata of ``values``, each with a storage of its own: the
    code traced from them never depends on which real inputs share memory (a graph that
    writes to an input, where that would matter, is refused by lowering whatever the
    inputs), so one module serves every aliasing of its inputs. (Real inputs that share
    storage would trace as one value: ``f(x, x)``'s ``x + y`` became ``y + y``.)"""
    fake_mode = FakeTensorMode()
    with fake_mode:
        return [_fresh_like(v) if isinstance(v, torch.Tensor) and v.layout == torch.strided else v for v in values]


def _fresh_like(tensor: torch.Tensor) -> torch.Tensor:
    extent = tensor.storage_offset() + sum((s - 1) * st for s, st in zip(tensor.shape, tensor.stride(), strict=True)) + 1
    base = torch.empty((max(extent, 0) if tensor.numel() else tensor.storage_offset(),), dtype=tensor.dtype,
                       device=tensor.device)
    return base.as_strided(tuple(tensor.shape), tuple(tensor.stride()), tensor.storage_offset())


def lower(aten_gm: torch.fx.GraphModule, input_names: list | None = None, signature=None) -> KernelGraph:
    """The kernel IR of an ATen graph (see module docstring); ``input_names`` name the
    inputs in error messages (default: the ATen graph's placeholder names).
    ``signature`` (a :class:`symbolic.SymbolicSignature`) turns the trace's symbolic
    sizes into canonical size expressions; without it every size is an int."""
    return _Lowering(aten_gm, input_names, signature).run()


class _Lowering:
    def __init__(self, aten_gm: torch.fx.GraphModule, input_names: list | None = None, signature=None):
        self.gm = aten_gm
        self.signature = signature
        # not Graph.find_nodes: GPU machines may have a torch older than 2.4
        placeholders = [node for node in aten_gm.graph.nodes if node.op == "placeholder"]
        names = input_names or [node.name for node in placeholders]
        self.input_names = dict(zip(placeholders, names, strict=True))
        self.graph = KernelGraph()
        self.device: torch.device | None = None
        self.env: dict[torch.fx.Node, Any] = {}  # TensorValue, tuple of them, or a constant
        self.counter = 0
        self.order = {node: i for i, node in enumerate(aten_gm.graph.nodes)}
        # Aliasing, read off the FakeTensors make_fx left in node.meta: values that share a
        # storage are views of one another (or the same tensor).
        self.storages = {node: _storages(node.meta.get("val")) for node in aten_gm.graph.nodes}
        # buffer -> the storage offset its FakeTensor has (computed buffers: 0, set by
        # name below), for views made from it by layout (None: symbolic)
        self.base_offsets: dict = _ComputedOffsets()
        # in-place ops on a graph input (the whole tensor): the node written -> the input,
        # and the input -> its last value and that value's FakeTensor (input_writes)
        self.written_inputs: dict[torch.fx.Node, torch.fx.Node] = {}
        self.input_values: dict[torch.fx.Node, tuple] = {}

    def check_device(self, meta: torch.Tensor) -> None:
        """Kernels write buffers on the graph's one device (the first tensor's): a value
        made on another one (``torch.arange(n, device="cuda")`` in a CPU graph) is an extern."""
        if self.device is None:
            self.device = meta.device
        elif meta.device != self.device:
            raise aten_rules.NoLowering(f"a value on {meta.device} in a graph on {self.device}")

    def fresh_name(self) -> str:
        name = f"buf{self.counter}"
        self.counter += 1
        return name

    def fresh_vars(self, shape: tuple) -> tuple:
        return tuple(Var(f"i{d}", size) for d, size in enumerate(shape))

    def size(self, value) -> Size:
        """A size of the trace (int or SymInt) as an int or a canonical expression."""
        if self.signature is None:
            if not isinstance(value, int):
                raise UnsupportedGraph(f"symbolic size {value} in a graph traced with static sizes")
            return value
        return self.signature.size(value)

    def shape_of(self, meta: torch.Tensor) -> tuple:
        if self.signature is None:
            return tuple(self.size(s) for s in meta.shape)
        return tuple(self.signature.shape_size(s) for s in meta.shape)

    def stride_of(self, meta: torch.Tensor) -> tuple:
        if self.signature is None:
            return tuple(self.size(s) for s in meta.stride())
        return tuple(self.signature.shape_size(s) for s in meta.stride())

    def run(self) -> KernelGraph:
        inputs = 0
        arguments = []
        for node in self.gm.graph.nodes:
            if node.op == "placeholder":
                name = f"arg{inputs}"
                self.env[node] = self.lower_input(node, name)
                arguments.append(name)
                inputs += 1
            elif node.op == "call_function":
                self.env[node] = self.lower_call(node)
            elif node.op == "output":
                self.graph.outputs = [self.output_ref(value) for value in pytree.tree_leaves(node.args[0])]
                self.add_input_writes(arguments)
            elif node.op == "get_attr":
                self.env[node] = self.lower_constant(node)
            else:
                raise UnsupportedGraph(f"{node.op} {node.target} in the ATen graph")
        self.graph.arguments = arguments
        if self.signature is not None:
            self.graph.size_bindings = {symbol.name: (b.kind, arguments[b.position], b.dim)
                                        for symbol, b in self.signature.bindings.items()}
        return self.graph

    def add_input_writes(self, arguments: list) -> None:
        """The last value of each input written in place, as extra outputs the wrapper
        stores into the input (``KernelGraph.input_writes``): kernels compute functional
        values, and the caller's tensor gets the result, as eager's in-place ops leave it."""
        positions = {node: arguments[i] for i, node in enumerate(self.input_names)}
        for graph_input, (value, fake) in self.input_values.items():
            if not isinstance(value, TensorValue) or not isinstance(fake, torch.Tensor) \
                    or value.base in self.graph.constants or fake.dtype != graph_input.meta["val"].dtype:
                raise UnsupportedGraph(f"the new value of input {self.input_names[graph_input]} is not a tensor "
                                       "of its dtype")
            self.graph.input_writes.append((positions[graph_input], len(self.graph.outputs)))
            self.graph.outputs.append(OutputRef(value.base, value.view_chain))  # (a view: copied in)

    def lower_input(self, node: torch.fx.Node, name: str) -> TensorValue | Size:
        meta = node.meta.get("val")
        if isinstance(meta, torch.SymInt) and self.signature is not None:
            return self.size(meta)  # an int input: a size the wrapper binds (size_bindings)
        if not isinstance(meta, torch.Tensor):
            raise UnsupportedGraph(f"input {node.name} is not a tensor")
        shape = self.shape_of(meta)
        _check_tensor(meta, node, shape)
        self.device = self.device or meta.device
        self.graph.add(InputNode(name, shape, self.stride_of(meta), meta.dtype))
        self.base_offsets[name] = meta.storage_offset() if _is_static(meta) else None
        return TensorValue.of_buffer(name, shape, meta.dtype)

    def lower_constant(self, node: torch.fx.Node) -> TensorValue:
        """A tensor the trace made (``torch.tensor([])`` in the model, a decomposition's
        scalar): written into the generated module, which is sound because the trace is a
        function of what the cache key holds (the graph's code and the inputs' metadata)."""
        value = getattr(self.gm, str(node.target), None)
        if not isinstance(value, torch.Tensor) or value.numel() > MAX_CONSTANT_ELEMENTS or not value.is_contiguous():
            raise UnsupportedGraph(f"tensor constant {node.target} too large or not contiguous to compile in")
        if value.dtype not in DTYPES or value.layout != torch.strided or value.device.type == "meta":
            raise UnsupportedGraph(f"tensor constant {node.target} of {value.dtype} on {value.device}")
        name = f"constant{len(self.graph.constants)}"
        shape = tuple(value.shape)
        self.graph.constants[name] = value.detach().clone()
        self.graph.add(InputNode(name, shape, tuple(value.stride()), value.dtype))
        return TensorValue.of_buffer(name, shape, value.dtype)

    def output_ref(self, value) -> OutputRef:
        fake = value.meta.get("val") if isinstance(value, torch.fx.Node) else None
        if isinstance(value, torch.fx.Node):
            value = self.env[value]
        if isinstance(value, TensorValue) and value.base in self.graph.constants:
            # the module's one tensor would be every call's output: the user could change it
            raise UnsupportedGraph("a tensor constant is an output")
        if isinstance(value, TensorValue):
            layout = self.view_layout(value, fake if isinstance(fake, torch.Tensor) else None)
            return OutputRef(value.base, value.view_chain, layout=layout)
        if isinstance(value, tuple):
            raise UnsupportedGraph("a tuple-valued node is an output")
        return OutputRef(None, constant=value)

    def lower_call(self, node: torch.fx.Node):
        if node.target is operator.getitem:
            container = self.lookup(node.args[0])
            return container[node.args[1]]
        meta = node.meta.get("val")
        if isinstance(meta, torch.SymInt):
            return self.size(meta)  # size arithmetic (sym_size, operator.mul, ...): its value
        if isinstance(meta, (torch.SymFloat, torch.SymBool)):
            raise SymbolicRefused(f"{node.target} computes a symbolic {type(meta).__name__}")
        for value in pytree.tree_leaves(meta):
            if isinstance(value, torch.Tensor):
                _check_tensor(value, node, self.shape_of(value))
        target = self.functional_target(node)
        args = pytree.tree_map(self.lookup, node.args)
        kwargs = pytree.tree_map(self.lookup, dict(node.kwargs))
        result = self.lower_target(node, target, meta, args, kwargs)
        if target is not node.target:
            # An in-place op made functional: whoever reads its argument later reads the
            # new value (functional_target proved nothing else aliases it).
            mutated = node.args[0]
            assert isinstance(mutated, torch.fx.Node), "functional_target checked the first argument"
            self.env[mutated] = result
            if mutated in self.written_inputs:  # the input's new value, written back by the wrapper
                self.input_values[self.written_inputs[mutated]] = (result, meta)
        return result

    def lower_target(self, node: torch.fx.Node, target, meta, args, kwargs):
        if isinstance(meta, torch.Tensor) and meta.numel() == 0 and _fresh_result(target):
            # nothing to compute: the result is its shape, strides and dtype
            return aten_rules.empty_result(self, meta)
        multi = aten_rules.MULTI_VIEWS.get(target) or aten_rules.MULTI_VIEWS.get(getattr(target, "overloadpacket", None))
        if multi is not None and isinstance(meta, (list, tuple)):
            try:
                return multi(self, node, meta, *args, **kwargs)
            except (aten_rules.NoLowering, TypeError):
                pass
        rule = aten_rules.LOWERINGS.get(target) or aten_rules.LOWERINGS.get(getattr(target, "overloadpacket", None))
        if rule is not None and isinstance(meta, torch.Tensor):
            try:
                return rule(self, node, meta, *args, **kwargs)
            except (aten_rules.NoLowering, TypeError):
                # TypeError: a call spelled in a form the rule does not take; the extern
                # path runs it exactly as written.
                pass
        return self.lower_extern(node, target, args, kwargs, meta)

    def lookup(self, value: object) -> Any:
        return self.env[value] if isinstance(value, torch.fx.Node) else value

    def functional_target(self, node: torch.fx.Node):
        """The out-of-place op for an in-place one whose effect stays inside the graph.

        Kernels never write a graph input, so any op that writes (the schema marks the
        argument ``Tensor(a!)``) a tensor sharing storage with an input (the input
        itself, a view of it, an ``out=`` argument) makes the whole graph run as ATen
        ops. An in-place op on an intermediate becomes its functional form when no other
        alias of that intermediate is read after it; later readers of the argument itself
        get the new value (``lower_call``).
        """
        target = node.target
        schema = getattr(target, "_schema", None)
        if schema is None or not schema.is_mutable:
            return target
        if not isinstance(target, torch._ops.OpOverload):
            raise UnsupportedGraph(f"{target} writes to an argument and is not an ATen operator")
        written = _written_arguments(node, schema)
        mutated = node.args[0] if node.args else None
        for argument in written:
            for graph_input, name in self.input_names.items():
                if self.storages.get(argument, set()) & self.storages[graph_input]:
                    if argument is mutated and isinstance(mutated, torch.fx.Node) and _writes_values(target) \
                            and _whole_alias(mutated, graph_input):
                        self.written_inputs[mutated] = graph_input
                        continue
                    through = f" through its view {argument.name}" if argument is not graph_input else ""
                    raise UnsupportedGraph(f"{target} mutates a graph input ({name}{through})")
        if (written != [mutated] or not isinstance(mutated, torch.fx.Node)
                or not isinstance(self.env.get(mutated), TensorValue)):
            raise UnsupportedGraph(f"{target} writes to something other than its first argument")
        storage = self.storages[mutated]
        for other in self.gm.graph.nodes:
            if other is node:
                break
            if other is not mutated and self.storages[other] & storage and any(
                    self.order[user] > self.order[node] for user in other.users):
                raise UnsupportedGraph(f"{target} mutates {mutated.name}, whose alias {other.name} is read later")
        name = target.overloadpacket.__name__.rstrip("_")
        packet = getattr(torch.ops.aten, name, None)
        functional = getattr(packet, target._overloadname, None) if packet is not None else None
        if functional is None or functional._schema.is_mutable:
            raise UnsupportedGraph(f"no functional form of {target}")
        return functional

    def view_layout(self, value: TensorValue, fake) -> tuple | None:
        """A static view's (shape, stride, offset from its buffer's storage offset)."""
        base_offset = self.base_offsets.get(value.base)
        if not value.view_chain or fake is None or base_offset is None or not _is_static(fake):
            return None
        return (tuple(fake.shape), tuple(fake.stride()), fake.storage_offset() - base_offset)

    def lower_extern(self, node, target, args, kwargs, meta) -> object:
        def to_arg(value, fake):
            if isinstance(value, TensorValue):
                return BufferArg(value.base, value.view_chain, self.view_layout(value, fake))
            return value

        extern_args = _map_pairs(to_arg, args, _fakes(node.args))
        extern_kwargs = _map_pairs(to_arg, kwargs, _fakes(dict(node.kwargs)))
        name = self.fresh_name()
        outputs: list[ExternOutput] = []
        paths: list[tuple] = []
        values: list[TensorValue | None] = []
        leaves = [meta] if isinstance(meta, torch.Tensor) else meta
        if not isinstance(leaves, (list, tuple)):
            raise UnsupportedGraph(f"{target} returns a non-tensor")
        for position, leaf in enumerate(leaves):
            if leaf is None:
                values.append(None)
                continue
            if not isinstance(leaf, torch.Tensor):
                raise UnsupportedGraph(f"{target} returns a non-tensor")
            out_name = f"{name}_{position}" if not isinstance(meta, torch.Tensor) else name
            outputs.append(ExternOutput(out_name, self.shape_of(leaf), self.stride_of(leaf), leaf.dtype))
            self.base_offsets[out_name] = leaf.storage_offset() if _is_static(leaf) else None
            paths.append(() if isinstance(meta, torch.Tensor) else (position,))
            values.append(TensorValue.of_buffer(out_name, self.shape_of(leaf), leaf.dtype))
        spelling = None
        fake_args, fake_kwargs = _fakes(node.args), _fakes(dict(node.kwargs))
        if all(_is_static(v) for v in pytree.tree_leaves((fake_args, fake_kwargs))):
            spelling = fast_spelling(target, fake_args, fake_kwargs)
        self.graph.add(ExternNode(name, target, extern_args, extern_kwargs, tuple(outputs), tuple(paths), spelling))
        return values[0] if isinstance(meta, torch.Tensor) else tuple(values)


def _check_tensor(meta: torch.Tensor, node: torch.fx.Node, shape: tuple) -> None:
    # (an empty tensor is fine: externs compute it, and no kernel is made over 0 elements)
    if meta.dtype not in DTYPES:
        raise UnsupportedGraph(f"{node.name} has dtype {meta.dtype}")
    if meta.layout != torch.strided:
        raise UnsupportedGraph(f"{node.name} is not a strided tensor")


class _ComputedOffsets(dict):
    """Storage offsets of buffers by name; a buffer a kernel writes (``bufN`` of a
    pointwise or reduction node, not recorded) is a fresh allocation: offset 0."""

    def get(self, key, default=None):
        return super().get(key, 0 if str(key).startswith("buf") else default)


# in-place ops that change only an input's values, made functional and written back
# (metadata-changing ones, ``t_``, ``resize_``, are ``inplace_view``: never)
_VALUE_WRITES = frozenset({torch.ops.aten.copy_.default, torch.ops.aten.fill_.Scalar, torch.ops.aten.fill_.Tensor,
                           torch.ops.aten.zero_.default})


def _writes_values(target) -> bool:
    tags = getattr(target, "tags", ())
    return torch.Tag.inplace_view not in tags and (torch.Tag.pointwise in tags or target in _VALUE_WRITES)


def _whole_alias(argument: torch.fx.Node, graph_input: torch.fx.Node) -> bool:
    """``argument`` is the graph input itself (or an in-place result on it): the same
    shape, strides, offset and dtype, not a part of it."""
    a, b = argument.meta.get("val"), graph_input.meta.get("val")
    return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and _is_static(a) and _is_static(b) \
        and (a.shape, a.stride(), a.storage_offset(), a.dtype) == (b.shape, b.stride(), b.storage_offset(), b.dtype)


def _fresh_result(target) -> bool:
    """An ATen function whose result is a new tensor (no view, no written argument, no
    random numbers drawn)."""
    schema = getattr(target, "_schema", None)
    if schema is None or schema.is_mutable or not isinstance(target, torch._ops.OpOverload):
        return False
    if torch.Tag.nondeterministic_seeded in target.tags:
        return False
    return all(ret.alias_info is None for ret in schema.returns)


def _map_pairs(fn, value, fake):
    """``fn(leaf, its FakeTensor or None)`` over a nested argument value, keeping its shape."""
    if isinstance(value, (list, tuple)):
        fakes = fake if isinstance(fake, (list, tuple)) and len(fake) == len(value) else [None] * len(value)
        return type(value)(_map_pairs(fn, v, f) for v, f in zip(value, fakes, strict=True))
    if isinstance(value, dict):
        fakes = fake if isinstance(fake, dict) else {}
        return {key: _map_pairs(fn, v, fakes.get(key)) for key, v in value.items()}
    return fn(value, fake if isinstance(fake, torch.Tensor) else None)


def _fakes(value):
    """``value`` (node arguments) with each graph node replaced by its FakeTensor value."""
    return pytree.tree_map(lambda a: a.meta.get("val") if isinstance(a, torch.fx.Node) else a, value)


def _is_static(value) -> bool:
    """No symbolic size in ``value`` (a FakeTensor, SymInt or constant)."""
    if isinstance(value, torch.Tensor):
        return all(isinstance(s, int) for s in (*value.shape, *value.stride(), value.storage_offset()))
    return not isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool))


def _storages(value) -> set:
    """Identities of the storages behind the tensors in ``value`` (a FakeTensor or a list)."""
    return {leaf.untyped_storage()._cdata for leaf in pytree.tree_leaves(value) if isinstance(leaf, torch.Tensor)}


def _written_arguments(node: torch.fx.Node, schema) -> list:
    """The graph nodes ``node`` passes to arguments its schema marks as written."""
    written: list[torch.fx.Node] = []
    for position, argument in enumerate(schema.arguments):
        if argument.alias_info is None or not argument.alias_info.is_write:
            continue
        value = node.args[position] if position < len(node.args) else node.kwargs.get(argument.name)
        written.extend(leaf for leaf in pytree.tree_leaves(value) if isinstance(leaf, torch.fx.Node))
    return written
