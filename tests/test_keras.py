"""Keras models inside converted training steps, under Keras 3 and (TF_USE_LEGACY_KERAS=1) Keras 2."""

import numpy as np
import pytest
import tensorflow as tf
from differential import assert_same, run_differential

pytestmark = pytest.mark.keras
keras = tf.keras


def lenet(seed):
    keras.utils.set_random_seed(seed)
    return keras.Sequential(
        [
            keras.layers.Input((28, 28, 1)),
            keras.layers.Conv2D(6, 5, activation="relu"),
            keras.layers.MaxPooling2D(),
            keras.layers.Conv2D(16, 5, activation="relu"),
            keras.layers.MaxPooling2D(),
            keras.layers.Flatten(),
            keras.layers.Dense(32, activation="relu"),
            keras.layers.Dense(10),
        ]
    )


def make_training_program():
    model = lenet(0)
    opt = keras.optimizers.SGD(0.05)

    def loss_fn(logits, labels):
        return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))

    def train_step(x, y):
        with tf.GradientTape() as tape:
            logits = model(x, training=True)
            loss = loss_fn(logits, y)
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    return train_step, lambda: [v.numpy() for v in model.trainable_variables]


def data(n, batch=16, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        x = tf.constant(rng.normal(size=(batch, 28, 28, 1)).astype("float32"))
        y = tf.constant(rng.integers(0, 10, batch).astype("int32"))
        out.append((x, y))
    return out


def test_lenet_training_step_matches_eager_weights():
    batches = data(8) + [(x[:7], y[:7]) for x, y in data(2, seed=1)]  # ragged last batches
    jitted = run_differential(make_training_program, batches, min_graph_calls=5)
    stats = jitted.stats
    assert stats.graphs_built <= 2


def test_model_call_and_layers_inside_converted_function():
    model = lenet(1)

    def predict(x):
        logits = model(x, training=False)
        return tf.argmax(logits, axis=1), tf.nn.softmax(logits)

    run_differential(lambda: (predict, lambda: None), [(x,) for x, _ in data(5, batch=4)])


def test_user_subclassed_model_call_side_effect_happens_once_per_call():
    calls = []

    class Net(keras.Model):
        def __init__(self):
            super().__init__()
            self.dense = keras.layers.Dense(3)

        def call(self, x):
            calls.append(1)
            return self.dense(x)

    import janus

    net = Net()

    @janus.jit
    def step(x):
        return net(x) * 2.0

    x = tf.ones([2, 4])
    for _ in range(5):
        assert_same(net.dense(x) * 2.0, step(x))
    assert len(calls) == 5, calls  # the append in call() happened once per call, never while generating
    assert janus.stats(step)["graph_calls"] == 2


def make_lstm_program():
    keras.utils.set_random_seed(3)
    embedding = tf.Variable(tf.random.uniform([50, 8], -0.1, 0.1))
    cell = keras.layers.LSTMCell(8)
    cell.build((4, 8))
    dense = keras.layers.Dense(50)
    dense.build((4, 8))
    variables = [embedding, *cell.trainable_variables, *dense.trainable_variables]
    opt = keras.optimizers.SGD(0.5)

    def train_step(x, y, state):
        h, c = state
        with tf.GradientTape() as tape:
            loss = 0.0
            for t in range(x.shape[1]):
                out, (h, c) = cell(tf.nn.embedding_lookup(embedding, x[:, t]), (h, c))
                loss += tf.reduce_mean(
                    tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y[:, t], logits=dense(out))
                )
            loss = loss / x.shape[1]
        opt.apply_gradients(zip(tape.gradient(loss, variables), variables))
        return loss, (h, c)

    return train_step, lambda: [v.numpy() for v in variables]


