"""All-or-nothing for TF state: every state update waits for every JanusAssert of its graph, and
for every op that comes before it in the program, so an op that raises leaves eager's TF state."""

from __future__ import annotations

import tensorflow as tf

from janus.graphgen.errors import NotConvertible

# Stateful ops that only read state: they may run before an assumption is checked.
_STATE_READS = frozenset(
    {
        "ReadVariableOp", "ResourceGather", "ResourceGatherNd", "VariableShape", "VarIsInitializedOp", "JanusAssert",
        "JanusInvoke", "JanusInvokeGrad",  # recursive functions only read variables (writes there are refused)
    }
)  # fmt: skip
# Control flow whose branches hold assertions is itself an assertion: its inner writes already wait for them.
_CONTROL_FLOW = frozenset({"If", "StatelessIf", "While", "StatelessWhile", "Case", "StatelessCase"})


def is_state_write(op: tf.Operation) -> bool:
    """TF state updates, prints, and Horovod collectives: what must wait for every assertion."""
    if op.type.startswith("Horovod"):
        return True  # a rank whose assertion fails must not have joined a collective yet
    if op.type in _STATE_READS or not op._is_stateful:
        return False
    return op.type == "PrintV2" or any(t.dtype == tf.resource for t in op.inputs)


def order_state_writes(graph: tf.Graph, assert_ops: list[tf.Operation]) -> None:
    """Adds a control dependency from every assertion to every state update of ``graph``.

    ``assert_ops`` may include control-flow ops (If/While) whose branches hold assertions.
    An update that an assertion itself depends on cannot wait for it: that graph is refused.
    """
    if not assert_ops:
        return
    ancestors: set[tf.Operation] = set()
    pending = list(assert_ops)
    while pending:
        op = pending.pop()
        for parent in [t.op for t in op.inputs] + list(op.control_inputs):
            if parent not in ancestors:
                ancestors.add(parent)
                pending.append(parent)
    for op in graph.get_operations():
        if is_state_write(op):
            if op in ancestors and op.type in _CONTROL_FLOW:
                continue
            if op in ancestors:
                raise NotConvertible(f"an assumption depends on the state update {op.type}")
            op._add_control_inputs([a for a in assert_ops if a is not op and a not in op.control_inputs])


def order_writes_after_earlier_ops(graph: tf.Graph) -> int | None:
    """Makes every state update wait for every op created before it (program order), as eager would
    have run them first: an op that raises (``tf.gather`` out of range, ``check_numerics``, a
    user's assert) then leaves TF state as eager leaves it. Updates do not wait for each other.

    Returns the creation index of the first state update (None without one): an op that fails
    before it has left TF state untouched, so the call can be re-run eagerly.
    """
    operations = graph.get_operations()
    pending: list[tf.Operation] = []
    barrier: tf.Operation | None = None
    first_write = None
    for index, op in enumerate(operations):
        if not is_state_write(op):
            pending.append(op)
            continue
        if first_write is None:
            first_write = index
        if pending:
            inputs = pending + ([barrier] if barrier is not None else [])
            with graph.as_default(), tf.control_dependencies(inputs):
                barrier = tf.no_op(name="janus_program_order")
            pending = []
        if barrier is not None and barrier not in op.control_inputs:
            op._add_control_inputs([barrier])
    return first_write
