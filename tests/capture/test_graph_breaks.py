"""Graph breaks, kind by kind: compiled (``backend="eager"``) against eager over several
calls (the first compiles, later ones hit the cache or take the other branch), with the
graph and break counts, reasons and ``file:line`` that explain reports. Reports (fullgraph,
logs) are in test_graph_break_reports.py, the state a break rebuilds (modules, signatures,
closures, mutations) in test_graph_break_state.py, blocks and loops in
test_graph_break_blocks.py, _try.py and _loops.py, generated programs in
test_generated_breaks.py."""
from __future__ import annotations

import io
import re
import warnings

import pytest
import torch

import fastdynamo
from fastdynamo import config
from fastdynamo.convert_frame import Recorder

from . import break_programs
from .break_helpers import (BOOL_BREAK, PRINT_BREAK, assert_breaks, assert_matches_eager, call, explain,
                            leaf, line_of, vec)

pytestmark = pytest.mark.usefixtures("fresh_cache")


# ---------------------------------------------------------------- data-dependent branches

def branch_on_sum(x):
    y = x * 2
    if y.sum() > 0:  # BREAK
        y = y + 1
    else:
        y = y - 1
    return y.cos(), y.dtype


def test_if_on_tensor_takes_both_branches():
    # the graph before the branch, and one resume function per branch
    assert_matches_eager(branch_on_sum, lambda i: call(vec(i)), calls=4, graphs=3, breaks=1)
    for i in (0, 1):
        report = explain(branch_on_sum, vec(i))
        assert_breaks(report, graphs=2, breaks=[(line_of(branch_on_sum, "# BREAK"), BOOL_BREAK)])


def truth_of_tensor(x):
    if x:  # BREAK
        return x + 1
    return x - 1


def test_if_tensor_directly():
    # nothing to capture before the branch; one resume function per branch
    assert_matches_eager(truth_of_tensor, lambda i: call(torch.tensor([float(i % 2)])), calls=4, graphs=2)
    report = explain(truth_of_tensor, torch.tensor([1.0]))
    assert_breaks(report, graphs=1, breaks=[(line_of(truth_of_tensor, "# BREAK"), BOOL_BREAK)])


def branch_in_condition_expression(x):
    y = x.sin()
    z = y * 2 if (x > 0).all() else y * 3  # BREAK
    return z + 1


def test_conditional_expression_on_tensor():
    assert_matches_eager(branch_in_condition_expression, lambda i: call(vec(i)), calls=4, graphs=3)
    report = explain(branch_in_condition_expression, vec(0))
    assert_breaks(report, graphs=2, breaks=[(line_of(branch_in_condition_expression, "# BREAK"), BOOL_BREAK)])


def short_circuit_and(x):
    y = (x.sum() > 0) and x.sum() * 2  # BREAK
    return y + 1


def short_circuit_or(x):
    y = (x.max() > 100) or x.min() * 2  # BREAK
    return y + 1


@pytest.mark.parametrize("fn, graphs", [
    (short_circuit_and, 3),
    (short_circuit_or, 2),  # x.max() > 100 is never true: one resume function
], ids=["short_circuit_and", "short_circuit_or"])
def test_short_circuit_on_tensor(fn, graphs):
    # JUMP_IF_FALSE_OR_POP / JUMP_IF_TRUE_OR_POP on a tensor
    assert_matches_eager(fn, lambda i: call(vec(i)), calls=4, graphs=graphs)
    report = explain(fn, vec(0))
    assert report.break_reasons[0].location == line_of(fn, "# BREAK")


def while_on_tensor(x):
    steps = 0
    while x.sum() > 0:  # BREAK
        x = x - 1
        steps += 1
    return x, steps


def test_while_on_tensor_condition():
    # the first test; the loop runs as Python, and what follows it computes nothing
    assert_matches_eager(while_on_tensor, lambda i: call(vec(0) * i), calls=3, graphs=1, breaks=2)
    report = explain(while_on_tensor, vec(0))
    where = line_of(while_on_tensor, "# BREAK")
    # the loop's first test, then the loop (run as Python) in the resume function
    assert_breaks(report, graphs=None, breaks=[(where, BOOL_BREAK), (where, BOOL_BREAK)])


