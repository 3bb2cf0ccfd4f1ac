"""Graph breaks inside ``with`` blocks: the grad mode inside and after the block and
the ``requires_grad`` of results (grad-mode blocks are re-entered for real before the
break and their __exit__ reaches the resume function), nested blocks, blocks around
inlined breaks, exceptions raised inside a block after a break, other context managers.
Compiled (``backend="eager"``) against eager, with the counts explain reports."""
from __future__ import annotations

import contextlib
import io

import pytest
import torch

import fastdynamo

from . import break_programs
from .break_helpers import (PRINT_BREAK, assert_breaks, assert_matches_eager, bad_index, call, explain, leaf,
                            line_of, vec)

pytestmark = pytest.mark.usefixtures("fresh_cache")


# ---------------------------------------------------------------- grad-mode blocks

def break_in_no_grad(x, buf):
    y = x * 2
    with torch.no_grad():
        z = y * 3
        print("inside", torch.is_grad_enabled(), file=buf)  # BREAK
        w = z + x
        inside = torch.is_grad_enabled()
    v = w * y
    return y, z, w, v, inside, torch.is_grad_enabled()


def break_in_enable_grad(x, buf):
    with torch.no_grad():
        y = x * 2
        with torch.enable_grad():
            z = x * 3
            print("inside", torch.is_grad_enabled(), file=buf)  # BREAK
            w = z + 1
        u = w * 2
    return y, z, w, u, torch.is_grad_enabled()


def nested_blocks_break_at_each_level(x, buf):
    with torch.no_grad():
        a = x * 2
        with torch.enable_grad():
            b = x * 3
            with torch.no_grad():
                c = x * 4
                print("deep", torch.is_grad_enabled(), file=buf)  # BREAK deep
                d = c + b
            e = b * 2
            print("middle", torch.is_grad_enabled(), file=buf)  # BREAK middle
            f = e + 1
        g = f * 2
    print("outside", torch.is_grad_enabled(), file=buf)  # BREAK outside
    return a, b, c, d, e, f, g, x * 5


def two_breaks_in_one_block(x, buf):
    with torch.no_grad():
        y = x * 2
        print("first", file=buf)  # BREAK first
        z = y * 3
        print("second", file=buf)  # BREAK second
        w = z + 1
    return y, z, w, x * 4


def item_in_no_grad(x):
    with torch.no_grad():
        y = x * 2
        s = y.sum().item()  # BREAK
        z = y * s
    return z, x * s


def set_grad_enabled_calls(x, buf):
    torch.set_grad_enabled(False)
    y = x * 2
    print("off", torch.is_grad_enabled(), file=buf)  # BREAK
    z = y * 3
    torch.set_grad_enabled(True)
    return y, z, x * 4


def set_grad_enabled_block(x, buf):
    with torch.set_grad_enabled(False):
        y = x * 2
        print("off", torch.is_grad_enabled(), file=buf)  # BREAK
        z = y * 3
    return y, z, x * 4


def break_before_block(x, buf):
    print("before", file=buf)  # BREAK
    with torch.no_grad():
        y = x * 2
    return y, x * 2


def break_after_block(x, buf):
    with torch.no_grad():
        y = x * 2
    print("after", torch.is_grad_enabled(), file=buf)  # BREAK
    return y, x * 2


def helper_prints_grad_mode(t, buf):
    u = t * 2
    print("helper", torch.is_grad_enabled(), file=buf)  # BREAK
    return u + 1


def block_around_inlined_break(x, buf):
    with torch.no_grad():
        y = helper_prints_grad_mode(x, buf)  # CALL
        z = y * x
    return y, z, x * 3, torch.is_grad_enabled()


def helper_with_block(t, buf):
    with torch.no_grad():
        u = t * 2
        print("callee", torch.is_grad_enabled(), file=buf)  # BREAK
        v = u + 1
    return u, v, t * 2


def inlined_block_with_break(x, buf):
    a, b, c = helper_with_block(x, buf)
    return a, b, c, x * 5, torch.is_grad_enabled()


@torch.no_grad()
def decorated_no_grad(x, buf):
    y = x * 2
    print("decorated", torch.is_grad_enabled(), file=buf)
    return y + 1


def calls_decorated(x, buf):
    y = decorated_no_grad(x, buf)
    return y * x, torch.is_grad_enabled()


def block_from_variable(x, buf):
    ctx = torch.no_grad()
    with ctx:
        y = x * 2
        print("ctx", torch.is_grad_enabled(), file=buf)  # BREAK
        z = y + 1
    return y, z, x * 2


