"""``map``/``filter``/``zip``/``enumerate`` are lazy (issue #10, class 2): functions run
when an item is pulled, ``zip`` stops at the first exhausted input, and an iterator that
leaves the frame is rebuilt lazily (never materialised)."""
import torch

from .helpers import check

x = torch.ones(2)


def test_extend_with_a_map_that_reads_the_list():
    def fn(x):
        lst = [1, 2]

        def f(v):
            return len(lst) + v
        lst.extend(map(f, [10, 20]))  # appended one at a time: f sees the list grow
        return lst, x + 1
    check(fn, x, graphs=1, breaks=0, fullgraph=True)


def test_zip_pulls_only_what_it_needs():
    def fn(x):
        seen = []

        def f(v):
            seen.append(v)
            return v
        out = list(zip([1], map(f, [1, 2, 3]), strict=False))
        return out, seen, x * 2
    check(fn, x, graphs=1, fullgraph=True)


def test_zip_stops_at_the_first_exhausted_input_left_to_right():
    def fn(x):
        seen = []

        def f(v):
            seen.append(v)
            return v
        it = map(f, [1, 2, 3])
        pairs = list(zip(it, [7], strict=False))  # pulls 1, 2 from `it`: 2 is lost, as in CPython
        return pairs, list(it), seen, x + 1
    check(fn, x, graphs=1, fullgraph=True)


def test_map_function_runs_when_pulled():
    def fn(x):
        log = []

        def f(v):
            log.append(("f", v))
            return v * x
        m = map(f, [1, 2])
        log.append("made")
        first = next(m)
        log.append("between")
        rest = list(m)
        return log, first, rest
    check(fn, x, graphs=1, fullgraph=True)


def test_filter_any_and_in_stop_early():
    def fn(x):
        calls = []

        def pred(v):
            calls.append(v)
            return v > 1
        found = any(map(pred, [0, 2, 5]))
        member = 2 in map(lambda v: calls.append(-v) or v, [1, 2, 3])  # noqa: C417 - the construct under test
        kept = list(filter(pred, [3, 0, 4]))
        return found, member, kept, calls, x + 1
    check(fn, x, graphs=1, fullgraph=True)


def test_enumerate_and_strict_zip():
    def fn(x):
        out = [(i, v * x) for i, v in enumerate([1, 2], start=5)]
        pairs = list(zip([1, 2], [3, 4], strict=True))
        return out, pairs
    check(fn, x, graphs=1, fullgraph=True)


def test_strict_zip_of_unequal_lengths_raises_as_in_python():
    def fn(x):
        return list(zip([1, 2], [3], strict=True)), x + 1
    got = check(fn, x, graphs=0)
    assert got.error is ValueError


def test_returned_lazy_iterators_keep_their_types_and_laziness():
    calls = []

    def f(v):
        calls.append(v)
        return v * 2

    def fn(x):
        m = map(f, [1, 2, 3])
        next(m)
        return m, filter(None, [0, 1]), zip([1, 2], "ab", strict=False), enumerate([5], 3), x + 1
    got = check(fn, x, graphs=1, fullgraph=True)
    assert [type(v) for v in got.value[:4]] == [map, filter, zip, enumerate]


def test_returned_map_does_not_run_its_function_early():
    calls = []

    def f(v):
        calls.append(v)
        return v

    def fn(x):
        return map(f, [1, 2]), x + 1
    calls.clear()
    from .helpers import run
    got = run(fn, x)
    assert got.graphs == 1 and calls == []
    assert list(got.value[0]) == [1, 2] and calls == [1, 2]


def test_lazy_map_with_nonlocal_effects_across_a_graph_break():
    def fn(x):
        order = []

        def f(v):
            order.append(v)
            return v + 1
        m = map(f, [1, 2, 3])
        first = next(m)
        order.append("before break")
        print("break")  # m is rebuilt lazily over the rest of the list
        order.append("after break")
        return first, list(m), order, x + 1
    # the resume function receives a real map object (its parts cannot be guarded):
    # it runs as Python, over the rebuilt iterator, in eager's order
    check(fn, x, graphs=1, breaks=2)


def test_map_over_an_iterator_that_cannot_be_rebuilt_is_unsupported_not_materialised():
    def fn(x):
        m = map(abs, reversed([1, -2, 3]))
        next(m)
        return m, x + 1
    got = check(fn, x, graphs=0)
    assert "cannot rebuild" in str(got.breaks[0]) or "lazy" in str(got.breaks[0])
