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


def is_control_flow(op: tf.Operation) -> bool:
    return op.type in _CONTROL_FLOW


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
    """Makes every state update wait for every op created before it (program order) that may raise,
    as eager would have run them first: an op that raises (``tf.gather`` out of range,
    ``check_numerics``, a user's assert) then leaves TF state as eager leaves it. Updates do not
    wait for each other, nor for ops that cannot raise.

    Returns the creation index of the first state update (None without one): an op that fails
    before it has left TF state untouched, so the call can be re-run eagerly.
    """
    operations = graph.get_operations()
    pending: list[tf.Operation] = []
    barrier: tf.Operation | None = None
    first_write = None
    for index, op in enumerate(operations):
        if not is_state_write(op):
            if may_raise(op):  # an op that cannot raise need not run first
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


# Ops that cannot raise at run time once their shapes are fixed (elementwise float math, reads,
# plain assignments, optimizer updates, gradients of such ops, stateless RNG). With a dimension
# known only at run time (a relaxed shape) any of them may raise (incompatible shapes).
_CANNOT_RAISE = frozenset(
    {
        "Placeholder", "Const", "Identity", "IdentityN", "NoOp", "ReadVariableOp", "StopGradient", "Cast",
        "AssignVariableOp", "AssignAddVariableOp", "AssignSubVariableOp", "Shape", "ShapeN", "Size", "Rank",
        "Fill", "ZerosLike", "OnesLike", "Add", "AddV2", "AddN", "Sub", "Mul", "Neg", "Square",
        "SquaredDifference", "Sqrt", "Rsqrt", "Reciprocal", "RealDiv", "DivNoNan", "Maximum", "Minimum", "Pow",
        "Exp", "Log", "Log1p", "Abs", "Sign", "Tanh", "Sigmoid", "Relu", "Relu6", "Elu", "Selu", "Softplus",
        "LeakyRelu", "Softmax", "LogSoftmax", "Sum", "Mean", "Max", "Min", "Prod", "MatMul", "BatchMatMulV2",
        "BiasAdd", "BiasAddGrad", "Select", "SelectV2", "Greater", "GreaterEqual", "Less", "LessEqual", "Equal",
        "NotEqual", "LogicalAnd", "LogicalOr", "LogicalNot", "Floor", "Ceil", "Round", "ClipByValue", "L2Loss",
        "Transpose", "ExpandDims", "Squeeze", "Pack", "ConcatV2", "Tile", "BroadcastTo", "Reshape", "ArgMax",
        "ArgMin", "Bitcast", "BitwiseAnd", "BitwiseOr", "ReluGrad", "Relu6Grad", "TanhGrad", "SigmoidGrad",
        "RsqrtGrad", "SqrtGrad", "Conv2D", "Conv2DBackpropFilter", "Conv2DBackpropInput", "MaxPool",
        "MaxPoolGrad", "AvgPool", "AvgPoolGrad", "FusedBatchNormV3", "FusedBatchNormGradV3",
        "StatelessRandomGetKeyCounter", "StatelessRandomUniformV2", "StatelessRandomNormalV2",
        "ResourceApplyGradientDescent", "ResourceApplyKerasMomentum", "ResourceApplyMomentum",
        "ResourceApplyAdam", "ResourceApplyAdagradV2", "ResourceApplyRMSProp", "ResourceApplyAdaMax",
    }
)  # fmt: skip


def may_raise(op: tf.Operation) -> bool:
    """An op may raise at run time unless its type cannot once shapes are fixed and they are."""
    if op.type.startswith("Horovod"):
        return False
    if op.type not in _CANNOT_RAISE:
        return True
    return not all(t.shape.is_fully_defined() for t in (*op.inputs, *op.outputs) if t.dtype != tf.resource)


def written_before_last_fallible(graph: tf.Graph, first_write: int | None) -> tuple[list[tf.Tensor], set[str]]:
    """The resources updated before the graph's last op that may raise (after its first update),
    and the names of the ops after the first update that may raise.

    If such an op raises, the updates before it may have run: the runner keeps a snapshot of those
    variables (usually BatchNormalization statistics and RNG state; an optimizer's updates come
    last) and puts them back, so the call can be re-run eagerly.
    """
    if first_write is None:
        return [], set()
    operations = graph.get_operations()
    fallible = [i for i in range(first_write, len(operations)) if may_raise(operations[i])]
    if not fallible:
        return [], set()
    resources = [
        t
        for op in operations[first_write : fallible[-1]]
        if is_state_write(op)
        for t in op.inputs
        if t.dtype == tf.resource
    ]
    return resources, {operations[i].name for i in fallible}
