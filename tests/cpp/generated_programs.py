"""Programs for the kernel generator's property tests, drawn by hypothesis and written as
Python source: chains of pointwise ops, broadcasting, input layouts, views and reductions
over every dtype the kernels take.

A :class:`Program` is straight-line source (``def program(v0, v1): v2 = ...; return
(v2,)``) and how to make its inputs (:class:`InputSpec`), so a failing example prints as
code to paste into a regression test. It is drawn step by step against real tensors
(:func:`programs`): each step runs eagerly as it is drawn, so the next one picks dims and
shapes that exist. A step eager refuses (``abs`` on bool, ``mean`` of int64) either ends
the program, which then expects compiled code to raise the same exception type, or is
dropped. The steps' vocabulary is :mod:`program_steps`.

What eager's results leave open (the sign of a zero where ATen's paths disagree, a value
an ulp decides) and how precise and exact each value is: :mod:`eager_rules`.
"""
from __future__ import annotations

import linecache
import math
import warnings
from dataclasses import dataclass, field, replace
from typing import Callable

import eager_rules
import program_steps
import torch
import torch.nn.functional as F
from hypothesis import strategies as st
from program_steps import Draft, Value

FLOAT_DTYPES = (torch.float32, torch.float64, torch.bfloat16, torch.float16)
HALF_DTYPES = (torch.bfloat16, torch.float16)
DTYPES = FLOAT_DTYPES + (torch.int64, torch.int32, torch.bool)
LAYOUTS = ("contiguous", "transposed", "sliced", "strided", "expanded")
# Layouts of dynamic programs' inputs: a "sliced" input's storage offset depends on its
# sizes, which capture refuses for a symbolic graph input (capture/dynamic.py).
DYNAMIC_LAYOUTS = ("contiguous", "transposed", "strided", "expanded")
FLOAT_SPECIALS = (math.nan, math.inf, -math.inf, 0.0, -0.0)
NAMESPACE = {"torch": torch, "F": F, "math": math}
# What eager raises for a call it refuses (NotImplementedError is a RuntimeError, and
# torch raises IndexError for a reduction over no elements); anything else, a TypeError
# above all, is a bug of the drawers and fails the test.
EAGER_REFUSALS = (RuntimeError, IndexError, ValueError)


@dataclass(frozen=True)
class InputSpec:
    """One input: its shape, dtype, layout and values (``seed``; ``specials`` plants NaN,
    ±inf and ±0.0 in floats, 0, -1 and the extremes in integers).

    A dynamic program's shapes hold ``"n"``, the size that changes between calls
    (``make(n)``). Layouts: ``transposed`` is a column-major tensor (its dims reversed in memory),
    ``sliced`` takes every second element from 1 of a larger tensor in each dim (a
    storage offset and steps), ``strided`` every second element from 1 in its last dim
    and from 0 in the others (steps, a constant offset), ``expanded`` broadcasts its
    first dim of size > 1 (stride 0).
    """

    shape: tuple
    dtype: torch.dtype
    layout: str = "contiguous"
    specials: bool = False
    seed: int = 0

    def make(self, n: int | None = None) -> torch.Tensor:
        shape = tuple(n if size == "n" else size for size in self.shape)
        rank = len(shape)
        generator = torch.Generator().manual_seed(self.seed)
        if self.layout == "transposed" and rank >= 2:
            order = tuple(reversed(range(rank)))
            return self._values([shape[d] for d in order], generator).permute(order)
        if self.layout in ("sliced", "strided") and rank >= 1:
            starts = [1] * rank if self.layout == "sliced" else [0] * (rank - 1) + [1]
            base = self._values([2 * size + start for size, start in zip(shape, starts, strict=True)], generator)
            return base[tuple(slice(start, None, 2) for start in starts)]
        expanded = next((d for d, size in enumerate(shape) if size > 1), None)
        if self.layout == "expanded" and expanded is not None:
            storage = [1 if d == expanded else size for d, size in enumerate(shape)]
            return self._values(storage, generator).expand(shape)
        return self._values(list(shape), generator)

    def _values(self, shape: list, generator: torch.Generator) -> torch.Tensor:
        if self.dtype == torch.bool:
            return torch.randint(0, 2, shape, generator=generator).bool()
        if self.dtype.is_floating_point:
            # multiples of 1/8 in [-2, 2]: exact in every float dtype, so sums are exact
            values = torch.randint(-16, 17, shape, generator=generator, dtype=torch.float64) / 8
            specials = FLOAT_SPECIALS
        else:
            values = torch.randint(-9, 10, shape, generator=generator, dtype=torch.float64)
            info = torch.iinfo(self.dtype)
            specials = (0, -1, info.min, info.max)
        values = values.to(self.dtype)
        if self.specials and values.numel():
            planted = torch.rand(shape, generator=generator) < 0.3
            choice = torch.randint(0, len(specials), shape, generator=generator)
            for index, special in enumerate(specials):
                values[planted & (choice == index)] = special
        return values

    def __repr__(self) -> str:
        return (f"InputSpec({self.shape!r}, {self.dtype}, {self.layout!r}, specials={self.specials}, "
                f"seed={self.seed})")


