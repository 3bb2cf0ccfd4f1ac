"""Opcode families, one small function each, plus the tested list of supported opcodes
and the unsupported path (reasons with file:line, never a wrong result)."""
from __future__ import annotations

import dis

import pytest
import torch

from fastdynamo.capture import SUPPORTED_OPCODES, Broken
from fastdynamo.capture.translator import InstructionTranslator
from .asserting_programs import assertion_passes
from .helpers import capture, check_capture

# Every version's handled opcodes; each version supports those of them it has.
HANDLED_ON_SOME_VERSION = {
    # stack and no-ops
    "NOP", "RESUME", "PRECALL", "COPY_FREE_VARS", "POP_TOP", "PUSH_NULL", "COPY", "SWAP",
    # loads and stores
    "LOAD_FAST", "STORE_FAST", "DELETE_FAST", "LOAD_CONST", "LOAD_GLOBAL", "STORE_GLOBAL", "MAKE_CELL",
    "LOAD_CLOSURE", "LOAD_DEREF", "STORE_DEREF", "LOAD_ATTR", "LOAD_METHOD", "STORE_ATTR", "DELETE_ATTR",
    "LOAD_ASSERTION_ERROR",
    # operators
    "BINARY_OP", "UNARY_NEGATIVE", "UNARY_POSITIVE", "UNARY_INVERT", "UNARY_NOT", "COMPARE_OP", "IS_OP",
    "CONTAINS_OP", "BINARY_SUBSCR", "STORE_SUBSCR", "DELETE_SUBSCR",
    # control flow
    "JUMP_FORWARD", "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT", "POP_JUMP_FORWARD_IF_TRUE",
    "POP_JUMP_FORWARD_IF_FALSE", "POP_JUMP_BACKWARD_IF_TRUE", "POP_JUMP_BACKWARD_IF_FALSE",
    "POP_JUMP_FORWARD_IF_NONE", "POP_JUMP_FORWARD_IF_NOT_NONE", "POP_JUMP_BACKWARD_IF_NONE",
    "POP_JUMP_BACKWARD_IF_NOT_NONE", "JUMP_IF_TRUE_OR_POP", "JUMP_IF_FALSE_OR_POP", "RETURN_VALUE",
    "RAISE_VARARGS",
    # calls
    "KW_NAMES", "CALL", "CALL_FUNCTION_EX", "MAKE_FUNCTION",
    # containers
    "BUILD_TUPLE", "BUILD_LIST", "BUILD_SET", "BUILD_MAP", "BUILD_CONST_KEY_MAP", "BUILD_SLICE",
    "BUILD_STRING", "FORMAT_VALUE", "LIST_APPEND", "SET_ADD", "MAP_ADD", "LIST_EXTEND", "SET_UPDATE",
    "DICT_UPDATE", "DICT_MERGE", "LIST_TO_TUPLE", "UNPACK_SEQUENCE", "UNPACK_EX",
    # iteration and generators
    "GET_ITER", "FOR_ITER", "RETURN_GENERATOR", "YIELD_VALUE", "GET_YIELD_FROM_ITER", "SEND",
    # with blocks
    "BEFORE_WITH",
    # imports of modules already imported
    "IMPORT_NAME", "IMPORT_FROM",
    # exceptions raised and handled in traced code
    "PUSH_EXC_INFO", "POP_EXCEPT", "CHECK_EXC_MATCH", "RERAISE",
    # pattern matching
    "MATCH_MAPPING", "MATCH_SEQUENCE", "MATCH_KEYS", "MATCH_CLASS", "GET_LEN",
    # 3.12: direction-free conditional jumps, slices, loops, constants, intrinsics,
    # inlined comprehensions, super()
    "POP_JUMP_IF_TRUE", "POP_JUMP_IF_FALSE", "POP_JUMP_IF_NONE", "POP_JUMP_IF_NOT_NONE",
    "BINARY_SLICE", "STORE_SLICE", "END_FOR", "END_SEND", "RETURN_CONST", "CALL_INTRINSIC_1",
    "CALL_INTRINSIC_2", "CLEANUP_THROW", "LOAD_FAST_CHECK", "LOAD_FAST_AND_CLEAR", "LOAD_SUPER_ATTR",
    # 3.13: bool conversion, paired locals, keyword calls, formatting, function parts
    "TO_BOOL", "LOAD_FAST_LOAD_FAST", "STORE_FAST_STORE_FAST", "STORE_FAST_LOAD_FAST", "CALL_KW",
    "FORMAT_SIMPLE", "FORMAT_WITH_SPEC", "CONVERT_VALUE", "SET_FUNCTION_ATTRIBUTE",
}
EXPECTED_SUPPORTED = HANDLED_ON_SOME_VERSION & {name for name, op in dis.opmap.items() if op <= 255}


