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
