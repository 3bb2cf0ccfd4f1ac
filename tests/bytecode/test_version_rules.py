"""Version rules of the bytecode layer that the stdlib round trips do not reach: a
conditional jump built to go backward (3.11 has backward twins; from 3.12 conditional
jumps only go forward, so assembly inverts the condition over a JUMP_BACKWARD), and the
call sequences of each version."""
from __future__ import annotations

from fastdynamo.bytecode import (
    assemble,
    create_call_function,
    create_instruction,
    create_load_const,
    create_load_global,
    instructions_from_code,
    version,
)
from bytecode_test_utils import function_with_code


def countdown(n):
    return n


def _countdown_with_backward_condition():
    """total = 0; loop: total += n; n -= 1; if n: goto loop; return total."""
    resume = instructions_from_code(countdown.__code__)[0]
    top = create_instruction("LOAD_FAST", argval="total")
    to_bool = [create_instruction("TO_BOOL")] if version.PY_3_13 else []  # 3.13 jumps on bools only
    return [
        resume,
        create_load_const(0), create_instruction("STORE_FAST", argval="total"),
        top, create_instruction("LOAD_FAST", argval="n"),
        create_instruction("BINARY_OP", arg=13),  # +=
        create_instruction("STORE_FAST", argval="total"),
        create_instruction("LOAD_FAST", argval="n"), create_load_const(1),
        create_instruction("BINARY_OP", arg=23),  # -=
        create_instruction("STORE_FAST", argval="n"),
        create_instruction("LOAD_FAST", argval="n"), *to_bool,
        create_instruction("POP_JUMP_IF_TRUE", target=top),
        create_instruction("LOAD_FAST", argval="total"), create_instruction("RETURN_VALUE"),
    ]


def test_backward_conditional_jump_assembles_and_runs():
    code = assemble(_countdown_with_backward_condition(), countdown.__code__)
    assert function_with_code(countdown, code)(4) == 10
    names = [inst.opname for inst in instructions_from_code(code)]
    if version.PY_3_12:
        assert "POP_JUMP_IF_FALSE" in names and "JUMP_BACKWARD" in names
        assert "POP_JUMP_IF_TRUE" not in names
    else:
        assert "POP_JUMP_BACKWARD_IF_TRUE" in names


def test_call_sequence_of_this_version_runs():
    def host():
        return None

    resume = instructions_from_code(host.__code__)[0]
    call = create_call_function([create_load_global("divmod")],
                                [[create_load_const(17)], [create_load_const(5)]])
    insts = [resume, *call, create_instruction("RETURN_VALUE")]
    assert function_with_code(host, assemble(insts, host.__code__))() == (3, 2)
    names = [inst.opname for inst in insts]
    assert ("PRECALL" in names) == (not version.PY_3_12)


def test_keyword_call_sequence_of_this_version_runs():
    def host():
        return None

    resume = instructions_from_code(host.__code__)[0]
    call = create_call_function([create_load_global("int")],
                                [[create_load_const("ff")], [create_load_const(16)]],
                                kw_names=("base",))
    insts = [resume, *call, create_instruction("RETURN_VALUE")]
    assert function_with_code(host, assemble(insts, host.__code__))() == 255
    names = [inst.opname for inst in insts]
    assert ("CALL_KW" in names) == version.PY_3_13
    assert ("KW_NAMES" in names) == (not version.PY_3_13)


def test_method_call_sequence_of_this_version_runs():
    from fastdynamo.bytecode import create_call, create_load_method

    def host():
        return None

    resume = instructions_from_code(host.__code__)[0]
    insts = [resume, create_load_const("a-b"), create_load_method("split"),
             create_load_const("-"), *create_call(1), create_instruction("RETURN_VALUE")]
    assert function_with_code(host, assemble(insts, host.__code__))() == ["a", "b"]


def test_list_to_tuple_of_this_version_runs():
    from fastdynamo.bytecode import create_list_to_tuple

    def host():
        return None

    resume = instructions_from_code(host.__code__)[0]
    insts = [resume, create_load_const(1), create_load_const(2),
             create_instruction("BUILD_LIST", arg=2), *create_list_to_tuple(),
             create_instruction("RETURN_VALUE")]
    assert function_with_code(host, assemble(insts, host.__code__))() == (1, 2)


def test_closure_of_this_version_is_built_from_cells():
    """A closure tuple built from the frame's cells (3.12+: LOAD_FAST of the cell slot)."""
    from fastdynamo.bytecode import create_load_closure

    def outer():
        value = 41

        def inner():
            return value
        return inner

    inner = outer()
    insts = instructions_from_code(inner.__code__)
    body = [create_load_closure("value"), create_instruction("BUILD_TUPLE", arg=1),
            create_instruction("RETURN_VALUE")]
    start = next(i for i, inst in enumerate(insts) if inst.opname == "RESUME") + 1
    code = assemble(insts[:start] + body, inner.__code__)
    cells = function_with_code(inner, code)()
    assert [cell.cell_contents for cell in cells] == [41]


def test_pseudo_instructions_are_refused():
    import pytest

    for name in ("LOAD_METHOD", "SETUP_FINALLY", "JUMP_NO_INTERRUPT"):
        if version.OPMAP.get(name, 0) > 255:
            with pytest.raises(ValueError, match="pseudo-instruction"):
                create_instruction(name, arg=0)
