"""Graph breaks inside ``for`` and ``while`` loops: the outermost loop runs as Python,
so counts do not grow with iterations and a 5000-iteration loop nests no resume calls
(no RecursionError); loops over tensor conditions, nested loops, loops in blocks and
blocks in loops; the trace budget (``config.max_trace_steps``) breaks long unrolled loops."""
from __future__ import annotations

import io

import pytest
import torch

from fastdynamo import config

from .break_helpers import PRINT_BREAK, assert_breaks, assert_matches_eager, call, explain, leaf, line_of, vec
from .test_graph_break_blocks import helper_prints_grad_mode

pytestmark = pytest.mark.usefixtures("fresh_cache")


# ---------------------------------------------------------------- loops

def print_in_for(x, n, buf):
    x = x * 2
    for i in range(n):
        x = x + i
        print(i, file=buf)  # BREAK
    return x.sin()


def print_in_while(x, n, buf):
    i = 0
    while i < n:
        x = x + 1
        print(i, file=buf)  # BREAK
        i += 1
    return x.cos()


def while_tensor_condition(x, limit):
    steps = 0
    while x.sum() < limit:  # BREAK
        x = x + 1
        steps += 1
    return x, steps


def item_in_nested_loops(x):
    total = 0.0
    for i in range(3):
        for j in range(2):
            x = x * 0.5 + j
            total += x.sum().item()  # BREAK
    return x, total


def while_true_with_break(x, buf):
    i = 0
    while True:
        x = x * 2
        i += 1
        if x.sum() > 10:  # BREAK
            break
        print(i, file=buf)
    return x, i


def for_else(x, buf):
    for i in range(3):
        if x.sum() > 100:  # BREAK
            break
        x = x + 1
    else:
        print("no break", file=buf)
        x = x * 2
    return x


def loop_in_block(x, buf):
    with torch.no_grad():
        for i in range(3):
            x = x * 2
            print(i, torch.is_grad_enabled(), file=buf)  # BREAK
        y = x + 1
    return x, y, torch.is_grad_enabled()


def block_in_loop(x, buf):
    for i in range(3):
        with torch.no_grad():
            x = x * 2
            print(i, torch.is_grad_enabled(), file=buf)  # BREAK
        x = x + 1
    return x


def list_built_in_loop(x, items):
    while x.sum() > 0:
        items.append(x.sum().item())
        x = x - 1
    return x, items


def loop_with_inlined_break(x, buf, n=3):
    for i in range(n):
        x = helper_prints_grad_mode(x, buf)
    return x


# graphs: a loop with a break runs as Python; what comes before it is compiled again when
# the loop bound (an int argument) first changes, then the bound is a symbol (automatic
# dynamic); what comes after it once; a function that is all loop captures nothing
@pytest.mark.parametrize("fn, make, graphs", [
    (print_in_for, lambda i: call(vec(i), i + 1, io.StringIO()), 4),
    (print_in_while, lambda i: call(vec(i), i + 1, io.StringIO()), 1),
    (while_tensor_condition, lambda i: call(vec(i), 10 + i), 2),
    (item_in_nested_loops, lambda i: call(vec(i)), 0),
    (while_true_with_break, lambda i: call(vec(0) * (i + 1), io.StringIO()), 0),
    (for_else, lambda i: call(vec(0) * (30 * i), io.StringIO()), 1),
    (loop_in_block, lambda i: call(leaf(i), io.StringIO()), 2),
    (block_in_loop, lambda i: call(leaf(i), io.StringIO()), 0),
    (list_built_in_loop, lambda i: call(vec(0) + i, [i]), 1),
    (loop_with_inlined_break, lambda i: call(vec(i), io.StringIO()), 2),  # the callee's
], ids=lambda v: getattr(v, "__name__", str(v)))
def test_loops(fn, make, graphs):
    assert_matches_eager(fn, make, calls=3, graphs=graphs)


def test_loop_break_counts_do_not_grow_with_iterations():
    for n in (3, 50):
        report = explain(print_in_for, vec(0), n, io.StringIO())
        # the graph before the loop (x * 2), the loop as Python, the graph after it (sin)
        assert_breaks(report, graphs=2, breaks=[(line_of(print_in_for, "# BREAK"), PRINT_BREAK)])
        report = explain(print_in_while, vec(0), n, io.StringIO())
        assert_breaks(report, graphs=1, breaks=[(line_of(print_in_while, "# BREAK"), PRINT_BREAK)])
    report = explain(item_in_nested_loops, vec(0))
    assert_breaks(report, graphs=0, breaks=[(line_of(item_in_nested_loops, "# BREAK"), "Tensor.item()")])