def test_assert_on_tensor():
    fn = break_programs.assert_on_tensor
    # odd i: AssertionError, raised by a resume function with nothing to capture
    assert_matches_eager(fn, lambda i: call(vec(i)), calls=4, graphs=2, breaks=2)
    report = explain(fn, vec(0))
    assert_breaks(report, graphs=2, breaks=[(line_of(fn, "# BREAK"), BOOL_BREAK)])


# ---------------------------------------------------------------- tensors to Python values

def item_then_use(x):
    y = x.sin()
    s = y.sum().item()  # BREAK
    return y * s, s


def tolist_then_use(x):
    y = x * 2
    values = y.tolist()  # BREAK
    return y + values[0], values


def bool_of_tensor(x):
    y = x + 1
    flag = bool(y.sum() > 2)  # BREAK
    return (y * 2 if flag else y), flag


def int_of_tensor(x):
    y = x.abs() + 1
    n = int(y.sum())  # BREAK
    return y * n, n


def float_of_tensor(x):
    y = x + 1
    f = float(y.mean())  # BREAK
    return y * f, f


def index_with_item(x):
    y = x * 2
    return y[int(x.argmax().item())]  # BREAK


# graphs: the one before the break, and a resume function specialized on each Python
# value the four calls produce (bool_of_tensor: True, then False, whose resume function
# computes nothing and is marked SKIP, so the True entry is not used again; index_with_item:
# two argmax positions; int_of_tensor: its int is a symbol of the resume function after it
# changes once (automatic dynamic), so two entries serve the four values)
@pytest.mark.parametrize("fn, reason, graphs", [
    (item_then_use, "Tensor.item() leaves the graph", 5),
    (tolist_then_use, "Tensor.tolist() leaves the graph", 5),
    (bool_of_tensor, BOOL_BREAK, 2),
    (int_of_tensor, "converting a tensor to a Python number", 3),
    (float_of_tensor, "converting a tensor to a Python number", 5),
    (index_with_item, "Tensor.item() leaves the graph", 3),
], ids=lambda v: getattr(v, "__name__", "reason"))
def test_tensor_to_python_value(fn, reason, graphs):
    assert_matches_eager(fn, lambda i: call(vec(i)), calls=4, graphs=graphs, breaks=1)
    report = explain(fn, vec(0))
    assert_breaks(report, graphs=2, breaks=[(line_of(fn, "# BREAK"), reason)])


def test_item_specialization_past_recompile_limit():
    # The resume function is specialized on the Python number; past the recompile limit
    # it runs eagerly, and every result stays right.
    fn = item_then_use
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert_matches_eager(fn, lambda i: call(torch.full((2,), float(i))),
                             calls=config.recompile_limit + 4, graphs=1 + config.recompile_limit)


# ---------------------------------------------------------------- print and other effects

def print_text(x, buf):
    y = x * 2
    print("value", 3, file=buf)  # BREAK
    return y + 1


def print_with_sep_end(x, buf):
    y = x * 2
    print("a", "b", sep="|", end="!\n", file=buf)  # BREAK
    return y + 1


def print_shape(x, buf):
    y = x.sin()
    print("shape", y.shape, y.dtype, file=buf)  # BREAK
    return y * 2


def print_tensor(x, buf):
    y = x.sum()
    print(y, file=buf)  # BREAK
    return y + 1


def print_tensor_values(x, buf):
    y = x * 2
    print("y =", y, file=buf)  # BREAK
    return y - 1


@pytest.mark.parametrize("fn", [print_text, print_with_sep_end, print_shape, print_tensor,
                                print_tensor_values], ids=lambda f: f.__name__)
