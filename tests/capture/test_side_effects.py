"""Side effects in a traced region, end to end through the native runtime: attribute,
global and nonlocal stores, list and dict mutation, in-place ops on input tensors.

Each case runs eager and compiled on fresh, equal copies of its objects, twice (the
second compiled call is a cache hit), and compares the return values AND the state
after (attributes, container contents and identity, globals, cells, input tensors).
"""
from __future__ import annotations

import types

import pytest
import torch

import fastdynamo
from fastdynamo._runtime import native
from fastdynamo.convert_frame import Recorder

from fastdynamo.capture import Broken
from .helpers import assert_same, capture

pytestmark = pytest.mark.usefixtures("fresh_cache")


def check_effects(fn, make, state, graphs=1, calls=2):
    """Run ``fn`` eager and compiled on ``make()`` (fresh arguments each time, equal
    between the two runs) ``calls`` times; return values and ``state(args)`` must match
    and ``graphs`` graphs must have been captured with no break. Returns the recorder."""
    fastdynamo.reset()
    recorder = Recorder()
    compiled = fastdynamo.compile(fn, backend="eager", _recorder=recorder)
    for call in range(calls):
        torch.manual_seed(call)
        args = make()
        expected = fn(*args)
        expected_state = state(*args)
        torch.manual_seed(call)
        args = make()
        actual = compiled(*args)
        assert_same(actual, expected)
        assert_same(state(*args), expected_state)
    assert [str(b) for b in recorder.breaks] == []
    assert len(recorder.captures) == graphs
    assert len(native().cache_entries(fn.__code__)) == graphs
    return recorder


def break_reasons(fn, *args):
    recorder = Recorder()
    fastdynamo.compile(fn, backend="eager", _recorder=recorder)(*args)
    # The construct itself is never captured: it breaks the graph (the code after it
    # may still compile in a resume function).
    return [b.reason for b in recorder.breaks]


class Box:
    def __init__(self, n=0):
        self.n = n
        self.items = [1, 2]
        self.table = {"a": 1}

    def update(self, x):
        self.n += 1
        self.items.append(x * self.n)
        self.latest = x.cos()
        return self.n


def box_state(box):
    """Everything observable about a Box: attribute names in order, values, identity
    of its containers against the ones it was made with."""
    return (list(vars(box)), {k: v for k, v in vars(box).items() if not k.startswith("_")},
            box.items is box._made_items if hasattr(box, "_made_items") else None)


def fresh_box(n=0):
    box = Box(n)
    box._made_items = box.items
    return box


# ---------------------------------------------------------------- attributes

def store_read_store(x, box):
    box.n += 1
    first = x * box.n      # reads the pending 1
    box.n += 1
    box.scale = box.n * 3  # a new attribute
    box.n = box.scale - 1
    return first + box.n


def test_attribute_store_read_back_store_again():
    rec = check_effects(store_read_store, lambda: (torch.ones(3), fresh_box()), lambda x, box: box_state(box))
    (effects,) = [c.result.effects for c in rec.captures]
    assert [type(e).__name__ for e in effects] == ["StoreAttr", "StoreAttr"]  # one per attribute


def new_attributes_in_order(x, box):
    box.z = 1
    box.a = x + 1
    box.z = 2
    return x


def test_new_attributes_keep_insertion_order():
    def state(x, box):
        return list(vars(box)), box.z, box.a
    check_effects(new_attributes_in_order, lambda: (torch.ones(2), fresh_box()), state)


def method_with_effects(x, box):
    n = box.update(x)
    box.update(x + n)
    return box.latest * box.n


def test_side_effects_in_an_inlined_method():
    check_effects(method_with_effects, lambda: (torch.randn(3), fresh_box()), lambda x, box: box_state(box))


def store_tensors(x, box):
    box.same = x           # the caller's tensor itself
    box.view = x[0]
    box.result = x * 2
    return box.same


def test_stored_tensors_keep_identity():
    x, box = torch.randn(2, 3), fresh_box()
    compiled = fastdynamo.compile(store_tensors, backend="eager")
    assert compiled(x, box) is x
    assert box.same is x
    assert torch.equal(box.result, x * 2) and torch.equal(box.view, x[0])
    check_effects(store_tensors, lambda: (torch.randn(2, 3), fresh_box()), lambda x, box: box_state(box),
                  graphs=1)


def return_stored_new_list(x, box):
    box.cache = out = [x + 1]
    box.alias = out
    out.append(x)
    return out


