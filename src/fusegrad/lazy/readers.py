"""Which values the later kernels of one domain read, kept up to date as kernels run.

The planner runs more than ``plan.MAX_OUTPUTS`` outputs of one domain as several kernels,
shallowest first, and a value that one kernel computes and a later one reads is stored by the
first (``plan._shared``). Walking every later kernel's graph again for each kernel is quadratic
in the number of kernels of a long chain. Instead, each uncached map under the outputs counts
its readers still to come: the later outputs it is, and the uncached maps that have it as an
argument and are themselves read. A count only goes down (an output's kernel has come, a map was
computed), and a map whose count reaches zero releases its arguments in turn, so the counts cost
one pass over the graph in all, however many kernels there are.

A map that the current kernel computes is read by a later kernel exactly when some of its
readers are outside the current kernel's graph: the later walk, stopped at the current
kernel's maps, would reach it.

Example::

    >>> import numpy as np
    >>> from .nodes import asarray
    >>> from . import small
    >>> with small.fusing():
    ...     x = asarray(np.ones(3))
    ...     a = np.exp(x)
    ...     b, c = a + 1.0, a * 2.0
    >>> later = LaterReaders([b, c], lambda o: [o])
    >>> later.done([b])  # b's kernel comes first; c is later
    >>> [n is a for n in later.read_later({id(b): b, id(a): a})]
    [True]
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from .nodes import Map


def _uncached_map(a: Any) -> bool:
    return type(a) is Map and a.cached is None


class LaterReaders:
    """Reader counts of the uncached maps under ``outputs`` (``bodies(o)``: what the kernel of
    output ``o`` evaluates at each point); every output counts as later until ``done``.

    >>> LaterReaders([], lambda o: [o]).read_later({})
    []
    """

    def __init__(self, outputs: Iterable[Any], bodies: Callable[[Any], list[Any]]) -> None:
        self._bodies = bodies
        self._count: dict[int, int] = {}
        self._read: set[int] = set()  # the maps whose count is above zero and not computed
        self.visits = 0  # nodes and edges looked at, for tests of the planner's work
        stack: list[Any] = []
        for o in outputs:
            for b in bodies(o):
                if _uncached_map(b):
                    self._count[id(b)] = self._count.get(id(b), 0) + 1
                    stack.append(b)
        while stack:  # each map's arguments are counted once, when the map is first reached
            n = stack.pop()
            self.visits += 1
            if id(n) in self._read:
                continue
            self._read.add(id(n))
            for a in n.args:
                self.visits += 1
                if _uncached_map(a):
                    self._count[id(a)] = self._count.get(id(a), 0) + 1
                    stack.append(a)

    def done(self, outputs: Iterable[Any]) -> None:
        """The kernel of ``outputs`` has come: they are no longer later readers."""
        for o in outputs:
            for b in self._bodies(o):
                if type(b) is Map and id(b) in self._count:
                    self._release(b)

    def computed(self, nodes: Iterable[Any]) -> None:
        """``nodes`` hold their values now: no kernel computes them again, nor reads through
        them to their arguments."""
        for n in nodes:
            if id(n) in self._read:
                self._drop(n)

    def read_later(self, mine: dict[int, Map]) -> list[Map]:
        """The maps of ``mine`` (the uncached maps under the current kernel's outputs, by id)
        that a later kernel reads, not through another of ``mine``: in ``mine``'s order."""
        inside: dict[int, int] = {}
        for nid, n in mine.items():
            self.visits += 1
            if nid not in self._read:
                continue
            for a in n.args:
                self.visits += 1
                if id(a) in mine:
                    inside[id(a)] = inside.get(id(a), 0) + 1
        return [
            n
            for nid, n in mine.items()
            if nid in self._read and self._count[nid] > inside.get(nid, 0)
        ]

    def _release(self, n: Map) -> None:
        self._count[id(n)] -= 1
        if self._count[id(n)] == 0 and id(n) in self._read:
            self._drop(n)

    def _drop(self, n: Map) -> None:
        stack = [n]
        while stack:  # iterative: the graphs of unrolled loops are deep
            m = stack.pop()
            self.visits += 1
            if id(m) not in self._read:
                continue
            self._read.discard(id(m))
            for a in m.args:
                self.visits += 1
                if type(a) is Map and id(a) in self._count:
                    self._count[id(a)] -= 1
                    if self._count[id(a)] == 0:
                        stack.append(a)
