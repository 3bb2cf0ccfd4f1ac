"""Functions of another module, called by corpus programs: their globals are this module's."""
import torch

SCALE = 3.0
OFFSETS = {"a": 1.0, "b": 2.0}


def scaled(t):
    return t * SCALE


def shifted(t, key="a"):
    return t + OFFSETS[key]


def uses_helper(t):
    return _helper(t) + SCALE


def _helper(t):
    return torch.relu(t)


class Accumulator:
    def __init__(self, start):
        self.total = start

    def add(self, t):
        self.total = self.total + t
        return self
