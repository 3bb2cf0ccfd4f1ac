"""Structural pattern matching (``match`` statements), as CPython 3.11 runs it.

The subject's kind is read from its type: ``MATCH_MAPPING``/``MATCH_SEQUENCE`` test the
type flags CPython tests (``Py_TPFLAGS_MAPPING``/``SEQUENCE``), class patterns use the
modelled ``isinstance`` and attribute reads, key patterns the modelled dict. A subject
whose type or contents are not known at trace time breaks the graph.
"""
from __future__ import annotations

from ...exc import unsupported
from ..variables.builtins import BuiltinVariable
from ..variables.constant import ConstantVariable
from ..variables.containers import DictVariable, TupleVariable

_TPFLAGS_SEQUENCE = 1 << 5
_TPFLAGS_MAPPING = 1 << 6
# Types whose single positional sub-pattern matches the whole subject (PEP 634).
_SELF_MATCHING = frozenset({bool, bytearray, bytes, dict, float, frozenset, int, list, set, str,
                            tuple})


class MatchingOpcodes:
    def MATCH_MAPPING(self, inst):
        self.push(ConstantVariable(bool(self.stack[-1].python_type().__flags__ & _TPFLAGS_MAPPING)))

    def MATCH_SEQUENCE(self, inst):
        self.push(ConstantVariable(bool(self.stack[-1].python_type().__flags__ & _TPFLAGS_SEQUENCE)))

    def GET_LEN(self, inst):
        self.push(BuiltinVariable(len).call_function(self, [self.stack[-1]], {}))

    def MATCH_KEYS(self, inst):
        keys = self.stack[-1].as_python_constant()
        subject = _dict_of(self.stack[-2])
        if all(key in subject.items for key in keys):
            self.push(TupleVariable([subject.items[key] for key in keys]))
        else:
            self.push(ConstantVariable(None))

    def MATCH_CLASS(self, inst):
        names = self.pop().as_python_constant()
        cls_var = self.pop()
        subject = self.pop()
        cls = cls_var.as_python_constant()
        if not isinstance(cls, type):
            raise unsupported(f"class pattern with {cls!r}, not a class (TypeError in eager)")
        matched = BuiltinVariable(isinstance).call_function(self, [subject, cls_var], {})
        if not matched.as_python_constant():
            self.push(ConstantVariable(None))
            return
        if inst.arg == 1 and cls in _SELF_MATCHING:
            values = [subject]
        else:
            values = [self._match_attribute(subject, name) for name in _positional_names(cls, inst.arg)]
        keyword = [self._match_attribute(subject, name) for name in names]
        if any(v is None for v in values + keyword):
            self.push(ConstantVariable(None))
        else:
            self.push(TupleVariable(values + keyword))

    def _match_attribute(self, subject, name: str):
        """The attribute for a sub-pattern, or None when the subject lacks it (no match)."""
        has = BuiltinVariable(hasattr).call_function(self, [subject, ConstantVariable(name)], {})
        if not has.as_python_constant():
            return None
        return subject.var_getattr(self, name)


def _positional_names(cls: type, count: int) -> tuple[str, ...]:
    if count == 0:
        return ()
    names = getattr(cls, "__match_args__", None)
    if not isinstance(names, tuple) or len(names) < count:
        raise unsupported(f"{cls.__qualname__}() accepts fewer positional sub-patterns "
                          f"(TypeError in eager)")
    return names[:count]


def _dict_of(subject) -> DictVariable:
    if not isinstance(subject, DictVariable):
        raise unsupported(f"mapping pattern on {subject.describe()}")
    return subject
