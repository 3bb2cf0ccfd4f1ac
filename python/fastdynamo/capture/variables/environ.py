"""``os.environ`` reads, guarded on what they read.

``os.environ.get(key, default)``, ``os.environ[key]``, ``key in os.environ`` (and
``os.getenv``, which reads ``environ`` through ``os``'s globals) use the value at trace
time as a constant; the entry is guarded on it: present with the same value, or still
absent. Writes and whole-environment reads (iteration, ``copy``) break the graph.
"""
from __future__ import annotations

import os
from typing import Any

from ...exc import unsupported
from ...guards import contains, equals
from ...guards.sources import ItemSource, Source
from .base import MethodCallVariable, VariableTracker
from .constant import ConstantVariable


class EnvironVariable(VariableTracker):
    """``os.environ``, read from a source (the guards need one)."""

    source: Source

    def __init__(self, source: Source):
        self.source = source

    def python_type(self) -> type:
        return type(os.environ)

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if name in ("get", "__getitem__", "__contains__"):
            return MethodCallVariable(self, name)
        raise unsupported(f"os.environ.{name}")

    def read(self, tx, key_var: VariableTracker) -> str | None:
        """The entry for ``key_var``, guarded: its value, or None when it is absent."""
        key = key_var.as_python_constant()
        if type(key) is not str:
            raise unsupported(f"os.environ key {key!r}")
        value = os.environ.get(key)
        tx.output.add_guard(self.source, contains(key, value is not None))
        if value is not None:
            tx.output.add_guard(ItemSource(self.source, key), equals(value))
        return value

    def contains(self, tx, key_var: VariableTracker) -> bool:
        return self.read(tx, key_var) is not None

    def getitem(self, tx, index: VariableTracker) -> VariableTracker:
        value = self.read(tx, index)
        if value is None:
            raise unsupported(f"KeyError: os.environ[{index.as_python_constant()!r}]")
        return ConstantVariable(value)

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        if kwargs:
            raise unsupported(f"os.environ.{name}() with keyword arguments")
        if name == "get" and 1 <= len(args) <= 2:
            value = self.read(tx, args[0])
            if value is not None:
                return ConstantVariable(value)
            return args[1] if len(args) == 2 else ConstantVariable(None)
        if name == "__getitem__" and len(args) == 1:
            return self.getitem(tx, args[0])
        if name == "__contains__" and len(args) == 1:
            return ConstantVariable(self.contains(tx, args[0]))
        raise unsupported(f"os.environ.{name}() with {len(args)} arguments")

    def describe(self) -> str:
        return "EnvironVariable"


def wrap_environ(value: Any, source) -> EnvironVariable | None:
    """The variable for ``os.environ`` read from ``source``; None for other values."""
    if value is not os.environ:
        return None
    if source is None:
        raise unsupported("os.environ without a source (its reads could not be guarded)")
    return EnvironVariable(source)
