"""Whether a variable was used on the path a call took: eager's ``None`` gradients, kept.

In eager, ``tape.gradient(loss, w)`` is ``None`` when the call never read ``w`` (a single-leaf
tree never reaches the combiner of a tree encoder; a branch that was not taken). A graph that
reads ``w`` only inside a ``tf.cond`` branch, a loop body or a recursive function differentiates
to zeros there. So janus counts, per trainable variable read only in such regions, the regions
that ran and read it (an ``AssignAddVariableOp`` on a janus-owned counter in each), and where the
code asks for its gradient a JanusAssert checks that the count grew during the call: a call that
never read it re-runs eagerly and gets eager's ``None``.

The counter's value before the call is read by ``prepare()``; graphs with counters take the heap
lock (one call at a time), so two calls never mix their counts.
"""

from __future__ import annotations

import weakref

import tensorflow as tf
from tensorflow.python.framework import ops
from tensorflow.python.ops import gen_resource_variable_ops, resource_variable_ops

# Ops that pass a variable's handle on to a region (its reads are counted there), not read it.
_REGION_OPS = frozenset(
    {"If", "StatelessIf", "While", "StatelessWhile", "Case", "StatelessCase", "PartitionedCall",
     "StatefulPartitionedCall", "JanusInvoke", "JanusInvokeGrad"}
)  # fmt: skip
SCOPE = "janus_touch"
_INVOCATIONS = frozenset({"JanusInvoke", "JanusInvokeGrad"})


def is_touch_op(op: tf.Operation) -> bool:
    """A counter update of this module: bookkeeping, not the program's state."""
    return SCOPE in op.name


def _eager_handle(tensor: tf.Tensor) -> object:
    """The eager resource handle a graph placeholder stands for (through enclosing graphs)."""
    graph = tensor.graph
    while not isinstance(tensor, ops.EagerTensor):
        external = next((ext for ext, internal in getattr(graph, "captures", ()) if internal is tensor), None)
        if external is None:
            return None
        tensor, graph = external, getattr(graph, "outer_graph", None)
    return tensor


def read_directly(graph: tf.Graph) -> set[int]:
    """Ids of the eager handles of the variables that ops of ``graph`` itself read (not its regions)."""
    handles: set[int] = set()
    for op in graph.get_operations():
        if op.type in _REGION_OPS or is_touch_op(op):
            continue
        for tensor in op.inputs:
            if tensor.dtype == tf.resource and tensor.op.type == "Placeholder":
                handle = _eager_handle(tensor)
                if handle is not None:
                    handles.add(id(handle))
    return handles


def users(graph: tf.Graph, handle: object) -> list[tf.Operation]:
    """The ops of ``graph`` that take the eager resource ``handle`` (through a placeholder)."""
    return [
        op
        for op in graph.get_operations()
        if any(t.dtype == tf.resource and t.op.type == "Placeholder" and _eager_handle(t) is handle for t in op.inputs)
    ]


_counter_handles: set[int] = set()  # ids of the eager handles of live counters


def is_counter(tensor: tf.Tensor) -> bool:
    """A graph's resource input that is one of these counters (janus's bookkeeping)."""
    if tensor.op.type != "Placeholder" and not isinstance(tensor, ops.EagerTensor):
        return False
    return id(_eager_handle(tensor)) in _counter_handles


class Counter:
    """An int64 resource counting regions that ran: a raw handle, not a ``tf.Variable`` (one made
    while tf.function traces would make it trace again)."""

    def __init__(self) -> None:
        with tf.init_scope():
            self.handle = resource_variable_ops.eager_safe_variable_handle(
                initial_value=tf.constant(0, tf.int64), shape=[], shared_name=None,
                name=SCOPE, graph_mode=False,
            )  # fmt: skip
            self._deleter = resource_variable_ops.EagerResourceDeleter(self.handle, self.handle.device)
            gen_resource_variable_ops.assign_variable_op(self.handle, tf.constant(0, tf.int64))
        _counter_handles.add(id(self.handle))
        weakref.finalize(self, _counter_handles.discard, id(self.handle))

    def add_one(self) -> None:
        with tf.name_scope(SCOPE):
            gen_resource_variable_ops.assign_add_variable_op(self.handle, tf.constant(1, tf.int64))

    def read(self) -> tf.Tensor:
        return gen_resource_variable_ops.read_variable_op(self.handle, tf.int64)


class TouchCounters:
    """One counter per trainable variable read inside a region; created while generating."""

    def __init__(self) -> None:
        self.counters: dict[int, tuple[tf.Variable, Counter]] = {}  # id(handle) -> (variable, counter)

    def count_region(self, graph: tf.Graph) -> None:
        """Adds to the counter of each trainable variable the region ``graph`` reads itself, and
        makes the region's invocations that count (a recursive function reading a variable) part of
        what the region waits for: ACD skips invocations (``janus.graphgen.recursion``), and a
        lowered ``If`` hands its control successors on once its control outputs ran, not its data."""
        if hasattr(graph, "control_outputs"):
            counting = [
                op for op in graph.get_operations() if op.type in _INVOCATIONS and any(map(is_counter, op.inputs))
            ]
            graph.control_outputs.extend(op for op in counting if op not in graph.control_outputs)
        watched = {id(v.handle): v for v in getattr(graph, "_watched_variables", ()) if v.trainable}
        for handle in read_directly(graph) & watched.keys():
            variable = watched[handle]
            entry = self.counters.get(id(variable.handle))
            if entry is None:
                entry = self.counters[id(variable.handle)] = (variable, Counter())
            entry[1].add_one()

    def counter_of(self, variable: tf.Variable) -> Counter | None:
        entry = self.counters.get(id(variable.handle))
        return None if entry is None else entry[1]