def test_print(fn):
    assert_matches_eager(fn, lambda i: call(vec(i), io.StringIO()), calls=3, graphs=2, breaks=1)
    report = explain(fn, vec(0), io.StringIO())
    # Printing a tensor runs torch's formatting (and collections' generated namedtuple
    # code) natively: no break of the user's besides the print.
    assert_breaks(report, graphs=2, breaks=[(line_of(fn, "# BREAK"), PRINT_BREAK)])


def print_returns_input(x, buf):
    print("identity", file=buf)  # BREAK
    return x


def print_returns_inputs_and_new(x, y, buf):
    z = x + y
    print("identity", file=buf)  # BREAK
    return y, z, x


def test_break_keeps_identity_of_returned_arguments():
    # no tensor operation at all; then only the one before the print
    assert_matches_eager(print_returns_input, lambda i: call(vec(i), io.StringIO()), graphs=0, breaks=1)
    assert_matches_eager(print_returns_inputs_and_new, lambda i: call(vec(i), leaf(i), io.StringIO()), graphs=1)
    x, y = vec(0), vec(1)
    out = fastdynamo.compile(print_returns_inputs_and_new)(x, y, io.StringIO())
    assert out[0] is y and out[2] is x


COUNTER = 0


def bump_global(x, buf):
    global COUNTER
    y = x * 2
    COUNTER += 1
    print("counter", COUNTER, file=buf)  # BREAK
    COUNTER += 1
    return y + COUNTER


def test_global_assignment_before_and_after_break():
    # The store before the break is seen by the print (replayed before the native
    # region); the one after it by the result.
    global COUNTER
    compiled = fastdynamo.compile(bump_global)
    for i in range(3):
        before = COUNTER
        expected_buf, actual_buf = io.StringIO(), io.StringIO()
        expected = bump_global(vec(i), expected_buf)
        COUNTER = before
        torch.testing.assert_close(compiled(vec(i), actual_buf), expected)
        assert COUNTER == before + 2
        assert actual_buf.getvalue() == expected_buf.getvalue()
    report = explain(bump_global, vec(0), io.StringIO())
    assert_breaks(report, graphs=2, breaks=[(line_of(bump_global, "# BREAK"), PRINT_BREAK)])


# ---------------------------------------------------------------- unsupported calls

def unique_call(x):
    y = x.round()
    values = torch.unique(y)  # BREAK
    return values * 2, y


@fastdynamo.disable
def not_compiled(t):
    return t * 10


def disabled_call(x):
    y = x + 1
    z = not_compiled(y)  # BREAK
    return z - y


def nonzero_call(x):
    y = x + 1
    idx = y.nonzero()  # BREAK
    return idx + 1, y


def numpy_call(x):
    y = x * 2
    arr = y.numpy()  # BREAK
    return y + float(arr.sum())


_tuple_new = tuple.__new__


def c_function_global(x):
    y = x + 1
    t = _tuple_new(tuple, (1, 2))  # BREAK
    return y + t[0]


# graphs: before the call, and after it; numpy_call's resume function breaks at once
# (ndarray.sum, at a LOAD_METHOD it cannot resume from) and c_function_global's while
# entering (the same call again): both run as Python after the first graph
@pytest.mark.parametrize("fn, reason, graphs", [
    (unique_call, "torch.unique is not captured", 2),
    (disabled_call, "marked fastdynamo.disable", 2),
    (nonzero_call, "Tensor.nonzero() leaves the graph", 2),
    (numpy_call, "Tensor.numpy() leaves the graph", 1),
    (c_function_global, "tuple.__new__", 1),
], ids=lambda v: getattr(v, "__name__", "reason"))
def test_unsupported_call(fn, reason, graphs):
    assert_matches_eager(fn, lambda i: call(vec(i)), calls=3, graphs=graphs)
    report = explain(fn, vec(0))
    assert report.break_reasons[0].location == line_of(fn, "# BREAK")
    assert reason in report.break_reasons[0].reason
    assert report.graph_count >= 1


# ---------------------------------------------------------------- inside inlined calls

