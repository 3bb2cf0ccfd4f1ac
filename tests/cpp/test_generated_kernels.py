"""Property tests: generated pointwise/view/reduction programs compiled to kernels match eager.

Programs come from :mod:`generated_programs` (their vocabulary: :mod:`program_steps`):
chains of unary and binary ops, casts, where/clamp/pow, integer division by constants,
reductions and normalisations over any dims, views inside the graph, over inputs of
every dtype the kernels take (float32/64, bfloat16, float16, int64, int32, bool) that
broadcast (size-1 dims, fewer dims, 0-d tensors, Python scalars), are transposed,
sliced with steps and offsets or expanded, hold NaN/±inf/±0.0 or integer extremes, and
now and then have no elements. Each example checks (:mod:`output_comparison`) every
output's values, dtype, shape and significant strides against eager, and what was
compiled: kernels whenever an op the IR lowers runs on elements (an empty tensor or an
eager error are the expected exceptions, counted as hypothesis events), the same
exception type as eager when eager refuses (``abs`` of bool, ``mean`` of int64), and
inputs left as they were.

The C++ target runs every example of its test; Triton, in its interpreter, a smaller
share with tiny shapes; programs captured with symbolic sizes run through
``fastdynamo.compile`` at several sizes. Examples: a share of the hypothesis profile
(``ci``: 150 C++ programs, 75 Triton ones, 22 and 6 symbolic ones) so that the file runs
in under a minute on one core (each new C++ graph is a g++ run of ~0.1-0.4 s; a symbolic
case is a capture and three calls); ``FASTDYNAMO_KERNEL_EXAMPLES`` sets the C++ test's
count and scales the others with it; ``--hypothesis-profile=long`` runs twenty times more.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass

import pytest
import torch
from eager_rules import least_precise
from examples_budget import share_of_profile
from generated_programs import (
    DTYPES,
    EAGER_REFUSALS,
    HALF_DTYPES,
    LAYOUTS,
    InputSpec,
    Program,
    dynamic_programs,
    programs,
    run_eager,
)
from hypothesis import HealthCheck, event, given, reject, settings
from hypothesis import strategies as st
from kernel_targets import TARGETS
from output_comparison import assert_output_matches

import fastdynamo
from fastdynamo.backends.triton import TritonOptions
from fastdynamo.convert_frame import Recorder

pytestmark = pytest.mark.filterwarnings("ignore:var\\(\\). degrees of freedom:UserWarning")

CPP_SHARE = 1.0


def examples(share: float) -> settings:
    """``share`` of the profile's examples (the C++ test's is :data:`CPP_SHARE`)."""
    override = os.environ.get("FASTDYNAMO_KERNEL_EXAMPLES")
    budget = share_of_profile(share)
    if override:
        budget = settings(budget, max_examples=max(1, round(int(override) * share / CPP_SHARE)))
    return settings(budget, database=None, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                           HealthCheck.data_too_large, HealthCheck.filter_too_much])


# ---- open bugs ------------------------------------------------------------------------------------
# Programs that meet an open bug (test_kernel_regressions.py, "Open", each a strict xfail
# there) are left out, so that everything else stays held; the steps say which they meet
# (eager_rules.OPEN_BUG_CHECKS). Drop a letter when its regression test passes.

OPEN_BUGS = {
    "D": "torch's meta strides (what kernels allocate) are not eager's",
}


def known_open_bug(program: Program) -> str | None:
    letters = set().union(*(step.draft.open_bugs for step in program.steps))
    return f"{min(letters)}: {OPEN_BUGS[min(letters)]}" if letters else None


# ---- one program, one target ----------------------------------------------------------------------

@dataclass
class Comparison:
    """What one compiled output is held to (see :func:`output_comparison.assert_output_matches`)."""

    expected: torch.Tensor
    reference: torch.Tensor
    unspecified: torch.Tensor | None
    precision: torch.dtype | None


def comparisons(program: Program, inputs: list) -> list[Comparison]:
    """Per output: eager's value (the function itself), the values to compare with (the
    float32 reference where an input is a half type), the unspecified positions (of
    either run) and the working precision."""
    expected = list(program.function()(*inputs))
    stepped = run_eager(program, inputs)
    for mine, theirs in zip(stepped, expected, strict=True):
        assert mine.tensor.dtype == theirs.dtype and mine.tensor.shape == theirs.shape, "the steps are the function"
    widened = run_eager(program, inputs, widen_half=True) if any(t.dtype in HALF_DTYPES for t in inputs) else stepped
    result = []
    for value, eager, wide in zip(expected, stepped, widened, strict=True):
        masks = [m for m in (eager.unspecified, wide.unspecified) if m is not None]
        unspecified = masks[0] | masks[-1] if masks else None
        result.append(Comparison(value, wide.tensor, unspecified, least_precise([eager.precision, wide.precision])))
    return result


def assert_outputs_match(actual, expected: list[Comparison]) -> None:
    assert isinstance(actual, tuple) and len(actual) == len(expected), (type(actual), len(expected))
    for position, (got, want) in enumerate(zip(actual, expected, strict=True)):
        assert_output_matches(got, want.expected, want.reference, want.unspecified, want.precision,
                              where=f"output {position}")


def assert_raises_like_eager(compile_and_call, refusal: BaseException) -> None:
    """Compiling and calling raises what eager raised, of the same type exactly."""
    with pytest.raises(EAGER_REFUSALS) as raised:
        compile_and_call()
    assert type(raised.value) is type(refusal), (raised.value, refusal)


def check_program(program: Program, target: str, options=None) -> None:
    known = known_open_bug(program)
    if known:
        event(f"left out, open bug {known}")
        reject()
    inputs = program.make_inputs()
    gm = torch.fx.symbolic_trace(program.function())
    try:
        expected = comparisons(program, inputs)
    except EAGER_REFUSALS as refusal:
        assert program.refused, f"eager raised on a program drawn as valid: {refusal!r}"
        event("eager refuses: the compiled graph raises the same")
        assert_raises_like_eager(lambda: TARGETS[target](gm, inputs, options)(*inputs), refusal)
        return
    assert not program.refused, "the drawing saw eager raise"
    compiled = TARGETS[target](gm, inputs, options)
    assert compiled.fallback_reason is None, compiled.fallback_reason
    if program.expects_kernels:
        assert compiled.kernel_count >= 1, f"no kernel for a graph of lowerable ops:\n{compiled.source_path}"
        event("kernels")
    else:
        event("no kernel expected: " + ("an empty tensor" if program.has_empty_tensor else "views and externs"))
    assert_outputs_match(compiled(*inputs), expected)
    for before, after in zip(program.make_inputs(), inputs, strict=True):
        assert torch.equal(before.nan_to_num(), after.nan_to_num()), "an input was written"


@examples(CPP_SHARE)
@given(program=programs())
def test_generated_program_matches_eager_cpp(program):
    check_program(program, "cpp")


TRITON_OPTIONS = st.sampled_from([
    None,
    TritonOptions(persistent_max=4, config_overrides=(("looped_reduction", ({"XBLOCK": 2, "RBLOCK": 2},)),
                                                      ("pointwise", ({"XBLOCK": 4},)))),
])


@examples(0.5)
@given(program=programs(max_rank=2, max_size=3, max_steps=4, max_inputs=2), options=TRITON_OPTIONS)
def test_generated_program_matches_eager_triton(program, options):
    check_program(program, "triton", options)


# ---- symbolic sizes -------------------------------------------------------------------------------

@st.composite
def dynamic_cases(draw):
    sizes = tuple(draw(st.permutations([4, 5, 6, 7]))[:3])
    mode = draw(st.sampled_from([True, None]))  # dynamic=True, or automatic dynamic
    return draw(dynamic_programs(sizes)), sizes, mode


def check_dynamic(program: Program, sizes: tuple, mode, backend: str) -> None:
    """Compile with ``fastdynamo.compile``, call at each size (every result eager's), and
    count: dynamic=True captures one symbolic graph; automatic dynamic a static one for
    the first size, then a symbolic one. The symbolic graph's one module serves every
    later size, unless its ATen trace would need a guard the frame does not have, and the
    graph gets kernels per size (one module per size called): a slice of a symbolic dim
    may leave a size of 1 (``x[1:]`` of ``n >= 2`` rows), or a pointwise op of a
    ``strided`` input (symbolic strides) and a broadcast operand orders its output's dims
    by comparing the strides (``x - x.mean()`` of ``base[0::2, 1::2]``)."""
    known = known_open_bug(program)
    if known:
        event(f"left out, open bug {known}")
        reject()
    function = program.function()
    recorder = Recorder()
    compiled = fastdynamo.compile(function, backend=backend, dynamic=mode, fullgraph=True, _recorder=recorder)
    for n in sizes:
        inputs = program.make_inputs(n)
        assert_outputs_match(compiled(*inputs), comparisons(program, inputs))
    graphs = [record.compiled_fn for record in recorder.captures]
    assert len(graphs) == (1 if mode else 2), [getattr(g, "signature", None) for g in graphs]
    if mode is None:
        assert graphs[0].signature is None, "automatic dynamic: the first size is static"
    symbolic = graphs[-1]
    assert symbolic.fallback_reason is None, symbolic.fallback_reason
    modules = {id(module) for module in symbolic.specialisations.values()}
    served = len(sizes) - (0 if mode else 1)  # the sizes the symbolic graph was called with
    if symbolic.symbolic_refused is not None:
        assert GUARD_REFUSAL in symbolic.symbolic_refused, symbolic.symbolic_refused
        assert slices_a_dim(program) or has_strided_input(program), symbolic.symbolic_refused
        assert len(modules) == served, "kernels per size"
        event("symbolic graph refused (a slice, or symbolic strides): kernels per size")
        return
    assert symbolic.signature is not None
    assert len(modules) == 1, "one module for every size"
    if program.expects_kernels:
        assert symbolic.kernel_count >= 1 and symbolic.module.SIZE_ARGUMENTS, open(symbolic.source_path).read()
        event("one symbolic module")


GUARD_REFUSAL = "the ATen trace needs a new shape guard"


def slices_a_dim(program: Program) -> bool:
    """A step slices a value (a view, or the pieces of a cat or slice_scatter)."""
    return any(step.draft.effect in ("view", "rearrange") and "[" in step.draft.code and ":" in step.draft.code
               for step in program.steps)


def has_strided_input(program: Program) -> bool:
    return any(spec.layout == "strided" and "n" in spec.shape for spec in program.inputs)


@examples(0.15)
@given(case=dynamic_cases())
def test_generated_program_with_symbolic_sizes_cpp(case):
    program, sizes, mode = case
    fastdynamo.reset()
    check_dynamic(program, sizes, mode, "cpp")


@examples(0.04)
@given(case=dynamic_cases())
def test_generated_program_with_symbolic_sizes_triton(case):
    program, sizes, mode = case
    fastdynamo.reset()
    check_dynamic(program, sizes, mode, "triton")


# ---- fixed cases ----------------------------------------------------------------------------------

SPECIALS = [math.nan, math.inf, -math.inf, 0.0, -0.0, 1.5, -2.0, -math.nan]


@pytest.mark.parametrize("target", sorted(TARGETS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("length", [8, 40])  # ATen's scalar path only, and its vectorized one too
@pytest.mark.parametrize("op", ["maximum", "minimum"])
def test_maximum_of_x_and_minus_x_with_nan_inf_and_signed_zeros(target, dtype, length, op):
    """The issue's case: ``x.maximum(-x)`` with NaN, ±inf and ±0.0. NaN propagates where
    x is NaN; at a ``+0.0``/``-0.0`` pair ATen returns the first operand on its scalar path
    and the second on its vectorized one: there the kernels return the second (``-x``), as
    the vectorized path does; everywhere else values and signs are eager's exactly."""
    x = torch.tensor((SPECIALS * length)[:length], dtype=dtype)

    def program(x):
        return (getattr(x, op)(-x),)

    compiled = TARGETS[target](torch.fx.symbolic_trace(program), [x])
    assert compiled.fallback_reason is None and compiled.kernel_count == 1
    (actual,), (expected,) = compiled(x), program(x)
    tie = x == 0
    assert_output_matches(actual, expected, unspecified=tie)
    assert actual[x.isnan()].isnan().all() and not actual[~x.isnan()].isnan().any()
    assert torch.equal(actual[tie].signbit(), (-x)[tie].signbit()), "a tie gives the second operand"


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_dtype_is_drawn_and_made(dtype):
    """The inputs the generator makes hold what their specs say (a check of the generator)."""
    for layout in LAYOUTS:
        t = InputSpec((3, 4), dtype, layout, specials=True, seed=1).make()
        assert t.shape == (3, 4) and t.dtype == dtype
        assert {"contiguous": t.is_contiguous(), "transposed": t.stride() == (1, 3),
                "sliced": t.storage_offset() == 10, "strided": t.stride() == (18, 2) and t.storage_offset() == 1,
                "expanded": 0 in t.stride()}[layout]