def test_a_new_list_stored_twice_and_returned_is_one_object():
    x, box = torch.ones(2), fresh_box()
    out = fastdynamo.compile(return_stored_new_list, backend="eager")(x, box)
    assert out is box.cache is box.alias and len(out) == 2 and out[1] is x
    check_effects(return_stored_new_list, lambda: (torch.ones(2), fresh_box()), lambda x, box: box_state(box))


def swap_attributes(x, box):
    box.items, box.table = box.table, box.items
    return x - 1


def test_swap_reads_values_from_before_the_stores():
    def state(x, box):
        return box.items is box._made_items, box.table is box._made_items, box_state(box)[1]
    check_effects(swap_attributes, lambda: (torch.ones(2), fresh_box()), state)


# ---------------------------------------------------------------- lists and dicts

def list_mutations(x, xs):
    xs.append(x)
    xs[0] = xs[-1] * 2     # append then item-assign: reads the appended tensor
    xs.extend([x + 1, 3])
    xs.insert(1, 7)
    del xs[2]
    xs += [x]
    last = xs.pop()
    return last + len(xs)


def test_list_append_extend_item_assignment():
    def make():
        xs = [torch.zeros(2), 5, torch.ones(2)]
        return torch.randn(2), xs

    def state(x, xs):
        return list(xs)
    check_effects(list_mutations, make, state)


def list_identity(x, xs):
    xs.append(x)
    return xs


def test_mutated_list_keeps_identity_and_is_returned():
    xs = [1]
    x = torch.ones(1)
    out = fastdynamo.compile(list_identity, backend="eager")(x, xs)
    assert out is xs and xs == [1, x] and xs[1] is x


def iterate_while_appending(x, xs):
    for v in xs:
        if len(xs) < 5:
            xs.append(v + 10)
    return x * len(xs)


def test_iterating_a_list_sees_items_appended_during_the_loop():
    check_effects(iterate_while_appending, lambda: (torch.ones(2), [1, 2]), lambda x, xs: list(xs))


def dict_mutations(x, d):
    d["new"] = x
    d.update(b=2)
    d["a"] = d["a"] + 1
    del d["gone"]
    d.setdefault("c", 3)
    d.pop("b")
    return x.relu()


def test_dict_updates_keep_identity_and_order():
    def make():
        return torch.randn(3), {"gone": 0, "a": 1}

    def state(x, d):
        return list(d.items())
    check_effects(dict_mutations, make, state)
    d = {"gone": 0, "a": 1}
    made = d
    fastdynamo.compile(dict_mutations, backend="eager")(torch.ones(1), d)
    assert d is made and list(d) == ["a", "new", "c"]


def nested_containers(x, box):
    box.table["k"] = [x]
    box.table["k"].append(1)
    box.items.append(box.table)
    return x + 1


def test_containers_reached_through_attributes():
    def state(x, box):
        table = box.table
        return table, box.items[:2], box.items[2] is table, box.items is box._made_items
    check_effects(nested_containers, lambda: (torch.ones(2), fresh_box()), state)


# ---------------------------------------------------------------- globals

COUNTER = 0
TOTAL = torch.zeros(2)


def read_total():
    return TOTAL * 2


def global_stored_then_read_inlined(x):
    global TOTAL
    TOTAL = TOTAL + x
    return read_total()      # an inlined function sees the stored tensor


def test_global_stored_then_read_in_an_inlined_function():
    def make():
        global TOTAL
        TOTAL = torch.zeros(2)
        return (torch.randn(2),)
    check_effects(global_stored_then_read_inlined, make, lambda x: TOTAL)


def bump_global():
    global COUNTER
    COUNTER += 1


def global_int_in_inlined_function(x):
    bump_global()
    bump_global()
    return x * COUNTER


def test_global_store_in_an_inlined_function():
    def make():
        global COUNTER
        COUNTER = 0
        return (torch.ones(2),)
    check_effects(global_int_in_inlined_function, make, lambda x: COUNTER)


def test_global_store_recompiles_when_the_read_value_changed():
    global COUNTER
    COUNTER = 0
    recorder = Recorder()
    compiled = fastdynamo.compile(global_int_in_inlined_function, backend="eager", _recorder=recorder)
    assert torch.equal(compiled(torch.ones(1)), torch.ones(1) * 2)
    assert torch.equal(compiled(torch.ones(1)), torch.ones(1) * 4)  # guard on COUNTER == 0 fails
    assert COUNTER == 4 and len(recorder.captures) == 2


