"""A ``tf.TensorArray`` made by a graph never leaves it: eager's TensorArray holds its elements in
Python, so a function that returns or stores one it made (or whose split segment hands one to the
Python around it) runs that part eagerly, with the reason; one made outside the graph is refused
too. Before, the graph's own TensorArray, bound to a tensor of the graph, was handed back and the
next call raised ``TypeError: ... is out of scope``."""

import numpy as np
import pytest
import tensorflow as tf
from differential import assert_served, run_differential

import janus


def doubled(n, clear_after_read=True):
    ta = tf.TensorArray(tf.float32, size=n, clear_after_read=clear_after_read)
    for i in tf.range(n):
        ta = ta.write(i, tf.cast(i, tf.float32) * 2.0)
    return ta


SIZES = (3, 4, 3, 5, 3, 4, 2, 6)


def test_a_returned_tensor_array_is_eagers():
    jitted = janus.jit(doubled)
    for n in SIZES:
        expected, actual = doubled(tf.constant(n)), jitted(tf.constant(n))
        assert type(actual) is type(expected)
        np.testing.assert_array_equal(actual.stack().numpy(), expected.stack().numpy())
    assert "tf.TensorArray made by the graph" in janus.explain(jitted)


def test_a_stored_tensor_array_is_eagers():
    class Holder:
        ta = None

    def make():
        holder = Holder()

        def step(n, x):
            holder.ta = doubled(n)
            return x * 2.0

        return step, lambda: holder.ta.stack() if holder.ta is not None else None

    jitted = run_differential(make, [(tf.constant(n), tf.constant(1.0)) for n in SIZES], min_graph_calls=0)
    assert "tf.TensorArray made by the graph" in janus.explain(jitted)


def test_a_read_after_a_split_loop_gives_eagers_answers():
    """The read clears in eager (the default), so it runs in Python; the loop before it may not
    hand its graph-made array over either. Later good calls stay good after a read out of range."""

    def make():
        def step(n, k):
            ta = tf.TensorArray(tf.float32, size=n)
            for i in tf.range(n):
                ta = ta.write(i, tf.cast(i, tf.float32) * 2.0)
            return ta.read(k)

        return step, lambda: None

    calls = [(3, 1), (4, 2), (3, 0), (5, 4), (3, 1), (3, 7), (4, 1), (3, 2), (4, 3)]
    jitted = run_differential(make, [(tf.constant(n), tf.constant(k)) for n, k in calls], min_graph_calls=0)
    assert janus.stats(jitted)["split_calls"] > 0  # the split whose segment graph handed its array over


@pytest.mark.parametrize("k_bad", [7, -1])
def test_a_read_that_does_not_clear_is_served_by_a_graph(k_bad):
    def make():
        def step(n, k):
            return doubled(n, clear_after_read=False).read(k) + 1.0

        return step, lambda: None

    calls = [(3, 1), (4, 2), (3, 0), (5, 4), (3, 1), (3, k_bad), (4, 1), (3, 2), (4, 3)]
    jitted = run_differential(make, [(tf.constant(n), tf.constant(k)) for n, k in calls], min_graph_calls=3)
    assert_served(jitted, 3)


def test_an_array_made_outside_the_graph_is_refused_with_its_reason():
    made = [tf.TensorArray(tf.float32, size=n).unstack(tf.range(n, dtype=tf.float32)) for n in SIZES]

    def make():
        def total(ta, scale):
            return tf.reduce_sum(ta.stack()) * scale

        return total, lambda: None

    jitted = run_differential(make, [(ta, tf.constant(2.0)) for ta in made], min_graph_calls=0)
    assert "tf.TensorArray made outside the graph" in janus.explain(jitted)
