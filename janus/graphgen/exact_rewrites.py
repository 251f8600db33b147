"""Rewrites of a generated graph that give bit for bit the values eager computes, faster.

janus's graphs run without Grappler's constant folding and arithmetic optimizer: they regroup
floating-point arithmetic and change the last bits of results (``janus/executor/runner.py``).
The rewrites here change no value.

**A scalar op after a tiling runs before it.** The gradient of ``tf.reduce_mean`` tiles the
reduced gradient to the input's shape and divides the tiled tensor by the count:
``Tile(g, m) / n``, 13.9 M divisions a step in ResNet50's BatchNormalization means (107 of them).
Every element of the tiled tensor is an element of ``g``, so ``Tile(g / n, m)`` holds the same
values, from ``g``'s few divisions. Grappler's constant folding makes those divisions
multiplications by ``1 / n`` instead, which changes their last bit.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from janus.graphgen.fallible import may_raise
from janus.graphgen.static_values import static_value

# Ops of two inputs computed element by element: op(tile(g), s) == tile(op(g, s)) for a scalar s.
# Not bit for bit in general: TF's CPU kernels compute a tensor's elements partly in SIMD packets
# and partly one by one, and the two paths disagree on some values, so an element's bits depend on
# its position and on the tensor's size, which the rewrite changes. Found (tests/
# test_breaker_rewrites.py): ``Maximum``/``Minimum`` of -0.0 and 0.0 (eager 0.0, the rewrite -0.0:
# ``1 / r`` then gives -inf for inf), a NaN made by ``0 / 0`` or ``0 * inf`` and the sign of the NaN
# kept from two NaN operands, and bfloat16's NaNs (its packets give 0x7fc0, one by one 0xffc0;
# float16, emulated the same way, is left out with it). So only IEEE float32/float64 arithmetic
# whose scalar is known while generating, finite and non-zero, where neither path can make a NaN
# or meet two: a mean gradient's count.
_ELEMENTWISE = {
    "RealDiv": lambda x, y: tf.raw_ops.RealDiv(x=x, y=y),
    "Mul": lambda x, y: tf.raw_ops.Mul(x=x, y=y),
    "AddV2": lambda x, y: tf.raw_ops.AddV2(x=x, y=y),
    "Sub": lambda x, y: tf.raw_ops.Sub(x=x, y=y),
}
_EXACT_DTYPES = frozenset({tf.float32, tf.float64})
_TILINGS = {
    "Tile": lambda x, multiples: tf.raw_ops.Tile(input=x, multiples=multiples),
    "BroadcastTo": lambda x, shape: tf.raw_ops.BroadcastTo(input=x, shape=shape),
}


def hoist_scalar_ops_over_tilings(graph: tf.Graph) -> int:
    """Replaces ``op(Tile(g, m), s)`` (``s`` a scalar, either side) by ``Tile(op(g, s), m)`` for the
    consumers of the op's result in ``graph``, where every shape is fixed, the values are float32
    or float64, ``s`` is known, finite and non-zero (``_ELEMENTWISE``), and neither may raise (the
    new ops, created last, must not count as raising after the graph's updates). The old op stays
    for a function output that names it. Returns how many were rewritten."""
    rewritten = 0
    for op in list(graph.get_operations()):
        if op.type not in _ELEMENTWISE or op.outputs[0].dtype not in _EXACT_DTYPES:
            continue
        result = op.outputs[0]
        consumers = result.consumers()
        if not consumers or not all(t.shape.is_fully_defined() for t in (*op.inputs, result)):
            continue
        for side in (0, 1):
            tiled, scalar = op.inputs[side], op.inputs[1 - side]
            if tiled.op.type not in _TILINGS or scalar.shape.rank != 0 or tiled.shape != result.shape:
                continue
            if not _finite_non_zero(scalar):
                continue
            source = tiled.op.inputs[0]
            if not source.shape.is_fully_defined():
                continue
            if may_raise(op) or may_raise(tiled.op):  # the new ops are of the same types, on the same parameters
                continue
            with graph.as_default():
                small = _ELEMENTWISE[op.type](*([source, scalar] if side == 0 else [scalar, source]))
                retiled = _TILINGS[tiled.op.type](small, tiled.op.inputs[1])
            if retiled.shape != result.shape:
                continue
            for consumer in consumers:
                for index, tensor in enumerate(consumer.inputs):
                    if tensor is result:
                        consumer._update_input(index, retiled)
            rewritten += 1
            break
    return rewritten


def _finite_non_zero(scalar: tf.Tensor) -> bool:
    """The scalar is known while generating and finite and non-zero (``_ELEMENTWISE``)."""
    value = static_value(scalar)
    return value is not None and bool(np.isfinite(value) and value != 0)
