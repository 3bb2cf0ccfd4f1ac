"""The kernel targets the tests compile for: name -> ``compile_graph(gm, inputs, options)``
(Triton options do not apply to C++ and are ignored there), and the tolerances their
floating-point results are held to. At the top of ``tests/`` so that every test folder
(``tests/triton``, ``tests/cpp``) imports the same ones.
"""
from __future__ import annotations

import torch

from fastdynamo.backends import cpp, triton

TARGETS = {"triton": triton.compile_graph, "cpp": lambda gm, inputs, options=None: cpp.compile_graph(gm, inputs)}

# Tolerances per dtype: kernels compute half types in float32 and round once on store,
# eager rounds after every op; the interpreter truncates bf16 casts (1 ulp).
TOLERANCES = {
    torch.float32: dict(atol=1e-5, rtol=1e-5),
    torch.float16: dict(atol=1e-3, rtol=2e-3),  # 2 ulp of float16
    torch.bfloat16: dict(atol=8e-3, rtol=1.6e-2),  # 2 ulp of bfloat16
    torch.float64: dict(atol=1e-10, rtol=1e-10),
}
