"""The state around a graph break: nn.Module methods (attributes, super(), library
modules), signatures (*args, **kwargs, keyword-only, defaults), closures, recursion,
mutations of Python objects the trace records and replays, the locals, containers
and iterators rebuilt before the break, deleted arguments, and frames that read their
locals by name (not split: Python). Compiled against eager: results, printed text
and the arguments' state after the call."""
from __future__ import annotations

import io
import sys
import types

import pytest
import torch

import fastdynamo

from .break_helpers import (PRINT_BREAK, assert_breaks, assert_matches_eager, bad_index, call, compile_recorded,
                            explain, leaf, line_of, vec)
from .test_graph_breaks import Holder, item_then_use

pytestmark = pytest.mark.usefixtures("fresh_cache")


# ---------------------------------------------------------------- modules

class Gate(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)
        self.calls = 0
        self.log = io.StringIO()

    def forward(self, x):
        y = self.lin(x)
        self.calls += 1
        if y.sum() > 0:  # BREAK branch
            y = y.relu()
        return self.scaled(y)  # CALL

    def scaled(self, y):
        z = y * 2
        print("scaled", self.calls, file=self.log)  # BREAK print
        return z - 1


def test_module_method_breaks():
    torch.manual_seed(0)
    eager, model = Gate(), Gate()
    model.load_state_dict(eager.state_dict())
    compiled = fastdynamo.compile(model)
    gen = torch.Generator().manual_seed(1)
    for i in range(4):
        x = torch.randn(4, 3, generator=gen) * (1 if i % 2 == 0 else -5)
        expected, actual = eager(x), compiled(x)
        torch.testing.assert_close(actual, expected)
        assert actual.requires_grad
        expected.sum().backward()
        actual.sum().backward()
        torch.testing.assert_close(model.lin.weight.grad, eager.lin.weight.grad)
    assert model.calls == eager.calls == 4
    assert model.log.getvalue() == eager.log.getvalue()
    report = explain(model, torch.ones(4, 3))
    locations = [b.location for b in report.break_reasons]
    assert locations[:2] == [line_of(Gate.forward, "# BREAK branch"), line_of(Gate.scaled, "# BREAK print")], locations
    inlined = report.break_reasons[1]
    assert f"{inlined.where[0][0]}:{inlined.where[0][1]}" == line_of(Gate.forward, "# CALL")


class AdaptiveHead(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 8)
        self.head = torch.nn.AdaptiveLogSoftmaxWithLoss(8, 10, cutoffs=[4])

    def forward(self, x, target):
        y = self.lin(x)
        out = self.head(y, target)  # BREAK
        return out.output, out.loss * 2


def test_break_inside_library_module_is_reported_at_user_line():
    # AdaptiveLogSoftmaxWithLoss calls nonzero() inside torch.nn: the break is reported
    # at the user's call; the namedtuple it returns is built by Python code torch runs
    # (collections' generated __new__), which is no break of the user's.
    torch.manual_seed(0)
    eager, model = AdaptiveHead(), AdaptiveHead()
    model.load_state_dict(eager.state_dict())
    compiled = fastdynamo.compile(model)
    gen = torch.Generator().manual_seed(2)
    target = torch.tensor([0, 1, 5, 7, 9, 2])
    for _ in range(3):
        x = torch.randn(6, 3, generator=gen)
        for actual, expected in zip(compiled(x, target), eager(x, target)):
            torch.testing.assert_close(actual, expected)
    report = explain(model, torch.randn(6, 3), target)
    brk = report.break_reasons[0]
    assert brk.location == line_of(AdaptiveHead.forward, "# BREAK")
    assert brk.where[-1][0].endswith("adaptive.py")
    assert [b.location for b in report.break_reasons] == [brk.location], [str(b) for b in report.break_reasons]


def test_grad_and_no_grad_calls_share_one_compiled_function():
    compiled, recorder = compile_recorded(item_then_use, backend="triton")
    for i in range(4):
        with torch.set_grad_enabled(i % 2 == 0):
            # each grad mode compiles the frame and its resume function once, then hits
            assert_matches_eager(item_then_use, lambda _: call(leaf(0)), calls=1, compiled=compiled,
                                 recorder=recorder, graphs=2 if i < 2 else 0)


class Doubling(torch.nn.Module):
    def forward(self, x):
        return x * 2


class PrintsThenSuper(Doubling):
    def forward(self, x, buf):
        print("child", file=buf)  # BREAK
        return super().forward(x) + 1


class SuperThenPrints(Doubling):
    def forward(self, x, buf):
        y = super().forward(x)
        print("child", file=buf)
        return super().forward(y) + 1


@pytest.mark.parametrize("cls, graphs", [(PrintsThenSuper, 1), (SuperThenPrints, 2)],
                         ids=["PrintsThenSuper", "SuperThenPrints"])
