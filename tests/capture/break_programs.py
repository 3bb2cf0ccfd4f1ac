"""Programs with ``assert`` statements that break the graph, kept out of test modules
because pytest rewrites asserts there (the translator must see CPython's own bytecode)."""
import torch


def assert_on_tensor(x):
    y = x * 2
    assert y.sum() > 0, "sum must be positive"  # BREAK
    return y + 1


def assert_in_no_grad(x):
    with torch.no_grad():
        y = x * 2
        assert y.sum() > 0, "sum must be positive"  # BREAK
    return y + x
