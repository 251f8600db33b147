"""The profile of one jitted function: everything the generator knows about runtime behaviour."""

from __future__ import annotations

import collections
import dataclasses
import types

from janus.profiler.observe import Observation

RETURN_SAMPLES = 32


@dataclasses.dataclass
class CallRecord:
    """One profiled call: its arguments, its return value and where control went."""

    args: tuple[Observation, ...]
    result: Observation | None = None
    raised: str | None = None
    branches: dict[tuple[types.CodeType, int], list[bool]] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class Profile:
    """Aggregated over every profiled call of one jitted function.

    ``line_hits`` counts line events per (code object, line) and is what branch and
    loop speculation read; ``callees`` maps a call site (code object, line) to the
    Python functions it entered; ``returns`` records return types per code object;
    ``heap_reads`` maps (code object, line, (root name, attribute chain)) to the values
    that global, closure-free attribute reads had, one observation per execution;
    ``trip_counts`` maps a loop (code object, header line) to its trip count at each execution.
    """

    calls: list[CallRecord] = dataclasses.field(default_factory=list)
    line_hits: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    callees: dict[tuple[types.CodeType, int], set[types.CodeType]] = dataclasses.field(
        default_factory=lambda: collections.defaultdict(set)
    )
    returns: dict[types.CodeType, set[type]] = dataclasses.field(default_factory=lambda: collections.defaultdict(set))
    heap_reads: dict[tuple, list[object]] = dataclasses.field(default_factory=lambda: collections.defaultdict(list))
    trip_counts: dict[tuple[types.CodeType, int], list[int]] = dataclasses.field(default_factory=dict)
    # per code object seen calling itself, the most Python frames between one level and the next
    recursion_steps: dict[types.CodeType, int] = dataclasses.field(default_factory=dict)
    # the first RETURN_SAMPLES return values per code object: recursive functions declare outputs from them
    return_observations: dict[types.CodeType, list[Observation]] = dataclasses.field(
        default_factory=lambda: collections.defaultdict(list)
    )

    def hits(self, code: types.CodeType, line: int) -> int:
        return self.line_hits[(code, line)]

    def branch_sequences(self, code: types.CodeType, line: int) -> list[tuple[bool, ...]]:
        """Per profiled call, the outcomes of the ``if`` at ``line`` in evaluation order."""
        return [tuple(call.branches.get((code, line), ())) for call in self.calls]

    def fixed_trip_count(self, code: types.CodeType, header: int) -> int | None:
        """The trip count every profiled execution of this loop had, or None if it varied."""
        counts = set(self.trip_counts.get((code, header), ()))
        return counts.pop() if len(counts) == 1 else None
