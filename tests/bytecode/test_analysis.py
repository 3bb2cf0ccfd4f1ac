"""Jump targets, blocks, reachability and liveness on small known functions."""
from __future__ import annotations

from fastdynamo.bytecode import (
    basic_blocks,
    create_instruction,
    create_jump,
    format_side_by_side,
    instructions_from_code,
    jump_targets,
    live_locals,
    liveness,
    reachable,
)
from bytecode_test_utils import stdlib_codes


def _first(insts, opname, argval=None):
    return next(i for i in insts if i.opname == opname and (argval is None or i.argval == argval))


def straight(a, b):
    c = a + 1
    if b:
        return c
    d = 2
    return d + a


def test_liveness_straight_line_and_branch():
    insts = instructions_from_code(straight.__code__)
    live = liveness(insts)
    at = {id(i): s for i, s in zip(insts, live)}
    assert at[id(insts[0])] == {"a", "b"}
    assert at[id(_first(insts, "STORE_FAST", "c"))] == {"a", "b"}  # c is written here
    assert at[id(_first(insts, "LOAD_FAST", "b"))] == {"a", "b", "c"}
    assert at[id(_first(insts, "STORE_FAST", "d"))] == {"a"}
    assert at[id(insts[-1])] == frozenset()


def handler_reads(x):
    seen = 0
    try:
        seen = 1
        x = x / 0
    except ZeroDivisionError:
        return seen, x
    return 0


def test_handler_keeps_locals_live_through_try_body():
    insts = instructions_from_code(handler_reads.__code__)
    store_x = _first(insts, "STORE_FAST", "x")
    # x is overwritten by the store, but if the division raises the handler reads
    # the old x: both are live before the division's store.
    assert {"x", "seen"} <= live_locals(insts, store_x)


def deletes(a):
    b = a
    del b
    return a


def test_delete_counts_as_a_read():
    insts = instructions_from_code(deletes.__code__)
    assert "b" in live_locals(insts, _first(insts, "DELETE_FAST", "b"))


def cells(a):
    def inner():
        return a + k
    k = 1
    return inner


def test_cells_are_always_live():
    insts = instructions_from_code(cells.__code__)
    assert {"a", "k"} <= live_locals(insts, insts[-1])


def loop(n):
    total = 0
    for i in range(n):
        total += i
    return total


def test_jump_targets_and_blocks():
    insts = instructions_from_code(loop.__code__)
    for_iter = _first(insts, "FOR_ITER")
    targets = jump_targets(insts)
    assert for_iter in targets and for_iter.target in targets
    blocks = basic_blocks(insts)
    starts = [b.start for b in blocks]
    assert insts.index(for_iter) in starts
    head = starts.index(insts.index(for_iter))
    assert sorted(blocks[head].successors) == [head + 1, starts.index(insts.index(for_iter.target))]
    # Blocks tile the list.
    assert blocks[0].start == 0 and blocks[-1].end == len(insts)
    assert all(a.end == b.start for a, b in zip(blocks, blocks[1:]))


def test_reachable_skips_dead_code():
    ret = create_instruction("RETURN_VALUE")
    dead = create_instruction("LOAD_CONST", argval=2)
    insts = [create_instruction("LOAD_CONST", argval=1), create_jump(ret), dead,
             create_instruction("POP_TOP"), ret]
    assert reachable(insts) == [True, True, False, False, True]


def test_all_stdlib_instructions_reachable_and_blocks_consistent():
    # CPython removes most unreachable code, so nearly every decoded function is
    # reachable throughout (handlers through the exception table); a few keep
    # dead tails the 3.11 optimiser leaves behind.
    codes = list(stdlib_codes())[:1500]
    fully = 0
    for code in codes:
        insts = instructions_from_code(code)
        fully += all(reachable(insts))
        blocks = basic_blocks(insts)
        assert sum(b.end - b.start for b in blocks) == len(insts)
    assert fully / len(codes) > 0.97


def test_side_by_side_listing():
    text = format_side_by_side(loop.__code__, straight.__code__)
    lines = text.splitlines()
    assert lines[0].startswith("ORIGINAL loop") and "TRANSFORMED straight" in lines[0]
    assert any("FOR_ITER" in line.split(" | ")[0] for line in lines)
    assert any(">>" in line for line in lines)  # jump targets marked
