"""Graph breaks, kind by kind: compiled (``backend="eager"``) against eager over several
calls (the first compiles, later ones hit the cache or take the other branch), with the
graph and break counts, reasons and ``file:line`` that explain reports, fullgraph errors
and the ``breaks``/``recompiles`` logs. Blocks (``with``, ``try``, loops) are in
test_graph_break_blocks.py; generated programs in test_generated_breaks.py."""
from __future__ import annotations

import importlib
import io
import re
import types
import warnings

import pytest
import torch

import fastdynamo
from fastdynamo import config, logs
from fastdynamo._runtime import native

from . import break_programs
from .break_helpers import assert_breaks, assert_matches_eager, call, explain, line_of

pytest.importorskip("fastdynamo._native")

BOOL_BREAK = "tensor used as a Python bool"
PRINT_BREAK = "print() has effects outside the graph"


@pytest.fixture(autouse=True)
def _fresh_cache():
    fastdynamo.reset()
    yield
    fastdynamo.reset()
    logs.set_logs("")


def vec(i, n=3):
    """A float vector whose sum is positive for even ``i``, negative for odd ``i``."""
    sign = 1.0 if i % 2 == 0 else -1.0
    return (torch.arange(n, dtype=torch.float32) + 1 + i) * sign


def leaf(i, n=3):
    return vec(i, n).requires_grad_()


# ---------------------------------------------------------------- data-dependent branches

def branch_on_sum(x):
    y = x * 2
    if y.sum() > 0:  # BREAK
        y = y + 1
    else:
        y = y - 1
    return y.cos(), y.dtype


def test_if_on_tensor_takes_both_branches():
    assert_matches_eager(branch_on_sum, lambda i: call(vec(i)), calls=4)
    for i in (0, 1):
        report = explain(branch_on_sum, vec(i))
        assert_breaks(report, graphs=2, breaks=[(line_of(branch_on_sum, "# BREAK"), BOOL_BREAK)])


def truth_of_tensor(x):
    if x:  # BREAK
        return x + 1
    return x - 1


def test_if_tensor_directly():
    assert_matches_eager(truth_of_tensor, lambda i: call(torch.tensor([float(i % 2)])), calls=4)
    report = explain(truth_of_tensor, torch.tensor([1.0]))
    assert_breaks(report, graphs=1, breaks=[(line_of(truth_of_tensor, "# BREAK"), BOOL_BREAK)])


def branch_in_condition_expression(x):
    y = x.sin()
    z = y * 2 if (x > 0).all() else y * 3  # BREAK
    return z + 1


def test_conditional_expression_on_tensor():
    assert_matches_eager(branch_in_condition_expression, lambda i: call(vec(i)), calls=4)
    report = explain(branch_in_condition_expression, vec(0))
    assert_breaks(report, graphs=2, breaks=[(line_of(branch_in_condition_expression, "# BREAK"), BOOL_BREAK)])


def short_circuit_and(x):
    y = (x.sum() > 0) and x.sum() * 2  # BREAK
    return y + 1


def short_circuit_or(x):
    y = (x.max() > 100) or x.min() * 2  # BREAK
    return y + 1


@pytest.mark.parametrize("fn", [short_circuit_and, short_circuit_or])
def test_short_circuit_on_tensor(fn):
    # JUMP_IF_FALSE_OR_POP / JUMP_IF_TRUE_OR_POP on a tensor
    assert_matches_eager(fn, lambda i: call(vec(i)), calls=4)
    report = explain(fn, vec(0))
    assert report.break_reasons[0].location == line_of(fn, "# BREAK")


def while_on_tensor(x):
    steps = 0
    while x.sum() > 0:  # BREAK
        x = x - 1
        steps += 1
    return x, steps


def test_while_on_tensor_condition():
    assert_matches_eager(while_on_tensor, lambda i: call(vec(0) * i), calls=3)
    report = explain(while_on_tensor, vec(0))
    where = line_of(while_on_tensor, "# BREAK")
    # the loop's first test, then the loop (run as Python) in the resume function
    assert_breaks(report, graphs=None, breaks=[(where, BOOL_BREAK), (where, BOOL_BREAK)])


def test_assert_on_tensor():
    fn = break_programs.assert_on_tensor
    assert_matches_eager(fn, lambda i: call(vec(i)), calls=4)  # odd i: AssertionError
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


