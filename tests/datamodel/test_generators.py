"""Generators of traced code run lazily, as in eager: their bodies interleave with the
consumer (side effects in eager's order), an unfinished generator does not run to the
end, and ``yield from`` (``nn.Module.named_modules``) stays in the graph."""
from __future__ import annotations

import pytest
import torch

import fastdynamo

pytestmark = pytest.mark.usefixtures("fresh_cache")


def counting(log, t, n):
    for i in range(n):
        log.append(("gen", i))
        yield t * i


def interleaved(x):
    log = []
    out = x
    for item in counting(log, x, 3):
        log.append(("use", len(log)))
        out = out + item
    return out, log


def partially_consumed(x):
    log = []
    gen = counting(log, x, 5)
    first = next(gen)
    second = next(gen)
    return first + second, log


def delegating(t):
    yield t
    result = yield from inner(t)
    yield t * result


def inner(t):
    yield t + 1
    return 3


def uses_yield_from(x):
    return torch.stack(list(delegating(x))).sum(0)


def module_walk(x):
    model = MODEL
    names = [name for name, _ in model.named_modules()]
    count = sum(1 for _ in model.modules())
    return x * count, names


MODEL = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Sequential(torch.nn.ReLU()))


@pytest.mark.parametrize("fn", [interleaved, partially_consumed, uses_yield_from, module_walk],
                         ids=lambda f: f.__name__)
def test_generators_run_lazily_in_one_graph(fn):
    x = torch.arange(2.0)
    expected = fn(x)
    actual = fastdynamo.compile(fn, backend="eager", fullgraph=True)(x)
    if isinstance(expected, tuple):
        assert torch.equal(actual[0], expected[0]) and actual[1:] == expected[1:]
    else:
        assert torch.equal(actual, expected)
    fastdynamo.reset()
    report = fastdynamo.explain(fn, backend="eager")(x)
    assert (report.graph_count, report.graph_break_count) == (1, 0)


def test_a_generator_left_suspended_at_a_break_runs_the_frame_as_python(capsys):
    def f(x):
        log = []
        gen = counting(log, x, 3)
        first = next(gen)
        print("break")  # the generator is suspended here: not rebuildable
        return first + next(gen), log

    fastdynamo.reset()
    out, log = fastdynamo.compile(f, backend="eager")(torch.ones(2))
    expected, expected_log = f(torch.ones(2))
    assert torch.equal(out, expected) and log == expected_log
