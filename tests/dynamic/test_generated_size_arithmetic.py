"""Property test (issue #12, GPT2's ``x.size()[:-1] + (self.nf,)`` under dynamic shapes):
generated programs of ``torch.Size`` arithmetic — concatenation with tuples on either
side, repetition, slices, ``numel()``, the results passed to ``view``/``reshape``/
``expand``/``new_zeros`` or returned — compiled with ``dynamic=True`` and automatic
dynamic shapes (``dynamic=None``) and called over a generated list of sizes. Every call
equals eager in values, types (a Size stays a Size) and dtypes; nothing breaks except
where noted; the number of graphs is bounded: one for ``dynamic=True`` (one plus a
recompile per dimension that changes for automatic), or one per distinct size where an
expression still specialises the sizes today (see SPECIALISES).
``--hypothesis-profile=long`` runs thousands."""
from __future__ import annotations

import textwrap

import torch
from examples_budget import share_of_profile
from hypothesis import given
from hypothesis import strategies as st

import fastdynamo

from .helpers import assert_same, compiled

# (expression over `x`, whose last dimension is 4; its kind). SPECIALISES: the sizes
# become constants of the graph today (Size + tuple, Size * n, a Size slice given to
# view: each size compiles its own graph), BREAKS: a graph break today where the Size
# is symbolic.
DYNAMIC, SPECIALISES, BREAKS = "dynamic", "specialises", "breaks"
EXPRESSIONS = [
    ("x.view(x.shape[:-1] + (2, -1))", SPECIALISES),
    ("x.view(x.size()[:-1] + (2, 2))", SPECIALISES),
    ("x.reshape((1,) + x.shape)", SPECIALISES),
    ("x.reshape(x.shape + (1,))", SPECIALISES),
    ("x.new_zeros(x.shape + (2,))", SPECIALISES),
    ("x.expand((2,) + x.shape)", SPECIALISES),
    ("x.reshape(x.shape[:1] + (-1,))", SPECIALISES),
    ("x.view(*(x.shape[:-1] + (4,)))", SPECIALISES),
    ("torch.zeros(x.shape[-1:] + x.shape[:-1])", SPECIALISES),
    ("x.new_ones(x.shape[:-1] + (x.shape[-1] * 2,))", SPECIALISES),
    ("x.shape * 2", SPECIALISES),
    ("x.shape[:-1] + ({c},)", SPECIALISES),
    ("len(x.shape + (1,))", SPECIALISES),
    ("(x.shape + ({c},))[-1]", SPECIALISES),
    ("tuple(x.shape) + ({c},)", SPECIALISES),
    ("x.shape + x.shape", SPECIALISES),
    ("x.sum(-1).view(x.shape[:-1])", DYNAMIC),
    ("x.flatten().view(x.shape)", DYNAMIC),
    ("x.shape[::-1]", DYNAMIC),
    ("x.view(x.shape.numel())", DYNAMIC),
    ("x.shape.numel() * {c}", DYNAMIC),
    ("x.shape[-1:]", DYNAMIC),
    ("x.reshape(x.shape[:-2] + (-1,))", SPECIALISES),
    ("{c} * x.shape", BREAKS),
    ("torch.Size([{c}]) + x.shape", BREAKS),
]


@st.composite
def programs(draw):
    chosen = draw(st.lists(st.sampled_from(EXPRESSIONS), min_size=1, max_size=4))
    outs = [text.format(c=draw(st.integers(1, 3))) for text, _ in chosen]
    source = "def prog(x):\n" + textwrap.indent(f"a = x * 2\nreturn (a, {', '.join(outs)})", "    ") + "\n"
    return source, {kind for _, kind in chosen}


# leading dimensions (2..9: sizes 0 and 1 are always specialised) of a rank 2 or 3 input
shapes = st.integers(1, 2).flatmap(
    lambda lead: st.lists(st.tuples(*[st.integers(2, 9)] * lead), min_size=1, max_size=5))


def _build(source):
    namespace = {"torch": torch}
    exec(compile(source, "<generated-size>", "exec"), namespace)  # noqa: S102 - test programs
    return namespace["prog"]


def _bound(kinds, sizes, dynamic):
    if SPECIALISES in kinds:
        return len(set(sizes))
    if dynamic:
        return 1
    changed = {d for d in range(len(sizes[0])) if len({size[d] for size in sizes}) > 1}
    return 1 + len(changed)  # static first, then each dimension that changed made symbolic


@share_of_profile(0.3)  # an example is up to five calls, each maybe compiling
@given(programs(), shapes, st.sampled_from([True, None]))
def test_generated_size_arithmetic_matches_eager(program, sizes, dynamic):
    source, kinds = program
    prog = _build(source)
    fastdynamo.reset()
    fn, recorder = compiled(prog, dynamic=dynamic, fullgraph=BREAKS not in kinds)
    for lead in sizes:
        x = torch.randn(*lead, 4)
        try:
            assert_same(fn(x), prog(x))
        except AssertionError as err:
            raise AssertionError(f"size {x.shape} of {sizes}, dynamic={dynamic}\n{source}") from err
    graphs, reasons = len(recorder.captures), [b.reason for b in recorder.breaks]
    where = f"{graphs} graphs for sizes {sizes}, dynamic={dynamic} {reasons}\n{source}"
    if BREAKS in kinds:  # (not where the Size is constant: static, or specialised by another)
        assert graphs >= 1, where
    else:
        assert not reasons and 1 <= graphs <= _bound(kinds, sizes, dynamic), where
    fastdynamo.reset()
