"""``super()`` in methods and ``__init__``, zero-argument and two-argument forms."""
import torch

from .object_helpers import compare, fresh


class Base:
    def __init__(self, t):
        self.t = t

    def value(self):
        return self.t + 1

    @property
    def doubled(self):
        return self.t * 2


class Child(Base):
    def __init__(self, t, k):
        super().__init__(t)
        self.k = k

    def value(self):
        return super().value() * self.k

    def explicit(self):
        return super().value() - 1

    def through_property(self):
        return super().doubled


class GrandChild(Child):
    def value(self):
        return super().value() + 100

    def skip_one(self):
        return super(Child, self).value()


class PlainInit:
    def __init__(self):
        super().__init__()  # object.__init__
        self.ready = True


def test_super_in_init_of_object_made_in_frame():
    def fn(x):
        c = Child(x, 3)
        return c.value(), c

    compare(fn, fresh(torch.ones(2)), fullgraph=True)


def test_super_methods_on_argument():
    def fn(x, c):
        return c.value(), c.explicit(), c.through_property()

    compare(fn, lambda: (torch.ones(2), Child(torch.ones(2), 2)), fullgraph=True)


def test_super_chain_and_two_argument_skip():
    def fn(x, g):
        return g.value() + x, g.skip_one()

    compare(fn, lambda: (torch.ones(2), GrandChild(torch.ones(2), 2)), fullgraph=True)


def test_super_init_reaching_object():
    def fn(x):
        p = PlainInit()
        return p.ready, x + 1

    compare(fn, fresh(torch.ones(2)), fullgraph=True)


class ModuleBase(torch.nn.Module):
    def forward(self, t):
        return t * 2


class ModuleChild(ModuleBase):
    def forward(self, t):
        return super().forward(t) + 1


def test_super_forward_in_module():
    compare(lambda x, m: m(x), lambda: (torch.ones(2), ModuleChild()), fullgraph=True)