def test_zero_argument_super_after_break(cls, graphs):
    # super() reads __class__ and the frame's first argument: in a resume function the
    # first argument must still be self. (Each resume function breaks again at super(),
    # so only the frames after that capture.)
    model = cls()
    compiled, recorder = compile_recorded(model, backend="triton")
    assert_matches_eager(model.forward, lambda i: call(vec(i), io.StringIO()), compiled=compiled,
                         recorder=recorder, graphs=graphs)


# ---------------------------------------------------------------- signatures and closures

def many_parameters(x, *rest, scale=2, offset=1.0, **options):
    y = x * scale
    print(len(rest), sorted(options), file=options["buf"])  # BREAK
    for extra in rest:
        y = y + extra
    return y * offset, options.get("tag", "none"), rest


def test_varargs_kwargs_kwonly_defaults():
    def make(i):
        extras = tuple(vec(j) for j in range(i))
        if i == 1:
            return call(vec(i), *extras, buf=io.StringIO())
        return call(vec(i), *extras, scale=i, offset=0.5, buf=io.StringIO(), tag=f"t{i}")
    # every call has another signature: the frame and its resume function, four times
    assert_matches_eager(many_parameters, make, calls=4, graphs=8)


def positional_defaults(x, y=None, factor=3, buf=None):
    z = x * factor
    print("defaults", y is None, file=buf)  # BREAK
    return z if y is None else z + y


def test_defaults_filled_and_overridden():
    # y given: the frame and its resume function; y None: the frame again, and a resume
    # function with nothing to compute, which marks the resume code SKIP (so later calls
    # with y run it as Python: 3, not 4)
    assert_matches_eager(positional_defaults, lambda i: call(vec(i), buf=io.StringIO()) if i % 2 else
                         call(vec(i), vec(i + 1), 5, io.StringIO()), calls=4, graphs=3)


def make_closure():
    factor = torch.tensor(5.0)
    offset = 1

    def closed(x, buf):
        y = x * factor
        print("offset", offset, file=buf)  # BREAK
        return y + offset

    def set_offset(value):
        nonlocal offset
        offset = value

    return closed, set_offset


def test_closure_free_variables_across_breaks():
    closed, set_offset = make_closure()
    compiled, recorder = compile_recorded(closed, backend="triton")
    # the offset is guarded: each new value compiles the frame and its resume function
    for value, graphs in ((1, 2), (7, 2), (7, 0), (2, 2)):
        set_offset(value)
        assert_matches_eager(closed, lambda i: call(vec(i), io.StringIO()), calls=1, compiled=compiled,
                             recorder=recorder, graphs=graphs)
    report = explain(closed, vec(0), io.StringIO())
    assert_breaks(report, graphs=2, breaks=[(line_of(closed, "# BREAK"), PRINT_BREAK)])


def captured_by_closure(x, buf):
    y = x * 2
    print("cell", file=buf)  # BREAK
    return (lambda: y + 1)()


def test_cell_variables_across_break():
    # y is a cell (the lambda captures it): the resume function receives the frame's cells
    assert_matches_eager(captured_by_closure, lambda i: call(vec(i), io.StringIO()), graphs=2)
    report = explain(captured_by_closure, vec(0), io.StringIO())
    assert report.break_reasons[0].location == line_of(captured_by_closure, "# BREAK")


def recursive(x, n, buf):
    if n == 0:
        return x
    print("depth", n, file=buf)  # BREAK
    return recursive(x * 2, n - 1, buf)


def test_recursive_function_with_break():
    # the recursive calls are frames of their own; the depth (an int argument) is guarded
    # until it changes, then a symbol (automatic dynamic): two entries per code
    assert_matches_eager(recursive, lambda i: call(vec(i), 3 + i, io.StringIO()), graphs=3)


# ---------------------------------------------------------------- mutations of Python objects

def mutate_object_and_list(x, obj, items):
    obj.n += 1
    items.append(x.sum().item())  # BREAK
    obj.t = x * obj.n
    return x + obj.n, len(items)


def mutate_dict(x, table):
    y = x * 2
    table["sum"] = y.sum().item()  # BREAK
    table.setdefault("calls", 0)
    table["calls"] += 1
    return y + table["calls"]


def counter(n):
    obj = Holder()
    obj.n = n
    return obj


