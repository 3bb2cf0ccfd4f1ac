"""When a compiled graph raises, the frame runs again as Python from its start.

The graph call is the first thing a transformed frame does, and nothing the frame does
is visible before it returns: side effects are replayed after it, locals are stored
after it. So when the graph raises an ``Exception`` the transformed code can call a
*fallback*, a copy of the code it replaced (marked ``SKIP``, so the hook runs it as
Python), with the frame's arguments, and return what it returns. The user then sees
exactly eager's behaviour: the error raised where eager raises it, caught by the frame's
own ``try``/``with`` blocks, stores made before it kept, grad mode restored by the
blocks it leaves.

A graph that writes to its inputs, or draws random numbers, cannot be run twice: it
gets no fallback (``can_rerun``), and its error propagates as before.

>>> def f(x):
...     return x + 1
>>> fallback_code(f.__code__) is not f.__code__
True
"""
from __future__ import annotations

import threading
import warnings
from contextlib import contextmanager
from types import CodeType
from typing import Any, Callable, Iterator

import torch

from ..bytecode import (
    ExceptionTableEntry,
    Instruction,
    create_call,
    create_call_function,
    create_callable,
    create_instruction,
    create_jump,
    create_list_to_tuple,
    create_load_closure,
    create_load_const,
    create_make_function,
    varargs_name,
    varkeywords_name,
    version,
)


def can_rerun(mutates_inputs: bool, draws_random: bool) -> bool:
    """Whether running the frame again after its graph raised is exact: not if the graph
    wrote to an input or consumed random numbers before raising (what the trace's ATen
    ops did, ``OutputGraph.mutates_inputs``/``draws_random``)."""
    return not (mutates_inputs or draws_random)


def fallback_for(runtime: Any, original: CodeType, mutates_inputs: bool,
                 draws_random: bool) -> CodeType | None:
    """The copy of ``original`` to run as Python when its graph raises, marked ``SKIP``
    in the native runtime; None when running the frame again would not be exact."""
    if not can_rerun(mutates_inputs, draws_random):
        return None
    fallback = fallback_code(original)
    runtime.set_code_action(fallback, runtime.SKIP)
    return fallback


def set_grad_mode(mode: bool) -> list[Instruction]:
    """``torch._C._set_grad_enabled(mode)`` as a statement."""
    return [*create_call_function([create_load_const(torch._C._set_grad_enabled)],
                                  [[create_load_const(mode)]]),
            create_instruction("POP_TOP")]


def fallback_code(original: CodeType) -> CodeType:
    """A copy of ``original`` with its own ``co_extra``: the hook's mark on it (SKIP)
    does not touch the original's cache."""
    return original.replace(co_name=original.co_name)


def make_function(code: CodeType) -> list[Instruction]:
    """A function for ``code`` with the running frame's globals and, if ``code`` has free
    variables, the frame's cells of the same names."""
    if not code.co_freevars:
        return [create_load_const(code), *create_make_function()]
    cells = [create_load_closure(name) for name in code.co_freevars]
    return [*cells, create_instruction("BUILD_TUPLE", arg=len(cells)), create_load_const(code),
            *create_make_function(version.MAKE_FUNCTION_CLOSURE)]


def _arguments(original: CodeType, load: Callable[[str], list[Instruction]]) -> list[Instruction]:
    """Push ``(positional..., *args)`` and ``{keyword_only..., **kwargs}`` built from the
    frame's parameters (``load(name)`` pushes one)."""
    n_pos, n_kw = original.co_argcount, original.co_kwonlyargcount
    names = original.co_varnames
    varargs, varkw = varargs_name(original), varkeywords_name(original)
    out: list[Instruction] = []
    for name in names[:n_pos]:
        out += load(name)
    out.append(create_instruction("BUILD_LIST", arg=n_pos))
    if varargs:
        out += load(varargs) + [create_instruction("LIST_EXTEND", arg=1)]
    out += create_list_to_tuple()
    for name in names[n_pos:n_pos + n_kw]:
        out += [create_load_const(name), *load(name)]
    out.append(create_instruction("BUILD_MAP", arg=n_kw))
    if varkw:
        out += load(varkw) + [create_instruction("DICT_MERGE", arg=1)]
    return out