@pytest.mark.parametrize("fn, make, graphs", [
    (print_in_for, lambda: call(torch.zeros(2), 5000, io.StringIO()), 2),
    (print_in_while, lambda: call(torch.zeros(2), 5000, io.StringIO()), 1),
    (while_tensor_condition, lambda: call(torch.zeros(2), 10000), 1),
    (loop_with_inlined_break, lambda: call(torch.zeros(2), io.StringIO(), 5000), 2),
], ids=lambda v: getattr(v, "__name__", str(v)))
def test_long_loop_does_not_nest_resume_calls(fn, make, graphs):
    # 5000 iterations: one resume call per iteration would overflow the recursion limit
    assert_matches_eager(fn, lambda i: make(), calls=2, graphs=graphs)


def test_trace_budget_breaks_long_loops(monkeypatch):
    def unrolled(x):
        for _ in range(200):
            x = x + 1
        return x * 2

    monkeypatch.setattr(config, "max_trace_steps", 300)
    # the loop runs as Python past the budget; x * 2 after it is a graph
    assert_matches_eager(unrolled, lambda i: call(vec(i)), graphs=1, breaks=1)
    report = explain(unrolled, vec(0))
    assert len(report.break_reasons) == 1
    assert "config.max_trace_steps" in report.break_reasons[0].reason
    # the step that runs out is in the loop (its header or its body: where depends on
    # how many instructions each line has in this version)
    assert report.break_reasons[0].location in {line_of(unrolled, "x = x + 1"),
                                                line_of(unrolled, "for _ in range(200)")}
    monkeypatch.setattr(config, "max_trace_steps", 100_000)
    report = explain(unrolled, vec(0))
    assert report.graph_count == 1 and report.graph_break_count == 0


# ---------------------------------------------------------------- iterators over changing containers, loop exits

def enumerate_list_grown_in_loop(x, buf):
    # CPython's enumerate reads the list live: the loop (Python) sees it grow
    work = [1, 2]
    for i, v in enumerate(work):
        x = x + v
        print(i, v, file=buf)  # BREAK: the loop runs as Python
        if v == 1:
            work.append(3)
    return x


def dict_items_grown_in_loop(x, buf):
    # eager raises "dictionary changed size during iteration"
    d = {"a": 1}
    for k, v in d.items():
        x = x + v
        print(k, file=buf)  # BREAK
        d["b"] = 2
    return x


def enumerate_traced_after_append(x):
    # enumerate reads the list as CPython's does (lazily): the append is seen, in one graph
    a = [1, 2, 3]
    it = enumerate(a)
    next(it)
    a.append(4)
    return x + len(list(it))


def for_else_with_break_and_print(x, n, buf):
    for i in range(n):
        x = x + 1
        print(i, file=buf)  # BREAK
        if i == 1:
            break
    else:
        print("exhausted", file=buf)
        x = x * 3
    return x, i


def nested_loops_continue(x, buf):
    out = []
    for i in range(3):
        for j in range(3):
            if j == 1:
                continue
            x = x + j
            print(i, j, file=buf)  # BREAK
            if i == 1:
                break
        out.append(i)
    return x, out


def return_in_loop_after_break(x, buf):
    for i in range(5):
        x = x * 2
        print(i, file=buf)  # BREAK
        if i == 2:
            return x, i
    return x, -1


def while_else(x, buf):
    i = 0
    while i < 3:
        x = x + 1
        i += 1
        print(i, file=buf)  # BREAK
        if x.sum() > 100:
            break
    else:
        print("else", file=buf)
        x = x * 2
    return x


def walrus_while(x, buf):
    vals = [3, 2, 1, 0]
    k = 0
    while (v := vals[k]) > 0:
        x = x + v
        print(v, file=buf)  # BREAK
        k += 1
    return x, v


# graphs over three calls: loops with a break run as Python, so a function that is all
# loop captures nothing; for_else and while_else capture the code after the loop once
@pytest.mark.parametrize("fn, make, graphs", [
    (enumerate_list_grown_in_loop, lambda i: call(vec(i), io.StringIO()), 0),
    (dict_items_grown_in_loop, lambda i: call(vec(i), io.StringIO()), 0),
    (enumerate_traced_after_append, lambda i: call(vec(i)), 1),
    (for_else_with_break_and_print, lambda i: call(vec(i), i + 1, io.StringIO()), 1),
    (nested_loops_continue, lambda i: call(vec(i), io.StringIO()), 0),
    (return_in_loop_after_break, lambda i: call(vec(i), io.StringIO()), 0),
    (while_else, lambda i: call(vec(i) * (40 * i), io.StringIO()), 1),
    (walrus_while, lambda i: call(vec(i), io.StringIO()), 0),
], ids=lambda v: getattr(v, "__name__", str(v)))
def test_loop_exits_and_changing_containers(fn, make, graphs):
    assert_matches_eager(fn, make, graphs=graphs, breaks=1 if graphs == 0 else None)
