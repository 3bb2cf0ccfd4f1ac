"""C++ source for one kernel group: a loop nest over the group's space, one C function.

Every kernel has the same C signature, ``void kernelN(void* const* buffers, const
int64_t* sizes)``: its buffers' data pointers in :attr:`RenderedKernel.params` order,
then the size symbols it reads and, last, the thread count. Members are rendered by
substitution as in the Triton renderer (reading an in-group pointwise node inlines its
body, reading an in-group reduction uses the row's reduced value, anything else is a
load); each distinct expression is one ``const`` temporary, cast to the op's dtype (C++
would compute ``int8 + int8`` in ``int``).

Loops (:mod:`loops`): kept dimensions outside, reduced ones inside, neighbours merged
into one loop where the addresses allow. The innermost loop carries ``#pragma omp simd``
(with ``reduction`` clauses for sums, maxima and minima, whose NaN is tracked in a flag
so that it propagates as in ATen); the outermost is ``#pragma omp parallel for`` when
the kernel's work is large enough to pay for threads. A reduction group runs one pass
over the row per reduction depth (a reduction that needs another one's result runs in
the pass after it), and writes the row's values after the last pass.

>>> import torch
>>> from fastdynamo.backends.kernels.lowering import trace_aten, lower
>>> from fastdynamo.backends.kernels.fusion import fuse
>>> schedule = fuse(lower(trace_aten(torch.fx.symbolic_trace(lambda x: x.exp() + 1), [torch.randn(8)]).graph_module))
>>> kernel = CppRenderer().render_kernel(schedule, schedule.kernels()[0])
>>> "fd_exp(" in kernel.source and "#pragma omp simd" in kernel.source
True
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

import torch

from ..kernels import indexing, sizes
from ..kernels.fusion import KernelGroup, Schedule, group_loads, reduction_depths
from ..kernels.ir import Constant, IndexValue, Load, Op, PointwiseNode, ReductionNode, SizeValue
from ..kernels.opset import PointwiseOp, ReductionType, accumulator_dtype, compute_dtype, reduction_identity
from ..kernels.scope import Scope
from ..kernels.target import RenderedKernel
from . import op_rules, sizes_cpp
from .op_rules import compute_type, cpp_type, render_literal

# Work (elements times row length) from which a kernel splits its outer loop over
# threads; below it a parallel region costs more than it saves.
PARALLEL_MIN_WORK = 32768
THREADS = "fd_threads"


@dataclass
class CppKernel(RenderedKernel):
    """A rendered C++ kernel and the dtype of each buffer it takes (what the launcher checks)."""

    dtypes: tuple = ()


@dataclass
class _Value:
    text: str
    dtype: torch.dtype  # the compute dtype the value is held in
    literal: bool = False
    invariant: bool = False  # the same at every element: computed once, before the loops


def _invariant(values) -> bool:
    return all(v.literal or v.invariant for v in values)


class _KernelWriter:
    def __init__(self, schedule: Schedule, group: KernelGroup):
        self.group = group
        self.nodes = schedule.graph.node_map()
        self.meta = schedule.graph.buffer_meta()
        self.aliased = {name for pair in schedule.in_place.items() for name in pair}
        self.members = set(group.members)
        self.size_names = sorted(schedule.graph.size_bindings)
        self.params: list = []
        self.written: set = set()
        self.counter = 0
        self.reduction_values: dict = {}
        self.nest = self._loop_nest()
        # values that read only 0-d buffers (an optimizer's lr and bias corrections: exp
        # and divisions in double) are computed here, once, not at every element
        self.hoisted = Scope("    ")

    # ---- the loop nest ---------------------------------------------------------------
    def _loop_nest(self):
        from .loops import merge_dims

        dim_vars = self.group.dim_vars()
        reduced = set(self.group.reduced_dims)
        x_dims = [v for d, v in enumerate(dim_vars) if d not in reduced]
        r_dims = [v for d, v in enumerate(dim_vars) if d in reduced]
        addresses = self._addresses()
        x_nest = merge_dims(x_dims, addresses, "y")
        addresses = [indexing.substitute(e, x_nest.substitution) for e in addresses]
        r_nest = merge_dims(r_dims, addresses, "z")
        substitution = {**x_nest.substitution, **r_nest.substitution}
        substitution = {name: indexing.substitute(e, r_nest.substitution) for name, e in substitution.items()}
        return x_nest.loops, r_nest.loops, substitution

    def _addresses(self) -> list:
        """Every address the group computes, over the group's dimension variables."""
        addresses = []
        for name in self.group.members:
            node = self.nodes[name]
            assert isinstance(node, (PointwiseNode, ReductionNode)), "groups hold computed nodes"
            for buffer, index in group_loads(self.nodes, self.members, node.body, self.group.var_map(node)):
                if buffer not in self.members:
                    addresses.append(indexing.linear_offset(index, self.meta[buffer][1]))
            if name in self.group.stores:
                addresses.append(indexing.linear_offset(self.group.canonical_index(node), self.meta[name][1]))
        return addresses

    def place(self, expr):
        """An index expression over the group's variables, over the loop variables."""
        return indexing.substitute(expr, self.nest[2])

    # ---- values ------------------------------------------------------------------------
    def emit(self, scope: Scope, key, text: str, dtype: torch.dtype, invariant: bool = False) -> _Value:
        cached = scope.lookup(key)
        if cached is not None:
            return cached
        if invariant:
            scope = self.hoisted
        name = f"tmp{self.counter}"
        self.counter += 1
        scope.lines.append(f"{scope.indent}const {compute_type(dtype)} {name} = {text};")
        value = _Value(name, dtype, invariant=invariant)
        scope.cache[key] = value
        return value

    def convert(self, scope: Scope, value: _Value, dtype: torch.dtype) -> _Value:
        target = compute_dtype(dtype)
        if value.dtype == target:
            return value
        if target == torch.bool:
            text = f"({value.text} != 0)"
        elif value.dtype.is_floating_point and target in op_rules.FLOAT_TO_INTEGER:
            # as tensor.to(int) does it: in range truncated, else what ATen's x86 code gives
            text = op_rules.FLOAT_TO_INTEGER[target].format(value.text)
        elif target.is_floating_point and not value.dtype.is_floating_point and value.dtype != torch.bool:
            # through the header: g++ folds float -> int -> float into trunc(x), which
            # keeps a negative fraction's -0.0 (see fd_integer_to)
            text = f"fd_integer_to<{compute_type(target)}>({value.text})"
        else:
            text = f"static_cast<{compute_type(target)}>({value.text})"
        if value.literal:
            return _Value(text, target, True)
        return self.emit(scope, ("convert", value.text, target), text, target, value.invariant)

    def value(self, scope: Scope, expr, var_map: dict) -> _Value:
        if isinstance(expr, Constant):
            return _Value(render_literal(expr.value, expr.dtype), compute_dtype(expr.dtype), True)
        if isinstance(expr, IndexValue):
            index = self.place(indexing.substitute(expr.index, var_map))
            raw = _Value(f"static_cast<int64_t>({indexing.render(index, sizes_cpp.SPELLING)})", torch.int64)
            return self.convert(scope, raw, expr.dtype)
        if isinstance(expr, SizeValue):
            raw = _Value(f"static_cast<int64_t>({sizes_cpp.render(expr.size)})", torch.int64, True)
            return self.convert(scope, raw, expr.dtype)
        if isinstance(expr, Load):
            return self.load(scope, expr, var_map)
        if isinstance(expr, Op):
            return self.operation(scope, expr, var_map)
        raise TypeError(f"cannot render {expr!r}")

    def operation(self, scope: Scope, op: Op, var_map: dict) -> _Value:
        args = [self.value(scope, arg, var_map) for arg in op.args]
        if op.name is PointwiseOp.CAST:
            return self.cast(scope, args[0], op.params[0])
        converted = op_rules.CONVERTED.get(op.name)
        if op.operand_dtype is not None:
            args = [self.convert(scope, a, op.operand_dtype) if converted is None or i in converted else a
                    for i, a in enumerate(args)]
        expression = op_rules.POINTWISE_RULES[op.name].format(*(a.text for a in args))
        result = compute_dtype(op.dtype)
        return self.emit(scope, (op.name, tuple(a.text for a in args), result),
                         f"static_cast<{compute_type(result)}>({expression})", result, _invariant(args))

    def cast(self, scope: Scope, value: _Value, target: torch.dtype) -> _Value:
        if target in op_rules.ROUNDINGS and value.dtype != target:
            # round through the narrow type: an explicit cast loses what ATen loses
            widened = self.convert(scope, value, torch.float32)
            text = op_rules.ROUNDINGS[target].format(widened.text)
            return self.emit(scope, ("round", widened.text, target), text, torch.float32, widened.invariant)
        return self.convert(scope, value, target)

    def load(self, scope: Scope, load: Load, var_map: dict) -> _Value:
        index = tuple(indexing.substitute(e, var_map) for e in load.index)
        node = self.nodes.get(load.buffer)
        if load.buffer in self.members and isinstance(node, PointwiseNode):
            inner = {var.name: e for var, e in zip(node.vars, index, strict=True)}
            return self.value(scope, node.body, inner)
        if load.buffer in self.members and isinstance(node, ReductionNode):
            return self.reduction_values[node.name]
        shape, stride, dtype = self.meta[load.buffer]
        offset = self.place(indexing.linear_offset(index, stride))
        self.use_param(load.buffer)
        rendered = indexing.render(offset, sizes_cpp.SPELLING)
        text = f"{load.buffer}[{rendered}]"
        conversion = op_rules.LOAD_CONVERSIONS.get(dtype)
        if conversion is not None:
            text = conversion.format(text)
        # a 0-d buffer the kernel does not write reads the same element everywhere
        invariant = len(shape) == 0 and rendered == "0" and load.buffer not in self.group.stores
        return self.emit(scope, ("load", text), text, compute_dtype(dtype), invariant)

    def use_param(self, buffer: str) -> None:
        if buffer not in self.params:
            self.params.append(buffer)

    # ---- stores ------------------------------------------------------------------------
    def store(self, scope: Scope, name: str) -> None:
        node = self.nodes[name]
        if isinstance(node, ReductionNode):
            value = self.reduction_values[name]
        else:
            assert isinstance(node, PointwiseNode), f"{name}: a kernel stores only what it computes"
            value = self.value(scope, node.body, self.group.var_map(node))
        _, stride, dtype = self.meta[name]
        offset = self.place(indexing.linear_offset(self.group.canonical_index(node), stride))
        value = self.convert(scope, value, dtype)
        text = op_rules.STORE_CONVERSIONS.get(dtype, "{0}").format(value.text)
        self.use_param(name)
        self.written.add(name)
        scope.lines.append(f"{scope.indent}{name}[{indexing.render(offset, sizes_cpp.SPELLING)}] = {text};")

    # ---- reductions --------------------------------------------------------------------
    def begin_reduction(self, before: Scope, node: ReductionNode) -> tuple:
        acc_dtype = accumulator_dtype(node.reduction_type, node.body.dtype, node.dtype)
        identity = render_literal(reduction_identity(node.reduction_type, acc_dtype), acc_dtype)
        acc = f"acc_{node.name}"
        kind = compute_type(acc_dtype)
        before.lines.append(f"{before.indent}{kind} {acc} = {identity};")
        clauses = []
        rule = node.reduction_type
        if rule is ReductionType.SUM and acc_dtype != torch.bool:
            clauses.append(f"reduction(+:{acc})")
        elif rule in (ReductionType.MAX, ReductionType.MIN) and acc_dtype != torch.bool:
            clauses.append(f"reduction({rule.value}:{acc})")
            if acc_dtype.is_floating_point:
                before.lines.append(f"{before.indent}int {acc}_nan = 0;")
                clauses.append(f"reduction(|:{acc}_nan)")
        elif rule.with_index:
            before.lines.append(f"{before.indent}int64_t {acc}_index = 0;")
        vectorized = not rule.with_index and acc_dtype != torch.bool
        return acc, acc_dtype, clauses, vectorized

    def accumulate(self, loop: Scope, node: ReductionNode, acc: str, acc_dtype: torch.dtype, row_index: str) -> None:
        value = self.convert(loop, self.value(loop, node.body, self.group.var_map(node)), acc_dtype)
        v, pad, rule = value.text, loop.indent, node.reduction_type
        if rule is ReductionType.SUM:
            update = f"{acc} = {acc} || {v};" if acc_dtype == torch.bool else f"{acc} += {v};"
            loop.lines.append(pad + update)
        elif rule in (ReductionType.MAX, ReductionType.MIN):
            better = ">" if rule is ReductionType.MAX else "<"
            loop.lines.append(f"{pad}{acc} = {v} {better} {acc} ? {v} : {acc};")
            if acc_dtype.is_floating_point:
                loop.lines.append(f"{pad}{acc}_nan |= ({v} != {v});")
        else:
            better = ">" if rule is ReductionType.ARGMAX else "<"
            nan_wins = f" || ({v} != {v} && {acc} == {acc})" if acc_dtype.is_floating_point else ""
            loop.lines.append(f"{pad}if ({v} {better} {acc}{nan_wins}) {{ {acc} = {v}; {acc}_index = {row_index}; }}")

    def finish_reduction(self, after: Scope, node: ReductionNode, acc: str, acc_dtype: torch.dtype) -> None:
        rule = node.reduction_type
        if rule.with_index:
            text, dtype = f"{acc}_index", torch.int64
        elif rule in (ReductionType.MAX, ReductionType.MIN) and acc_dtype.is_floating_point:
            text, dtype = f"({acc}_nan ? {render_literal(math.nan, acc_dtype)} : {acc})", acc_dtype
        else:
            text, dtype = acc, acc_dtype
        self.reduction_values[node.name] = self.emit(after, ("reduced", node.name), text, dtype)

    # ---- the function ------------------------------------------------------------------
    def loop_lines(self, scope: Scope, loops: list, body, inner_pragma: str, outer_pragma: str | None) -> None:
        """Nested ``for`` loops over ``loops`` (outermost first) around ``body(scope)``;
        ``inner_pragma`` on the innermost loop, ``outer_pragma`` on the outermost."""
        if not loops:
            body(scope)
            return
        self._loop(scope, loops, 0, body, inner_pragma, outer_pragma)

    def _loop(self, scope: Scope, loops: list, position: int, body, inner_pragma: str,
              outer_pragma: str | None) -> None:
        var = loops[position]
        innermost = position == len(loops) - 1
        pragma = inner_pragma if innermost else ""
        if position == 0 and outer_pragma:
            # one loop both parallel and vectorized: the combined construct
            simd = inner_pragma.removeprefix("#pragma omp simd") if innermost and inner_pragma else None
            pragma = outer_pragma if simd is None else outer_pragma.replace(" for ", " for simd ", 1) + simd
        if pragma:
            scope.lines.append(scope.indent + pragma)
        extent = sizes_cpp.render(var.extent)
        scope.lines.append(f"{scope.indent}for (int64_t {var.name} = 0; {var.name} < {extent}; ++{var.name}) {{")
        child = scope.child()
        if innermost:
            body(child)
        else:
            self._loop(child, loops, position + 1, body, inner_pragma, outer_pragma)
        scope.lines.extend(child.lines)
        scope.lines.append(scope.indent + "}")

    def parallel_pragma(self, x_loops: list) -> str | None:
        if not x_loops:
            return None
        work = sizes.normalise(math.prod(v.extent for v in x_loops) * math.prod(self.group.r_shape or (1,)))
        if isinstance(work, int) and work < PARALLEL_MIN_WORK:
            return None
        condition = f"{THREADS} > 1" if isinstance(work, int) else \
            f"{THREADS} > 1 && ({sizes_cpp.render(work)}) >= {PARALLEL_MIN_WORK}"
        return f"#pragma omp parallel for num_threads({THREADS}) if({condition})"

    def render(self) -> CppKernel:
        x_loops, r_loops, _ = self.nest
        top = Scope("    ", self.hoisted)
        if self.group.kind == "pointwise":
            self.loop_lines(top, x_loops, self.pointwise_body, "#pragma omp simd", self.parallel_pragma(x_loops))
        else:
            self.loop_lines(top, x_loops, self.reduction_body, "", self.parallel_pragma(x_loops))
        return self.finish(top)

    def pointwise_body(self, scope: Scope) -> None:
        for name in self.group.stores:
            self.store(scope, name)

    def reduction_body(self, outer: Scope) -> None:
        _, r_loops, _ = self.nest
        depth = reduction_depths(self.group, self.nodes)
        final_pass = max(depth.values(), default=0)
        row_stores = [n for n in self.group.stores if self.group.space_of(self.nodes[n]) == "row"]
        full_stores = [n for n in self.group.stores if n not in row_stores]
        r_vars = [v for d, v in enumerate(self.group.dim_vars()) if d in self.group.reduced_dims]
        row_index = indexing.render(self.place(indexing.ravel(tuple(r_vars), self.group.r_shape)), sizes_cpp.SPELLING)
        for pass_number in range(final_pass + 1):
            reductions = [node for n in self.group.members
                          if isinstance(node := self.nodes[n], ReductionNode) and depth[n] == pass_number + 1]
            stores = [n for n in full_stores if depth[n] == pass_number]
            if not reductions and not stores:
                continue
            started = [(node, *self.begin_reduction(outer, node)) for node in reductions]
            clauses = " ".join(clause for *_, node_clauses, _ in started for clause in node_clauses)
            vectorized = all(entry[-1] for entry in started)
            pragma = f"#pragma omp simd {clauses}".rstrip() if vectorized else ""

            def body(loop: Scope, started=started, stores=stores) -> None:
                for node, acc, acc_dtype, _clauses, _vec in started:
                    self.accumulate(loop, node, acc, acc_dtype, row_index)
                for name in stores:
                    self.store(loop, name)

            self.loop_lines(outer, r_loops, body, pragma, None)
            for node, acc, acc_dtype, _clauses, _vec in started:
                self.finish_reduction(outer, node, acc, acc_dtype)
        for name in row_stores:
            self.store(outer, name)

    def finish(self, top: Scope) -> CppKernel:
        body = "\n".join(self.hoisted.lines + top.lines)
        used = [name for name in self.size_names if re.search(rf"\b{name}\b", body)]
        lines = [f"extern \"C\" void {self.group.name}(void* const* fd_buffers, const int64_t* fd_sizes) {{"]
        for position, name in enumerate(self.params):
            kind = cpp_type(self.meta[name][2])
            const = "" if name in self.written else "const "
            # a buffer written into an input the kernel reads aliases it (in_place.py)
            restrict = "" if name in self.aliased else " __restrict__"
            lines.append(f"    {const}{kind}*{restrict} {name} = static_cast<{const}{kind}*>(fd_buffers[{position}]);")
        for position, name in enumerate(used):
            lines.append(f"    const int64_t {name} = fd_sizes[{position}];")
        lines.append(f"    const int64_t {THREADS} = fd_sizes[{len(used)}];")
        lines.append(f"    (void){THREADS};")
        lines.append(body)
        lines.append("}")
        xnumel = sizes.normalise(math.prod(self.group.x_shape))
        rnumel = sizes.normalise(math.prod(self.group.r_shape))
        dtypes = tuple(self.meta[name][2] for name in self.params)
        return CppKernel(self.group.name, "\n".join(lines) + "\n", [*self.params, *used], xnumel, rnumel, used, dtypes)


