"""The ``ShapeEnv`` of a trace: torch's, without the search for the user's source line.

torch's ``ShapeEnv`` records, with every symbol, guard and replacement it makes, where in
the user's code it was made (an ``SLoc``): it walks the Python stack to the first frame
outside a set of "uninteresting" torch files, and builds that set on first use by
importing ``torch._dynamo``, ``torch._inductor.sizevars``, ``torch.export._trace`` and
more (~0.5-0.9 s, once per process), then walks again for every symbol and guard. Those
locations only feed torch's own messages and logs; fastdynamo reports shapes with its own
sources (``FASTDYNAMO_LOGS=dynamic``), so the trace's ShapeEnv names one location for all.

>>> env = TraceShapeEnv()
>>> str(env._get_sloc())
'(fastdynamo trace)'
"""
from __future__ import annotations

from torch._guards import SLoc
from torch.fx.experimental.symbolic_shapes import ShapeEnv

__all__ = ["TraceShapeEnv"]

_LOCATION = "fastdynamo trace"


class TraceShapeEnv(ShapeEnv):
    """A ``ShapeEnv`` whose source locations are the trace's, found without a stack walk."""

    def _get_stack_summary(self, is_debug: bool = False, framework_loc: str | None = None) -> tuple[SLoc, str]:
        return SLoc(framework_loc if framework_loc is not None else _LOCATION, None), ""
