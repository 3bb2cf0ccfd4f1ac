"""``functools.wraps``-decorated wrappers forwarding ``*args, **kwargs``: defined outside
the frame, and made inside it (the wrapper's copied attributes are modelled and rebuilt
when it leaves the frame)."""
import functools

import torch

from .object_helpers import compare, fresh


def add_one(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs) + 1
    return wrapper


@add_one
def scaled(t, k=2):
    """Doc of scaled."""
    return t * k


def test_decorated_function_called_from_frame():
    compare(lambda x: scaled(x, k=3) + scaled(x), fresh(torch.ones(2)), fullgraph=True)


def test_wrapper_attributes_read_in_frame():
    def fn(x):
        return scaled.__name__, scaled.__wrapped__(x), x + 1

    compare(fn, fresh(torch.ones(2)), graphs=1, breaks=0)


def test_wraps_applied_inside_the_frame():
    def fn(x):
        wrapped = add_one(scaled.__wrapped__)
        return wrapped(x, k=4), wrapped.__name__, wrapped.__doc__, wrapped.__wrapped__ is scaled.__wrapped__

    compare(fn, fresh(torch.ones(2)), fullgraph=True)


def test_wrapper_made_in_frame_escapes_with_its_attributes():
    def fn(x):
        @functools.wraps(torch.relu)
        def relu_plus(*args, **kwargs):
            return torch.relu(*args, **kwargs) + 1
        return relu_plus(x), relu_plus

    def check(x):
        y, f = fn(x)
        return y, f.__name__, f.__qualname__, f.__wrapped__ is torch.relu, f(x)

    compare(check, fresh(-torch.ones(2)), fullgraph=True)


def test_wraps_applied_to_a_lambda_made_in_the_frame():
    """The lambda's name, qualname, module, doc and (empty) annotations are read as
    CPython gives them, then ``__wrapped__`` is the lambda itself."""
    def fn(x):
        shift = lambda t: t - 1  # noqa: E731 - a function made by the frame
        wrapped = add_one(shift)
        names = (wrapped.__name__, wrapped.__qualname__, wrapped.__module__, wrapped.__doc__)
        return wrapped(x), names, wrapped.__wrapped__ is shift, wrapped.__annotations__ is shift.__annotations__

    compare(fn, fresh(torch.ones(2)), fullgraph=True)


def test_wraps_copies_the_attributes_a_frame_set_on_its_lambda():
    def fn(x):
        shift = lambda t: t * 3  # noqa: E731
        shift.tag = "scaled"
        wrapped = add_one(shift)
        return wrapped(x), wrapped.tag, shift.__doc__

    compare(fn, fresh(torch.ones(2)), fullgraph=True)


def test_wraps_applied_to_a_closure_made_in_the_frame():
    def fn(x):
        k = 5

        def times_k(t):
            """Doc of times_k."""
            return t * k
        wrapped = add_one(times_k)
        return wrapped(x), wrapped.__doc__, wrapped.__qualname__

    compare(fn, fresh(torch.ones(2)), fullgraph=True)