@dataclass(frozen=True)
class Step:
    """``name = code``, with what :func:`run_eager` needs to follow unspecified positions."""

    name: str
    draft: Draft


@dataclass(frozen=True)
class Expected:
    """One output as eager computes it: the tensor, its unspecified positions (a bool
    tensor, or None: none) and its working precision (None: exact data, no float op)."""

    tensor: torch.Tensor
    unspecified: torch.Tensor | None
    precision: torch.dtype | None


@dataclass(frozen=True)
class Program:
    inputs: tuple
    steps: tuple
    outputs: tuple
    refused: bool = False  # the last step raises in eager
    dynamic: bool = False  # size-agnostic steps, for calls at several sizes
    label: str = field(default="program", compare=False)

    def source(self) -> str:
        arguments = ", ".join(f"v{i}" for i in range(len(self.inputs)))
        lines = [f"def {self.label}({arguments}):"]
        lines += [f"    {step.name} = {step.draft.code}" for step in self.steps]
        outputs = "".join(f"{name}, " for name in self.outputs)
        lines.append(f"    return ({outputs})")
        return "\n".join(lines) + "\n"

    def function(self) -> Callable:
        """The program as a Python function (its source registered with linecache, so
        tracebacks and fastdynamo's capture see ordinary code)."""
        source = self.source()
        filename = f"<generated-program-{abs(hash(source)):x}>"
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        namespace = dict(NAMESPACE)
        exec(compile(source, filename, "exec"), namespace)
        return namespace[self.label]

    def make_inputs(self, n: int | None = None) -> list:
        return [spec.make(n) for spec in self.inputs]

    @property
    def has_empty_tensor(self) -> bool:
        return any(step.draft.empty for step in self.steps) or any(0 in spec.shape for spec in self.inputs)

    @property
    def expects_kernels(self) -> bool:
        """An op the kernel IR lowers runs on elements: the graph must get kernels."""
        return not self.refused and not self.has_empty_tensor and any(step.draft.lowers for step in self.steps)

    def __repr__(self) -> str:
        inputs = "".join(f"\n    {spec!r}," for spec in self.inputs)
        return f"Program(inputs=({inputs}\n), refused={self.refused})\n{self.source()}"


# ---- eager evaluation ----------------------------------------------------------------------

def run_eager(program: Program, inputs: list, widen_half: bool = False) -> list[Expected]:
    """The program's outputs computed eagerly step by step (see the module docstring).
    ``widen_half``: half-type inputs become float32 first (what kernels compute: one
    rounding, at the end)."""
    if widen_half:
        inputs = [t.float() if t.dtype in HALF_DTYPES else t for t in inputs]
    values = {f"v{i}": Value(f"v{i}", t, None) for i, t in enumerate(inputs)}
    for step in program.steps:
        values[step.name] = evaluate(step.name, step.draft, values)
    return [Expected(v.tensor, v.unspecified, v.precision) for v in (values[name] for name in program.outputs)]


def evaluate(name: str, draft: Draft, values: dict) -> Value:
    """One step on eager tensors (raises what eager raises)."""
    scope = dict(NAMESPACE)
    scope.update({key: value.tensor for key, value in values.items()})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # var() with no degrees of freedom
        tensor = eval(draft.code, scope)
    operands = [values[key] for key in draft.operands]
    precision = eager_rules.least_precise([tensor.dtype, *(v.precision for v in operands)])
    return Value(name, tensor, eager_rules.unspecified_of(draft, operands, tensor, scope), precision,
                 eager_rules.result_is_exact(draft, operands, tensor))


# ---- drawing ---------------------------------------------------------------------------------

# Mostly tiny; 17 and 33 for vector loops with a remainder (and ATen's vectorized paths),
# and their products for kernels that split their outer loop over threads.
SIZES = st.sampled_from([1, 2, 2, 3, 3, 4, 5, 17, 33])


@st.composite
def full_shapes(draw, max_rank: int, max_size: int):
    rank = draw(st.integers(0, max_rank))
    sizes = draw(st.lists(SIZES.filter(lambda s: s <= max_size), min_size=rank, max_size=rank))
    if sizes and draw(st.integers(0, 11)) == 11:
        sizes[draw(st.integers(0, rank - 1))] = 0  # now and then an empty tensor
    return tuple(sizes)


