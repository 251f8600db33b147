"""Per-function counters reported by ``janus.stats``."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass
class Stats:
    calls: int = 0
    graph_calls: int = 0
    imperative_calls: int = 0
    profiled_calls: int = 0
    fallbacks: int = 0
    graphs_built: int = 0
    assumption_failures: int = 0
    guard_misses: int = 0
    build_seconds: float = 0.0

    def as_dict(self) -> dict[str, float]:
        return dataclasses.asdict(self)
