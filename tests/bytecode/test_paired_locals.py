"""3.13's paired local opcodes (``LOAD_FAST_LOAD_FAST``, ``STORE_FAST_STORE_FAST``,
``STORE_FAST_LOAD_FAST``) pack two 4-bit local indices. Transformed code adds locals in
front of the original ones, so assembly unpacks a pair whose locals moved past the first
16 into its two single opcodes (T5's decoder has such a pair). On 3.11 and 3.12 the
functions below have no pairs and run the same way."""
from __future__ import annotations

from fastdynamo.bytecode import assemble, instructions_from_code
from bytecode_test_utils import function_with_code


def swap_and_add(a, b):
    x = a + 1
    y = b + 1
    x, y = y, x  # STORE_FAST_STORE_FAST from 3.13
    c = x - y  # LOAD_FAST_LOAD_FAST
    for i in range(2):
        c = c * 2 + i  # STORE_FAST_LOAD_FAST (i stored, c loaded)
    return x, y, c


def test_pairs_of_locals_moved_past_sixteen_run_as_before():
    code = swap_and_add.__code__
    padding = tuple(f"pad{i}" for i in range(20))
    # the new locals come after the arguments, pushing the others past the first 16
    varnames = code.co_varnames[:code.co_argcount] + padding + code.co_varnames[code.co_argcount:]
    moved = assemble(instructions_from_code(code), code, co_varnames=varnames)
    assert moved.co_varnames == varnames
    assert function_with_code(swap_and_add, moved)(3, 10) == swap_and_add(3, 10)
    # unchanged layout: the pairs stay pairs
    same = assemble(instructions_from_code(code), code)
    assert [op for op in same.co_code[::2]] == [op for op in code.co_code[::2]]
