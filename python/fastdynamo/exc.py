"""Errors raised while translating a frame.

:class:`Unsupported` is the single way out of the translator for anything it cannot
model: an unknown opcode, a data-dependent branch, a call with effects outside the graph.
The frame then runs as ordinary Python and the reason is recorded (explain, logs).

>>> err = Unsupported("tensor used as a Python bool")
>>> err.where = [("model.py", 12, "forward")]
>>> str(err)
'model.py:12: tensor used as a Python bool'
"""
from __future__ import annotations


class Unsupported(Exception):
    """The translator met a construct it does not model; ``where`` is the chain of
    (filename, lineno, function) from the compiled frame down to the inlined function
    that held the construct, filled in as the error unwinds through translators."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason
        self.where: list[tuple[str, int, str]] = []
        # Set by the compiled frame's translator (see InstructionTranslator.run).
        self.root_index: int | None = None
        self.root_step: int | None = None
        self.first_steps: dict[int, int] = {}

    @property
    def location(self) -> str:
        """``file:line`` of the innermost frame that held the construct."""
        if not self.where:
            return "<unknown>:0"
        # Prefer the innermost frame of user code over library internals (torch.nn...).
        user = [w for w in self.where if not _is_library_file(w[0])]
        filename, lineno, _ = (user or self.where)[-1]
        return f"{filename}:{lineno}"

    def __str__(self) -> str:
        return f"{self.location}: {self.reason}"


def _is_library_file(filename: str) -> bool:
    import os

    parts = filename.split(os.sep)
    return "torch" in parts and "site-packages" in parts


class FullGraphError(RuntimeError):
    """Raised by ``fastdynamo.compile(..., fullgraph=True)`` when a frame cannot be
    captured whole; the message names the construct and its ``file:line``."""


class BackendCompilerFailed(RuntimeError):
    """Raised when a user's backend given to ``fastdynamo.compile`` raises while compiling
    a captured graph, or returns something that cannot be called; the message names the
    backend and the frame (the backend's exception is chained). A failure of a built-in
    backend is an internal compiler error instead."""


def unsupported(reason: str) -> Unsupported:
    """Shorthand used as ``raise unsupported(...)`` so that handlers read as prose."""
    return Unsupported(reason)