class CppRenderer:
    """The :class:`kernels.target.Renderer` for C++ (see the module docstring and
    :mod:`fastdynamo.backends.cpp.runtime`, which compiles and loads the source)."""

    spelling = sizes_cpp.SPELLING

    def module_header(self) -> str:
        return _MODULE_HEADER

    def render_kernel(self, schedule: Schedule, group: KernelGroup) -> CppKernel:
        return _KernelWriter(schedule, group).render()

    def kernel_section(self, kernels: list) -> str:
        if not kernels:
            return "# no kernels: nothing to compile\n"
        source = "\n".join(kernel.source for kernel in kernels)
        lines = [f"SOURCE = r'''\n{source}'''\n", "_library = _cpp_runtime.load(SOURCE)"]
        meta_lines = []
        for kernel in kernels:
            dtypes = ", ".join(str(d) for d in kernel.dtypes) + ("," if len(kernel.dtypes) == 1 else "")
            meta_lines.append(f"{kernel.name} = _library.kernel({kernel.name!r}, ({dtypes}), "
                              f"{len(kernel.size_params) + 1})")
        return "\n".join(lines + meta_lines) + "\n"

    def forward_prologue(self, inputs: list[str]) -> list[str]:
        return ["_threads = _get_num_threads()"]

    def launch_line(self, kernel: RenderedKernel, size_arguments: str) -> str:
        return f"{kernel.name}({', '.join([*kernel.params, '_threads'])})"

    def allocation(self, name: str, shape: str, stride: str, dtype: torch.dtype) -> str:
        return f"{name} = _empty({shape}, {stride}, {dtype})"


_MODULE_HEADER = '''# Generated by fastdynamo's C++ backend. Do not edit: regenerated from the cache key.
import torch

from fastdynamo.backends.cpp import runtime as _cpp_runtime
from fastdynamo.backends.kernels import runtime as _runtime

_empty = _runtime.empty_strided_for("cpu")
_get_num_threads = torch.get_num_threads
'''
