"""The graph cache of one function: entries tried in order, newest (most general) first.

The entry list is replaced, never changed in place, so a lookup in one thread never sees
another thread's insertion or removal half done.
"""

from __future__ import annotations

from janus.executor.runner import GraphRunner
from janus.graphgen.generate import GeneratedGraph


class GraphCache:
    def __init__(self) -> None:
        self.entries: list[GraphRunner] = []

    def __len__(self) -> int:
        return len(self.entries)

    def add(self, graph: GeneratedGraph) -> GraphRunner:
        runner = GraphRunner(graph)
        self.entries = [runner, *self.entries]
        return runner

    def remove(self, runner: GraphRunner) -> bool:
        """Drops ``runner``; False if another thread dropped it already."""
        if runner not in self.entries:
            return False
        self.entries = [r for r in self.entries if r is not runner]
        return True

    def lookup(self, args) -> tuple[GraphRunner | None, list | None]:
        """The first entry whose guards hold for ``args``, with its flat inputs."""
        for runner in self.entries:
            try:
                flat = runner.graph.prepare(*args)
            except Exception:  # a guard that cannot even be evaluated is a miss
                flat = None
            if flat is not None:
                return runner, flat
        return None, None

    def clear(self) -> None:
        self.entries = []
