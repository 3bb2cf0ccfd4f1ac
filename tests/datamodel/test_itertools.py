"""itertools iterators (lazy, CPython's pull order and state), functools.reduce,
dict.fromkeys and sys.intern, in one graph; returned iterators keep their types."""
import functools
import itertools
import operator
import sys

import torch

from .helpers import check

x = torch.ones(2)


def test_chain_islice_count_repeat():
    def fn(x):
        return (list(itertools.chain([x], (x * 2,), [])), list(itertools.chain.from_iterable([[1], [2, 3]])),
                list(itertools.islice([x, x + 1, x + 2, x + 3], 1, None, 2)),
                [x * i for i, _ in zip(itertools.count(3, 2), range(2))],
                list(itertools.repeat(x, 2)))
    check(fn, x, graphs=1, breaks=0, fullgraph=True)


def test_product_starmap_accumulate_zip_longest():
    def fn(x):
        return ([a * b for a, b in itertools.product([1, 2], [x])],
                list(itertools.product("ab", repeat=2)),
                list(itertools.starmap(torch.add, [(x, x), (x, 1)])),
                list(itertools.accumulate([x, x, x])), list(itertools.accumulate([1, 2, 3], operator.mul)),
                list(itertools.accumulate([1, 2], initial=10)),
                list(itertools.zip_longest([x], [1, 2], fillvalue=0)))
    check(fn, x, graphs=1, breaks=0, fullgraph=True)


def test_islice_takes_no_more_than_it_yields():
    def fn(x):
        seen = []
        it = iter([1, 2, 3, 4])
        first_two = list(itertools.islice(map(lambda v: seen.append(v) or v, it), 2))  # noqa: C417 - the construct under test
        return first_two, seen, list(it), x + 1
    check(fn, x, graphs=1, fullgraph=True)


def test_reduce_fromkeys_intern():
    def fn(x):
        total = functools.reduce(lambda a, b: a * 2 + b, [x, x, x])
        shared = dict.fromkeys(["a", "b"], [])  # noqa: RUF024 - the construct under test
        shared["a"].append(1)  # one list for every key, as in Python
        return total, shared, functools.reduce(operator.add, [], 5), sys.intern("name") + "!"
    check(fn, x, graphs=1, breaks=0, fullgraph=True)


def test_reduce_of_nothing_raises_as_in_python():
    def fn(x):
        return functools.reduce(operator.add, []), x
    got = check(fn, x, graphs=0)
    assert got.error is TypeError


def test_returned_itertools_iterators_keep_type_and_state():
    def fn(x):
        c = itertools.count(5)
        next(c)
        s = itertools.islice([1, 2, 3, 4, 5], 1, 4)
        next(s)
        p = itertools.product([1, 2], [3])
        next(p)
        ch = itertools.chain([1, 2], [3])
        next(ch)
        return c, s, p, ch, itertools.repeat("r", 2), x + 1
    got = check(fn, x, graphs=1, fullgraph=True)
    assert [type(v) for v in got.value[:5]] == [itertools.count, itertools.islice, itertools.product,
                                                itertools.chain, itertools.repeat]


def test_bad_arguments_break_like_python_raises():
    def fn(x):
        return list(itertools.islice([1], -1)), x
    got = check(fn, x, graphs=0)
    assert got.error is ValueError
