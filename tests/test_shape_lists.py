"""[generalize] Shape lists built with ``+`` and ``*`` from numbers known only at run time: an
attribute such as ``self.units`` that differs between the instances sharing one line is relaxed
to a run-time number; joining lists (or tuples) is Python's own and never looks at the items, and
the joined list becomes the shape tensor eager's ``convert_to_tensor`` makes of it.
"""

import tensorflow as tf
from differential import run_differential


class Block:
    def __init__(self, units, seed, heads=2):
        self.units = units
        self.heads = heads
        self.kernel = tf.Variable(tf.random.stateless_normal([3, units * heads], seed=[seed, 1]))

    def tuple_shape(self, x):
        return tf.reshape(tf.matmul(x, self.kernel), (-1,) + (self.units, self.heads))

    def repeated(self, x):
        ones = tf.ones([tf.shape(x)[0]] + [self.units] * 2)
        return tf.reduce_sum(ones, axis=[1, 2]) + tf.reduce_sum(x, axis=1)

    def grown_in_place(self, x):
        shape = [tf.shape(x)[0]]
        shape += [self.units]
        shape = shape + [self.heads]
        return tf.reshape(tf.matmul(x, self.kernel), shape)

    def fill(self, x):
        return tf.fill([2] + [self.units], tf.reduce_sum(x))


def blocks():
    return [Block(units, seed) for seed, units in enumerate((1, 4, 2))]


def batches(n):
    return [(tf.fill([1 + i % 3, 3], float(i)),) for i in range(n)]


def shared_line(method):
    """Every block's ``method`` runs the same line: ``self.units`` differs between them."""

    def make():
        items = blocks()

        def step(x):
            return [method(b, x) for b in items]

        return step, lambda: None

    return make


def test_a_tuple_shape_joined_from_a_relaxed_attribute():
    run_differential(shared_line(Block.tuple_shape), batches(9), min_graph_calls=3)


def test_a_list_repeated_with_star_holding_a_relaxed_attribute():
    run_differential(shared_line(Block.repeated), batches(9), min_graph_calls=3)


def test_a_shape_list_grown_with_plus_equals():
    run_differential(shared_line(Block.grown_in_place), batches(9), min_graph_calls=3)


def test_a_fill_dims_list_joined_from_a_relaxed_attribute():
    run_differential(shared_line(Block.fill), batches(9), min_graph_calls=3)


def test_joining_a_list_held_by_a_variable_keeps_the_original():
    """``b = a + [x]`` makes a new list; ``a += [x]`` changes ``a`` (and every name for it)."""

    def make():
        def step(x):
            a = [x]
            alias = a
            b = a + [x * 2.0]
            a += [x * 3.0]
            t = (x,) + (x + 1.0,)
            return len(alias), tf.add_n(b), tf.add_n(alias), t * 2

        return step, lambda: None

    run_differential(make, batches(8), min_graph_calls=3)


class Scaled:
    def __init__(self, scale):
        self.scale = scale


def test_a_float_in_a_joined_shape_raises_as_in_eager():
    """A float dimension: eager's tf.reshape raises; so must every call janus serves."""

    def make():
        items = [Scaled(s) for s in (1.0, 2.5, 3.0)]

        def step(x):
            return [tf.reshape(x, [-1] + [item.scale]) for item in items]

        return step, lambda: None

    run_differential(make, batches(6), min_graph_calls=0)
