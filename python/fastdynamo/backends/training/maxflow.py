"""A minimum s-t cut by max-flow (Dinic's algorithm), pure Python: what the partitioner
uses to choose the tensors a forward saves for its backward.

The graphs are a joint forward/backward graph split into two vertices per node (a few
thousand edges for a model layer); capacities are byte counts, :data:`INFINITE` for an
edge the cut must not cross. Integers keep the arithmetic exact.

>>> graph = FlowGraph()
>>> graph.add_edge("s", "a", 3); graph.add_edge("a", "t", 2); graph.add_edge("s", "t", 1)
>>> flow, side = graph.min_cut("s", "t"); flow, sorted(side)
(3, ['a', 's'])
"""
from __future__ import annotations

from collections import deque
from typing import Hashable

INFINITE = 1 << 62


class FlowGraph:
    """A directed graph with capacities; parallel edges add up."""

    def __init__(self) -> None:
        self._index: dict[Hashable, int] = {}
        self._names: list[Hashable] = []
        # edge i: head[i], capacity[i]; edge i ^ 1 is its reverse
        self._head: list[int] = []
        self._capacity: list[int] = []
        self._out: list[list[int]] = []

    def _vertex(self, name: Hashable) -> int:
        index = self._index.get(name)
        if index is None:
            index = self._index[name] = len(self._names)
            self._names.append(name)
            self._out.append([])
        return index

    def add_edge(self, tail: Hashable, head: Hashable, capacity: int) -> None:
        u, v = self._vertex(tail), self._vertex(head)
        self._out[u].append(len(self._head))
        self._head.append(v)
        self._capacity.append(min(capacity, INFINITE))
        self._out[v].append(len(self._head))
        self._head.append(u)
        self._capacity.append(0)

    def _levels(self, source: int, sink: int) -> list[int] | None:
        level = [-1] * len(self._names)
        level[source] = 0
        queue = deque([source])
        while queue:
            u = queue.popleft()
            for edge in self._out[u]:
                v = self._head[edge]
                if level[v] < 0 and self._capacity[edge] > 0:
                    level[v] = level[u] + 1
                    queue.append(v)
        return level if level[sink] >= 0 else None

    def _augment(self, source: int, sink: int, level: list[int], cursor: list[int]) -> int:
        """One blocking-flow path, found iteratively (graphs are deeper than Python's stack)."""
        path: list[int] = []  # edges from source
        u = source
        while True:
            if u == sink:
                pushed = min(self._capacity[e] for e in path)
                for e in path:
                    self._capacity[e] -= pushed
                    self._capacity[e ^ 1] += pushed
                return pushed
            edges = self._out[u]
            while cursor[u] < len(edges):
                e = edges[cursor[u]]
                v = self._head[e]
                if self._capacity[e] > 0 and level[v] == level[u] + 1:
                    break
                cursor[u] += 1
            else:
                if not path:
                    return 0
                level[u] = -1  # a dead end for this phase
                u = self._head[path.pop() ^ 1]
                cursor[u] += 1
                continue
            path.append(edges[cursor[u]])
            u = self._head[edges[cursor[u]]]

    def min_cut(self, source: Hashable, sink: Hashable) -> tuple[int, set]:
        """The maximum flow's value and the source side of a minimum cut (names)."""
        s, t = self._vertex(source), self._vertex(sink)
        flow = 0
        while (level := self._levels(s, t)) is not None:
            cursor = [0] * len(self._names)
            while pushed := self._augment(s, t, level, cursor):
                flow += pushed
                if flow >= INFINITE:
                    return flow, set()
        reached = {s}
        queue = deque([s])
        while queue:
            u = queue.popleft()
            for edge in self._out[u]:
                v = self._head[edge]
                if v not in reached and self._capacity[edge] > 0:
                    reached.add(v)
                    queue.append(v)
        return flow, {self._names[i] for i in reached}
