"""Inserting code into real functions: prologues, code inside try blocks and loops,
enough code to need EXTENDED_ARG jumps."""
from __future__ import annotations

import pytest

from fastdynamo.bytecode import (
    assemble,
    create_call,
    create_call_function,
    create_instruction,
    create_load_const,
    create_load_global,
    create_push_null,
    insert_before,
    instructions_from_code,
    max_stack_depth,
    stack_depths,
)
from fastdynamo.bytecode import version
from bytecode_test_utils import function_with_code

RECORDED: list = []


def record(value):
    RECORDED.append(value)
    return "ignored"


def loop_with_try(items):
    total = 0
    for x in items:
        try:
            total += 10 // x
        except ZeroDivisionError:
            total -= 1
            continue
        if total > 100:
            break
    return total


def _totals_eagerly(items):
    totals, total = [0], 0
    for x in items:
        try:
            total += 10 // x
        except ZeroDivisionError:
            total -= 1
            totals.append(total)
            continue
        totals.append(total)
        if total > 100:
            break
    return totals


@pytest.fixture(autouse=True)
def _clear():
    RECORDED.clear()


def test_prologue_runs_first():
    insts = instructions_from_code(loop_with_try.__code__)
    resume = next(i for i, inst in enumerate(insts) if inst.opname == "RESUME")
    prologue = create_call_function([create_load_global("record")],
                                    [[create_instruction("LOAD_FAST", argval="items")]])
    prologue.append(create_instruction("POP_TOP"))
    insts[resume + 1:resume + 1] = prologue
    fn = function_with_code(loop_with_try, assemble(insts, loop_with_try.__code__))
    assert fn([1, 2, 0, 5]) == loop_with_try([1, 2, 0, 5])
    assert RECORDED == [[1, 2, 0, 5]]


def _record_top_of_stack():
    # [.., v] -> [.., v]; calls record(v) on the way. The call takes NULL, record, v
    # (3.13: record, NULL, v).
    if version.PY_3_13:
        callable_and_null = [create_load_global("record"), create_instruction("SWAP", arg=2),
                             create_push_null()]
    else:
        callable_and_null = [create_push_null(), create_instruction("SWAP", arg=2),
                             create_load_global("record")]
    return [create_instruction("COPY", arg=1), *callable_and_null,
            create_instruction("SWAP", arg=2), *create_call(1),
            create_instruction("POP_TOP")]


@pytest.mark.parametrize("items", [[1, 2, 0, 5], [0, 0], [1] * 20, []])
def test_code_inserted_inside_try_and_loop(items):
    code = loop_with_try.__code__
    insts = instructions_from_code(code)
    stores = [inst for inst in insts if inst.opname == "STORE_FAST" and inst.argval == "total"]
    assert any(store.exn_tab_entry is not None for store in stores)  # one is in the try
    depths = stack_depths(insts)
    deepest_store = max(depths[insts.index(store)] for store in stores)
    for store in stores:
        insert_before(insts, store, _record_top_of_stack())
    new = assemble(insts, code)
    # COPY, NULL and the callable sit on top of the stored value at once.
    assert new.co_stacksize == max(code.co_stacksize, deepest_store + 3)
    assert new.co_stacksize == max_stack_depth(instructions_from_code(new))
    assert function_with_code(loop_with_try, new)(items) == loop_with_try(items)
    assert RECORDED == _totals_eagerly(items)


def test_inserted_code_that_raises_is_caught_by_the_enclosing_handler():
    def guarded(x):
        try:
            y = x + 1
        except RuntimeError:
            return "handled"
        return y

    insts = instructions_from_code(guarded.__code__)
    store = next(i for i in insts if i.opname == "STORE_FAST" and i.argval == "y")
    boom = [create_load_global("RuntimeError"), create_instruction("RAISE_VARARGS", arg=1)]
    skip = create_instruction("POP_JUMP_IF_FALSE", target=store)
    insert_before(insts, store, [create_instruction("COPY", arg=1), create_load_const(5),
                                 create_instruction("COMPARE_OP", argval=">"), skip, *boom],
                  retarget=False)
    fn = function_with_code(guarded, assemble(insts, guarded.__code__))
    assert fn(1) == 2
    assert fn(10) == "handled"


