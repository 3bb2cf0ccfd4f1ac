"""Passes over captured torch.fx graphs (no translator state: capture builds the graphs,
see :mod:`fastdynamo.capture.output_graph`)."""
from .passes import count_ops, eliminate_dead_code

__all__ = ["count_ops", "eliminate_dead_code"]