@st.composite
def input_specs(draw, full_shape: tuple, dtypes=DTYPES, layouts=LAYOUTS):
    """An input broadcastable against ``full_shape``: fewer leading dims, size-1 dims."""
    dropped = draw(st.integers(0, len(full_shape))) if draw(st.booleans()) else 0
    shape = [1 if draw(st.integers(0, 4)) == 4 else size for size in full_shape[dropped:]]
    dtype = draw(st.sampled_from((torch.float32,) * 3 + tuple(dtypes)))
    return InputSpec(tuple(shape), dtype, draw(st.sampled_from(layouts)), draw(st.booleans()),
                     draw(st.integers(0, 2**16)))


@st.composite
def programs(draw, max_rank: int = 3, max_size: int = 33, max_steps: int = 6, max_inputs: int = 3,
             dtypes=DTYPES):
    """A :class:`Program` over inputs broadcastable against one drawn shape."""
    shape = draw(full_shapes(max_rank, max_size))
    specs = tuple(draw(st.lists(input_specs(shape, dtypes), min_size=1, max_size=max_inputs)))
    return draw_steps(draw, specs, [[spec.make() for spec in specs]], max_steps, dynamic=False)


@st.composite
def dynamic_programs(draw, sizes: tuple, max_steps: int = 5, max_inputs: int = 3, dtypes=DTYPES):
    """A program whose every step holds at each of ``sizes``: inputs of shapes over
    ``"n"`` and the constants 2 and 3 (never one of ``sizes``: duck sizing would tie them),
    each step drawn at the first size and kept if it runs at every size with the same
    rank and the same size-1 dims (so no size is specialised)."""
    assert not {2, 3} & set(sizes) and min(sizes) >= 4
    rank = draw(st.integers(1, 3))
    shape = tuple(draw(st.lists(st.sampled_from(["n", "n", 2, 3]), min_size=rank, max_size=rank)))
    specs = list(draw(st.lists(input_specs(shape, dtypes, DYNAMIC_LAYOUTS), min_size=1, max_size=max_inputs)))
    if not any("n" in spec.shape for spec in specs):
        specs[0] = replace(specs[0], shape=("n", *specs[0].shape))
    specs = tuple(specs)
    return draw_steps(draw, specs, [[spec.make(n) for spec in specs] for n in sizes], max_steps, dynamic=True)


def draw_steps(draw, specs: tuple, inputs_by_size: list, max_steps: int, dynamic: bool) -> Program:
    """Steps over the inputs (one list of tensors per size), each run eagerly as drawn."""
    pools = [[Value(f"v{i}", t, None) for i, t in enumerate(inputs)] for inputs in inputs_by_size]
    # values that change with the size (dynamic programs must return one)
    varying = {v.name for v in pools[0] if len({pool[int(v.name[1:])].tensor.shape for pool in pools}) > 1}
    steps: list[Step] = []
    refused = False
    for _ in range(draw(st.integers(min(2, max_steps), max_steps))):
        draft = program_steps.draw_step(draw, pools[0], dynamic).with_operands({v.name: v for v in pools[0]})
        name = f"v{len(pools[0])}"
        try:
            values = [evaluate(name, draft, {v.name: v for v in pool}) for pool in pools]
        except EAGER_REFUSALS:  # eager refuses this step: end the program here, or drop the step
            if not dynamic and draw(st.booleans()):
                steps.append(Step(name, draft))
                refused = True
                break
            continue
        if dynamic and not _same_pattern([value.tensor.shape for value in values]):
            continue
        first_operands = [pool[int(draft.operands[0][1:])].tensor for pool in pools] if draft.operands else []
        scope = {**NAMESPACE, **{v.name: v.tensor for v in pools[0]}}
        bugs = eager_rules.open_bugs_of(draft, values[0].tensor, first_operands, scope)
        steps.append(Step(name, replace(draft, empty=values[0].tensor.numel() == 0, open_bugs=bugs)))
        if varying & set(draft.operands):
            varying.add(name)
        for pool, value in zip(pools, values, strict=True):
            pool.append(value)
    used = {operand for step in steps for operand in step.draft.operands}
    outputs = tuple(step.name for step in steps if step.name not in used)
    if not steps or (dynamic and not varying & set(outputs)):
        # every step was dropped, or none reads a size that changes: one that does
        operand = min(varying, key=lambda name: int(name[1:])) if dynamic else "v0"
        steps.append(Step(f"v{len(pools[0])}", Draft(f"({operand} == {operand})", (operand,))))
        outputs += (steps[-1].name,)
    return Program(specs, tuple(steps), outputs, refused, dynamic)


def _same_pattern(shapes: list) -> bool:
    """Shapes at several sizes of one value: same rank, no empty dim, size-1 dims alike."""
    return (len({len(shape) for shape in shapes}) == 1 and all(0 not in shape for shape in shapes)
            and len({tuple(size == 1 for size in shape) for shape in shapes}) == 1)
