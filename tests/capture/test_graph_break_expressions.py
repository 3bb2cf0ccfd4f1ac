"""Graph breaks in the middle of an expression: the stack below the break (operands,
a NULL and a callable, keyword names, a bound method) is rebuilt for the native region
and handed to the resume function. Breaks at LOAD_ATTR (a property), STORE_ATTR (a
custom ``__setattr__``), UNPACK_SEQUENCE/UNPACK_EX (a user iterable, a C call),
CALL_FUNCTION_EX and KW_NAMES calls, chained comparisons, ``and``/``or`` and a subscript
key. Compiled (``backend="eager"``) against eager over three calls, with the number of
graphs captured."""
from __future__ import annotations

import io

import pytest

from .break_helpers import assert_matches_eager, call, vec

pytestmark = pytest.mark.usefixtures("fresh_cache")


class Prop:
    def __init__(self, buf):
        self.buf = buf

    @property
    def v(self):
        print("get v", file=self.buf)
        return 2.0


class Setter:
    def __init__(self, buf):
        self.__dict__["buf"] = buf

    def __setattr__(self, k, v):
        print("set", k, file=self.buf)
        self.__dict__[k] = v


class Triple:
    def __init__(self, buf):
        self.buf = buf

    def __iter__(self):
        print("iter", file=self.buf)
        yield from (1.0, 2.0, 3.0)


def load_attr_mid_expression(x, buf):
    obj = Prop(buf)
    return x * 2 + x * obj.v  # BREAK at LOAD_ATTR with x * 2 on the stack


def store_attr_custom_setattr(x, buf):
    s = Setter(buf)
    y = x + 1
    s.a = y.sum()  # BREAK at STORE_ATTR
    return y, s.a


def unpack_user_iterable(x, buf):
    a, *rest = Triple(buf)  # BREAK at UNPACK_EX
    b, c = rest
    return x * a + b - c


def chained_comparison(x, buf):
    if 0 < x.sum() < 10:  # BREAK with the middle operand kept on the stack
        print("in", file=buf)
        return x + 1
    return x - 1


def and_or_break(x, buf):
    y = x + 1
    z = (x.sum() > 0) and (print("and", file=buf) or 5)
    return y, z


def break_in_subscript_key(x, table, buf):
    y = x + 1
    v = table[print("key", file=buf) or "a"]  # BREAK in a subscript expression
    return y * v


def unpack_from_call(x, buf):
    a, b = divmod(int(x.sum().item()), 3)  # BREAK
    return x * a + b


def print_star_args(x, buf, *parts):
    y = x + 1
    print(*parts, y.shape, file=buf)  # BREAK at CALL_FUNCTION_EX
    return y * 2


def print_kw_in_call(x, buf):
    y = x + 1
    print("a", "b", sep="-", end="!\n", file=buf)  # BREAK at CALL with KW_NAMES
    return y * 2


def star_args_and_kwargs_call(x, buf):
    opts = {"sep": "-", "file": buf}
    parts = ["a", x.shape[0]]
    print(*parts, **opts)  # BREAK at CALL_FUNCTION_EX 1
    return x * 2


# graphs over three calls: constructing a user object breaks and its methods run as
# frames of their own; a resume function specialized on a Python value (the sum in
# chained_comparison, the divmod in unpack_from_call, the parts of print_star_args)
# compiles per value
@pytest.mark.parametrize("fn, make, graphs", [
    (load_attr_mid_expression, lambda i: call(vec(i), io.StringIO()), 2),
    (store_attr_custom_setattr, lambda i: call(vec(i), io.StringIO()), 1),
    (unpack_user_iterable, lambda i: call(vec(i), io.StringIO()), 1),
    (chained_comparison, lambda i: call(vec(i), io.StringIO()), 5),
    (and_or_break, lambda i: call(vec(i), io.StringIO()), 1),
    (break_in_subscript_key, lambda i: call(vec(i), {"a": 2.0}, io.StringIO()), 2),
    (unpack_from_call, lambda i: call(vec(i), io.StringIO()), 4),
    (print_star_args, lambda i: call(vec(i), io.StringIO(), "p", i), 4),
    (print_kw_in_call, lambda i: call(vec(i), io.StringIO()), 2),
    (star_args_and_kwargs_call, lambda i: call(vec(i), io.StringIO()), 1),
], ids=lambda v: getattr(v, "__name__", str(v)))
def test_break_mid_expression(fn, make, graphs):
    assert_matches_eager(fn, make, graphs=graphs)