@pytest.mark.parametrize("fn, reason", [
    (item_then_use, "Tensor.item() leaves the graph"),
    (tolist_then_use, "Tensor.tolist() leaves the graph"),
    (bool_of_tensor, BOOL_BREAK),
    (int_of_tensor, "converting a tensor to a Python number"),
    (float_of_tensor, "converting a tensor to a Python number"),
    (index_with_item, "Tensor.item() leaves the graph"),
], ids=lambda v: getattr(v, "__name__", "reason"))
def test_tensor_to_python_value(fn, reason):
    assert_matches_eager(fn, lambda i: call(vec(i)), calls=4)
    report = explain(fn, vec(0))
    assert_breaks(report, graphs=2, breaks=[(line_of(fn, "# BREAK"), reason)])


def test_item_specialization_past_recompile_limit():
    # The resume function is specialized on the Python number; past the recompile limit
    # it runs eagerly, and every result stays right.
    fn = item_then_use
    compiled = fastdynamo.compile(fn, backend="eager")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert_matches_eager(fn, lambda i: call(torch.full((2,), float(i))),
                             calls=config.recompile_limit + 4, compiled=compiled)


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
    assert_matches_eager(fn, lambda i: call(vec(i), io.StringIO()), calls=3)
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
    assert_matches_eager(print_returns_input, lambda i: call(vec(i), io.StringIO()))
    assert_matches_eager(print_returns_inputs_and_new, lambda i: call(vec(i), leaf(i), io.StringIO()))
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


@pytest.mark.parametrize("fn, reason", [
    (unique_call, "torch.unique is not captured"),
    (disabled_call, "marked fastdynamo.disable"),
    (nonzero_call, "Tensor.nonzero() leaves the graph"),
    (numpy_call, "Tensor.numpy() leaves the graph"),
    (c_function_global, "tuple.__new__"),
], ids=lambda v: getattr(v, "__name__", "reason"))
def test_unsupported_call(fn, reason):
    assert_matches_eager(fn, lambda i: call(vec(i)), calls=3)
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
    assert_matches_eager(caller, lambda i: call(vec(i), io.StringIO()))
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
    assert_matches_eager(caller_of_caller, lambda i: call(vec(i), io.StringIO()))
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


@pytest.mark.parametrize("fn", [call_with_keywords, call_with_star_args, call_with_break_in_arguments])
def test_break_at_call_with_stack_below(fn):
    # KW_NAMES, CALL_FUNCTION_EX, and a NULL + callable below the broken argument
    assert_matches_eager(fn, lambda i: call(vec(i), io.StringIO()))


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


@pytest.mark.parametrize("fn", [break_deep_in_expression, call_callable_instance], ids=lambda f: f.__name__)
def test_break_inside_expressions(fn):
    assert_matches_eager(fn, lambda i: call(vec(i), io.StringIO()))


def test_break_in_method_call_argument():
    assert_matches_eager(call_method_with_break_in_argument, lambda i: call(vec(i), [i]))


# ---------------------------------------------------------------- unsupported opcodes

def import_inside(x):
    y = x * 2
    import math  # BREAK
    return y * math.pi


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


def match_statement(x):
    y = x * 2
    match x.shape:
        case (3,):  # BREAK
            y = y + 1
        case _:
            y = y - 1
    return y


def holder(i):
    obj = Holder()
    obj.value = i
    return obj


@pytest.mark.parametrize("fn, make, opcode", [
    (import_inside, lambda i: call(vec(i)), "IMPORT_NAME"),
    (delete_attribute, lambda i: call(vec(i), holder(i)), "DELETE_ATTR"),
    (class_inside, lambda i: call(vec(i)), "LOAD_BUILD_CLASS"),
    (match_statement, lambda i: call(vec(i, n=3 + i % 2)), "MATCH_SEQUENCE"),
], ids=lambda v: v if isinstance(v, str) else getattr(v, "__name__", ""))
def test_unsupported_opcode(fn, make, opcode):
    assert_matches_eager(fn, make, calls=3)
    report = explain(fn, *make(0).args)
    assert report.break_reasons[0].location == line_of(fn, "# BREAK")
    assert f"opcode {opcode} is not supported" in report.break_reasons[0].reason
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
        raise ValueError("bad value")  # BREAK
    except ValueError as err:
        message = str(err)
    return y + len(message)


def test_raise_matches_eager():
    assert_matches_eager(raise_after_ops, lambda i: call(vec(0, n=2 + i % 2)), calls=4)
    assert_matches_eager(raise_caught, lambda i: call(vec(i)))


def test_raise_is_one_break_with_a_readable_reason():
    report = explain(raise_caught, vec(0))
    brk = report.break_reasons[0]
    assert brk.location == line_of(raise_caught, "# BREAK")
    assert "ValueError" in brk.reason and "Variable(" not in brk.reason, brk.reason
    assert report.graph_break_count == 1, [str(b) for b in report.break_reasons]


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