def return_inside_block(x, buf):
    with torch.no_grad():
        y = x * 2
        print("returning", file=buf)  # BREAK
        return y * 3, torch.is_grad_enabled()


def loop_exits_inside_block(x, buf):
    for i in range(5):
        with torch.no_grad():
            x = x + 1
            print(i, torch.is_grad_enabled(), file=buf)  # BREAK
            if i == 2:
                break
            if i == 1:
                continue
        x = x * 2
    return x, torch.is_grad_enabled()


# (function, graphs its three calls capture): the graph before each break and a resume
# function after it, unless one side computes nothing.
GRAD_FUNCTIONS = [
    # runs as Python: a grad-mode object held in a local cannot be rebuilt at the break
    (block_from_variable, 0),
    (return_inside_block, 2),
    (loop_exits_inside_block, 0),  # the loop runs as Python; nothing around it computes
    (break_in_no_grad, 2),
    (break_in_enable_grad, 2),
    (nested_blocks_break_at_each_level, 4),
    (two_breaks_in_one_block, 3),
    (set_grad_enabled_calls, 2),
    (set_grad_enabled_block, 2),
    (break_before_block, 1),  # nothing before the print
    (break_after_block, 2),
    (block_around_inlined_break, 4),  # the caller's two, the callee's two
    (inlined_block_with_break, 3),  # the callee's two, the caller's resume function
    (calls_decorated, 3),
]


@pytest.mark.parametrize("outer_grad", [True, False], ids=["grad", "no_grad"])
@pytest.mark.parametrize("fn, graphs", GRAD_FUNCTIONS, ids=[fn.__name__ for fn, _ in GRAD_FUNCTIONS])
def test_grad_mode_blocks(fn, graphs, outer_grad):
    # requires_grad of every result, the mode printed inside and returned after the block
    with torch.set_grad_enabled(outer_grad):
        assert_matches_eager(fn, lambda i: call(leaf(i), io.StringIO()), graphs=graphs, breaks=1 if graphs == 0 else None)
    assert torch.is_grad_enabled()


def test_grad_mode_item_and_backward():
    # a resume function per .item() value; the failing assert's resume function only raises
    assert_matches_eager(item_in_no_grad, lambda i: call(leaf(i)), calls=2, graphs=3)
    assert_matches_eager(break_programs.assert_in_no_grad, lambda i: call(leaf(i)), calls=4, graphs=2)


def test_gradients_flow_through_split_graphs():
    def fn(x, w):
        h = (x @ w).tanh()
        s = h.sum().item()
        with torch.no_grad():
            scale = h.abs().max()
            print("scale", file=io.StringIO())
        return (h * s / scale).sum()

    compiled = fastdynamo.compile(fn)
    for seed in range(3):
        gen = torch.Generator().manual_seed(seed)
        x, w = torch.randn(4, 3, generator=gen), torch.randn(3, 2, generator=gen)
        we, wc = w.clone().requires_grad_(), w.clone().requires_grad_()
        expected, actual = fn(x, we), compiled(x, wc)
        torch.testing.assert_close(actual, expected)
        expected.backward()
        actual.backward()
        torch.testing.assert_close(wc.grad, we.grad)


def test_block_break_count_and_location():
    report = explain(break_in_no_grad, leaf(0), io.StringIO())
    assert_breaks(report, graphs=2, breaks=[(line_of(break_in_no_grad, "# BREAK"), PRINT_BREAK)])


def test_inlined_break_in_block_location():
    report = explain(block_around_inlined_break, leaf(0), io.StringIO())
    brk = report.break_reasons[0]
    assert brk.location == line_of(helper_prints_grad_mode, "# BREAK")
    assert f"{brk.where[0][0]}:{brk.where[0][1]}" == line_of(block_around_inlined_break, "# CALL")


def test_second_break_in_one_block_resumes():
    # The resume function holds the block's real __exit__ on its stack; a second break
    # in the same block must be resumed too, not run the rest of the frame as Python.
    fn = two_breaks_in_one_block
    report = explain(fn, leaf(0), io.StringIO())
    assert_breaks(report, graphs=3, breaks=[(line_of(fn, "# BREAK first"), PRINT_BREAK),
                                            (line_of(fn, "# BREAK second"), PRINT_BREAK)])


def test_break_at_each_level_of_nested_blocks_resumes():
    fn = nested_blocks_break_at_each_level
    report = explain(fn, leaf(0), io.StringIO())
    assert_breaks(report, graphs=4, breaks=[(line_of(fn, "# BREAK deep"), PRINT_BREAK),
                                            (line_of(fn, "# BREAK middle"), PRINT_BREAK),
                                            (line_of(fn, "# BREAK outside"), PRINT_BREAK)])


