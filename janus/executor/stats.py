"""Per-function counters reported by ``janus.stats``: exact when many threads call the function."""

from __future__ import annotations

import dataclasses
import threading


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
    _lock: threading.Lock = dataclasses.field(default_factory=threading.Lock, repr=False, compare=False)

    def count(self, *names: str) -> None:
        """Adds one to each counter in ``names``, atomically."""
        with self._lock:
            for name in names:
                setattr(self, name, getattr(self, name) + 1)

    def add_seconds(self, seconds: float) -> None:
        with self._lock:
            self.build_seconds += seconds

    def as_dict(self) -> dict[str, float]:
        with self._lock:
            return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if not f.name.startswith("_")}