def callee_prints(t, buf):
    u = t * 2
    print("callee", file=buf)  # BREAK
    return u + 1


def caller(x, buf):
    y = x.sin()
    z = callee_prints(y, buf)  # CALL
    return z * 3


def caller_of_caller(x, buf):
    w = caller(x + 1, buf)  # CALL
    return w.sum()


def test_break_inside_inlined_call_surfaces_at_call_site():
    assert_matches_eager(caller, lambda i: call(vec(i), io.StringIO()), graphs=4)
    report = explain(caller, vec(0), io.StringIO())
    brk = report.break_reasons[0]
    assert brk.location == line_of(callee_prints, "# BREAK")
    assert PRINT_BREAK in brk.reason
    file, line = line_of(caller, "# CALL").rsplit(":", 1)
    assert brk.where[0] == (file, int(line), "caller")
    assert brk.where[-1][:2] == (file, int(line_of(callee_prints, "# BREAK").rsplit(":", 1)[1]))
    assert len(brk.where) == 2
    # before the call (sin), the callee's frame before and after its print, after the call
    assert report.graph_count == 4, report
    assert "sin" in report.graphs[0].code


def test_break_two_inlined_calls_deep():
    # its own graph and resume function around caller's four
    assert_matches_eager(caller_of_caller, lambda i: call(vec(i), io.StringIO()), graphs=6)
    report = explain(caller_of_caller, vec(0), io.StringIO())
    brk = report.break_reasons[0]
    assert brk.location == line_of(callee_prints, "# BREAK")
    assert [w[2] for w in brk.where][:1] == ["caller_of_caller"]
    assert len(brk.where) == 3
    assert f"{brk.where[0][0]}:{brk.where[0][1]}" == line_of(caller_of_caller, "# CALL")
    assert f"{brk.where[1][0]}:{brk.where[1][1]}" == line_of(caller, "# CALL")


def test_fullgraph_names_callee_line():
    with pytest.raises(fastdynamo.FullGraphError, match=re.escape(line_of(callee_prints, "# BREAK"))):
        fastdynamo.compile(caller, fullgraph=True)(vec(0), io.StringIO())


def call_with_keywords(x, buf):
    return keyword_only_callee(x, buf=buf, scale=3) + 1  # CALL


def keyword_only_callee(x, *, buf, scale):
    y = x * scale
    print("kw", scale, file=buf)  # BREAK
    return y + 1


def call_with_star_args(x, buf):
    pair = (x, buf)
    return callee_prints(*pair) + 1  # CALL


def call_with_break_in_arguments(x, buf):
    return torch.add(x * 2, x.sum().item())  # BREAK


def call_method_with_break_in_argument(x, items):
    items.append(x.sum().item())  # BREAK
    return x * len(items)


# graphs: the callee's two and the caller's resume function; or the graph before .item()
# and a resume function per value
@pytest.mark.parametrize("fn, graphs", [
    (call_with_keywords, 3), (call_with_star_args, 3), (call_with_break_in_arguments, 4),
], ids=["call_with_keywords", "call_with_star_args", "call_with_break_in_arguments"])
def test_break_at_call_with_stack_below(fn, graphs):
    # KW_NAMES, CALL_FUNCTION_EX, and a NULL + callable below the broken argument
    assert_matches_eager(fn, lambda i: call(vec(i), io.StringIO()), graphs=graphs)


def break_deep_in_expression(x, buf):
    label = f"{x.sum().item():.2f} for {x.shape}"  # BREAK
    return torch.cat([x, x + 1, torch.tensor([len(label)], dtype=x.dtype)]), label


class Scale:
    def __init__(self, k):
        self.k = k

    def __call__(self, t, buf):
        print("scale", self.k, file=buf)
        return t * self.k


SCALE = Scale(3)


def call_callable_instance(x, buf):
    return SCALE(x * 2, buf) + 1


