"""Constant folding for janus's recursive functions: shape arithmetic computed once, not per tree node.

TF's gradients build shapes from constants at run time: the gradient of an ``embedding_lookup``
reshapes its ids with a shape concatenated from a ``Size``, an ``ExpandDims`` and a
``StridedSlice`` of constants; a ``concat``'s gradient computes its slice offsets with a
``ConcatOffset`` of constant shapes; a zero gradient is a ``Fill`` of constants. TF folds such
nodes when it optimises a graph it runs, but a function run by ``JanusInvoke`` runs as written,
once per tree node, forward and backward, at the executor's cost per node (issue #19).

A node folds when every input is a ``Const`` of the same function, it waits for nothing (no
control inputs), nothing waits for it, its op is on an allow-list of pure, deterministic ops, and
each output is an integer or boolean tensor (shapes, offsets, indices: exact on any device) or
the op only places one value (``Fill``, ``ZerosLike``, ``OnesLike``). Its value is computed once,
on the CPU, by the op's own kernel, and the node becomes one ``Const`` per output: a ``Const``
hands out its one buffer, so a folded zero gradient is not allocated and filled again at every
tree node. Outputs hold at most ``_MAX_BYTES`` bytes, so a function never embeds a large tensor.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf
from tensorflow.core.framework import function_pb2, graph_pb2, node_def_pb2
from tensorflow.python.framework import op_def_registry, tensor_util

_ARITHMETIC = frozenset(
    {
        "Add",
        "AddV2",
        "BroadcastArgs",
        "BroadcastGradientArgs",
        "Cast",
        "ConcatOffset",
        "ConcatV2",
        "ExpandDims",
        "FloorDiv",
        "FloorMod",
        "Maximum",
        "Minimum",
        "Mul",
        "Pack",
        "Prod",
        "Range",
        "Rank",
        "Reshape",
        "Shape",
        "ShapeN",
        "Size",
        "Slice",
        "Squeeze",
        "StridedSlice",
        "Sub",
        "Sum",
    }
)
"""Ops folded when their outputs are integers or booleans."""

_PLACING = frozenset({"Fill", "OnesLike", "ZerosLike"})
"""Ops folded whatever their output type: each element is a copy of an input value."""

_EXACT_DTYPES = frozenset({tf.int8, tf.int16, tf.int32, tf.int64, tf.uint8, tf.uint16, tf.uint32, tf.uint64, tf.bool})
_MAX_BYTES = 1 << 20


def fold_constants(fdef: function_pb2.FunctionDef) -> bool:
    """Replaces, in place, every node of ``fdef`` that computes only from constants by its value.

    Returns whether anything changed. Nodes left without readers stay for the caller's dead-node pass.
    """
    changed, refused = False, set()
    while True:
        nodes = {n.name: n for n in fdef.node_def}
        waited_for = {ref[1:] for n in fdef.node_def for ref in n.input if ref.startswith("^")}
        waited_for |= set(fdef.control_ret.values())
        for node in list(fdef.node_def):
            if node.name in refused:
                continue
            values = _foldable_value(node, nodes, waited_for, refused)
            if values is not None:
                _replace(fdef, node, values)
                changed = True
                break
        else:
            return changed


def _foldable_value(
    node: node_def_pb2.NodeDef, nodes: dict, waited_for: set[str], refused: set[str]
) -> list[np.ndarray] | None:
    """The node's values if it folds. A node refused with constant inputs goes into ``refused``
    (its inputs never change, so it is not looked at again)."""
    if node.op not in _ARITHMETIC and node.op not in _PLACING:
        return None
    if node.name in waited_for or node.device or not node.input:
        return None
    inputs = []
    for ref in node.input:
        producer = nodes.get(ref.split(":", 1)[0])
        if ref.startswith("^") or producer is None or producer.op != "Const" or producer.input:
            return None
        inputs.append(producer)
    refused.add(node.name)
    if not _small_and_exact(node, [tensor_util.MakeNdarray(c.attr["value"].tensor) for c in inputs]):
        return None
    try:
        values = _evaluate(node, inputs)
    except (tf.errors.OpError, ValueError, TypeError):
        return None  # it fails at run time as written, where the failure belongs
    if any(v.nbytes > _MAX_BYTES for v in values):
        return None
    if node.op not in _PLACING and any(tf.as_dtype(v.dtype) not in _EXACT_DTYPES for v in values):
        return None
    return values


def _small_and_exact(node: node_def_pb2.NodeDef, inputs: list[np.ndarray]) -> bool:
    """Checks made before the node runs: the ops that make a large tensor from small inputs stay
    under ``_MAX_BYTES``; a ``Cast`` folds only from an exact type (a float's conversion to an
    integer out of range or of NaN is the device's own)."""
    if node.op == "Cast":
        return tf.as_dtype(node.attr["SrcT"].type) in _EXACT_DTYPES
    if node.op == "Fill":
        dtype = tf.as_dtype(inputs[1].dtype)
        if dtype == tf.string or inputs[0].ndim != 1:
            return False
        return int(np.prod([max(int(d), 0) for d in inputs[0]], dtype=object)) * dtype.size <= _MAX_BYTES
    if node.op == "Range":
        start, limit, delta = (x.item() if x.ndim == 0 else None for x in inputs)
        if not all(isinstance(x, int) for x in (start, limit, delta)) or delta == 0:
            return False
        return max(-(-(limit - start) // delta), 0) * tf.as_dtype(inputs[0].dtype).size <= _MAX_BYTES
    return True


def _evaluate(node: node_def_pb2.NodeDef, inputs: list[node_def_pb2.NodeDef]) -> list[np.ndarray]:
    """The node's outputs, computed by its kernel on the CPU in a graph holding it and its constants."""
    graph_def = graph_pb2.GraphDef()
    for i, const in enumerate(inputs):
        copy = graph_def.node.add()
        copy.CopyFrom(const)
        copy.name = f"in{i}"
        copy.device = ""
    target = graph_def.node.add()
    target.CopyFrom(node)
    target.name = "folded"
    target.device = ""
    del target.input[:]
    target.input.extend(f"in{i}" for i in range(len(inputs)))
    graph = tf.Graph()
    with graph.as_default():
        tf.graph_util.import_graph_def(graph_def, name="")
        outputs = graph.get_operation_by_name("folded").outputs
        with tf.compat.v1.Session(graph=graph, config=tf.compat.v1.ConfigProto(device_count={"GPU": 0})) as sess:
            return [np.asarray(v) for v in sess.run(outputs)]


def _output_refs(node: node_def_pb2.NodeDef) -> list[str]:
    """The FunctionDef names of the node's outputs, in order (``name:arg:index``)."""
    op_def = op_def_registry.get(node.op)
    refs = []
    for arg in op_def.output_arg:
        if arg.number_attr:
            count = node.attr[arg.number_attr].i
        elif arg.type_list_attr:
            count = len(node.attr[arg.type_list_attr].list.type)
        else:
            count = 1
        refs += [f"{node.name}:{arg.name}:{k}" for k in range(count)]
    return refs


def _replace(fdef: function_pb2.FunctionDef, node: node_def_pb2.NodeDef, values: list[np.ndarray]) -> None:
    refs = _output_refs(node)
    names = [node.name] if len(values) == 1 else [f"{node.name}/folded_{k}" for k in range(len(values))]
    renamed = {ref: f"{name}:output:0" for ref, name in zip(refs, names)}
    if len(values) == 1:
        node.Clear()
    else:
        fdef.node_def.remove(node)
    for name, value in zip(names, values):
        const = node if len(values) == 1 else fdef.node_def.add()
        const.name = name
        const.op = "Const"
        const.attr["dtype"].type = tf.as_dtype(value.dtype).as_datatype_enum
        const.attr["value"].tensor.CopyFrom(tensor_util.make_tensor_proto(value))
    for reader in fdef.node_def:
        for i, ref in enumerate(reader.input):
            if ref in renamed:
                reader.input[i] = renamed[ref]
    for key, ref in fdef.ret.items():
        if ref in renamed:
            fdef.ret[key] = renamed[ref]