def test_supported_opcode_list():
    assert SUPPORTED_OPCODES == EXPECTED_SUPPORTED
    assert SUPPORTED_OPCODES <= set(dis.opmap)


def test_unknown_opcode_goes_to_one_place():
    def defines_class(x):
        class Local:  # LOAD_BUILD_CLASS has no handler
            pass
        return x * 2, Local

    result, _ = capture(defines_class, torch.ones(2))
    assert isinstance(result, Broken)
    assert "opcode LOAD_BUILD_CLASS is not supported" in result.reason.reason
    assert result.reason.location.endswith(f":{defines_class.__code__.co_firstlineno + 1}")
    assert hasattr(InstructionTranslator, "unsupported_opcode")


def stack_ops(x, y):
    a, b = y, x  # SWAP
    c = x + 0
    c += a  # in-place on an intermediate
    return a - b, c


def load_store(x):
    y = x
    del x
    z = y.shape
    return y * z[0]


def unary(x, flag):
    return -x, +x, ~(x > 0), not flag


def compare_is_contains(x, n):
    return (x < n, n <= 3, n == 2, n != 1, n is None, n is not None, n in (1, 2, 3),
            "a" not in "bcd", x is x)


def subscript_ops(x):
    d = {"a": 1, "b": 2}
    del d["a"]
    lst = [x, x * 2, 3]
    lst[2] = x + 1
    y = x.clone()
    y[0] = 5.0
    return d, lst[1:], y


def jumps(x, n):
    i = 0
    while i < n:
        x = x + 1
        i += 1
    ok = n > 2 and n < 10 or n == 0
    return x, ok


def calls(x):
    def kw(a, *, scale=1, **rest):
        return a * scale + len(rest)

    args = [x]
    return kw(x, scale=2), kw(*args, scale=3, extra=1), torch.sum(x, dim=0, keepdim=True)


def containers(x):
    t = (x + 1, 1)  # one tensor operation: a frame without any runs as Python
    s = {1, 2}
    s.add(3)
    d = {"k": x, **{"j": 2}}
    lst = [*t, *[4, 5]]
    return t, sorted(s), d, lst, tuple(lst), f"{len(lst):03d}-{'x'!r}"


def iteration(x):
    out = []
    for i, row in enumerate(x):
        out.append(row * i)
    gen = sum(v for v in range(4))
    return out, gen, {k: v for k, v in zip("ab", out)}, {v % 2 for v in range(5)}


def cells(x):
    counter = 0

    def bump():
        nonlocal counter
        counter += 1
        return counter

    bump()
    bump()
    return x * counter


@pytest.mark.parametrize("fn,args", [
    (stack_ops, (torch.ones(2), torch.ones(2) * 3)),
    (load_store, (torch.ones(2),)),
    (unary, (torch.randn(3), False)),
    (compare_is_contains, (torch.randn(3), 2)),
    (subscript_ops, (torch.randn(3),)),
    (jumps, (torch.randn(3), 3)),
    (calls, (torch.randn(3),)),
    (containers, (torch.randn(3),)),
    (iteration, (torch.randn(3, 2),)),
    (cells, (torch.randn(2),)),
    (assertion_passes, (torch.randn(2),)),
], ids=lambda v: getattr(v, "__name__", ""))
def test_opcode_family(fn, args):
    check_capture(fn, *args)


def test_invert_on_bool_tensor():
    check_capture(lambda x: ~(x > 0), torch.randn(3))


UNSUPPORTED = [
    (lambda x: x.item(), "item"),
    (lambda x: x.tolist(), "tolist"),
    (lambda x: torch.nonzero(x), "nonzero"),
    (lambda x: x.nonzero(), "nonzero"),
    (lambda x: x + 1 if x.sum() > 0 else x, "Python bool"),
    (lambda x: print(x), "print"),
    (lambda x: torch.add(x, 1, out=x), "out=...) writes outside the graph"),
    (lambda x: x.unsqueeze_(0), "in-place unsqueeze_ changes the size"),
    (lambda x: float(x.sum()), "Python number"),
]


@pytest.mark.parametrize("fn,needle", UNSUPPORTED, ids=[n for _, n in UNSUPPORTED])
def test_unsupported_constructs_are_reported(fn, needle):
    result, run = capture(fn, torch.randn(3))
    assert run is None
    assert isinstance(result, Broken)
    assert needle in result.reason.reason
    assert "test_opcodes.py:" in result.reason.location


def test_assertion_failure_is_unsupported_not_wrong():
    result, _ = capture(assertion_passes, torch.randn(2, 2))
    assert isinstance(result, Broken) and "raise" in result.reason.reason