# ---------------------------------------------------------------- fullgraph and logs

@pytest.mark.parametrize("fn, make", [
    (branch_on_sum, lambda: call(vec(0))),
    (item_then_use, lambda: call(vec(0))),
    (print_text, lambda: call(vec(0), io.StringIO())),
    (import_inside, lambda: call(vec(0))),
], ids=lambda v: getattr(v, "__name__", ""))
def test_fullgraph_raises_at_first_break(fn, make):
    arguments = make()
    with pytest.raises(fastdynamo.FullGraphError) as info:
        fastdynamo.compile(fn, fullgraph=True)(*arguments.args)
    assert line_of(fn, "# BREAK") in str(info.value)
    assert fn.__name__ in str(info.value)


def print_then_sin(x, buf):
    y = x * 2
    print("between", file=buf)  # BREAK
    return y.sin()


def test_logs_name_breaks_and_resume_recompiles(capsys):
    logs.set_logs("breaks,recompiles")
    compiled = fastdynamo.compile(print_then_sin)
    buf = io.StringIO()
    compiled(vec(0), buf)
    compiled(vec(1), buf)  # cache hit: nothing logged
    err = capsys.readouterr().err
    assert err.count("[fastdynamo:breaks]") == 1, err
    assert f"graph break in print_then_sin: {line_of(print_then_sin, '# BREAK')}: {PRINT_BREAK}" in err
    assert "[fastdynamo:recompiles]" not in err
    compiled(vec(0, n=5), buf)
    compiled(vec(0).double(), buf)
    err = capsys.readouterr().err
    resume = re.findall(r"recompiling (print_then_sin\.<resume at line \d+>) \(.*\): (.*)", err)
    assert len(resume) == 2, err
    assert "size()[0] == 3, got 5" in resume[0][1]
    assert "dtype == torch.float32, got torch.float64" in resume[1][1]
    assert err.count("recompiling print_then_sin (") == 2
    assert err.count("[fastdynamo:breaks]") == 2


def test_logs_from_environment(monkeypatch, capsys):
    monkeypatch.setenv("FASTDYNAMO_LOGS", "breaks,recompiles")
    importlib.reload(logs)
    try:
        assert logs.enabled("breaks") and logs.enabled("recompiles") and not logs.enabled("graph")
        fastdynamo.compile(print_then_sin)(vec(0), io.StringIO())
    finally:
        monkeypatch.delenv("FASTDYNAMO_LOGS")
        importlib.reload(logs)
    assert line_of(print_then_sin, "# BREAK") in capsys.readouterr().err


def captured_by_closure(x, buf):
    y = x * 2
    print("cell", file=buf)  # BREAK
    return (lambda: y + 1)()


def write_item(x, buf):
    return buf.write(str(x.sum().item()))  # BREAK


def test_logs_and_explain_when_a_frame_cannot_resume(capsys):
    # a break at LOAD_METHOD (the stack after it depends on the object) is not resumed
    logs.set_logs("breaks")
    assert_matches_eager(write_item, lambda i: call(vec(i), io.StringIO()))
    err = capsys.readouterr().err
    assert f"write_item runs as Python: {line_of(write_item, '# BREAK')}" in err
    report = explain(write_item, vec(0), io.StringIO())
    assert report.break_reasons[0].location == line_of(write_item, "# BREAK")


def test_explain_text_lists_every_break():
    report = explain(caller, vec(0), io.StringIO())
    text = str(report)
    assert f"Graph break count: {report.graph_break_count}" in text
    for brk in report.break_reasons:
        assert f"{brk.location}: {brk.reason}" in text
    assert "<resume at line" in text


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
    compiled = fastdynamo.compile(item_then_use)
    for i in range(4):
        with torch.set_grad_enabled(i % 2 == 0):
            assert_matches_eager(item_then_use, lambda _: call(leaf(0)), calls=1, compiled=compiled)


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


@pytest.mark.parametrize("cls", [PrintsThenSuper, SuperThenPrints], ids=lambda c: c.__name__)
def test_zero_argument_super_after_break(cls):
    # super() reads __class__ and the frame's first argument: in a resume function the
    # first argument must still be self
    model = cls()
    compiled = fastdynamo.compile(model)
    assert_matches_eager(model.forward, lambda i: call(vec(i), io.StringIO()), compiled=compiled)


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
    assert_matches_eager(many_parameters, make, calls=4)


