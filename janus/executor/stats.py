"""Per-function counters reported by ``janus.stats``: exact when many threads call the function."""

from __future__ import annotations

import dataclasses
import threading


@dataclasses.dataclass
class Stats:
    calls: int = 0
    graph_calls: int = 0
    imperative_calls: int = 0
    split_calls: int = 0  # calls run split (janus.partial): Python statements and graph segments
    profiled_calls: int = 0
    fallbacks: int = 0
    graphs_built: int = 0
    assumption_failures: int = 0
    guard_misses: int = 0
    build_seconds: float = 0.0  # generating graphs
    eager_seconds: float = 0.0  # calls run eagerly (profiled, fallen back or imperative)
    graph_seconds: float = 0.0  # calls served by graphs
    saved_seconds: float = 0.0  # graph calls times (mean eager call - mean graph call): what graphs saved
    _eager_runs: int = dataclasses.field(default=0, repr=False)
    _eager_timed: float = dataclasses.field(default=0.0, repr=False)  # the eager calls the mean is of
    _profiled_only: bool = dataclasses.field(default=True, repr=False)
    _lock: threading.Lock = dataclasses.field(default_factory=threading.Lock, repr=False, compare=False)

    def count(self, *names: str) -> None:
        """Adds one to each counter in ``names``, atomically."""
        with self._lock:
            for name in names:
                setattr(self, name, getattr(self, name) + 1)

    def add_seconds(self, seconds: float) -> None:
        with self._lock:
            self.build_seconds += seconds

    def add_eager(self, seconds: float, profiled: bool = False) -> None:
        """A call run eagerly; a profiled one is slower than eager, so it times eager calls only
        until a plain one is seen."""
        with self._lock:
            self.eager_seconds += seconds
            if not profiled:
                if self._profiled_only:  # forget the profiled calls' inflated times
                    self._profiled_only, self._eager_runs, self._eager_timed = False, 0, 0.0
            elif not self._profiled_only:
                return self._update_saved()
            self._eager_runs += 1
            self._eager_timed += seconds
            self._update_saved()

    def add_graph_call(self, seconds: float) -> None:
        """One call served by a graph (counted in ``calls`` and ``graph_calls``), and its time."""
        with self._lock:
            self.calls += 1
            self.graph_calls += 1
            self.graph_seconds += seconds
            self._update_saved()

    def _update_saved(self) -> None:
        if self._eager_runs and self.graph_calls:
            eager_mean = self._eager_timed / self._eager_runs
            self.saved_seconds = max(0.0, self.graph_calls * eager_mean - self.graph_seconds)

    def as_dict(self) -> dict[str, float]:
        with self._lock:
            return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if not f.name.startswith("_")}
