"""The shared kernel generator: FX graph -> ATen graph -> kernel IR -> fused groups ->
a generated wrapper module, for any kernel target.

Pipeline (one module each): :mod:`lowering` (FX -> ATen through :mod:`decompositions`
-> the IR of :mod:`ir`, with :mod:`aten_rules`, :mod:`views`, :mod:`indexing`,
:mod:`sizes`, :mod:`symbolic`), :mod:`fusion` (greedy grouping into kernels),
:mod:`wrapper` (the Python module that allocates, launches and calls externs, see
:mod:`externs`), :mod:`cache` (on-disk modules) and :mod:`compiler`, which ties them
together for a :class:`target.KernelTarget`. The IR's vocabulary is :mod:`opset`; no
module here knows a kernel language (``backends/triton`` and ``backends/cpp`` do).
"""
