"""Round-tripped functions (with every instruction moved) behave like the originals:
same results, same exceptions, same traceback line numbers."""
from __future__ import annotations

import asyncio
import sys
import traceback

import pytest

from fastdynamo.bytecode import assemble, instructions_from_code, version
from bytecode_test_utils import function_with_code, roundtrip, with_nops


def closures(n):
    total = 0

    def add(k):
        nonlocal total
        total += k + n
        return total

    for i in range(4):
        add(i)
    return total, add(10), (lambda: total * 2)()


def try_except_finally(x):
    log = []
    try:
        log.append("try")
        if x == 0:
            raise ValueError("zero")
        log.append(10 // x)
    except ValueError as e:
        log.append(f"value {e}")
    except ZeroDivisionError:
        log.append("div")
    else:
        log.append("else")
    finally:
        log.append("finally")
    try:
        try:
            return log, 1 / (x - 1)
        finally:
            log.append("inner finally")
    except ZeroDivisionError:
        return log, "outer"


class Resource:
    def __init__(self, log):
        self.log = log

    def __enter__(self):
        self.log.append("enter")
        return self

    def __exit__(self, *exc):
        self.log.append(f"exit {exc[0].__name__ if exc[0] else None}")
        return exc[0] is KeyError


def with_blocks(key):
    log = []
    with Resource(log) as r, Resource(log):
        r.log.append({"a": 1}[key])
    with Resource(log):
        log.append("body")
    return log


def generator(n):
    received = []
    for i in range(n):
        got = yield i * i
        received.append(got)
    yield from range(3)
    return received


def drive_generator(n):
    gen = generator(n)
    out = [next(gen)]
    try:
        while True:
            out.append(gen.send(len(out)))
    except StopIteration as stop:
        out.append(stop.value)
    return out


def comprehensions(xs):
    squares = [x * x for x in xs if x % 2]
    table = {x: [y for y in range(x) if y != 2] for x in xs}
    unique = {x % 3 for x in xs}
    lazy = sum(x for x in xs if x > 2)
    return squares, table, unique, lazy


def loops(n):
    out = []
    for i in range(n):
        if i == 2:
            continue
        j = 0
        while True:
            j += 1
            if j > i:
                break
            if j == 3:
                continue
            out.append((i, j))
        else:
            out.append("never")
        if i > 6:
            break
    else:
        out.append("for-else")
    return out


async def coroutine(n):
    await asyncio.sleep(0)
    total = 0
    async def inner(k):
        return k * 2
    for i in range(n):
        total += await inner(i)
    return total


def raises_on_line(x):
    y = x + 1
    z = [y, 2]
    return z[x]  # IndexError for x >= 2: the traceback must point here


def make_big_function():
    """Source for a function with > 256 constants and names and jumps longer than
    256 code units, so that EXTENDED_ARG is needed everywhere."""
    lines = ["def big(flag):", "    total = 0"]
    lines += [f"    v{i} = {i} + 1000" for i in range(300)]
    lines += ["    if flag:"]
    lines += [f"        total += v{i} * {i + 5000}" for i in range(300)]
    lines += ["    else:", "        total = -1", "    for k in range(3):"]
    lines += [f"        total += v{i}" for i in range(150)]
    lines += ["    return total"]
    namespace = {}
    exec(compile("\n".join(lines), "<big>", "exec"), namespace)
    return namespace["big"]


CASES = [
    (closures, (3,)),
    (try_except_finally, (0,)), (try_except_finally, (1,)), (try_except_finally, (5,)),
    (with_blocks, ("a",)), (with_blocks, ("missing",)),
    (drive_generator, (4,)),
    (comprehensions, ([1, 2, 3, 4, 5],)),
    (loops, (10,)), (loops, (3,)),
]


def _deep_roundtrip(fn):
    """Round-trip ``fn`` and, through the nested code objects in its constants,
    everything it defines (inner functions, comprehensions, generators)."""
    def transform(code):
        insts = instructions_from_code(code)
        for inst in insts:
            if inst.opname == "LOAD_CONST" and isinstance(inst.argval, type(code)):
                inst.argval = transform(inst.argval)
        return with_nops(assemble(insts, code))
    return function_with_code(fn, transform(fn.__code__))


def _outcome(fn, args):
    try:
        return ("ok", fn(*args))
    except Exception as e:  # noqa: BLE001 - comparing exceptions is the point
        return ("error", type(e), str(e))


@pytest.mark.parametrize("fn,args", CASES, ids=lambda v: getattr(v, "__name__", repr(v)))
def test_behaviour_is_unchanged(fn, args):
    expected = _outcome(fn, args)
    assert _outcome(roundtrip(fn), args) == expected
    # The helpers the case calls (generators, comprehensions) are rebuilt too.
    assert _outcome(_deep_roundtrip(fn), args) == expected


def test_generator_roundtrip_directly():
    gen_fn = _deep_roundtrip(generator)
    assert list(gen_fn(3)) == list(generator(3))


def test_coroutine_roundtrip():
    assert asyncio.run(_deep_roundtrip(coroutine)(5)) == asyncio.run(coroutine(5))


def test_large_function_needs_extended_args_and_still_runs():
    big = make_big_function()
    raw = big.__code__.co_code
    assert any(raw[i] == version.EXTENDED_ARG for i in range(0, len(raw), 2))
    again = roundtrip(big)
    assert again.__code__.co_code != raw  # moved by the NOPs
    assert again(True) == big(True) and again(False) == big(False)
    # NOPs everywhere push more jumps past 256 code units: still consistent.
    assert function_with_code(big, with_nops(big.__code__, every=1))(True) == big(True)


def _traceback_lines(fn, *args):
    try:
        fn(*args)
    except Exception:  # noqa: BLE001
        return [(f.name, f.lineno, f.colno, f.end_colno) if sys.version_info >= (3, 11)
                else (f.name, f.lineno)
                for f in traceback.extract_tb(sys.exc_info()[2])][1:]
    raise AssertionError("expected an exception")


@pytest.mark.parametrize("fn,args", [(raises_on_line, (5,)), (with_blocks, ([],)),
                                     (try_except_finally, ("s",))])
def test_traceback_points_at_the_same_source(fn, args):
    assert _traceback_lines(roundtrip(fn), *args) == _traceback_lines(fn, *args)


def test_exception_inside_nested_try_in_roundtripped_code():
    # Handlers, depths and lasti (re-raise from finally) must be right for the
    # exception to come out with its original type.
    rt = roundtrip(try_except_finally)
    with pytest.raises(TypeError):
        rt("text")