def test_mutations_of_python_objects():
    # The store to obj.n before the break is replayed before it; .item() breaks.
    # obj.n and the list's items are guarded values: every call compiles again (the
    # frame and its resume function; a SimpleNamespace's attribute store breaks too, so
    # its calls compile three resume functions each, an int argument of one of them
    # becoming a symbol once it changed (automatic dynamic); from 3.13 SimpleNamespace
    # inherits object's __getattribute__ and __setattr__, so it is an ordinary object there)
    assert_matches_eager(mutate_object_and_list, lambda i: call(vec(i), counter(i), [float(i)]), calls=4,
                         graphs=8)
    namespace_graphs = 8 if types.SimpleNamespace.__setattr__ is object.__setattr__ else 11
    assert_matches_eager(mutate_object_and_list,
                         lambda i: call(vec(i), types.SimpleNamespace(n=i), [float(i)]), calls=4,
                         graphs=namespace_graphs)
    assert_matches_eager(mutate_dict, lambda i: call(vec(i), {"calls": i} if i % 2 else {}), calls=4, graphs=5)
    report = explain(mutate_object_and_list, vec(0), counter(0), [])
    brk = report.break_reasons[0]
    assert brk.location == line_of(mutate_object_and_list, "# BREAK") and "Tensor.item()" in brk.reason


def test_break_in_method_argument_is_one_break():
    # items.append(<break>): the resume function receives the bound list.append on its
    # stack; calling it there is the same list mutation the trace records, not a second break
    report = explain(mutate_object_and_list, vec(0), counter(0), [])
    assert_breaks(report, graphs=2, breaks=[(line_of(mutate_object_and_list, "# BREAK"), "Tensor.item()")])


def store_print_store(x, obj, items, buf):
    obj.n += 1
    items.append(obj.n)
    print(obj.n, len(items), file=buf)  # BREAK
    obj.n *= 3
    items.append(x.sum())
    return x + obj.n


def callee_stores_and_prints(t, obj, buf):
    obj.n += 10
    print("callee", obj.n, file=buf)  # BREAK
    return t * obj.n


def caller_stores(x, obj, buf):
    obj.n += 1
    y = callee_stores_and_prints(x, obj, buf)
    return y + obj.n


def stores_around_loop_break(x, obj, buf):
    obj.n += 1
    for i in range(3):
        obj.n += i
        print(obj.n, file=buf)  # BREAK
    return x * obj.n


def store_then_raise(x, obj):
    obj.n += 1
    y = x * 2
    if obj.n > 1:
        raise ValueError(f"n={obj.n}")  # BREAK
    return y


# graphs: obj.n is a guarded value, so each of the three calls compiles again
@pytest.mark.parametrize("fn, make, graphs", [
    (store_print_store, lambda i: call(vec(i), counter(i), [i], io.StringIO()), 3),
    (caller_stores, lambda i: call(vec(i), counter(i), io.StringIO()), 6),
    (stores_around_loop_break, lambda i: call(vec(i), counter(i), io.StringIO()), 3),
    (store_then_raise, lambda i: call(vec(i), counter(i)), 3),
], ids=lambda v: getattr(v, "__name__", str(v)))
def test_stores_before_a_break_are_seen_by_it(fn, make, graphs):
    # recorded stores are replayed before the native region runs
    assert_matches_eager(fn, make, calls=3, graphs=graphs)


def store_then_graph_error(x, index, obj):
    obj.n += 1
    return x.index_select(0, index)  # an IndexError only the real data shows


def store_after_break_then_graph_error(x, index, obj, buf):
    print("before", file=buf)
    obj.n += 1
    return x.index_select(0, index)


@pytest.mark.parametrize("fn, make", [
    (store_then_graph_error, lambda i: call(vec(i), bad_index(i), counter(i))),
    (store_after_break_then_graph_error, lambda i: call(vec(i), bad_index(i), counter(i), io.StringIO())),
], ids=lambda v: getattr(v, "__name__", ""))
def test_stores_before_an_error_raised_by_the_graph_happen(fn, make):
    # eager stores obj.n and then raises; the compiled run must leave obj.n the same
    # (obj.n is a guarded value: one graph per call)
    assert_matches_eager(fn, make, graphs=3)


def test_in_place_tensor_updates_across_break():
    def inplace(x, buf):
        x.add_(1)
        print("between", file=buf)
        x.mul_(2)
        return x
    assert_matches_eager(inplace, lambda i: call(vec(i), io.StringIO()), graphs=2)


# ---------------------------------------------------------------- state rebuilt at the break

def aliased_list(x, buf):
    a = [x * 2]
    b = a
    print("between", file=buf)  # BREAK
    b.append(x * 3)
    return a, a is b


def list_aliased_in_containers(x, buf):
    a = [x * 2]
    table = {"a": a, "pair": (a, x)}
    print("between", file=buf)  # BREAK
    a.append(1)
    return table, table["a"] is a, table["pair"][0] is a


def containers_and_constants(x, buf):
    t = (x * 2, 3, "s", None, [x], {"k": x.sum()})
    dtype, shape, window = x.dtype, x.shape, slice(0, 2)
    print("between", file=buf)  # BREAK
    return t, torch.zeros(shape, dtype=dtype)[window] + x[window]


