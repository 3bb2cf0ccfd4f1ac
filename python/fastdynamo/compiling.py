"""``fastdynamo.is_compiling()``: True while fastdynamo traces the code that calls it.

Called for real it returns False; the translator models a call to it (and to
``torch.compiler.is_compiling()`` and its aliases) as the constant True, so a library
that branches on it takes its "being compiled" path inside a captured graph, exactly
as under torch.compile.

>>> is_compiling()
False
"""
from __future__ import annotations


def is_compiling() -> bool:
    """True inside code fastdynamo is tracing, False when it runs as Python."""
    return False


__all__ = ["is_compiling"]
