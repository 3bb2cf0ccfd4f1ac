"""Exception table, location table and stack depth against CPython's own output."""
from __future__ import annotations

import dis

import pytest
from hypothesis import given, strategies as st

from fastdynamo.bytecode import (
    StackDepthError,
    create_instruction,
    instructions_from_code,
    max_stack_depth,
    stack_depths,
)
from fastdynamo.bytecode.exception_table import (
    RawExceptionEntry,
    encode_exception_table,
    parse_exception_table,
)
from fastdynamo.bytecode.line_table import encode_line_table, parse_line_table
from bytecode_test_utils import stdlib_codes


def test_exception_table_parse_matches_dis_and_reencodes():
    checked = 0
    for code in stdlib_codes():
        ours = parse_exception_table(code.co_exceptiontable)
        theirs = dis._parse_exception_table(code)
        assert [(e.start, e.end, e.target, e.depth, e.lasti) for e in ours] == \
               [(e.start, e.end, e.target, e.depth, e.lasti) for e in theirs]
        assert encode_exception_table(ours) == code.co_exceptiontable
        checked += bool(ours)
    assert checked > 500


def test_line_table_parse_matches_co_positions_and_reencodes():
    for code in stdlib_codes():
        entries = parse_line_table(code.co_linetable, code.co_firstlineno)
        expanded = [pos for length, pos in entries for _ in range(length)]
        assert [tuple(p) for p in expanded] == list(code.co_positions())
        assert encode_line_table([(pos, length) for length, pos in entries],
                                 code.co_firstlineno) == code.co_linetable


@given(st.lists(st.tuples(st.integers(0, 1 << 20), st.integers(1, 1 << 12),
                          st.integers(0, 1 << 20), st.integers(0, 300), st.booleans()),
                max_size=20))
def test_exception_table_encoding_property(rows):
    entries = [RawExceptionEntry(2 * s, 2 * (s + n), 2 * t, d, lasti)
               for s, n, t, d, lasti in rows]
    assert parse_exception_table(encode_exception_table(entries)) == entries


_line = st.integers(1, 100_000)


@given(st.integers(1, 1000), st.lists(st.tuples(
    st.one_of(
        st.just(dis.Positions(None, None, None, None)),
        st.builds(lambda l: dis.Positions(l, l, None, None), _line),
        st.builds(lambda l, dl, c, w: dis.Positions(l, l + dl, c, c + w if dl == 0 else w),
                  _line, st.integers(0, 3), st.integers(0, 300), st.integers(0, 300)),
    ),
    st.integers(1, 20)), max_size=30))
def test_line_table_encoding_property(first_line, runs):
    table = encode_line_table(runs, first_line)
    expanded = [pos for length, pos in parse_line_table(table, first_line) for _ in range(length)]
    assert expanded == [pos for pos, size in runs for _ in range(size)]


def test_stack_size_matches_cpython():
    total = equal = 0
    for code in stdlib_codes():
        ours = max_stack_depth(instructions_from_code(code))
        assert ours >= code.co_stacksize, code
        total += 1
        equal += ours == code.co_stacksize
    # Measured: every stdlib code object agrees; allow a little slack for
    # compiler corner cases (an empty try body keeps a handler CPython counts).
    assert equal / total >= 0.995, (equal, total)


def test_stack_depths_at_known_points():
    def f(a, b):
        try:
            return a[b]
        except KeyError:
            return None

    insts = instructions_from_code(f.__code__)
    depths = stack_depths(insts)
    for inst, depth in zip(insts, depths):
        if inst.opname == "RETURN_VALUE":
            assert depth == 1
        if inst.opname == "RESUME":
            assert depth == 0
    handler = next(i.exn_tab_entry.target for i in insts if i.exn_tab_entry)
    entry = next(i.exn_tab_entry for i in insts if i.exn_tab_entry)
    assert depths[insts.index(handler)] == entry.depth + entry.lasti + 1


def test_unreachable_instructions_have_no_depth():
    ret = create_instruction("RETURN_VALUE")
    insts = [create_instruction("LOAD_CONST", argval=None), ret,
             create_instruction("LOAD_CONST", argval=1), create_instruction("RETURN_VALUE")]
    assert stack_depths(insts) == [0, 1, None, None]


def test_inconsistent_stack_is_reported():
    end = create_instruction("RETURN_VALUE")
    insts = [create_instruction("LOAD_CONST", argval=True),
             create_instruction("POP_JUMP_IF_TRUE", target=end),
             create_instruction("LOAD_CONST", argval=1),
             create_instruction("LOAD_CONST", argval=2),
             end]
    with pytest.raises(StackDepthError):
        stack_depths(insts)


def test_stack_underflow_is_reported():
    insts = [create_instruction("POP_TOP"), create_instruction("LOAD_CONST", argval=None),
             create_instruction("RETURN_VALUE")]
    with pytest.raises(StackDepthError):
        max_stack_depth(insts)
