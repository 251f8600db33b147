"""[generalize] What janus.jit accepts: bound methods, functools.partial, callable objects."""

import functools

import tensorflow as tf
from differential import run_differential

import janus


class Model:
    def __init__(self):
        self.w = tf.Variable(2.0)
        self.calls = 0

    def step(self, x):
        self.calls += 1
        self.w.assign_add(0.5)
        return x * self.w

    def __call__(self, x):
        return tf.reduce_sum(x) + self.w


def scaled(x, scale, shift=0.0):
    return x * scale + shift


def test_a_bound_method():
    def make():
        model = Model()
        return model.step, lambda: (model.calls, model.w)

    run_differential(make, [(tf.constant([1.0, float(i)]),) for i in range(7)], min_graph_calls=3)


def test_a_partial():
    def make():
        return functools.partial(scaled, scale=3.0, shift=1.0), lambda: None

    jitted = run_differential(make, [(tf.constant(float(i)),) for i in range(7)], min_graph_calls=3)
    assert janus.stats(jitted)["graph_calls"] == 4


def test_a_callable_object():
    def make():
        model = Model()
        return model, lambda: model.w

    run_differential(make, [(tf.constant([1.0, float(i)]),) for i in range(7)], min_graph_calls=3)
