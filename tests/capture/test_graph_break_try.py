"""Graph breaks inside ``try``/``except``/``else``/``finally``: a break in the body with
the exception caught, in the handler, in ``else`` and ``finally`` (normal and exceptional
paths), a ``return`` through ``finally``, errors the graph raises inside ``try``,
``except ... as`` names, nested ``finally``, grad-mode and user ``with`` blocks inside
``try``."""
from __future__ import annotations

import io
import sys

import pytest
import torch

from .break_helpers import (PRINT_BREAK, assert_breaks, assert_matches_eager, bad_index, call, explain, leaf,
                            line_of, vec)

pytestmark = pytest.mark.usefixtures("fresh_cache")


# ---------------------------------------------------------------- try / except / finally

def break_in_try_caught(x, buf):
    try:
        y = x * 2
        print("try", file=buf)  # BREAK
        raise KeyError("k")
    except KeyError as err:
        y = x * 3
        print("caught", err, file=buf)
    return y + 1


def break_in_handler(x, buf):
    try:
        y = x * 2
        {}["missing"]
    except KeyError as err:
        print("caught", repr(err), file=buf)
        y = y + x.sum().item()
    return y


def break_in_finally(x, buf):
    try:
        y = x * 2
    finally:
        print("finally", file=buf)  # BREAK
        y = y + 1
    return y


def break_in_finally_while_raising(x, buf):
    try:
        y = x * 2
        raise RuntimeError(f"raised {y.shape}")
    finally:
        print("finally", file=buf)


def item_in_try(x):
    try:
        s = x.sum().item()  # BREAK
        y = x * s
    except ValueError:
        y = x
    return y


def graph_error_in_try(x, index, buf):
    try:
        y = x * 2
        print("try", file=buf)
        z = y.index_select(0, index)
    except IndexError:
        z = x - 1
    return z


def graph_error_in_try_without_break(x, index):
    try:
        z = x.index_select(0, index)
    except IndexError:
        z = x - 1
    return z


def break_in_try_else(x, buf):
    try:
        y = x * 2
    except ValueError:
        y = x
    else:
        print("else", file=buf)  # BREAK
        y = y + 1
    return y


def return_inside_try_finally(x, buf):
    try:
        y = x * 2
        print("try", file=buf)  # BREAK
        return y
    finally:
        print("finally", file=buf)


def loop_in_try(x, buf):
    try:
        for i in range(3):
            x = x + i
            print(i, file=buf)
            if i == 2:
                raise IndexError("i")
    except IndexError:
        x = x * 10
    return x


# graphs: the one before the break, and resume functions for normal exits (exits into a
# handler run as Python; so does a frame that breaks inside a handler); item_in_try's
# resume function is specialized on each value;
# loop_in_try is a loop in a try: Python, and its handler too; from 3.12 the compiler
# lays the ``raise`` out after the loop's backward jump, so the loop exits to it and
# that resume function (the raise caught by the frame's handler, then ``x * 10``) is a graph
@pytest.mark.parametrize("fn, make, graphs", [
    (break_in_try_caught, lambda i: call(vec(i), io.StringIO()), 1),
    # the KeyError of `{}["missing"]` is raised in the trace (#12: Mapping.get and `in` on
    # registries catch it), so the break is in a handler, which runs the frame as Python
    (break_in_handler, lambda i: call(vec(i), io.StringIO()), 0),
    (break_in_finally, lambda i: call(vec(i), io.StringIO()), 2),
    # the raise goes to the finally block in the trace, and a break in a handler runs the
    # frame as Python
    (break_in_finally_while_raising, lambda i: call(vec(i), io.StringIO()), 0),
    (item_in_try, lambda i: call(vec(i)), 4),
    (break_in_try_else, lambda i: call(vec(i), io.StringIO()), 2),
    (return_inside_try_finally, lambda i: call(vec(i), io.StringIO()), 1),
    (loop_in_try, lambda i: call(vec(i), io.StringIO()), 1 if sys.version_info >= (3, 12) else 0),
    (graph_error_in_try, lambda i: call(vec(i), bad_index(i), io.StringIO()), 2),
    (graph_error_in_try_without_break, lambda i: call(vec(i), bad_index(i)), 1),
], ids=lambda v: getattr(v, "__name__", str(v)))
def test_try_blocks(fn, make, graphs):
    assert_matches_eager(fn, make, calls=3, graphs=graphs)


