"""Assumptions checked inside the graph: each a ``JanusAssert`` whose failure names it."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Assumption:
    """A speculation checked inside the graph by a JanusAssert."""

    id: int
    key: str  # stable across regenerations (for failure counting)
    description: str
    location: str
    final: bool = False  # no rung relaxes it: a call that breaks it is eager's alone, the graph stays
