"""[generalize] ``super()`` in converted methods: the zero-argument form finds the method's class
(its ``__class__`` cell) and first argument as Python does; ``super().call`` of a Keras layer class
runs Keras's own ``call`` on the user's layer, a user parent's method is converted. The method
found is guarded, so a parent changed between calls is seen.
"""

import pytest
import tensorflow as tf
from differential import run_differential

import janus

keras = tf.keras


def vec(*values):
    return tf.constant([float(v) for v in values])


def calls(n):
    return [(vec(i, 1.0 - i, 0.5),) for i in range(n)]


class Scorer:
    def __init__(self):
        self.w = tf.Variable([1.0, -0.5, 2.0])

    def score(self, x):
        return tf.reduce_sum(x * self.w)


class Sharp(Scorer):
    def score(self, x):
        return super().score(x) ** 2 + 1.0


class Sharper(Sharp):
    def score(self, x):
        return super(Sharp, self).score(x) - super().score(x)  # skips Sharp, then uses it


def test_zero_argument_super_calls_a_user_parent_method():
    def make():
        model = Sharp()

        def step(x):
            return model.score(x)

        return step, lambda: None

    run_differential(make, calls(8), min_graph_calls=3)


def test_two_argument_super_skips_a_class_of_the_mro():
    def make():
        model = Sharper()

        def step(x):
            return model.score(x)

        return step, lambda: None

    run_differential(make, calls(8), min_graph_calls=3)


def test_a_parent_method_replaced_between_calls_is_seen():
    def make():
        model = Sharp()
        original = Scorer.score

        def step(x):
            return model.score(x)

        def state():
            return None

        return step, state, original

    eager_step, _, original = make()
    jit_step = janus.jit(make()[0])
    try:
        for i, (x,) in enumerate(calls(10)):
            if i == 6:
                Scorer.score = lambda self, x: tf.reduce_max(x * self.w)
            expected, actual = eager_step(x), jit_step(x)
            assert abs(float(expected) - float(actual)) < 1e-4, (i, expected, actual)
    finally:
        Scorer.score = original
    assert janus.stats(jit_step)["graph_calls"] >= 3


class Offset:
    bias = 0.5

    def shift(self, x):
        return x + self.bias


class Offset2(Offset):
    def shift(self, x):
        return super().shift(x) * super().bias  # a class attribute through super(): runs eagerly


def test_a_class_attribute_read_through_super_runs_eagerly():
    def make():
        obj = Offset2()

        def step(x):
            return obj.shift(x)

        return step, lambda: None

    jitted = run_differential(make, calls(6), min_graph_calls=0)
    assert "super().bias is not a plain method" in janus.explain(jitted)


class Nested(Scorer):
    def score(self, x):
        def inner():
            return super().score(x)  # noqa: B023 - Python: RuntimeError, no arguments

        return inner()


def test_super_without_arguments_in_a_nested_function_raises_as_in_eager():
    def make():
        model = Nested()

        def step(x):
            return model.score(x)

        return step, lambda: None

    run_differential(make, calls(5), min_graph_calls=0)


@pytest.mark.keras
def test_a_layer_normalization_subclass_calling_super_call_with_gradients():
    class Gated(keras.layers.LayerNormalization):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.gate = self.add_weight(shape=(3,), initializer="ones", name="gate")

        def call(self, inputs):
            return super().call(inputs) * tf.sigmoid(self.gate)

    def make():
        layer = Gated()
        layer.build((None, 3))

        def step(x):
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(layer(x) ** 2)
            return loss, tape.gradient(loss, layer.trainable_variables)

        return step, lambda: None

    run_differential(make, [(tf.fill([2, 3], 0.1 * i) + vec(0.0, 1.0, 2.0),) for i in range(8)], min_graph_calls=3)


@pytest.mark.keras
def test_a_user_layer_extending_a_user_layer_through_super_call():
    class Base(keras.layers.Layer):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.dense = keras.layers.Dense(3)

        def call(self, x):
            return tf.tanh(self.dense(x))

    class Residual(Base):
        def call(self, x):
            return x + super().call(x)

    def make():
        keras.utils.set_random_seed(4)
        layer = Residual()
        layer(tf.zeros([1, 3]))

        def step(x):
            return layer(x)

        return step, lambda: None

    run_differential(make, [(tf.fill([2, 3], 0.2 * i),) for i in range(8)], min_graph_calls=3)
