"""Why a function (or one graph of it) could not be generated."""

from __future__ import annotations


class NotConvertible(Exception):
    """A construct janus does not convert: the function runs imperatively, for this reason."""

    def __init__(self, reason: str, location: str = "") -> None:
        super().__init__(f"{reason} ({location})" if location else reason)
        self.reason = reason
        self.location = location


class NeedsStaticShape(NotConvertible):
    """The code inspects a dimension that a relaxed shape made unknown; retry with exact shapes."""


class RaisesHere(NotConvertible):
    """The code raises on the path these arguments take (a ``raise`` reached, a missing key read):
    calls that take it run eagerly, which raises eager's own exception; the graphs serve the rest."""


class GenerationError(Exception):
    """A library call or janus itself failed while building the graph."""

    def __init__(self, message: str, location: str = "") -> None:
        super().__init__(f"{message} ({location})" if location else message)
        self.location = location


class StrictModeError(RuntimeError):
    """``janus.jit(strict=True)`` (or ``janus.config.strict``): the function cannot be served by a
    graph, and would run imperatively. The message says why, with ``file:line``."""
