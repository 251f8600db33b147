"""Values of graph tensors known while generating: small shape vectors, constants, divisors.

TF's own ``tf.get_static_value`` folds constants and fixed shapes, but it also folds the small
eager tensors a function captures where TF builds them as ``Const`` ops holding the capture-time
value (turned into inputs only in the FunctionDef). janus feeds Python numbers and arrays
through captures (``GenerationContext.number_input``), whose capture-time value is a stand-in.
janus's own builds capture them as placeholders (``captures.py``); a ``Const`` capture in a graph
traced otherwise is still treated as unknown here.

Beyond TF's folding, the shape arithmetic of gradients (``ShapeN``, ``ConcatOffset``,
``Maximum``, ``FloorDiv``, ``Slice`` ...) is evaluated, by TF on the known values.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

# Evaluated where their inputs are known: what gradients and TF's Python wrappers compute from
# fixed shapes (a reduction's tiling, a concatenation's offsets, a padding's begin, a reshape's
# ``[-1, shape[1]]``). Each takes the op (for its attributes) and its inputs' known values.
SHAPE_ARITHMETIC = {
    "Maximum": lambda op, x, y: tf.raw_ops.Maximum(x=x, y=y),
    "Minimum": lambda op, x, y: tf.raw_ops.Minimum(x=x, y=y),
    "AddV2": lambda op, x, y: tf.raw_ops.AddV2(x=x, y=y),
    "Sub": lambda op, x, y: tf.raw_ops.Sub(x=x, y=y),
    "Mul": lambda op, x, y: tf.raw_ops.Mul(x=x, y=y),
    "FloorDiv": lambda op, x, y: tf.raw_ops.FloorDiv(x=x, y=y),
    "FloorMod": lambda op, x, y: tf.raw_ops.FloorMod(x=x, y=y),
    "Reshape": lambda op, tensor, shape: tf.raw_ops.Reshape(tensor=tensor, shape=shape),
    "Slice": lambda op, x, begin, size: tf.raw_ops.Slice(input=x, begin=begin, size=size),
    "ConcatOffset": lambda op, concat_dim, *shapes: tf.raw_ops.ConcatOffset(concat_dim=concat_dim, shape=list(shapes)),
    "ConcatV2": lambda op, *values: tf.raw_ops.ConcatV2(values=list(values[:-1]), axis=values[-1]),
    "Pack": lambda op, *values: tf.raw_ops.Pack(values=list(values), axis=op.get_attr("axis")),
    "ExpandDims": lambda op, x, axis: tf.raw_ops.ExpandDims(input=x, axis=axis),
    "Squeeze": lambda op, x: tf.raw_ops.Squeeze(input=x, axis=op.get_attr("squeeze_dims")),
    "Identity": lambda op, x: tf.raw_ops.Identity(input=x),
    "Cast": lambda op, x: tf.raw_ops.Cast(x=x, DstT=op.get_attr("DstT"), Truncate=op.get_attr("Truncate")),
    "Prod": lambda op, x, axis: tf.raw_ops.Prod(input=x, axis=axis, keep_dims=op.get_attr("keep_dims")),
    "StridedSlice": lambda op, x, begin, end, strides: tf.raw_ops.StridedSlice(
        input=x, begin=begin, end=end, strides=strides, **{mask: op.get_attr(mask) for mask in STRIDED_SLICE_MASKS}
    ),
}
STRIDED_SLICE_MASKS = ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask")
_MAX_ELEMENTS = 64  # shape vectors and scalars, not data
_MAX_DEPTH = 16
_MAX_ANCESTORS = 256
_SHAPE_ONLY = frozenset({"Shape", "ShapeN", "Size", "Rank"})  # their input's fixed shape, not its value


def static_value(tensor: tf.Tensor) -> np.ndarray | None:
    """The value of a small tensor where it is known while generating, else None (module docstring).

    Remembered on the op. An eager tensor's is its value."""
    if not tf.is_symbolic_tensor(tensor):
        return tf.get_static_value(tensor)
    return _static_value(tensor, 0)


def _static_value(tensor: tf.Tensor, depth: int) -> np.ndarray | None:
    known = getattr(tensor.op, "_janus_static_values", None)
    if known is None:
        known = _evaluate(tensor.op, depth)
        tensor.op._janus_static_values = known
    return known[tensor.value_index]


def _evaluate(op: tf.Operation, depth: int) -> tuple:
    unknown = (None,) * len(op.outputs)
    if depth > _MAX_DEPTH or not all(t.shape.is_fully_defined() and t.shape.num_elements() <= _MAX_ELEMENTS
                                     for t in op.outputs):  # fmt: skip
        return unknown
    if op.type == "ShapeN":
        shapes = [t.shape for t in op.inputs]
        if not all(s.is_fully_defined() for s in shapes):
            return unknown
        return tuple(np.array(s.as_list(), op.outputs[0].dtype.as_numpy_dtype) for s in shapes)
    if not _reads_a_capture(op):
        values = tuple(tf.get_static_value(t) for t in op.outputs)
        if all(v is not None for v in values):
            return values
    if op.type not in SHAPE_ARITHMETIC:
        return unknown
    inputs = [_static_value(t, depth + 1) for t in op.inputs]
    if any(value is None for value in inputs):
        return unknown
    try:
        with tf.init_scope():  # eagerly, on known values: TF's own semantics
            outputs = SHAPE_ARITHMETIC[op.type](op, *[tf.constant(v, t.dtype) for v, t in zip(inputs, op.inputs)])
    except (tf.errors.OpError, ValueError, TypeError):
        return unknown  # it raises on these values: the graph's op will too
    return tuple(np.asarray(o) for o in tf.nest.flatten(outputs))


def _reads_a_capture(op: tf.Operation) -> bool:
    """Whether ``op``'s value may depend on a captured eager tensor (a ``Const`` that is a
    function input), through data edges other than shape-only reads. True past a bound."""
    captured = _captured_constants(op.graph)
    seen: set[str] = set()
    pending = [op]
    while pending:
        current = pending.pop()
        if current.name in seen:
            continue
        seen.add(current.name)
        if current.name in captured or len(seen) > _MAX_ANCESTORS:
            return True
        if current.type not in _SHAPE_ONLY:
            pending.extend(t.op for t in current.inputs)
    return False


def _captured_constants(graph: tf.Graph) -> frozenset[str]:
    internal = getattr(graph, "internal_captures", ())
    return frozenset(t.op.name for t in internal if t.op.type == "Const")
