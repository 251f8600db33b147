"""[generalize] Bools that flip between calls (train/eval flags): fed at run time, so an `if` on
them becomes a tf.cond and one graph serves both values; where the code needs a constant (a
branch that prints, a library's own Python `if`), a graph per value, as before. Shapes from public
training loops: `train_step(x, training)` alternating with evaluation, a layer's `self.training`
toggled by the loop, three independent flags, a flag returned or used in arithmetic.
"""

import itertools

import pytest
import tensorflow as tf
from differential import run_differential

import janus


def regularised_step():
    w = tf.Variable([[0.5, -0.25], [0.1, 0.3]])

    def step(x, training):
        with tf.GradientTape() as tape:
            y = tf.matmul(x, w)
            loss = tf.reduce_mean(y**2)
            if training:
                loss += 0.01 * tf.reduce_sum(w**2)
        grads = tape.gradient(loss, w)
        if training:
            w.assign_sub(0.1 * grads)
        return loss, grads

    return step, lambda: w.numpy()


def test_a_training_flag_argument_alternating_with_evaluation_is_one_graph():
    calls = [(tf.constant([[1.0, float(i)]]), i % 2 == 0) for i in range(12)]
    jitted = run_differential(regularised_step, calls, min_graph_calls=8)
    assert janus.stats(jitted)["graphs_built"] == 1
    assert "a bool (value relaxed)" in janus.explain(jitted)


def test_three_flags_in_every_combination_share_one_graph():
    """Per-value graphs would need 8 (config.max_graphs): the flags go to run time instead."""

    def make():
        w = tf.Variable(2.0)

        def step(x, scale, shift, square):
            y = x * w
            if scale:
                y = y * 3.0
            if not shift:
                y = y - 1.0
            if square and scale:
                y = y * y
            return y

        return step, lambda: w.numpy()

    combos = list(itertools.product([True, False], repeat=3))
    calls = [(tf.constant(float(i)), *combos[(i * 5) % 8]) for i in range(20)]
    jitted = run_differential(make, calls, min_graph_calls=14)
    assert janus.stats(jitted)["graphs_built"] == 1


def test_a_layer_flag_attribute_toggled_by_the_loop():
    class Block:
        def __init__(self):
            self.training = True
            self.w = tf.Variable([1.0, 2.0])

    def run(jit):
        block = Block()

        def call(x):
            out = x * block.w
            if block.training:
                out = out + tf.reduce_sum(block.w)
            return out

        fn = janus.jit(call) if jit else call
        results = []
        for i in range(12):
            block.training = i % 2 == 1  # the loop toggles it; the jitted function only reads it
            results.append(fn(tf.constant([float(i), 1.0])).numpy().tolist())
        return results, fn

    expected, _ = run(jit=False)
    got, jitted = run(jit=True)
    assert got == expected
    stats = janus.stats(jitted)
    assert stats["graph_calls"] >= 8 and stats["graphs_built"] == 1, stats


def test_a_flag_returned_and_used_in_arithmetic_stays_a_python_bool():
    def make():
        def step(x, flag):
            weight = flag * 2 + 1  # True * 2 + 1 == 3, an int
            return x * weight, flag, not flag, weight

        return step, lambda: None

    calls = [(tf.constant(1.5), i % 2 == 0) for i in range(10)]
    jitted = run_differential(make, calls, min_graph_calls=6)
    result = jitted(tf.constant(1.0), True)
    assert type(result[1]) is bool and type(result[2]) is bool and type(result[3]) is int


def test_a_flag_whose_branch_prints_gets_a_graph_per_value():
    """A tf.cond cannot hold a print: the flag goes back to a constant, and each value's graph
    prints as eager does (not speculated on one side)."""

    def make():
        w = tf.Variable(1.0)

        def step(x, verbose):
            y = x * w
            if verbose:
                print("step", 1)
            return y

        return step, lambda: w.numpy()

    calls = [(tf.constant(float(i)), i % 2 == 0) for i in range(12)]
    jitted = run_differential(make, calls, min_graph_calls=6)
    assert janus.stats(jitted)["graphs_built"] == 2
    assert janus.stats(jitted)["assumption_failures"] == 0


@pytest.mark.keras
def test_a_keras_training_flag_passed_to_dropout_and_batch_norm():
    keras = tf.keras

    def make():
        keras.utils.set_random_seed(3)
        model = keras.Sequential([keras.layers.Dense(4), keras.layers.BatchNormalization(), keras.layers.Dense(1)])
        model.build((None, 3))

        def step(x, training):
            return model(x, training=training)

        return step, lambda: [v.numpy() for v in model.variables]

    calls = [(tf.constant([[1.0, 2.0, float(i)], [0.5, -1.0, 2.0]]), i % 2 == 0) for i in range(10)]
    jitted = run_differential(make, calls, min_graph_calls=5)
    assert janus.stats(jitted)["graphs_built"] <= 2
