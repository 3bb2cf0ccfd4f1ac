"""Property test (issues #10, #12): generated programs that mutate an object through one
argument and read it through another (an attribute, a list, a dict, an attribute of an
attribute) or compare two arguments with ``is`` (objects, lists, dicts, tuples of
constants), called in a generated sequence in which each pair is one object or two
distinct equal objects. The trace relies on which arguments are one object, so the
native relation guards (``same_object``, ``distinct_objects``) or identity guards must
send a call whose aliasing changed to another entry: every call gives eager's value,
type, exception and argument state; the first call compiles, a configuration repeated
at once (or, without breaks, seen before) adds no graph, and a program made only of
statements captured whole runs under ``fullgraph=True`` with at most one graph per call
and no break. ``--hypothesis-profile=long`` runs thousands."""
from __future__ import annotations

import torch
from examples_budget import share_of_profile
from hypothesis import given
from hypothesis import strategies as st

import fastdynamo

from .call_sequences import assert_graph_counts, run_sequence, with_repeats
from .object_helpers import build_program, programs_with_break_tags


class Box:
    def __init__(self):
        self.n, self.t, self.items = 1, torch.ones(3), []


class Holder:
    def __init__(self, box):
        self.box = box


class Objects:
    """The world of one run: pairs of distinct equal objects (``p``/``q``, lists, dicts)
    and holders of ``p`` and of ``q``."""

    def __init__(self):
        self.p, self.q = Box(), Box()
        self.lists = [1, 2], [1, 2]
        self.dicts = {"k": 1}, {"k": 1}
        self.tuples = (1, 2), tuple([1, 2])  # constants, guarded by value
        self.holders = Holder(self.p), Holder(self.q)

    def reset(self):
        for box in (self.p, self.q):
            box.n, box.t = 1, torch.ones(3)
            box.items.clear()
        for items in self.lists:
            items[:] = [1, 2]
        for d in self.dicts:
            d.clear()
            d["k"] = 1
        self.holders[0].box, self.holders[1].box = self.p, self.q

    def state(self):
        boxes = [holder.box is self.p for holder in self.holders]
        return [vars(self.p), vars(self.q), *self.lists, *self.dicts, boxes]


# (statement, the pairs whose aliasing breaks it). Over: `a` (the running tensor), `p`
# and `q` (Boxes, maybe one object), `la`/`lb` (lists), `da`/`db` (dicts), `h` (a Holder
# whose box is p or q). {c}: 1..3. A list or dict mutated and reached through two
# arguments is not modelled (a break).
STATEMENTS = [
    ("p.n = p.n + {c}\na = a + q.n", frozenset()),
    ("q.n += {c}\np.n += 1\na = a + p.n * q.n", frozenset()),
    ("q.t = a * {c}\na = a + p.t", frozenset()),
    ("p.t.add_({c})\na = a + q.t", frozenset()),
    ("p.items.append({c})\na = a + len(q.items)", frozenset({"box"})),
    ("la.append({c})\na = a + len(lb) + lb[-1]", frozenset({"list"})),
    ("lb[0] = lb[0] + {c}\na = a + la[0]", frozenset({"list"})),
    ("la.extend(lb)\na = a + len(la)", frozenset({"list"})),
    ("da['k'] = da['k'] + {c}\na = a + db['k']", frozenset({"dict"})),
    ("db['new'] = {c}\na = a + len(da) + da.get('new', 0)", frozenset({"dict"})),
    ("h.box.n = h.box.n + {c}\na = a + p.n - q.n", frozenset()),
    ("h.box = q\nh.box.n += {c}\na = a + p.n", frozenset()),
    ("a = a + (id(p) == id(q)) * {c} + (id(la) == id(lb))", frozenset()),
    ("a = a + (p is q) * {c} + (h.box is not q)", frozenset()),
    ("a = a + (la is lb) + (da is not db) * {c}", frozenset()),
    ("a = a + (ta is tb) * {c} + (ta == tb)", frozenset()),
    ("if p is q:\n    a = a - {c}\nq.n = 7\na = a + p.n", frozenset()),
]
RETURNS = ["return a", "return a, p.n, q.n, la, db", "return [a, h.box.n, len(lb)]", "return a, tb"]


# a configuration: whether q is p, lb is la, db is da, which holder h is, whether tb is ta
configurations = st.tuples(st.booleans(), st.booleans(), st.booleans(), st.integers(0, 1), st.booleans())


def _aliased_pairs(sequence):
    pairs = set()
    for same_box, same_list, same_dict, _, _ in sequence:
        pairs |= {name for name, same in (("box", same_box), ("list", same_list), ("dict", same_dict)) if same}
    return pairs


def _arguments(world, configuration, call):
    same_box, same_list, same_dict, holder, same_tuple = configuration
    x = torch.randn(3, generator=torch.Generator().manual_seed(call))
    la, da, ta = world.lists[0], world.dicts[0], world.tuples[0]
    return (x, world.p, world.p if same_box else world.q, la, la if same_list else world.lists[1],
            da, da if same_dict else world.dicts[1], world.holders[holder], ta,
            ta if same_tuple else world.tuples[1])


@share_of_profile(0.25)  # an example is up to five calls, most of them compiling
@given(programs_with_break_tags("x, p, q, la, lb, da, db, h, ta, tb", STATEMENTS, RETURNS),
       st.lists(configurations, min_size=1, max_size=4))
def test_generated_aliasing_sequence_matches_eager(program, sequence):
    source, breaks_when = program
    whole = not breaks_when & _aliased_pairs(sequence)
    sequence = with_repeats(sequence)
    fastdynamo.reset()
    prog = build_program(source, {"torch": torch}, "<generated-aliasing>")
    run = run_sequence(prog, sequence, Objects, _arguments, fullgraph=whole, source=source)
    assert_graph_counts(run, sequence, fullgraph=whole, source=source)
    fastdynamo.reset()
