"""Whether a graph's TF error leaves the call re-runnable eagerly (eager then decides), or past
updates that cannot be undone (the error reaches the user, and TF state stays as the graph left it)."""

from __future__ import annotations

import re

import tensorflow as tf

from janus.graphgen.generate import GeneratedGraph

# The node that raised, ``{{node X}}``; where it ran in a function a JanusInvoke called, the
# graph's own node on its way out is named ``[[X]]`` only.
_FAILED_NODE = re.compile(r"\{\{node ([^}]+)\}\}|\[\[([^\[\]{}]+)\]\]")
# The graph could not be instantiated: none of its ops ran.
_NOT_RUN = re.compile(r"\d+ nodes in a cycle")
# A node TF names inside the function it ran in (a branch run as a function, not lowered).
_FAILED_IN_FUNCTION = re.compile(r"\{\{function_node ([^}]+)\}\}\{\{node [^}]+\}\}")


def recoverable(err: tf.errors.OpError, graph: GeneratedGraph) -> bool:
    """Whether the call can be re-run eagerly after ``err``: the graph updates no TF state, or the
    op that raised comes before every update it cannot put back (each such update waits for every
    earlier op; the saved variables and rows are put back first, ``GraphRunner``)."""
    if not graph.state_writes or _NOT_RUN.search(str(err)):
        return True
    return _raised_in(err, graph.ops_before_writes, graph.functions_before_writes)


def exact(err: tf.errors.OpError, graph: GeneratedGraph) -> bool:
    """Whether ``err``, not recoverable, came from an op that ran after every TF state update and
    print before it and before every one after it (``ordering.order_after_printed``), in a graph
    without Python effects: TF state and printed text are eager's, so the error is the call's
    outcome and the graph keeps serving."""
    return _raised_in(err, graph.exact_errors, graph.exact_error_functions)


def _raised_in(err: tf.errors.OpError, ops: frozenset[str], functions: frozenset[str]) -> bool:
    """Whether the node that raised ``err`` is one of ``ops`` (or inside one), or ran in a function
    only those ops run."""
    message = str(err)
    for name in (a or b for a, b in _FAILED_NODE.findall(message)):
        parts = name.split("/")  # a node in a loop body or branch: "while/Op" is inside the op "while"
        if any("/".join(parts[:n]) in ops for n in range(1, len(parts) + 1)):
            return True
    return any(f in functions for f in _FAILED_IN_FUNCTION.findall(message))
