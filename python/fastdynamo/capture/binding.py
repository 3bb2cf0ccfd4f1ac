"""Binding call arguments to a code object's parameters, as CPython does it.

Works on VariableTrackers, so inlined calls bind symbolic values; defaults are passed
in already wrapped.

>>> def f(a, b=2, *rest, c, **kw): pass
>>> bound = bind_arguments(f.__code__, [1, 5, 6], {"c": 3, "d": 4}, (2,), {})
>>> bound["a"], bound["b"], bound["rest"], bound["c"], bound["kw"]
(1, 5, (6,), 3, {'d': 4})

(Plain values are used above for brevity; the translator passes VariableTrackers and
gets TupleVariable/DictVariable for ``*rest`` and ``**kw``.)
"""
from __future__ import annotations

from types import CodeType
from typing import Any, Callable

from ..bytecode.version import CO_VARARGS, CO_VARKEYWORDS
from ..exc import unsupported


def bind_arguments(code: CodeType, args: list, kwargs: dict, defaults: tuple, kwdefaults: dict,
                   make_tuple: Callable[[list], Any] = tuple,
                   make_dict: Callable[[dict], Any] = dict) -> dict[str, Any]:
    """Map parameter names to values; raises Unsupported where CPython raises TypeError
    (the eager run then raises the real error)."""
    names = code.co_varnames
    n_pos = code.co_argcount
    n_kwonly = code.co_kwonlyargcount
    has_varargs = bool(code.co_flags & CO_VARARGS)
    has_varkw = bool(code.co_flags & CO_VARKEYWORDS)
    posonly = set(names[:code.co_posonlyargcount])
    bound: dict[str, Any] = {}
    for name, value in zip(names[:n_pos], args, strict=False):
        bound[name] = value
    extra = list(args[n_pos:])
    if extra and not has_varargs:
        raise unsupported(f"{code.co_name}() takes {n_pos} positional arguments but {len(args)} were given")
    varkw = {}
    allowed = set(names[:n_pos + n_kwonly]) - posonly
    for key, value in kwargs.items():
        if key in allowed:
            if key in bound:
                raise unsupported(f"{code.co_name}() got multiple values for argument {key!r}")
            bound[key] = value
        elif has_varkw:
            varkw[key] = value
        else:
            raise unsupported(f"{code.co_name}() got an unexpected keyword argument {key!r}")
    first_default = n_pos - len(defaults)
    for i, name in enumerate(names[:n_pos]):
        if name not in bound:
            if i >= first_default:
                bound[name] = defaults[i - first_default]
            else:
                raise unsupported(f"{code.co_name}() missing required argument {name!r}")
    for name in names[n_pos:n_pos + n_kwonly]:
        if name not in bound:
            if name in kwdefaults:
                bound[name] = kwdefaults[name]
            else:
                raise unsupported(f"{code.co_name}() missing keyword-only argument {name!r}")
    index = n_pos + n_kwonly
    if has_varargs:
        bound[names[index]] = make_tuple(extra)
        index += 1
    if has_varkw:
        bound[names[index]] = make_dict(varkw)
    return bound
