"""Settings read by the translator and the compile wrapper; change them at runtime.

>>> from fastdynamo import config
>>> config.recompile_limit
8
"""
from __future__ import annotations

# Cache entries per code object before the frame runs eagerly (the native runtime's limit).
recompile_limit: int = 8
# How many nested user-function calls the translator inlines before giving up.
max_inline_depth: int = 32
# Instructions one capture may trace (compiled frame and inlined calls together); a
# longer trace breaks the graph there (a loop then runs as Python, see graph_break.py).
max_trace_steps: int = 50_000
# Frames whose file is inside these packages are not compiled on their own (they are
# still inlined when user code calls them), unless they are the function given to compile().
# (The standard library is always skipped.)
skip_packages: tuple[str, ...] = ("torch", "fastdynamo", "hypothesis", "_pytest", "pytest",
                                  "pluggy", "numpy", "sympy", "mpmath", "triton", "functorch",
                                  "networkx", "jinja2", "filelock", "fsspec", "coverage")
# A bug inside the compiler (anything but Unsupported) makes the frame run as Python and
# is logged; the test suite turns this off so that such bugs fail loudly.
fallback_on_internal_error: bool = True
# With symbolic sizes, compute the results of common ops (pointwise activations, batch/layer
# norm, matmuls, cat, mean, views) without torch's Python decompositions (capture/shape_rules.py);
# off: every op takes torch's meta path, as a static trace does.
symbolic_shape_rules: bool = True