def test_store_to_a_global_of_another_module_is_unsupported():
    other = {"__builtins__": __builtins__, "V": 0}
    exec("def setter():\n    global V\n    V = 1\n", other)

    def fn(x):
        setter_fn()
        return x + 1

    setter_fn = other["setter"]
    reasons = break_reasons(fn, torch.ones(1))
    assert any("global 'V' of another module" in r for r in reasons)
    assert other["V"] == 1


# ---------------------------------------------------------------- cells

def make_accumulator():
    total = torch.zeros(2)
    calls = 0

    def accumulate(x):
        nonlocal total, calls
        total = total + x
        calls += 1
        return total * calls

    return accumulate


ACCUMULATE = make_accumulator()


def test_nonlocal_store_in_the_compiled_function():
    cells = dict(zip(ACCUMULATE.__code__.co_freevars, ACCUMULATE.__closure__))

    def make():
        cells["total"].cell_contents = torch.zeros(2)
        cells["calls"].cell_contents = 0
        return (torch.randn(2),)

    def state(x):
        return cells["total"].cell_contents, cells["calls"].cell_contents
    rec = check_effects(ACCUMULATE, make, state)
    assert {type(e).__name__ for e in rec.captures[0].result.effects} == {"StoreDeref"}


def make_counter():
    count = 0

    def bump():
        nonlocal count
        count += 1
        return count

    return bump


BUMP = make_counter()


def nonlocal_in_inlined_closure(x):
    BUMP()
    return x * BUMP()


def test_nonlocal_store_in_an_inlined_closure():
    def make():
        BUMP.__closure__[0].cell_contents = 0
        return (torch.ones(2),)
    rec = check_effects(nonlocal_in_inlined_closure, make, lambda x: BUMP.__closure__[0].cell_contents)
    assert [type(e).__name__ for e in rec.captures[0].result.effects] == ["SetCellContents"]


# ---------------------------------------------------------------- in-place ops on inputs

def inplace_on_inputs(x, y, out):
    x.add_(1)
    x[0].mul_(2)               # a view of an input
    y += x                     # y is an input: rebinds to the same tensor
    out[:, :2] = y[:2].unsqueeze(0) * 3
    return x, y, out.sum()


def test_inplace_ops_on_inputs_and_views():
    def make():
        return torch.arange(3.0), torch.ones(3), torch.zeros(2, 3)
    check_effects(inplace_on_inputs, make, lambda x, y, out: (x, y, out))


def return_mutated_input(x):
    x.mul_(2)
    x += 1
    return x


def test_returning_a_mutated_input_returns_the_same_object():
    x = torch.ones(3)
    out = fastdynamo.compile(return_mutated_input, backend="eager")(x)
    assert out is x and torch.equal(x, torch.full((3,), 3.0))
    check_effects(return_mutated_input, lambda: (torch.randn(3),), lambda x: x)


def reads_after_mutation(x):
    before = x.sum()
    x.sub_(x.mean())
    return before, x.sum(), x.shape, x.dtype


def test_later_uses_see_the_mutation():
    check_effects(reads_after_mutation, lambda: (torch.randn(4),), lambda x: x)


def inplace_activation(x):
    torch.nn.functional.relu(x, inplace=True)
    return x * 2


def test_inplace_keyword_on_an_input():
    check_effects(inplace_activation, lambda: (torch.randn(5),), lambda x: x)


def inplace_on_leaf(w):
    w.add_(1)
    return w * 2


def test_inplace_on_a_leaf_that_requires_grad_raises_as_eager():
    w = torch.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        inplace_on_leaf(w)
    recorder = Recorder()
    compiled = fastdynamo.compile(inplace_on_leaf, backend="eager", _recorder=recorder)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        compiled(w)
    assert not recorder.captures and "leaf Variable" in recorder.breaks[0].reason
    assert torch.equal(w.detach(), torch.ones(2))


def sgd_step(w, grad):
    with torch.no_grad():
        w.sub_(grad * 0.5)
    return (w * 2).sum()


def test_inplace_on_a_parameter_under_no_grad():
    def make():
        return torch.nn.Parameter(torch.ones(3)), torch.arange(3.0)
    check_effects(sgd_step, make, lambda w, grad: w.detach())


# ---------------------------------------------------------------- modules

