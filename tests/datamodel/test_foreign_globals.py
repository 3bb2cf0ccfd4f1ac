"""Functions defined in another module, called from traced code: their globals are
read through the function object (``fn.__globals__[name]``), guarded, and reloaded."""
import torch

import fastdynamo
from fastdynamo.convert_frame import Recorder

from . import foreign_module
from .foreign_module import HANDLERS, Shifter, make_adder, scaled
from .object_helpers import compare, fresh


def test_imported_function_reading_its_globals():
    compare(lambda x: scaled(x), fresh(torch.ones(2)), fullgraph=True)


def test_function_through_module_attribute():
    compare(lambda x: foreign_module.use_torch(x) + foreign_module.helper(x), fresh(torch.ones(2)),
            fullgraph=True)


def test_method_of_a_foreign_class_on_an_argument_and_a_new_object():
    def fn(x, s):
        made = Shifter(2)
        return s.apply(x) + made.apply(x) + s.static(x)

    compare(fn, lambda: (torch.ones(2), Shifter(5)), fullgraph=True)


def test_closure_made_by_a_foreign_function():
    def fn(x, add):
        return add(x)

    compare(fn, lambda: (torch.ones(2), make_adder(4)), fullgraph=True)


def test_function_from_a_list_of_a_foreign_module():
    compare(lambda x: HANDLERS[0](x) + HANDLERS[1](x), fresh(torch.ones(2)), fullgraph=True)


def test_changing_a_foreign_global_recompiles():
    def fn(x):
        return scaled(x)

    fastdynamo.reset()
    recorder = Recorder()
    compiled = fastdynamo.compile(fn, backend="eager", _recorder=recorder)
    x = torch.ones(2)
    try:
        assert torch.equal(compiled(x), fn(x))
        foreign_module.SCALE = 10
        assert torch.equal(compiled(x), fn(x))
    finally:
        foreign_module.SCALE = 3
    assert len(recorder.captures) == 2
