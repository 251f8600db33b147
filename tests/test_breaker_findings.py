"""[generalize] Shapes a fresh-context tester used to break this round's changes (each one gave a
different answer than eager, or no graph, before its fix)."""

import threading

import numpy as np
import pytest
import tensorflow as tf
from differential import run_differential

import janus

keras = tf.keras


class Leaf:
    def __init__(self, flag=None, left=None, right=None):
        self.flag, self.left, self.right = flag, left, right


def test_is_true_and_is_small_int_on_numbers_known_only_at_run_time():
    """`x is True` / `x is 0`: CPython's bools and small ints are single objects."""

    def make():
        def score(node):
            if node.flag is None:
                return score(node.left) + score(node.right)
            if node.flag is True:
                return tf.constant(1.0)
            return tf.constant(10.0) if node.flag is 0 else tf.constant(100.0)  # noqa: F632 - the shape under test

        return score, lambda: None

    rng = np.random.default_rng(0)
    # flags of one type per run: bool leaves (`is True`), then int leaves (`is 0`)
    bools = [(tree_of(rng, bool),) for _ in range(7)]
    run_differential(make, bools, min_graph_calls=3)
    ints = [(tree_of(rng, int),) for _ in range(7)]
    run_differential(make, ints, min_graph_calls=3)


def tree_of(rng, kind):
    def leaf():
        return Leaf(flag=bool(rng.random() < 0.5) if kind is bool else int(rng.integers(0, 3)))

    node = leaf()
    for _ in range(int(rng.integers(1, 4))):
        node = Leaf(left=node, right=leaf())
    return node


def test_a_run_time_number_appended_to_a_python_list_stays_a_python_number():
    def make():
        seen = []

        def step(n, x):
            seen.append(n)
            scale = 2 if tf.reduce_sum(x) > 0 else 3  # a Python number chosen by a tensor
            seen.append(scale)
            return x * 2.0 + n

        return step, lambda: list(seen)

    calls = [(i, tf.constant(float(1 - 2 * (i % 2)))) for i in range(9)]
    run_differential(make, calls, min_graph_calls=3)


@pytest.mark.keras
def test_another_thread_calling_a_layer_with_a_user_activation_meanwhile_gets_eagers_result():
    def act(x):
        return tf.nn.relu(x) + 1.0

    keras.utils.set_random_seed(1)
    layer = keras.layers.Dense(3, activation=act)
    layer.build((None, 2))
    x0 = tf.fill([2, 2], 0.5)
    expected = (tf.nn.relu(tf.matmul(x0, layer.kernel) + layer.bias) + 1.0).numpy()
    stop, problems = threading.Event(), []

    def other():
        while not stop.is_set():
            try:
                if not np.allclose(layer(x0).numpy(), expected):
                    problems.append("wrong result")
            except Exception as err:  # noqa: BLE001 - any error is a finding
                problems.append(repr(err))

    thread = threading.Thread(target=other)
    thread.start()
    step = janus.jit(lambda x, k: layer(x) * k)
    try:
        for i in range(30):
            step(tf.fill([2, 2], 0.1 * i), float(i % 7))  # k changes: graphs get built meanwhile
    finally:
        stop.set()
        thread.join()
    assert not problems, problems[:3]


@pytest.mark.keras
def test_a_user_layer_keeping_a_user_function_in_an_attribute_is_served():
    def make():
        def gelu(x):
            return x * tf.sigmoid(1.702 * x)

        class MyDense(keras.layers.Layer):
            def __init__(self, units, activation):
                super().__init__()
                self.units, self.activation_fn = units, activation

            def build(self, shape):
                self.w = self.add_weight(shape=(shape[-1], self.units), initializer="ones")

            def call(self, x):
                return self.activation_fn(tf.matmul(x, self.w))

        layer = MyDense(3, gelu)
        layer.build((None, 2))
        return (lambda x: layer(x)), lambda: None

    jitted = run_differential(make, [(tf.fill([2, 2], 0.3 * i - 0.5),) for i in range(10)], min_graph_calls=6)
    assert janus.stats(jitted)["graphs_built"] == 1


def test_logging_every_n_steps_serves_the_other_steps_from_graphs():
    """`if self.step % 5 == 0: print(...); self.history.append(loss)`: a tf.cond cannot hold the
    effects, so the common side is speculated and the logging steps run eagerly."""

    class Trainer:
        def __init__(self):
            self.w = tf.Variable([1.0, -2.0])
            self.step, self.history = 0, []

        def train_step(self, x):
            loss = tf.reduce_sum(self.w * x)
            self.w.assign_sub(0.1 * x)
            self.step += 1
            if self.step % 5 == 0:
                print("step", self.step, "loss", loss)
                self.history.append(loss)
            return loss

    def make():
        trainer = Trainer()
        return trainer.train_step, lambda: (trainer.step, trainer.w, list(trainer.history))

    jitted = run_differential(make, [(tf.constant([0.1 * i, 1.0]),) for i in range(21)], min_graph_calls=10)
    assert janus.stats(jitted)["graphs_built"] <= 3


def test_a_function_returning_its_gradient_tape_keeps_eagers_tape():
    """A graph's tape recorded the graph's ops: the caller's tape.gradient on it gave None or raised
    on later calls. Such a function runs eagerly, and the returned tape works as eager's."""

    def make():
        w = tf.Variable(2.0)

        def forward(x):
            with tf.GradientTape() as tape:
                y = x * w
            return y, tape

        def step(x):
            y, tape = forward_fn(x)
            return y, tape.gradient(y, w)

        forward_fn = janus.jit(forward) if make.jit else forward
        return step, lambda: w.numpy()

    make.jit = False
    eager_step, _ = make()
    make.jit = True
    jit_step, _ = make()
    for i in range(6):
        x = tf.constant(float(i))
        assert [float(v) for v in eager_step(x)] == [float(v) for v in jit_step(x)]
