"""[generalize] ``opt.minimize(loss_fn, var_list)``: the optimizer calls the user's loss function
under its own tape while the graph is built, and janus converts it there (tf_keras optimizers, and
the tf.compat.v1.train optimizers janus knows). Eager's result differs from a graph's (None against
an op), so only a minimize whose result is unused is served; a v1 minimize of a tensor (eager
raises) and a loss function with Python effects run eagerly.
"""

import pytest
import tensorflow as tf
from differential import run_differential

import janus

keras = tf.keras


def vec(*values):
    return tf.constant([float(v) for v in values])


def calls(n):
    return [(vec(1.0, 0.1 * i),) for i in range(n)]


@pytest.mark.parametrize("kind", ["sgd", "momentum"])
def test_v1_minimize_with_a_lambda_loss(kind):
    def make():
        w = tf.Variable([1.0, -2.0])
        if kind == "sgd":
            opt = tf.compat.v1.train.GradientDescentOptimizer(0.1)
        else:
            opt = tf.compat.v1.train.MomentumOptimizer(0.05, momentum=0.9)

        def step(x):
            opt.minimize(lambda: tf.reduce_sum((w * x - 1.0) ** 2), var_list=[w])
            return w * 1.0

        return step, lambda: w

    run_differential(make, calls(8), min_graph_calls=3)


@pytest.mark.keras
def test_minimize_of_a_loss_fn_calling_a_keras_model():
    if not hasattr(keras.optimizers.SGD(0.05), "minimize"):
        pytest.skip("Keras 3 optimizers have no minimize (and v1 ones cannot update Keras 3 variables)")

    def make():
        keras.utils.set_random_seed(5)
        model = keras.Sequential([keras.layers.Dense(4, activation="tanh"), keras.layers.Dense(1)])
        model(tf.zeros([1, 2]))
        opt = keras.optimizers.SGD(0.05)

        def step(x, y):
            def loss_fn():
                return tf.reduce_mean((model(x) - y) ** 2)

            opt.minimize(loss_fn, var_list=model.trainable_variables)
            return loss_fn()

        return step, lambda: [v.numpy() for v in model.trainable_variables]

    batches = [(tf.fill([3, 2], 0.1 * i), tf.fill([3, 1], 1.0 - 0.1 * i)) for i in range(8)]
    run_differential(make, batches, min_graph_calls=3)


def test_a_learning_rate_changed_between_calls_is_seen():
    w = {}

    def make():
        w["v"] = tf.Variable([1.0, -2.0])
        v = w["v"]
        opt = tf.compat.v1.train.GradientDescentOptimizer(0.1)

        def step(x):
            opt.minimize(lambda: tf.reduce_sum((v * x) ** 2), var_list=[v])
            return v * 1.0

        return step, opt

    eager_step, eager_opt = make()
    eager_w = w["v"]
    jit_raw, jit_opt = make()
    jit_w = w["v"]
    jitted = janus.jit(jit_raw)
    for i, (x,) in enumerate(calls(10)):
        if i == 6:
            eager_opt._learning_rate = jit_opt._learning_rate = 0.02
        eager_step(x)
        jitted(x)
        assert (eager_w.numpy() == jit_w.numpy()).all() or abs(eager_w.numpy() - jit_w.numpy()).max() < 1e-6, i
    assert janus.stats(jitted)["graph_calls"] >= 3


def refused(make, calls, reason):
    jitted = run_differential(make, calls, min_graph_calls=0)
    assert reason in janus.explain(jitted), janus.explain(jitted)


def test_a_v1_minimize_whose_result_is_used_runs_eagerly():
    def make():
        w = tf.Variable([1.0, -2.0])
        opt = tf.compat.v1.train.GradientDescentOptimizer(0.1)

        def step(x):
            op = opt.minimize(lambda: tf.reduce_sum((w * x) ** 2), var_list=[w])
            return op is None, w * 1.0

        return step, lambda: w

    refused(make, calls(6), "the result of minimize() is used")


def test_a_v1_minimize_of_a_tensor_raises_as_in_eager():
    def make():
        w = tf.Variable([1.0, -2.0])
        opt = tf.compat.v1.train.GradientDescentOptimizer(0.1)

        def step(x):
            with tf.GradientTape():
                loss = tf.reduce_sum((w * x) ** 2)
            opt.minimize(loss, var_list=[w])
            return w * 1.0

        return step, lambda: w

    run_differential(make, calls(5), min_graph_calls=0)


def test_a_loss_fn_that_records_its_calls_runs_eagerly():
    def make():
        w = tf.Variable([1.0, -2.0])
        opt = tf.compat.v1.train.GradientDescentOptimizer(0.1)

        def step(x):
            seen = []

            def loss_fn():
                seen.append(1)
                return tf.reduce_sum((w * x) ** 2)

            opt.minimize(loss_fn, var_list=[w])
            return len(seen)

        return step, lambda: w

    refused(make, calls(6), "changes a list or dict it can see")