def test_long_loop_body_needs_extended_arg_jumps():
    insts = instructions_from_code(loop_with_try.__code__)
    body_start = next(i for i in insts if i.opname == "STORE_FAST" and i.argval == "x")
    insert_before(insts, body_start, [create_instruction("NOP") for _ in range(400)],
                  retarget=False)
    new = assemble(insts, loop_with_try.__code__)
    raw = new.co_code
    assert any(raw[k] == version.EXTENDED_ARG for k in range(0, len(raw), 2))
    fn = function_with_code(loop_with_try, new)
    for items in ([1, 2, 0, 5], [1] * 20):
        assert fn(items) == loop_with_try(items)


def test_new_instructions_inherit_neighbour_lines():
    def f(x):
        y = x * 2
        return y

    insts = instructions_from_code(f.__code__)
    ret = next(i for i in insts if i.opname == "RETURN_VALUE")
    line_of_return = ret.positions.lineno
    insert_before(insts, ret, [create_instruction("NOP")])
    placed = create_instruction("NOP", starts_line=f.__code__.co_firstlineno)
    insert_before(insts, insts[1], [placed])
    new = assemble(insts, f.__code__)
    positions = list(new.co_positions())
    again = instructions_from_code(new)
    nops = [i for i in again if i.opname == "NOP"]
    assert nops[0].positions.lineno == f.__code__.co_firstlineno
    # The NOP before RETURN_VALUE follows LOAD_FAST y, on the return line.
    assert nops[1].positions.lineno == line_of_return
    assert nops[1].positions.col_offset is None
    assert len(positions) * 2 == len(new.co_code)


def test_argval_drives_indices_and_tables_grow():
    def f():
        return None

    resume = instructions_from_code(f.__code__)[0]
    ret = create_instruction("RETURN_VALUE")
    insts = [resume, create_load_const((1, 2.0, -0.0)), create_instruction("POP_TOP"),
             create_instruction("LOAD_CONST", argval=0.0),
             create_instruction("STORE_FAST", argval="fresh_local"),
             create_instruction("LOAD_FAST", argval="fresh_local"), ret]
    new = assemble(insts, f.__code__)
    assert new.co_varnames == ("fresh_local",) and new.co_nlocals == 1
    assert (1, 2.0, -0.0) in new.co_consts
    assert function_with_code(f, new)() == 0.0
    assert ret.opname == "RETURN_VALUE"


def test_missing_cell_variable_is_an_error():
    def f():
        return 1

    insts = instructions_from_code(f.__code__)
    insts.insert(1, create_instruction("LOAD_DEREF", argval="nope"))
    with pytest.raises(ValueError, match="cell or free"):
        assemble(insts, f.__code__)


def test_bound_pairs_must_stay_adjacent():
    # 3.11: PRECALL, CALL; 3.12: KW_NAMES, CALL; 3.13: END_FOR, POP_TOP.
    (first, second), = version.MUST_BE_FOLLOWED_BY.items()
    first_inst = {"PRECALL": lambda: create_instruction("PRECALL", arg=1),
                  "KW_NAMES": lambda: create_instruction("KW_NAMES", argval=("key",)),
                  "END_FOR": lambda: create_instruction("END_FOR")}[first]()
    insts = [create_push_null(), create_load_global("len"), create_load_const("ab"),
             first_inst, create_instruction("NOP"),
             create_instruction(second, arg=1 if second == "CALL" else None),
             create_instruction("RETURN_VALUE")]
    with pytest.raises(ValueError, match="directly followed"):
        assemble(insts, (lambda: None).__code__)
