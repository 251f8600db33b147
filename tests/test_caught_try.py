"""[partial] ``try`` with ``except``/``else`` is converted when its body is: the graph speculates that
the body does not raise, and a call whose body raises in the graph re-runs eagerly (TF state put
back), where the handler catches it. Otherwise the ``try`` stays Python and the function runs split.
Every call is compared with eager."""

import numpy as np
import tensorflow as tf
from differential import run_differential

import janus


def test_a_convertible_try_body_is_one_graph_and_a_call_that_raises_gets_the_handlers_answer():
    def make():
        w = tf.Variable(np.ones((3, 1)), dtype=tf.float32)
        steps = tf.Variable(0)

        def step(x):
            steps.assign_add(1)  # an update before the op that raises: put back, then eager runs
            try:
                y = tf.debugging.check_numerics(tf.reduce_sum(x @ w), "loss")
            except tf.errors.InvalidArgumentError:
                y = tf.constant(-1.0)
            else:
                w.assign_sub(0.01 * tf.ones_like(w))
            return y * 2.0

        return step, lambda: (w, steps)

    x = tf.ones((4, 3))
    nan = tf.fill((4, 3), float("nan"))
    calls = [(x * n,) for n in range(5)] + [(nan,), (x,), (x * 2,), (x * 3,)]
    jitted = run_differential(make, calls, min_graph_calls=4)
    stats = janus.stats(jitted)
    assert stats["graphs_built"] == 1 and stats["split_calls"] == 0, janus.explain(jitted)


def test_a_try_whose_body_keeps_raising_in_the_graph_runs_split_with_the_try_in_python():
    def make():
        log = []

        def lookup(table, index):
            try:
                value = tf.gather(table, index)  # out of range raises on the CPU
            except tf.errors.InvalidArgumentError:
                value = tf.zeros([], table.dtype)
            log.append(int(tf.size(table)))
            return value + 1.0

        return lookup, lambda: list(log)

    table = tf.constant([1.0, 2.0, 3.0])
    calls = [(table, tf.constant(i % 2)) for i in range(4)] + [(table, tf.constant(7 + i)) for i in range(6)]
    jitted = run_differential(make, calls, min_graph_calls=0)
    assert jitted.split is not None, janus.explain(jitted)
    assert janus.stats(jitted)["segment_calls"] + janus.stats(jitted)["graph_calls"] > 0


def test_a_handler_that_ran_while_profiling_keeps_the_try_in_python():
    def make():
        def scale(x, config):
            try:
                factor = config["scale"]
            except KeyError:
                factor = 1.0
            return tf.reduce_sum(x) * factor

        return scale, lambda: None

    x = tf.constant([1.0, 2.0])
    configs = [{"lr": 0.1}, {"scale": 2.0}, {"lr": 0.2}, {"scale": 3.0}] * 3
    run_differential(make, [(x, c) for c in configs], min_graph_calls=0)


def test_a_try_body_with_a_print_or_a_return_is_not_speculated():
    def make():
        out = []

        def noisy(x):
            try:
                y = tf.reduce_mean(x)
                print("mean computed")
            except ValueError:
                return None
            try:
                z = tf.reduce_max(x)
                if len(out) > 100:
                    return z
            except ValueError:
                z = None
            out.append(1)
            return y + z

        return noisy, lambda: list(out)

    jitted = run_differential(make, [(tf.constant([1.0, float(n)]),) for n in range(8)], min_graph_calls=0)
    text = janus.explain(jitted)
    assert "runs split" in text and ("print, log or warning" in text or "return, break or continue" in text), text


def test_a_python_exception_raised_while_building_the_body_goes_to_the_handler():
    def make():
        def first_or_zero(xs):
            try:
                head = xs[0]
            except IndexError:
                head = tf.constant(0.0)
            return head * 2.0

        return first_or_zero, lambda: None

    calls = [([tf.constant(float(n))],) for n in range(4)] + [([],)] * 3 + [([tf.constant(5.0)],)] * 3
    run_differential(make, calls, min_graph_calls=0)


def test_try_except_in_a_training_step_with_an_optimizer():
    def make():
        tf.random.set_seed(1)
        w = tf.Variable(tf.random.normal((3, 2)))
        opt_steps = []

        def train_step(x, y):
            with tf.GradientTape() as tape:
                try:
                    logits = x @ w
                    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(y, logits))
                except tf.errors.InvalidArgumentError:
                    loss = tf.constant(0.0)
            grad = tape.gradient(loss, w)
            if grad is not None:
                w.assign_sub(0.1 * grad)
            opt_steps.append(1)
            return loss

        return train_step, lambda: (w, len(opt_steps))

    rng = np.random.default_rng(0)
    calls = [
        (tf.constant(rng.normal(size=(5, 3)), tf.float32), tf.constant(rng.integers(0, 2, size=5), tf.int32))
        for _ in range(8)
    ]
    calls[6] = (calls[6][0], tf.constant([0, 1, 5, 0, 1], tf.int32))  # a label out of range raises
    jitted = run_differential(make, calls, min_graph_calls=3)
    assert janus.stats(jitted)["split_calls"] == 0, janus.explain(jitted)
