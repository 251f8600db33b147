"""Why a function (or one graph of it) could not be generated."""

from __future__ import annotations

import sys

# Stable refusal kinds, by the part of janus that refuses (as TorchDynamo's ``gb_type``): tests,
# ``explain()`` and the fallback warning group refusals by kind, not by their prose.
KINDS = {
    "janus.graphgen.interpreter": "construct",
    "janus.source.purity": "library call",
    "janus.graphgen.sandbox": "library call",
    "janus.graphgen.context": "heap value",
    "janus.graphgen.heap": "heap write",
    "janus.graphgen.control_flow": "control flow",
    "janus.graphgen.recursion": "recursion",
    "janus.graphgen.recursion_grad": "recursion",
    "janus.graphgen.keras_layers": "keras",
    "janus.graphgen.source": "source",
    "janus.graphgen.pynumber": "python number",
    "janus.graphgen.effects": "deferred effect",
    "janus.graphgen.formatted": "text",
    "janus.graphgen.numpy_values": "numpy",
    "janus.graphgen.generate": "result",
    "janus.graphgen.ordering": "state order",
    "janus.assumptions.specs": "argument",
    "janus.driver": "argument",
}


class NotConvertible(Exception):
    """A construct janus does not convert: the function runs imperatively, for this reason.

    ``kind`` is stable (see ``KINDS``): given, the subclass's, or that of the module that refused.
    """

    kind = ""
    runtime_flags: tuple[str, ...] = ()  # keys of the bools the failed build fed at run time

    def __init__(self, reason: str, location: str = "", kind: str = "") -> None:
        super().__init__(f"{reason} ({location})" if location else reason)
        self.reason = reason
        self.location = location
        if kind or not self.kind:
            self.kind = kind or KINDS.get(sys._getframe(1).f_globals.get("__name__", ""), "construct")  # noqa: SLF001


class NeedsStaticShape(NotConvertible):
    """The code inspects a dimension that a relaxed shape made unknown; retry with exact shapes."""

    kind = "static shape"


class RaisesHere(NotConvertible):
    """The code raises on the path these arguments take (a ``raise`` reached, a missing key read):
    calls that take it run eagerly, which raises eager's own exception; the graphs serve the rest."""

    kind = "raises"


class DeferredPrintFirst(NotConvertible):
    """A ``tf.print`` janus makes after the graph ran comes before a print the graph makes (a
    variable's value, a branch or loop that prints): its text would come out second. The driver
    builds again with every ``tf.print`` a graph op (``TF_PRINTS_IN_GRAPH``)."""

    kind = "print order"


class BuildAgainWithout(NotConvertible):
    """A build that made assumptions it must not make: the driver builds again without ``keys``,
    as after they failed."""

    def __init__(self, reason: str, location: str, keys: list[str]) -> None:
        super().__init__(reason, location)
        self.keys = keys


class SpeculatesUnderPrint(BuildAgainWithout):
    """A loop whose turns print and check assumptions: a later turn's failed check would re-run the
    call and print the earlier turns' text twice. The driver builds again without ``keys`` (the
    loop's assumptions), as after they failed."""

    kind = "print order"


class TreeBatchingRefused(BuildAgainWithout):
    """A loop whose calls of a recursive function were batched (``tree_batching``) changes what the
    function reads: the driver builds again with one call per node there."""

    kind = "tree batching"


TF_PRINTS_IN_GRAPH = "tf.print:in graph"  # the failure key of that build: no tf.print is deferred


class GenerationError(Exception):
    """A library call or janus itself failed while building the graph."""

    runtime_flags: tuple[str, ...] = ()  # as NotConvertible's: a library's `if` on a run-time bool

    def __init__(self, message: str, location: str = "") -> None:
        super().__init__(f"{message} ({location})" if location else message)
        self.reason = message
        self.location = location


class StrictModeError(RuntimeError):
    """``janus.jit(strict=True)`` (or ``janus.config.strict``): the function cannot be served by a
    graph, and would run imperatively. The message says why, with ``file:line``."""
