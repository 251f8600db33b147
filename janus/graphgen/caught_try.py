"""``try`` with ``except``/``else`` in a graph: the body is speculated not to raise.

A graph cannot catch an exception. janus converts a ``try`` whose handlers never ran while
profiling: the graph holds its body and its ``else`` clause. If an op of the body raises when the
graph runs, the runner puts back the TF state the graph updated (``ordering.py``: every op that may
raise is recoverable) and the call re-runs eagerly, where the handler catches the exception as it
always does. Refused, so that the function runs split with the ``try`` kept in Python:

* a handler that ran while profiling: catching would be the common path, a fallback per call;
* a body that raises while janus builds it (a ``raise``, a missing key): its handler would run;
* a body that leaves the ``try`` by ``return``, ``break`` or ``continue``;
* a body with a deferred Python effect (``print``, ``logging``, ``warnings``) or a statement run
  after the graph (``later.py``): it runs after the graph, outside the handler (a warning filtered
  to "error", a user check, would raise there, uncaught).

The graph records each such ``try``'s location (``ctx.caught_tries``): where its errors keep
sending calls to eager, the driver splits the function there rather than give up on it.
"""

from __future__ import annotations

import gast

from janus.graphgen.errors import NotConvertible, RaisesHere

_SCOPES = (gast.FunctionDef, gast.AsyncFunctionDef, gast.Lambda, gast.ClassDef)


def speculate(interp, frame, node: gast.Try) -> None:
    """Converts ``node``'s body and ``else`` clause (not its ``finally``), or refuses."""
    loc = interp.loc(frame, node)
    profile = interp.ctx.profile
    if any(profile.hits(frame.code, handler.body[0].lineno) for handler in node.handlers):
        raise NotConvertible("a `try` whose `except` handler ran while profiling is not converted", loc)
    if any(_leaves(stmt, in_loop=False) for stmt in node.body):
        raise NotConvertible("a `try` body that leaves it by return, break or continue is not converted", loc)
    writes = interp.ctx.heap.writes
    before = len(writes)
    try:
        interp.exec_block(frame, node.body)
    except RaisesHere as err:
        raise NotConvertible(
            f"the `try` body raises here ({err.reason}, {err.location}): its handler runs", loc
        ) from None
    if any(write.kind in ("call", "statement") for write in writes[before:]):
        raise NotConvertible(
            "a `try` body with a print, log or warning, or a statement run in Python, is not converted (it would "
            "run after the graph, outside the handler)",
            loc,
        )
    interp.ctx.caught_tries.append(loc)
    interp.exec_block(frame, node.orelse)


def _leaves(node: gast.AST, in_loop: bool) -> bool:
    """Whether ``node`` holds a ``return``, or a ``break``/``continue`` of a loop outside it."""
    if isinstance(node, gast.Return) or (isinstance(node, (gast.Break, gast.Continue)) and not in_loop):
        return True
    if isinstance(node, _SCOPES):
        return False
    inner = in_loop or isinstance(node, (gast.For, gast.While))
    return any(_leaves(child, inner) for child in gast.iter_child_nodes(node))