def rerun(graph_error: Exception, function: Callable, args: tuple, kwargs: dict,
          may_catch: bool) -> Any:
    """What the handler calls: the frame, as Python. Its own error is the program's and
    propagates (eager's). If it succeeds although nothing the graph traced could catch an
    error (``may_catch``: no traced code had a ``try``/``with``), the graph's error was
    the compiler's: raised when ``config.fallback_on_internal_error`` is off (the test
    suite), else reported."""
    result = function(*args, **kwargs)
    from .. import config, logs

    if may_catch:
        return result
    if not config.fallback_on_internal_error:
        raise graph_error
    message = (f"fastdynamo: the compiled graph of {function.__qualname__} raised "
               f"{type(graph_error).__name__}: {graph_error}; the frame ran as Python")
    logs.emit("breaks", message)
    warnings.warn(message, RuntimeWarning, stacklevel=2)
    for report in list(_reporters.stack):
        report(function.__code__, graph_error)
    return result


class _Reporters(threading.local):
    def __init__(self) -> None:
        self.stack: list[Callable[[CodeType, Exception], None]] = []


_reporters = _Reporters()


@contextmanager
def graph_errors_reported_to(report: Callable[[CodeType, Exception], None]) -> Iterator[None]:
    """While in the block, this thread's compiler errors found at run time (a graph that
    raised where its frame, run as Python, did not; see :func:`rerun`) are also given to
    ``report(code, error)``, ``code`` being the frame's (``explain`` counts them)."""
    _reporters.stack.append(report)
    try:
        yield
    finally:
        _reporters.stack.remove(report)


# Local of the transformed code holding the graph's error until rerun() gets it.
GRAPH_ERROR_LOCAL = "___graph_error"


def protect(graph_call: list[Instruction], original: CodeType, fallback: CodeType,
            load: Callable[[str], list[Instruction]], grad_mode: bool,
            may_catch: bool = True) -> list[Instruction]:
    """Cover ``graph_call`` (run with an empty stack) with a handler that, for an
    ``Exception``, leaves the handler, restores ``grad_mode`` (the frame's, guarded; the
    graph may have switched it) and returns ``rerun(error, fallback, <the frame's
    arguments>)``;
    returns the handler's instructions, to be placed where nothing falls into them.

    The exception is dropped before the call (``POP_EXCEPT``), so the fallback's own
    error does not chain to it.
    """
    handler = create_instruction("PUSH_EXC_INFO")
    reraise = create_instruction("RERAISE", arg=0)
    cleanup = [create_instruction("COPY", arg=3), create_instruction("POP_EXCEPT"),
               create_instruction("RERAISE", arg=1)]
    error = [create_instruction("LOAD_FAST", argval=GRAPH_ERROR_LOCAL),
             create_instruction("DELETE_FAST", argval=GRAPH_ERROR_LOCAL)]  # no frame cycle
    arguments = _arguments(original, load)  # two values: the tuple and the dict
    call = [*set_grad_mode(grad_mode), *create_callable([create_load_const(rerun)]), *error,
            *make_function(fallback), *arguments, create_load_const(may_catch), *create_call(5)]
    caught = [handler, create_load_const(Exception), create_instruction("CHECK_EXC_MATCH"),
              create_jump(reraise, "POP_JUMP_IF_FALSE"),
              create_instruction("STORE_FAST", argval=GRAPH_ERROR_LOCAL),
              create_instruction("POP_EXCEPT"), create_jump(call[0])]
    to_handler = ExceptionTableEntry(graph_call[0], graph_call[-1], handler, 0, False)
    for inst in graph_call:
        inst.exn_tab_entry = to_handler
    to_cleanup = ExceptionTableEntry(handler, reraise, cleanup[0], 1, True)
    for inst in caught[:-2] + [reraise]:  # not POP_EXCEPT and after: exc_info is restored
        inst.exn_tab_entry = to_cleanup
    return caught + [reraise] + cleanup + call + [create_instruction("RETURN_VALUE")]


__all__ = ["can_rerun", "fallback_code", "fallback_for", "graph_errors_reported_to", "make_function", "protect",
           "rerun", "set_grad_mode"]
