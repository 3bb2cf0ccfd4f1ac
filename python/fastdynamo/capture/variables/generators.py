"""Generators of traced code, run lazily as CPython runs them.

Calling a generator function inlined by the trace makes a :class:`GeneratorVariable`
over a child translator that has not started. Each item pulled from it (``for``,
``next``, ``yield from``, a builtin consuming it) resumes the child until its next
``yield`` or its return, so the generator's body and its consumer interleave exactly as
in eager: side effects of both happen in eager's order, and a generator that is not
consumed to the end does not run to the end. A suspended generator cannot be rebuilt by
the rewritten code: one that is live at a graph break, or returned, makes the frame run
as Python.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from .containers import IteratorVariable

if TYPE_CHECKING:  # pragma: no cover
    from ..translator import InstructionTranslator


class PulledIterator(IteratorVariable):
    """An iterator whose items exist only once pulled (``next_item``, one at a time),
    never rebuilt after the graph: a generator, or CPython's sequence-protocol iterator
    (:mod:`.user_iteration`). Subclasses set ``done`` when pulling finds no more."""

    live = False  # never rebuilt after the graph: its state is not a list of values
    done = False

    @property
    def items(self) -> list:
        return []  # nothing known ahead: items exist only once pulled

    def unpack_var_sequence(self, tx) -> list:
        rest = []
        while (item := self.next_item(tx)) is not None:
            rest.append(item)
        return rest

    def exhausted(self) -> bool:
        return self.done

    def has_items_left(self) -> bool:
        return False  # unknown until pulled

    def remaining(self):
        return []


class GeneratorVariable(PulledIterator):
    """A generator object of traced code (``gen()`` inlined, not yet run)."""

    def __init__(self, frame: InstructionTranslator):
        self.frame = frame
        self.index = 0
        self.done = False

    def next_item(self, tx=None):
        if self.done:
            return None
        value = self.frame.resume_generator()
        if value is None:
            self.done = True
        return value

    def describe(self) -> str:
        return f"GeneratorVariable({self.frame.name})"
