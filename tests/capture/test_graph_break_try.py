"""Graph breaks inside ``try``/``except``/``else``/``finally``: a break in the body with
the exception caught, in the handler, in ``else`` and ``finally`` (normal and exceptional
paths), a ``return`` through ``finally``, errors the graph raises inside ``try``."""
from __future__ import annotations

import io

import pytest

from .break_helpers import (PRINT_BREAK, assert_breaks, assert_matches_eager, bad_index, call, explain,
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
# handler run as Python); item_in_try's resume function is specialized on each value;
# loop_in_try is a loop in a try: Python, and its handler too
@pytest.mark.parametrize("fn, make, graphs", [
    (break_in_try_caught, lambda i: call(vec(i), io.StringIO()), 1),
    (break_in_handler, lambda i: call(vec(i), io.StringIO()), 1),
    (break_in_finally, lambda i: call(vec(i), io.StringIO()), 2),
    (break_in_finally_while_raising, lambda i: call(vec(i), io.StringIO()), 1),
    (item_in_try, lambda i: call(vec(i)), 4),
    (break_in_try_else, lambda i: call(vec(i), io.StringIO()), 2),
    (return_inside_try_finally, lambda i: call(vec(i), io.StringIO()), 1),
    (loop_in_try, lambda i: call(vec(i), io.StringIO()), 0),
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