class Tracker(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(3, 3)
        self.register_buffer("running", torch.zeros(3))
        self.register_buffer("seen", torch.zeros(()))
        self.act = torch.nn.ReLU(inplace=True)

    def forward(self, x):
        y = self.act(self.linear(x))
        self.running = self.running * 0.9 + y.detach().mean(0) * 0.1   # buffer assignment
        self.seen.add_(1)                                    # in-place on a buffer
        self.last = y                                        # a plain attribute
        self.training = False
        return y + self.running


def test_module_attribute_and_buffer_updates():
    torch.manual_seed(0)
    eager, compiled_module = Tracker(), Tracker()
    compiled_module.load_state_dict(eager.state_dict())
    recorder = Recorder()
    compiled = fastdynamo.compile(compiled_module, backend="eager", _recorder=recorder)
    for _ in range(2):
        x = torch.randn(4, 3)
        assert_same(compiled(x.clone()), eager(x.clone()))
        for name in ("running", "seen", "last"):
            assert_same(getattr(compiled_module, name), getattr(eager, name))
        assert compiled_module.training is False and "running" in compiled_module._buffers
        assert "running" not in vars(compiled_module)
    assert not recorder.breaks and len(recorder.captures) == 1


class History(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.sizes = [2, 3]
        self.history = []

    def forward(self, x):
        for size in self.sizes:      # another list, read while history is mutated
            x = x * size
        self.history.append(x)
        return x, len(self.history)


def test_module_lists_are_pinned_by_identity_and_hit_the_cache():
    eager, module = History(), History()
    history = module.history
    recorder = Recorder()
    compiled = fastdynamo.compile(module, backend="eager", _recorder=recorder)
    for _ in range(3):
        x = torch.randn(2)
        module.history.clear()       # the list's length is guarded: same length, cache hit
        eager.history.clear()
        assert_same(compiled(x), eager(x))
        assert_same(module.history, eager.history)
    assert module.history is history
    assert not recorder.breaks and len(recorder.captures) == 1
    guards = [g.text() for g in recorder.captures[0].result.guards]
    assert any(g.startswith("self.history is <list") for g in guards)
    assert any(g.startswith("self.sizes is <list") for g in guards)
    module.sizes = [2, 3]            # equal contents, another object: the pin fails, recompiles
    module.history.clear()
    eager.history.clear()
    assert_same(compiled(torch.ones(2)), eager(torch.ones(2)))
    assert len(recorder.captures) == 2


class SharedState(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = self.b = Box()     # one object under two attributes

    def forward(self, x):
        self.a.n += 1
        return x * self.b.n         # reads the store made through self.a


def test_one_object_through_two_long_lived_paths_is_pinned():
    eager, module = SharedState(), SharedState()
    recorder = Recorder()
    compiled = fastdynamo.compile(module, backend="eager", _recorder=recorder)
    x = torch.ones(2)
    assert_same(compiled(x), eager(x))
    assert module.a.n == eager.a.n == 1 and module.a is module.b
    guards = [g.text() for g in recorder.captures[0].result.guards]
    assert any(g.startswith("self.a is <Box") for g in guards) and any(g.startswith("self.b is <Box") for g in guards)
    module.b = Box(5)                # now two objects: the pins fail, a new graph
    eager.b = Box(5)
    assert_same(compiled(x), eager(x))
    assert (module.a.n, module.b.n) == (eager.a.n, eager.b.n) == (2, 5)
    assert len(recorder.captures) == 2 and not recorder.breaks


def make_shared_counter():
    count = 0

    def bump():
        nonlocal count
        count += 1

    def use(x):
        bump()
        return x * count             # the same cell as bump's, reached as use's own

    return use


def test_one_cell_through_two_closures_is_unsupported():
    use = make_shared_counter()
    reasons = break_reasons(use, torch.ones(1))
    assert any("are the same object" in r for r in reasons), reasons


LOG = []
SCALES = [1.0, 2.0]


def global_lists(x):
    LOG.append(x * SCALES[1])
    return x + len(LOG)


def test_global_lists_are_pinned_by_identity():
    def make():
        LOG.clear()
        return (torch.ones(2),)
    check_effects(global_lists, make, lambda x: list(LOG))


class ParameterSwap(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(2))

    def forward(self, x):
        self.w = x
        return x + 1


def test_replacing_a_parameter_is_unsupported():
    recorder = Recorder()
    compiled = fastdynamo.compile(ParameterSwap(), backend="eager", _recorder=recorder)
    with pytest.raises(TypeError, match="cannot assign"):  # as in eager: the frame runs as Python
        compiled(torch.ones(2))
    assert not recorder.captures and "replacing a parameter" in recorder.breaks[0].reason


# ---------------------------------------------------------------- explain

def test_explain_counts_one_graph_for_a_frame_with_effects():
    report = fastdynamo.explain(store_read_store)(torch.ones(2), fresh_box())
    assert report.graph_count == 1 and report.graph_break_count == 0


# ---------------------------------------------------------------- still unsupported

class Guarded:
    def __setattr__(self, name, value):
        object.__setattr__(self, name, value * 2)


def store_n(x, obj):
    obj.n = 1
    return x + 1


def store_function(x, box):
    box.fn = lambda: 1
    return x + 1


def store_closure(x, box):
    box.fn = lambda: x
    return x + 1


def mutate_first(x, a, b):
    a.append(1)
    return x + len(b)


@pytest.mark.parametrize("fn,make,needle", [
    (store_n, lambda: (torch.ones(1), Guarded()), "customises __setattr__"),
    (store_closure, lambda: (torch.ones(1), fresh_box()), "cannot rebuild"),
    (mutate_first, lambda: (torch.ones(1),) + (lambda s: (s, s))([0]), "are the same list"),
], ids=["custom-setattr", "unrebuildable-value", "aliased-lists"])
def test_unsupported_effects_run_as_python_with_a_reason(fn, make, needle):
    """Never a wrong result: the frame runs as Python (same effects as eager) and the
    break names the construct."""
    args = make()
    reasons = break_reasons(fn, *args)
    assert any(needle in r for r in reasons), reasons
    eager_args, compiled_args = make(), make()
    expected = fn(*eager_args)
    actual = fastdynamo.compile(fn, backend="eager")(*compiled_args)
    assert_same(actual, expected)
    assert observable(compiled_args[1:]) == observable(eager_args[1:])


def observable(values):
    """Plain data standing for the state of test objects (functions by name)."""
    if isinstance(values, (list, tuple)):
        return [observable(v) for v in values]
    if isinstance(values, types.FunctionType):
        return values.__qualname__
    if isinstance(values, torch.Tensor):
        return values.tolist()
    if hasattr(values, "__dict__"):
        return {k: observable(v) for k, v in vars(values).items()}
    if hasattr(type(values), "__slots__"):
        return {k: getattr(values, k, None) for k in type(values).__slots__}
    return values


def test_effects_are_not_replayed_when_the_frame_breaks():
    def fn(x, box):
        box.n += 1
        box.items.append(1)
        print_it = print  # noqa: F841
        return x + x.sum().item()

    box = fresh_box()
    fastdynamo.compile(fn, backend="eager")(torch.ones(1), box)
    assert box.n == 1 and box.items == [1, 2, 1]  # exactly once, by the Python run


# ---------------------------------------------------------------- without the runtime

def test_capture_helper_replays_effects():
    box = fresh_box()
    result, run = capture(store_read_store, torch.ones(2), box)
    assert not isinstance(result, Broken) and len(result.effects) == 2
    out = run(torch.ones(2), box)
    expected_box = fresh_box()
    expected = store_read_store(torch.ones(2), expected_box)
    assert_same(out, expected)
    assert box_state(box) == box_state(expected_box)


def test_plans_can_be_taken_mid_trace_and_again_later():
    from fastdynamo.transform.codegen import StoreAttr, StoreGlobal
    from fastdynamo.guards.sources import LocalSource
    from fastdynamo.capture.output import OutputPlanBuilder
    from fastdynamo.capture.side_effects import SideEffects
    from fastdynamo.capture.variables.constant import ConstantVariable
    from fastdynamo.capture.variables.misc import UserObjectVariable

    box = fresh_box()
    effects = SideEffects()
    var = UserObjectVariable(box, LocalSource(0, "box"))
    effects.track(box, var.source, var)
    effects.store_attr(var, box, "n", ConstantVariable(1))
    first = effects.plans(OutputPlanBuilder())
    effects.store_global("G", ConstantVariable(2))
    effects.store_attr(var, box, "n", ConstantVariable(3))
    second = effects.plans(OutputPlanBuilder())
    assert [type(e) for e in first] == [StoreAttr]
    assert [type(e) for e in second] == [StoreAttr, StoreGlobal]
    assert second[0].value.value == 3 and first[0].value.value == 1
    assert types.SimpleNamespace(n=box.n).n == 0  # nothing ran while tracing


def test_function_made_by_the_frame_is_stored_as_a_new_function():
    box = fresh_box()
    out = fastdynamo.compile(store_function, backend="eager")(torch.ones(1), box)
    assert_same(out, torch.ones(1) + 1)
    assert box.fn() == 1 and box.fn.__code__ is store_function.__code__.co_consts[1]
    assert box.fn.__globals__ is store_function.__globals__
