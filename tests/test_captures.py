"""Eager tensors janus feeds anew each call enter its graphs as placeholders, never as constants.

TF captures a small eager tensor as a ``Const`` holding its trace-time value, which shape
inference reads while the graph is built (``janus/graphgen/captures.py``). janus feeds a relaxed
Python number through such a tensor whose trace-time value is a stand-in: ``tf.zeros([n, 2])``
had the static shape ``(0, 2)``, so ``z.shape[0]`` read 0 and was baked into the graph.
"""

import numpy as np
import tensorflow as tf
from differential import run_differential
from tensorflow.core.function.capture import capture_container

import janus


def test_a_shape_built_from_a_relaxed_int_is_not_the_stand_in_value():
    def make():
        def step(x, n):
            z = tf.zeros([n, 2])
            return x * 2.0, z.shape[0], tf.shape(z)[0]

        return step, lambda: None

    calls = [(tf.constant(1.0), n) for n in (3, 2, 3, 6, 4, 3, 2, 6, 12, 1, 4)]
    run_differential(make, calls, min_graph_calls=0)  # correct first; a graph for every n is not asked


def test_a_reshape_by_a_relaxed_int_gets_a_graph_and_eagers_shapes():
    def make():
        def step(x, n):
            return tf.reduce_sum(tf.reshape(x, [n, -1]), axis=1)

        return step, lambda: None

    x = tf.reshape(tf.range(12.0), [3, 4])
    calls = [(x, n) for n in (3, 2, 3, 6, 4, 3, 2, 6, 12, 1, 4)]
    jitted = run_differential(make, calls, min_graph_calls=3)
    assert janus.stats(jitted)["imperative_calls"] == 0, janus.explain(jitted)


def test_a_small_tensor_held_on_an_object_is_fed_not_baked():
    """``self.k`` is an eager tensor the program replaces between calls: tf.zeros's static shape
    must not be the first one's."""

    class Holder:
        k = tf.constant(2)

    def make():
        holder = Holder()

        def step(x, k):
            holder.k = tf.constant(k)
            return x * tf.cast(tf.size(tf.zeros([holder.k])), tf.float32)

        return step, lambda: None

    calls = [(tf.constant(1.5), k) for k in (2, 2, 2, 3, 5, 2, 7, 1)]
    run_differential(make, calls, min_graph_calls=0)


def test_tfs_threshold_is_put_back_after_generation():
    threshold = capture_container._EAGER_CONST_THRESHOLD
    jitted = janus.jit(lambda x: x + np.float32(1.0))
    for _ in range(4):
        jitted(tf.constant(1.0))
    assert janus.stats(jitted)["graph_calls"] >= 1
    assert capture_container._EAGER_CONST_THRESHOLD == threshold == 128
