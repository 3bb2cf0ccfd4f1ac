"""OrderedDict, defaultdict, Counter and deque made by the frame are modelled with their
type's behaviour and rebuilt with their type; dict equality uses the identity shortcut;
instances passed in from outside, and dict/list subclasses, break cleanly."""
import collections

import torch

from .helpers import check

x = torch.ones(2)


def test_ordered_dict():
    def fn(x):
        d = collections.OrderedDict(a=x, b=x + 1)
        d.move_to_end("a")
        d["c"] = x * 3
        d.move_to_end("c", last=False)
        k, v = d.popitem(last=False)
        same_order = collections.OrderedDict(a=1, b=2) == collections.OrderedDict(b=2, a=1)
        return d, k, v, list(d), same_order, d.copy()
    got = check(fn, x, graphs=1, breaks=0, fullgraph=True)
    assert type(got.value[0]) is collections.OrderedDict and type(got.value[5]) is collections.OrderedDict


def test_defaultdict_calls_its_factory_on_a_missing_key():
    def fn(x):
        d = collections.defaultdict(list)
        d["a"].append(x)
        d["a"].append(x + 1)
        d["b"]
        return d, d.default_factory, "c" in d, d.get("z"), len(d), x * 2
    got = check(fn, x, graphs=1, breaks=0, fullgraph=True)
    assert type(got.value[0]) is collections.defaultdict
    got.value[0]["new"].append(1)  # still a defaultdict with its factory


def test_counter_counts():
    def fn(x):
        c = collections.Counter("abca")
        c["a"] += 1
        c.update(["b", "z"])
        c.subtract({"z": 1})
        return c, c["missing"], "missing" in c, c.most_common(1), c.total(), x + 1
    got = check(fn, x, graphs=1, breaks=0, fullgraph=True)
    assert type(got.value[0]) is collections.Counter


def test_deque_with_maxlen():
    def fn(x):
        d = collections.deque([x, x + 1], maxlen=3)
        d.append(x * 2)
        d.appendleft(x * 3)
        d.extend([x * 4])
        d.rotate(1)
        first = d.popleft()
        return d, first, d[0], len(d), d.maxlen, x in d
    got = check(fn, x, graphs=1, breaks=0, fullgraph=True)
    assert type(got.value[0]) is collections.deque and got.value[0].maxlen == 3


def test_deque_errors_break_like_python_raises():
    def fn(x):
        d = collections.deque()
        return d.pop(), x
    got = check(fn, x, graphs=0)
    assert got.error is IndexError


def test_dict_equality_uses_identity_first():
    def fn(x):
        return {1: x} == {1: x}, {1: x} != {2: x}, {1: x} == {1: x, 2: 0}, x + 1
    check(fn, x, graphs=1, breaks=0, fullgraph=True)


class MyDict(dict):
    def __getitem__(self, key):
        return 42


class MyList(list):
    def __len__(self):
        return 0


def test_subclasses_and_outside_instances_break_cleanly():
    def fn(x, od):
        made = MyDict(a=1)
        lst = MyList([1, 2])
        return made["a"], len(lst), od["a"] + 1
    got = check(fn, x, collections.OrderedDict(a=x), graphs=1, fullgraph=False)
    assert got.value[:2] == (42, 0) and got.breaks