@pytest.mark.parametrize("unroll", [True, False])
def test_lstm_language_model_step_unrolled_and_as_loop(unroll):
    import janus

    janus.config.unroll_loops = unroll
    rng = np.random.default_rng(0)
    state = (tf.zeros([4, 8]), tf.zeros([4, 8]))
    calls = []
    for _ in range(6):
        d = rng.integers(0, 50, size=(4, 6)).astype("int32")
        calls.append((tf.constant(d[:, :-1]), tf.constant(d[:, 1:]), state))
    jitted = run_differential(make_lstm_program, calls, min_graph_calls=3)
    graph = jitted.cache.entries[0].graph.concrete.graph
    ops = {node.op for fn in graph.as_graph_def().library.function for node in fn.node_def}
    ops |= {op.type for op in graph.get_operations()}
    assert bool(ops & {"While", "StatelessWhile"}) == (not unroll)


class Block(keras.layers.Layer):
    def __init__(self, units, **kwargs):
        super().__init__(**kwargs)
        self.dense = keras.layers.Dense(units)
        self.scale = 0.5

    def call(self, x, training=None):
        y = tf.nn.relu(self.dense(x))
        if training:
            y = y * self.scale
        return y + x[:, : y.shape[1]] if y.shape[1] <= x.shape[1] else y


class Net(keras.Model):
    def __init__(self):
        super().__init__()
        self.block1 = Block(8)
        self.block2 = Block(8)
        self.head = keras.layers.Dense(3)
        self.use_second = True

    def call(self, x, training=False):
        h = self.block1(x, training=training)
        if self.use_second:
            h = self.block2(h, training=training)
        for _ in range(2):
            h = tf.tanh(h)
        return self.head(h)


def make_subclassed_training(seed=0):
    def make():
        keras.utils.set_random_seed(seed)
        net = Net()
        net(tf.zeros([2, 8]))
        opt = keras.optimizers.SGD(0.1)

        def train_step(x, y, training):
            with tf.GradientTape() as tape:
                logits = net(x, training=training)
                loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
            grads = tape.gradient(loss, net.trainable_variables)
            opt.apply_gradients(zip(grads, net.trainable_variables))
            return loss

        return train_step, lambda: [v.numpy() for v in net.trainable_variables]

    return make


def test_subclassed_model_trained_20_steps_matches_eager_weights():
    rng = np.random.default_rng(4)
    calls = [
        (
            tf.constant(rng.normal(size=(6, 8)).astype("float32")),
            tf.constant(rng.integers(0, 3, 6).astype("int32")),
            True,
        )
        for _ in range(20)
    ]
    jitted = run_differential(make_subclassed_training(), calls, min_graph_calls=15)
    assert "runs imperatively" not in janus_explain(jitted)


def test_subclassed_model_toggling_training_between_calls():
    rng = np.random.default_rng(5)
    calls = [
        (
            tf.constant(rng.normal(size=(6, 8)).astype("float32")),
            tf.constant(rng.integers(0, 3, 6).astype("int32")),
            i % 3 != 0,
        )
        for i in range(12)
    ]
    jitted = run_differential(make_subclassed_training(1), calls, min_graph_calls=6)
    assert jitted.stats.graphs_built == 2  # one graph per value of the Python bool `training`


def test_user_layers_inside_sequential_are_converted_and_guarded():
    seen = []

    class Doubler(keras.layers.Layer):
        def call(self, x):
            return x * 2.0

    model = keras.Sequential([keras.layers.Input((4,)), keras.layers.Dense(4), Doubler()])
    import janus

    def predict(x):
        return model(x)

    jitted = janus.jit(predict)
    for _ in range(5):
        assert_same(predict(tf.ones([2, 4])), jitted(tf.ones([2, 4])))
    assert janus.stats(jitted)["graph_calls"] >= 2

    def counting_call(self, x):  # replacing the method must invalidate the converted graph
        seen.append(1)
        return x * 3.0

    Doubler.call = counting_call
    for _ in range(3):
        assert_same(model(tf.ones([2, 4])), jitted(tf.ones([2, 4])))
    assert len(seen) == 6  # as in eager: the new call() ran once per call, in both modes


def janus_explain(fn):
    import janus

    return janus.explain(fn)
