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

import tensorflow as tf

from janus.graphgen.fallible import may_raise

# Ops of two inputs computed element by element: op(tile(g), s) == tile(op(g, s)) for a scalar s.
_ELEMENTWISE = {
    "RealDiv": lambda x, y: tf.raw_ops.RealDiv(x=x, y=y),
    "Mul": lambda x, y: tf.raw_ops.Mul(x=x, y=y),
    "AddV2": lambda x, y: tf.raw_ops.AddV2(x=x, y=y),
    "Sub": lambda x, y: tf.raw_ops.Sub(x=x, y=y),
    "Maximum": lambda x, y: tf.raw_ops.Maximum(x=x, y=y),
    "Minimum": lambda x, y: tf.raw_ops.Minimum(x=x, y=y),
}
_TILINGS = {
    "Tile": lambda x, multiples: tf.raw_ops.Tile(input=x, multiples=multiples),
    "BroadcastTo": lambda x, shape: tf.raw_ops.BroadcastTo(input=x, shape=shape),
}


def hoist_scalar_ops_over_tilings(graph: tf.Graph) -> int:
    """Replaces ``op(Tile(g, m), s)`` (``s`` a scalar, either side) by ``Tile(op(g, s), m)`` for the
    consumers of the op's result in ``graph``, where every shape is fixed and the values are
    floating point, and neither may raise (the new ops, created last, must not count as raising
    after the graph's updates). The old op stays for a function output that names it. Returns how
    many were rewritten."""
    rewritten = 0
    for op in list(graph.get_operations()):
        if op.type not in _ELEMENTWISE or not op.outputs[0].dtype.is_floating:
            continue
        result = op.outputs[0]
        consumers = result.consumers()
        if not consumers or not all(t.shape.is_fully_defined() for t in (*op.inputs, result)):
            continue
        for side in (0, 1):
            tiled, scalar = op.inputs[side], op.inputs[1 - side]
            if tiled.op.type not in _TILINGS or scalar.shape.rank != 0 or tiled.shape != result.shape:
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
