"""Review probes: graph breaks at unusual stack layouts, exception paths, locals."""
from __future__ import annotations

import io

import pytest
import torch

import fastdynamo

from .break_helpers import assert_matches_eager, call, fresh_cache, vec

assert fresh_cache

pytest.importorskip("fastdynamo._native")


def deleted_param_read_after(x, buf):
    # BUG: the break is the LOAD_FAST of the deleted argument; the transformed frame
    # still holds the argument (nothing deletes it), so the native LOAD_FAST succeeds.
    y = x * 2
    del x
    return y + x  # eager: UnboundLocalError


def deleted_param_read_in_loop(x, buf):
    # BUG: same, the loop runs as Python in the transformed frame where x is still bound.
    y = x * 2
    del x
    for i in range(2):
        print(i, file=buf)  # BREAK: the loop runs as Python
        if i == 1:
            y = y + x  # eager: UnboundLocalError
    return y


def locals_in_loop(x, buf):
    # BUG: locals() in a region run natively shows the transformed frame's temporaries.
    y = x * 2
    for i in range(2):
        print(i, sorted(locals()), file=buf)  # BREAK: the loop runs as Python
    return y


def enumerate_list_grown_in_loop(x, buf):
    # BUG: enumerate/zip/map/reversed iterators are rebuilt as iter(tuple(snapshot)), so
    # the native loop does not see the list grow (CPython's iterators read it live).
    work = [1, 2]
    for i, v in enumerate(work):
        x = x + v
        print(i, v, file=buf)  # BREAK: the loop runs as Python
        if v == 1:
            work.append(3)
    return x


def dict_items_grown_in_loop(x, buf):
    # BUG: eager raises "dictionary changed size during iteration"; the rebuilt
    # iterator is a tuple snapshot, so the compiled frame returns.
    d = {"a": 1}
    for k, v in d.items():
        x = x + v
        print(k, file=buf)  # BREAK
        d["b"] = 2
    return x


def enumerate_traced_after_append(x):
    # BUG (translator, no break needed): enumerate() snapshots the list when made.
    a = [1, 2, 3]
    it = enumerate(a)
    next(it)
    a.append(4)
    return x + len(list(it))


def print_star_args(x, buf, *parts):
    y = x + 1
    print(*parts, y.shape, file=buf)  # BREAK at CALL_FUNCTION_EX
    return y * 2


def print_kw_in_call(x, buf):
    y = x + 1
    print("a", "b", sep="-", end="!\n", file=buf)  # BREAK at CALL with KW_NAMES
    return y * 2


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


def walrus_in_comprehension(x, buf):
    total = [(s := v * 2) for v in range(3)]
    y = x * s
    print(total, file=buf)  # BREAK
    return y + s


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


def and_or_break(x, buf):
    y = x + 1
    z = (x.sum() > 0) and (print("and", file=buf) or 5)
    return y, z


def break_in_subscript_key(x, table, buf):
    y = x + 1
    v = table[print("key", file=buf) or "a"]  # BREAK in a subscript expression
    return y * v


def unpack_from_call(x, buf):
    a, b = divmod(int(x.sum().item()), 3)  # BREAK
    return x * a + b


CASES = [
    (deleted_param_read_after, lambda i: call(vec(i), io.StringIO())),
    (deleted_param_read_in_loop, lambda i: call(vec(i), io.StringIO())),
    (enumerate_list_grown_in_loop, lambda i: call(vec(i), io.StringIO())),
    (dict_items_grown_in_loop, lambda i: call(vec(i), io.StringIO())),
    (enumerate_traced_after_append, lambda i: call(vec(i))),
    (locals_in_loop, lambda i: call(vec(i), io.StringIO())),
    (print_star_args, lambda i: call(vec(i), io.StringIO(), "p", i)),
    (print_kw_in_call, lambda i: call(vec(i), io.StringIO())),
    (except_as_then_break, lambda i: call(vec(i), io.StringIO())),
    (walrus_in_comprehension, lambda i: call(vec(i), io.StringIO())),
    (for_else_with_break_and_print, lambda i: call(vec(i), i + 1, io.StringIO())),
    (nested_loops_continue, lambda i: call(vec(i), io.StringIO())),
    (return_in_loop_after_break, lambda i: call(vec(i), io.StringIO())),
    (try_finally_in_no_grad, lambda i: call(vec(i).requires_grad_(), io.StringIO())),
    (and_or_break, lambda i: call(vec(i), io.StringIO())),
    (break_in_subscript_key, lambda i: call(vec(i), {"a": 2.0}, io.StringIO())),
    (unpack_from_call, lambda i: call(vec(i), io.StringIO())),
]


@pytest.mark.parametrize("fn, make", CASES, ids=[c[0].__name__ for c in CASES])
def test_matches_eager(fn, make):
    assert_matches_eager(fn, make)


# ---------------------------------------------------------------- the fallback re-run

def _rerun_state(fn, make):
    """Per call (good index, then out-of-range index): outcome, next random number,
    tensor arguments after the call."""
    states = []
    for index in ([0], [99]):
        torch.manual_seed(0)
        args = make(index)
        try:
            fn(*args)
            outcome = "ok"
        except IndexError:
            outcome = "IndexError"
        states.append((outcome, torch.rand(1).item(), [a.clone() for a in args]))
    return states


def _assert_rerun_matches(fn, make):
    eager = _rerun_state(fn, make)
    compiled = _rerun_state(fastdynamo.compile(fn, backend="eager"), make)
    for i, ((eo, er, ea), (co, cr, ca)) in enumerate(zip(eager, compiled)):
        assert co == eo, f"call {i}: {co} != {eo}"
        assert cr == er, f"call {i}: random stream differs after the call ({cr} != {er})"
        for k, (e, c) in enumerate(zip(ea, ca)):
            torch.testing.assert_close(c, e, msg=f"call {i}: argument {k} after the call")


def batch_norm_then_gather(x, running_mean, running_var, index):
    y = torch.nn.functional.batch_norm(x, running_mean, running_var, training=True, momentum=0.5)
    return y.index_select(0, index)  # out of range: only the real data shows it


def sdpa_dropout_then_gather(q, index):
    y = torch.nn.functional.scaled_dot_product_attention(q, q, q, dropout_p=0.5)
    return y.sum(-1).reshape(-1).index_select(0, index)


def fractional_pool_then_gather(x, index):
    y = torch.nn.functional.fractional_max_pool2d(x, 2, output_size=(2, 2))
    return y.reshape(-1).index_select(0, index)


def test_fallback_rerun_batch_norm_running_stats_updated_once():
    # BUG: batch_norm(training=True) updates running_mean/var in place inside the ATen op;
    # the graph is not seen as writing its inputs, so the fallback re-runs it.
    _assert_rerun_matches(batch_norm_then_gather, lambda index: (
        torch.randn(4, 3), torch.zeros(3), torch.ones(3), torch.tensor(index)))


@pytest.mark.parametrize("fn, make", [
    (sdpa_dropout_then_gather, lambda index: (torch.randn(2, 4, 8), torch.tensor(index))),
    (fractional_pool_then_gather, lambda index: (torch.randn(1, 1, 5, 5), torch.tensor(index))),
], ids=["sdpa_dropout", "fractional_max_pool2d"])
def test_fallback_rerun_draws_random_numbers_once(fn, make):
    # BUG: can_rerun's name regex misses random ops (dropout_p of SDPA, fractional pooling).
    _assert_rerun_matches(fn, make)
