"""A code object's parameters, as the frame lays them out.

>>> def f(a, /, b, *args, c, **kw): pass
>>> parameter_names(f.__code__)
('a', 'b', 'c', 'args', 'kw')
>>> varargs_name(f.__code__), varkeywords_name(f.__code__)
('args', 'kw')
"""
from __future__ import annotations

from types import CodeType

from .version import CO_VARARGS, CO_VARKEYWORDS


def parameter_names(code: CodeType) -> tuple[str, ...]:
    """Names of the parameters in ``localsplus`` order: positional, keyword-only,
    ``*args``, ``**kwargs``."""
    count = code.co_argcount + code.co_kwonlyargcount
    count += bool(code.co_flags & CO_VARARGS) + bool(code.co_flags & CO_VARKEYWORDS)
    return code.co_varnames[:count]


def varargs_name(code: CodeType) -> str | None:
    """The ``*args`` parameter's name, if the code has one."""
    if not code.co_flags & CO_VARARGS:
        return None
    return code.co_varnames[code.co_argcount + code.co_kwonlyargcount]


def varkeywords_name(code: CodeType) -> str | None:
    """The ``**kwargs`` parameter's name, if the code has one."""
    if not code.co_flags & CO_VARKEYWORDS:
        return None
    index = code.co_argcount + code.co_kwonlyargcount + bool(code.co_flags & CO_VARARGS)
    return code.co_varnames[index]


__all__ = ["parameter_names", "varargs_name", "varkeywords_name"]
