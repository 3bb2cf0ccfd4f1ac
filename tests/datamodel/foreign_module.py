"""A module of helpers whose globals the compiled frames in test_foreign_globals.py read
through the functions' ``__globals__``."""
import torch

SCALE = 3
OFFSETS = {"a": 1}


def scaled(t):
    return t * SCALE + helper(t)


def helper(t):
    return t + OFFSETS["a"]


def make_adder(n):
    def add(t):
        return t + n * SCALE
    return add


class Shifter:
    shift = 2

    def __init__(self, k):
        self.k = k

    def apply(self, t):
        return scaled(t) + self.k * SCALE

    @staticmethod
    def static(t):
        return t - SCALE


def use_torch(t):
    return torch.relu(t) * SCALE


HANDLERS = [scaled, helper]
