"""The graph cache of one function: entries tried in order, newest (most general) first."""

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
        self.entries.insert(0, runner)
        return runner

    def remove(self, runner: GraphRunner) -> None:
        self.entries.remove(runner)

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
        self.entries.clear()