@pytest.mark.parametrize("fn, graphs", [
    (break_deep_in_expression, 4),  # before .item(), and a resume function per value
    (call_callable_instance, 3),  # before the call, after the print in __call__, after the call
], ids=["break_deep_in_expression", "call_callable_instance"])
def test_break_inside_expressions(fn, graphs):
    assert_matches_eager(fn, lambda i: call(vec(i), io.StringIO()), graphs=graphs)


def test_break_in_method_call_argument():
    # each call's list holds another int (guarded): the frame and its resume function recompile
    assert_matches_eager(call_method_with_break_in_argument, lambda i: call(vec(i), [i]), graphs=6, breaks=3)


# ---------------------------------------------------------------- unsupported opcodes

class Holder:
    pass


def delete_attribute(x, obj):
    y = x * 2
    del obj.value  # BREAK
    return y + 1, hasattr(obj, "value")


def class_inside(x):
    y = x * 2

    class Local:  # BREAK
        factor = 3
    return y * Local.factor


def holder(i):
    obj = Holder()
    obj.value = i
    return obj


# graphs: before and after the break; class_inside's resume function breaks while
# entering (the __build_class__ call) and runs as Python. ``del`` is modelled on objects
# the frame made only: on an argument it is a side effect the frame does not model.
@pytest.mark.parametrize("fn, make, reason, graphs", [
    (delete_attribute, lambda i: call(vec(i), holder(i)), "del UserObjectVariable(Holder).value: deleting", 2),
    (class_inside, lambda i: call(vec(i)), "opcode LOAD_BUILD_CLASS is not supported", 1),
], ids=lambda v: v if isinstance(v, str) else getattr(v, "__name__", ""))
def test_unsupported_opcode(fn, make, reason, graphs):
    assert_matches_eager(fn, make, calls=3, graphs=graphs)
    report = explain(fn, *make(0).args)
    assert report.break_reasons[0].location == line_of(fn, "# BREAK")
    assert reason in report.break_reasons[0].reason
    assert report.graph_count >= 1


# ---------------------------------------------------------------- raise

def raise_after_ops(x):
    y = x * 2
    if x.shape[0] > 2:
        raise ValueError(f"too long: {y.shape}")  # BREAK
    return y


def raise_caught(x):
    y = x * 2
    try:
        raise ValueError("bad value")  # caught in the frame: no break (datamodel tests)
    except ValueError:
        message = "bad value"
    return y + len(message)


def test_raise_matches_eager():
    # length 2: one graph, no break; length 3: the graph before the raise
    assert_matches_eager(raise_after_ops, lambda i: call(vec(0, n=2 + i % 2)), calls=4, graphs=2, breaks=1)
    # caught in the frame: one graph, no break
    assert_matches_eager(raise_caught, lambda i: call(vec(i)), graphs=1, breaks=0)


def test_raise_is_one_break_with_a_readable_reason():
    recorder = Recorder()
    with pytest.raises(ValueError, match="too long"):
        fastdynamo.compile(raise_after_ops, _recorder=recorder)(vec(0, n=3))
    brk = recorder.breaks[0]
    assert brk.location == line_of(raise_after_ops, "# BREAK")
    assert "ValueError" in brk.reason and "Variable(" not in brk.reason, brk.reason
    assert len(recorder.breaks) == 1, [str(b) for b in recorder.breaks]
    report = explain(raise_caught, vec(0))
    assert (report.graph_count, report.graph_break_count) == (1, 0)


def test_handler_resume_functions_stay_python_after_reset():
    # A handler exit's resume function runs as Python (SKIP). reset() drops that mark
    # while the resume code stays cached: it must not come back as a compiled frame
    # breaking at PUSH_EXC_INFO on the ``def`` line.
    for _ in range(2):
        fastdynamo.compile(raise_caught)(vec(0))
        fastdynamo.reset()
    report = explain(raise_caught, vec(0))
    found = [str(b) for b in report.break_reasons]
    assert not any("PUSH_EXC_INFO" in reason for reason in found), found
    assert line_of(raise_caught, "def raise_caught") not in " ".join(found), found
