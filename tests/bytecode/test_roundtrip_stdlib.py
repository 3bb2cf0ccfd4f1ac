"""Every code object of a large set of stdlib modules survives decode -> assemble."""
from __future__ import annotations

import pytest

from fastdynamo.bytecode import assemble, instructions_from_code
from bytecode_test_utils import STDLIB_MODULES, module_codes, strip_nops, with_nops

_FIELDS = ("co_code", "co_consts", "co_names", "co_varnames", "co_linetable",
           "co_exceptiontable", "co_stacksize", "co_nlocals")


@pytest.mark.parametrize("module", STDLIB_MODULES)
def test_unedited_roundtrip_is_identical(module):
    codes = module_codes(module)
    assert len(codes) > 5
    for code in codes:
        new = assemble(instructions_from_code(code), code)
        for field in _FIELDS:
            assert getattr(new, field) == getattr(code, field), (code, field)
        assert new == code
        assert list(new.co_positions()) == list(code.co_positions())


@pytest.mark.parametrize("module", STDLIB_MODULES)
def test_roundtrip_after_moving_everything(module):
    # A NOP before every instruction: all offsets, jump arguments, exception ranges
    # and location entries change; the instruction stream minus NOPs must not.
    for code in module_codes(module):
        moved = with_nops(code)
        assert len(moved.co_code) > len(code.co_code) or len(code.co_code) <= 2
        assert strip_nops(moved) == strip_nops(code), code
        assert moved.co_stacksize == code.co_stacksize, code


def test_already_compiled_functions_roundtrip():
    # Code objects from imported modules (not recompiled here), specialised or not:
    # co_code is the unspecialised form either way.
    import json
    import collections

    for _ in range(10):  # let the adaptive interpreter specialise
        json.dumps({"a": [1, 2.5, None]})
        collections.Counter("abca").most_common(1)
    for fn in (json.dumps, json.JSONEncoder.iterencode, collections.Counter.most_common,
               collections.namedtuple):
        code = fn.__code__
        assert assemble(instructions_from_code(code), code) == code


def test_many_code_objects_are_covered():
    total = sum(len(module_codes(m)) for m in STDLIB_MODULES)
    assert total > 3000
