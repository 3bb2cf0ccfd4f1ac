"""A renderer's scope: the lines of one block of generated code, and the values already
computed in it or in an enclosing block (common-subexpression elimination by key).

>>> outer = Scope("    ")
>>> outer.cache["x + 1"] = "tmp0"
>>> inner = outer.child()
>>> inner.lookup("x + 1"), inner.indent, outer.lookup("y")
('tmp0', '        ', None)
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Scope:
    indent: str
    parent: "Scope | None" = None
    lines: list = field(default_factory=list)
    cache: dict = field(default_factory=dict)

    def lookup(self, key):
        """The value computed for ``key`` here or in an enclosing scope, or None."""
        scope: Scope | None = self
        while scope is not None:
            if key in scope.cache:
                return scope.cache[key]
            scope = scope.parent
        return None

    def child(self) -> "Scope":
        """A nested block, one level deeper."""
        return Scope(self.indent + "    ", self)
