"""Compiled training: a joint forward/backward trace partitioned by our own min-cut
(:mod:`.partition`, :mod:`.maxflow`), both halves compiled by the kernel compiler
(:mod:`.joint`). Used by :func:`fastdynamo.backends.kernels.compiler.compile_graph` for
graphs whose inputs need autograd."""
from .joint import CompiledHalf, TrainingGraph, compile_training
from .partition import PartitionRefused, partition

__all__ = ["CompiledHalf", "PartitionRefused", "TrainingGraph", "compile_training", "partition"]
