"""FX graph construction for the translator: :class:`OutputGraph` holds the graph, its
FakeTensor mode, the graph inputs and their sources, and the guards collected so far.

>>> from fastdynamo.fx import OutputGraph
>>> OutputGraph().graph.nodes.__len__()
0
"""
from .output_graph import GraphInput, OutputGraph
from .passes import eliminate_dead_code, count_ops

__all__ = ["GraphInput", "OutputGraph", "eliminate_dead_code", "count_ops"]