def test_try_break_locations():
    for fn in (break_in_try_caught, break_in_finally):
        report = explain(fn, vec(0), io.StringIO())
        assert report.break_reasons[0].location == line_of(fn, "# BREAK")
        assert PRINT_BREAK in report.break_reasons[0].reason
        assert report.graph_count >= 1
    report = explain(item_in_try, vec(0))
    assert_breaks(report, graphs=2, breaks=[(line_of(item_in_try, "# BREAK"), "Tensor.item()")])


# ---------------------------------------------------------------- handlers, finally and grad-mode blocks together

def except_as_then_break(x, buf):
    try:
        raise ValueError("v")
    except ValueError as e:
        y = x * 2
        print("caught", e, file=buf)  # BREAK inside the handler
    try:
        e
    except NameError:
        print("e cleared", file=buf)
    return y


def try_finally_in_no_grad(x, buf):
    with torch.no_grad():
        try:
            y = x * 2
            print("body", torch.is_grad_enabled(), file=buf)  # BREAK
        finally:
            print("fin", torch.is_grad_enabled(), file=buf)  # BREAK
            y = y + 1
    print("after", torch.is_grad_enabled(), file=buf)
    return y


def grad_blocks_return_through_finally(x, buf):
    try:
        with torch.no_grad():
            y = x * 2
            print("in", torch.is_grad_enabled(), file=buf)  # BREAK
            with torch.enable_grad():
                z = x * 3
                print("in2", torch.is_grad_enabled(), file=buf)  # BREAK
                return y + z
    finally:
        print("fin", torch.is_grad_enabled(), file=buf)  # BREAK


def raising_break_in_try_in_no_grad(x, buf):
    with torch.no_grad():
        try:
            y = x * 2
            print("a", file=42)  # BREAK that raises AttributeError natively
        except AttributeError:
            print("caught", torch.is_grad_enabled(), file=buf)
            y = y + 1
    return y, torch.is_grad_enabled()


def loop_in_no_grad_in_try(x, n, buf):
    try:
        with torch.no_grad():
            for i in range(n):
                x = x + 1
                print(i, torch.is_grad_enabled(), file=buf)  # BREAK
                if i == 1:
                    raise KeyError(i)
    except KeyError as e:
        print("caught", e, torch.is_grad_enabled(), file=buf)
    return x, torch.is_grad_enabled()


def nested_finally(x, buf):
    try:
        try:
            y = x * 2
            print("inner", file=buf)  # BREAK
            raise KeyError("a")
        finally:
            print("inner fin", file=buf)
            y = y + 1
    except KeyError:
        print("outer caught", file=buf)
        y = y * 5
    finally:
        print("outer fin", file=buf)
    return y


class Recording:
    def __init__(self, buf):
        self.buf = buf

    def __enter__(self):
        print("enter", file=self.buf)
        return 5.0

    def __exit__(self, *exc):
        print("exit", exc[0], file=self.buf)
        return False


def user_with_in_try_finally(x, buf):
    try:
        with Recording(buf) as v:  # BREAK at BEFORE_WITH
            y = x * v
            print("body", file=buf)
            if y.sum() > 0:
                raise KeyError("pos")
    except KeyError as e:
        print("caught", e, file=buf)
        y = -x
    finally:
        print("fin", file=buf)
    return y


# graphs over three calls: exits into a handler run as Python (except_as_then_break
# raises first: nothing else is captured); Recording is a user context manager, not
# modelled: its block runs as Python
@pytest.mark.parametrize("fn, make, graphs", [
    (except_as_then_break, lambda i: call(vec(i), io.StringIO()), 0),
    (try_finally_in_no_grad, lambda i: call(vec(i).requires_grad_(), io.StringIO()), 2),
    (grad_blocks_return_through_finally, lambda i: call(leaf(i), io.StringIO()), 3),
    (raising_break_in_try_in_no_grad, lambda i: call(leaf(i), io.StringIO()), 1),
    # n = i + 2 is guarded: the graph before the loop, per call
    (loop_in_no_grad_in_try, lambda i: call(leaf(i), i + 2, io.StringIO()), 3),
    (nested_finally, lambda i: call(vec(i), io.StringIO()), 1),
    (user_with_in_try_finally, lambda i: call(vec(i), io.StringIO()), 0),
], ids=lambda v: getattr(v, "__name__", str(v)))
def test_handlers_finally_and_blocks(fn, make, graphs):
    assert_matches_eager(fn, make, graphs=graphs)