def positional_defaults(x, y=None, factor=3, buf=None):
    z = x * factor
    print("defaults", y is None, file=buf)  # BREAK
    return z if y is None else z + y


def test_defaults_filled_and_overridden():
    assert_matches_eager(positional_defaults, lambda i: call(vec(i), buf=io.StringIO()) if i % 2 else
                         call(vec(i), vec(i + 1), 5, io.StringIO()), calls=4)


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
    compiled = fastdynamo.compile(closed)
    for value in (1, 7, 7, 2):
        set_offset(value)
        assert_matches_eager(closed, lambda i: call(vec(i), io.StringIO()), calls=1, compiled=compiled)
    report = explain(closed, vec(0), io.StringIO())
    assert_breaks(report, graphs=2, breaks=[(line_of(closed, "# BREAK"), PRINT_BREAK)])


def test_cell_variables_run_as_python():
    assert_matches_eager(captured_by_closure, lambda i: call(vec(i), io.StringIO()))


def recursive(x, n, buf):
    if n == 0:
        return x
    print("depth", n, file=buf)  # BREAK
    return recursive(x * 2, n - 1, buf)


def test_recursive_function_with_break():
    assert_matches_eager(recursive, lambda i: call(vec(i), 3 + i, io.StringIO()))


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
    assert_matches_eager(mutate_object_and_list, lambda i: call(vec(i), counter(i), [float(i)]), calls=4)
    assert_matches_eager(mutate_object_and_list,
                         lambda i: call(vec(i), types.SimpleNamespace(n=i), [float(i)]), calls=4)
    assert_matches_eager(mutate_dict, lambda i: call(vec(i), {"calls": i} if i % 2 else {}), calls=4)
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


@pytest.mark.parametrize("fn, make", [
    (store_print_store, lambda i: call(vec(i), counter(i), [i], io.StringIO())),
    (caller_stores, lambda i: call(vec(i), counter(i), io.StringIO())),
    (stores_around_loop_break, lambda i: call(vec(i), counter(i), io.StringIO())),
    (store_then_raise, lambda i: call(vec(i), counter(i))),
], ids=lambda v: getattr(v, "__name__", ""))
def test_stores_before_a_break_are_seen_by_it(fn, make):
    # recorded stores are replayed before the native region runs
    assert_matches_eager(fn, make, calls=3)


def store_then_graph_error(x, index, obj):
    obj.n += 1
    return x.index_select(0, index)  # an IndexError only the real data shows


def store_after_break_then_graph_error(x, index, obj, buf):
    print("before", file=buf)
    obj.n += 1
    return x.index_select(0, index)


def bad_index(i):
    return torch.tensor([1 if i == 0 else 7])


@pytest.mark.parametrize("fn, make", [
    (store_then_graph_error, lambda i: call(vec(i), bad_index(i), counter(i))),
    (store_after_break_then_graph_error, lambda i: call(vec(i), bad_index(i), counter(i), io.StringIO())),
], ids=lambda v: getattr(v, "__name__", ""))
def test_stores_before_an_error_raised_by_the_graph_happen(fn, make):
    # eager stores obj.n and then raises; the compiled run must leave obj.n the same
    assert_matches_eager(fn, make)


def test_in_place_tensor_updates_across_break():
    def inplace(x, buf):
        x.add_(1)
        print("between", file=buf)
        x.mul_(2)
        return x
    assert_matches_eager(inplace, lambda i: call(vec(i), io.StringIO()))


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


@pytest.mark.parametrize("fn", [aliased_list, list_aliased_in_containers, containers_and_constants,
                                iterators_across_break], ids=lambda f: f.__name__)
def test_python_values_rebuilt_at_the_break(fn):
    # Locals built during the trace are rebuilt before the break: a list two names refer
    # to must stay one list.
    assert_matches_eager(fn, lambda i: call(vec(i), io.StringIO()))


def item_of_many(x):
    y = x * 2
    return y.item()  # BREAK


def int_of_many(x):
    y = x * 2
    return int(y)  # BREAK


def test_error_at_the_break_itself():
    assert_matches_eager(item_of_many, lambda i: call(vec(i, n=1 + i % 2)), calls=4)
    assert_matches_eager(int_of_many, lambda i: call(vec(i, n=1 + i % 2)), calls=4)


def test_cache_entries_of_resume_functions():
    compiled = fastdynamo.compile(print_then_sin)
    for i in range(3):
        compiled(vec(i), io.StringIO())
    assert len(native().cache_entries(print_then_sin.__code__)) == 1
