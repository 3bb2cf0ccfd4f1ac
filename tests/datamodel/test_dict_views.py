"""Dict views are live (issue #10, class 1): ``len``/``in``/iteration see later changes
of the dict, and a view that leaves the frame is a real view of the rebuilt dict."""
import torch

from .helpers import check, run

x = torch.ones(2)
y = torch.full((2,), 2.0)


def test_keys_see_later_insertions():
    def fn(x, y):
        d = {1: 5}
        keys, values, items = d.keys(), d.values(), d.items()
        d[4] = y
        # (4, y): found by identity, Tensor.__eq__ is not called
        return 4 in keys, len(values), (4, y) in items, (1, 5) in items, (1, 6) in items, 5 in values, x + 1
    check(fn, x, y, graphs=1, breaks=0, fullgraph=True)


def test_comparing_tensors_by_value_in_a_view_is_a_break():
    def fn(x, y):
        d = {1: x}
        return y in d.values()  # bool(x == y): RuntimeError for two elements
    got = check(fn, x, y, graphs=0)
    assert got.error is RuntimeError


def test_returned_views_have_view_types_and_stay_live():
    def fn(x):
        d = {1: x + 1}
        return d.items(), d.keys(), d.values(), d
    got = check(fn, x, graphs=1, fullgraph=True)
    items, keys, values, d = got.value
    assert type(items) is type({}.items()) and type(keys) is type({}.keys())
    d[7] = 0
    assert 7 in keys and len(values) == 2 and len(items) == 2  # views of the returned dict


def test_view_of_an_argument_dict():
    def fn(d, x):
        d["b"] = x * 2
        return d.keys(), len(d.values()), d["b"] + 1
    d = {"a": x}
    got = run(fn, d, x)
    assert got.graphs == 1 and list(got.value[0]) == ["a", "b"]
    assert got.value[0] == d.keys() and type(got.value[0]) is type(d.keys())


def test_iteration_sees_replaced_values():
    def fn(x):
        d = {"a": x, "b": x + 1}
        out = []
        for _k, v in d.items():  # noqa: PERF102 - the construct under test
            d["b"] = v * 10  # a value replaced: CPython's iterator sees it
            out.append(v)
        return out
    check(fn, x, graphs=1, breaks=0, fullgraph=True)


def test_inserting_while_iterating_breaks_like_python_raises():
    def fn(x):
        d = {"a": x}
        for k in d:
            d[k + "x"] = x  # RuntimeError in Python
        return d
    got = check(fn, x, graphs=0)
    assert got.error is RuntimeError


def test_key_set_algebra_and_comparisons():
    def fn(x):
        d = {1: x, 2: x, 3: x}
        e = {2: 0, 5: 0}
        return (d.keys() & e.keys(), d.keys() | {9}, d.keys() - e, d.keys() ^ e.keys(),
                d.keys() == {1, 2, 3}, d.keys().isdisjoint(e), x * 2)
    check(fn, x, graphs=1, fullgraph=True)


def test_values_views_compare_by_identity():
    def fn(x):
        d = {1: 1}
        v = d.values()
        return v == v, d.values() == d.values(), x + 1  # noqa: PLR0124 - the construct under test
    check(fn, x, graphs=1, fullgraph=True)


def test_view_iterator_left_at_a_graph_break_keeps_its_position():
    def fn(x):
        d = {"a": 1, "b": 2, "c": 3}
        it = iter(d.items())
        first = next(it)
        print("break")  # graph break: `it` is rebuilt as a real dict iterator
        return first, list(it), type(it).__name__, x + 1
    # the resume function cannot read a real dict iterator's position: it runs as Python
    check(fn, x, graphs=1, breaks=2)


def test_len_and_bool_of_views_of_a_mutated_dict():
    def fn(x):
        d = {}
        k = d.keys()
        empty = bool(k)
        d.update(a=x)
        d.setdefault("b", x)
        d.pop("a")
        return empty, bool(k), len(k), list(k), x - 1
    check(fn, x, graphs=1, fullgraph=True)