# ---------------------------------------------------------------- exceptions in blocks

def raise_after_break_in_no_grad(x, buf):
    with torch.no_grad():
        y = x * 2
        print("inside", file=buf)  # BREAK
        raise ValueError("boom")
    return y


def raise_after_break_in_enable_grad(x, buf):
    with torch.enable_grad():
        y = x * 2
        print("inside", file=buf)  # BREAK
        raise ValueError("boom")
    return y


def graph_error_in_no_grad(x, index):
    with torch.no_grad():
        y = x * 2
        z = y.index_select(0, index)  # an IndexError only the real data shows
    return z


def graph_error_after_break_in_no_grad(x, index, buf):
    with torch.no_grad():
        y = x * 2
        print("inside", file=buf)
        z = y.index_select(0, index)
    return z


@pytest.mark.parametrize("outer_grad", [True, False], ids=["grad", "no_grad"])
@pytest.mark.parametrize("fn", [raise_after_break_in_no_grad, raise_after_break_in_enable_grad],
                         ids=lambda f: f.__name__)
def test_exception_in_block_after_break_restores_grad_mode(fn, outer_grad):
    with torch.set_grad_enabled(outer_grad):
        # the graph before the print; the resume function raises, capturing nothing
        assert_matches_eager(fn, lambda i: call(leaf(i), io.StringIO()), graphs=1)


@pytest.mark.parametrize("fn, make", [
    (graph_error_in_no_grad, lambda i: call(leaf(i), bad_index(i))),
    (graph_error_after_break_in_no_grad, lambda i: call(leaf(i), bad_index(i), io.StringIO())),
], ids=["no_break", "after_break"])
def test_error_raised_by_graph_in_block_restores_grad_mode(fn, make):
    # The first call succeeds (and compiles), the next ones raise inside the graph.
    graphs = 1 if fn is graph_error_in_no_grad else 2
    assert_matches_eager(fn, make, calls=3, graphs=graphs)


def block_in_try(x, buf):
    try:
        with torch.no_grad():
            y = x * 2
            print("inside", file=buf)  # BREAK
            raise KeyError("key")
    except KeyError as err:
        mode = torch.is_grad_enabled()
        y = x * 3
        print("caught", err, mode, file=buf)
    return y, mode


def finally_after_block(x, buf):
    try:
        with torch.no_grad():
            y = x * 2
            print("try", file=buf)
            raise ValueError("v")
    finally:
        print("finally", torch.is_grad_enabled(), file=buf)  # BREAK


def test_block_inside_try():
    # the graph before the first print; the exits after it are handlers, run as Python
    assert_matches_eager(block_in_try, lambda i: call(leaf(i), io.StringIO()), graphs=1)
    assert_matches_eager(finally_after_block, lambda i: call(leaf(i), io.StringIO()), graphs=1)


def test_inference_mode_block():
    def fn(x):
        with torch.inference_mode():
            y = x * 2
        return y, torch.is_grad_enabled()
    # inference mode is not modelled: the block runs as Python, and nothing else computes
    assert_matches_eager(fn, lambda i: call(leaf(i)), graphs=0)


def test_autocast_block():
    def fn(x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = x @ x
        return y, torch.is_autocast_enabled("cpu")
    # autocast is not modelled: the block runs as Python, and nothing else computes
    assert_matches_eager(fn, lambda i: call(vec(i, n=4).reshape(2, 2)), graphs=0)


class Recording:
    def __init__(self, log):
        self.log = log

    def __enter__(self):
        self.log.append("enter")
        return self

    def __exit__(self, *exc):
        self.log.append(f"exit {exc[0].__name__ if exc[0] else None}")
        return False


@contextlib.contextmanager
def recording(log):
    log.append("in")
    try:
        yield len(log)
    finally:
        log.append("out")


def user_context_managers(x, log):
    with Recording(log):
        y = x * 2
    with recording(log) as n:
        z = y + n
    return z


def user_context_manager_raises(x, log):
    with Recording(log):
        y = x * 2
        if y.sum() > 0:
            raise RuntimeError("positive")
    return y


def test_user_context_managers():
    # user context managers are not modelled: their blocks (here, everything) run as Python
    assert_matches_eager(user_context_managers, lambda i: call(vec(i), [i]), graphs=0)
    assert_matches_eager(user_context_manager_raises, lambda i: call(vec(i), []), calls=4, graphs=0)
