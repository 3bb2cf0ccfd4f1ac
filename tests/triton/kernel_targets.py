"""The kernel targets the tests compile for: name -> ``compile_graph(gm, inputs, options)``
(Triton options do not apply to C++ and are ignored there)."""
from __future__ import annotations

from fastdynamo.backends import cpp, triton

TARGETS = {"triton": triton.compile_graph, "cpp": lambda gm, inputs, options=None: cpp.compile_graph(gm, inputs)}