def iterators_across_break(x, buf):
    it = iter([x, x * 2, x * 3])
    first = next(it)
    print("between", file=buf)  # BREAK
    out = []
    for i, (k, v) in enumerate({"a": x * 4, "b": x * 5}.items()):
        print(k, file=buf)
        out.append(v + i)
    return first, list(it), out, [t.sum() for t in reversed(x.unbind(0))]


# graphs: the one before the break, and the resume function's when it computes something
# (iterators_across_break: its resume functions compile around the prints in the loop,
# whose iterator is rebuilt lazily; the islice over the list breaks once more)
@pytest.mark.parametrize("fn, graphs", [
    (aliased_list, 2), (list_aliased_in_containers, 1), (containers_and_constants, 2),
    (iterators_across_break, 3),
], ids=["aliased_list", "list_aliased_in_containers", "containers_and_constants", "iterators_across_break"])
def test_python_values_rebuilt_at_the_break(fn, graphs):
    # Locals built during the trace are rebuilt before the break: a list two names refer
    # to must stay one list.
    assert_matches_eager(fn, lambda i: call(vec(i), io.StringIO()), graphs=graphs)


def item_of_many(x):
    y = x * 2
    return y.item()  # BREAK


def int_of_many(x):
    y = x * 2
    return int(y)  # BREAK


def test_error_at_the_break_itself():
    # one graph per shape; .item() of two elements raises where eager does
    assert_matches_eager(item_of_many, lambda i: call(vec(i, n=1 + i % 2)), calls=4, graphs=2)
    assert_matches_eager(int_of_many, lambda i: call(vec(i, n=1 + i % 2)), calls=4, graphs=2)


# ---------------------------------------------------------------- deleted arguments, locals read by name

def deleted_param_read_after(x, buf):
    # the LOAD_FAST of the deleted argument breaks; the transformed frame deletes it too
    y = x * 2
    del x
    return y + x  # eager: UnboundLocalError


def deleted_param_read_in_loop(x, buf):
    y = x * 2
    del x
    for i in range(2):
        print(i, file=buf)  # BREAK: the loop runs as Python
        if i == 1:
            y = y + x  # eager: UnboundLocalError
    return y


def locals_in_loop(x, buf):
    y = x * 2
    for i in range(2):
        print(i, sorted(locals()), file=buf)  # BREAK: the loop runs as Python
    return y


def eval_after_break(x, buf):
    y = x * 2
    print("p", file=buf)  # BREAK
    return eval("y + 1")


def frame_locals_after_break(x, buf):
    y = x * 2
    print("p", file=buf)  # BREAK
    return sys._getframe().f_locals["y"] + 1


def walrus_in_comprehension(x, buf):
    total = [(s := v * 2) for v in range(3)]
    y = x * s
    print(total, file=buf)  # BREAK
    return y + s


class Methods:
    @staticmethod
    def static(x, buf):
        y = x * 2
        print("st", file=buf)  # BREAK
        return y + 1

    @classmethod
    def klass(cls, x, buf):
        y = x * 2
        print("cm", cls.__name__, file=buf)  # BREAK
        return y + 1


def posonly_kwonly_varkw(x, /, buf, *, k=2, **kw):
    y = x * k
    print("p", sorted(kw), file=buf)  # BREAK
    return y + kw.get("z", 0)


# graphs over three calls: deleted arguments: the graph before the break (the resume
# function raises UnboundLocalError, or is a loop); frames that read their locals by name
# (locals, eval, sys._getframe) are not split and run as Python
@pytest.mark.parametrize("fn, make, graphs", [
    (deleted_param_read_after, lambda i: call(vec(i), io.StringIO()), 1),
    (deleted_param_read_in_loop, lambda i: call(vec(i), io.StringIO()), 1),
    (locals_in_loop, lambda i: call(vec(i), io.StringIO()), 0),
    (eval_after_break, lambda i: call(vec(i), io.StringIO()), 0),
    (frame_locals_after_break, lambda i: call(vec(i), io.StringIO()), 0),
    (walrus_in_comprehension, lambda i: call(vec(i), io.StringIO()), 2),
    (Methods.static, lambda i: call(vec(i), io.StringIO()), 2),
    (Methods.klass, lambda i: call(vec(i), io.StringIO()), 2),
    # z=i is a guarded value: the frame and its resume function, per call
    (posonly_kwonly_varkw, lambda i: call(vec(i), io.StringIO(), k=3, z=i), 6),
], ids=lambda v: getattr(v, "__qualname__", str(v)))
def test_locals_and_signatures_across_a_break(fn, make, graphs):
    assert_matches_eager(fn, make, graphs=graphs, breaks=1 if graphs == 0 else None)
