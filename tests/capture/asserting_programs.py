"""Functions with ``assert`` statements, kept out of test modules because pytest
rewrites asserts there (the translator must see CPython's own bytecode)."""


def assertion_passes(x):
    assert x.dim() == 1, "must be 1-d"
    return x + 1
