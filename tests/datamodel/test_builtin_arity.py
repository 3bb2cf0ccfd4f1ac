"""Modelled builtin methods check their arguments as CPython does (issue #10, class 7):
a call Python rejects with TypeError breaks the graph, and Python raises."""
import pytest
import torch

from fastdynamo.capture.variables.arity import FUNCTIONS, METHODS

from .helpers import check

x = torch.ones(2)

CALLS = {
    "dict.update two positionals": lambda x: ({}.update({}, {}), x + 1),
    "dict.get keyword": lambda x: ({}.get("a", default=1), x + 1),
    "dict.pop no argument": lambda x: ({"a": 1}.pop(), x + 1),
    "dict.keys argument": lambda x: ({}.keys(1), x + 1),
    "dict.setdefault three": lambda x: ({}.setdefault(1, 2, 3), x + 1),
    "list.append two": lambda x: ([].append(1, 2), x + 1),
    "list.insert one": lambda x: ([].insert(0), x + 1),
    "list.extend keyword": lambda x: ([].extend(iterable=[1]), x + 1),
    "list.copy argument": lambda x: ([x].copy(1), x + 1),
    "tuple.count none": lambda x: ((x,).count(), x + 1),
    "len two": lambda x: (len([1], [2]), x + 1),
    "len keyword": lambda x: (len(obj=[1]), x + 1),
    "next three": lambda x: (next(iter([1]), 0, 0), x + 1),
    "map one": lambda x: (list(map(abs)), x + 1),
    "filter three": lambda x: (list(filter(None, [1], [2])), x + 1),
    "zip keyword": lambda x: (list(zip([1], shortest=True)), x + 1),
    "sorted two positionals": lambda x: (sorted([2, 1], None), x + 1),
    "enumerate keyword": lambda x: (list(enumerate([1], begin=1)), x + 1),
    "dict view len argument": lambda x: ({1: 2}.keys().__len__(1), x + 1),
}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_a_call_python_rejects_breaks_and_raises(name):
    got = check(CALLS[name], x, graphs=0, fullgraph=False)
    assert got.error is TypeError


def test_calls_python_accepts_stay_in_one_graph():
    def fn(x):
        d = {"a": 1}
        d.update({"b": 2}, c=3)
        d.update([("e", 4)])
        d.update()
        lst = [x]
        lst.insert(0, 1)
        lst.sort(key=lambda v: 0) if False else None
        return (d, d.get("a"), d.pop("z", 0), lst, list(enumerate(iterable=[1], start=2)),
                sorted([3, 1], reverse=True), next(iter([]), 5), x + 1)
    check(fn, x, graphs=1, breaks=0, fullgraph=True)


def test_every_table_row_is_well_formed():
    for table in [*METHODS.values(), FUNCTIONS]:
        for low, high, keywords in table.values():
            assert low >= 0 and (high is None or high >= low) and isinstance(keywords, frozenset)
