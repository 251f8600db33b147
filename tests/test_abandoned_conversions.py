"""Conversions janus gives up on and makes again must leave nothing behind that runs.

TF keeps every op a trace made, and a function runs every stateful op of its graph. A ``tf.cond``
traced once with Python numbers, then again with them as tensors (its branches set ``scale = 2``
and ``scale = 1``), left its first ``If`` in the graph: a variable update or an object write in a
branch ran twice. The retry now happens before TF makes the ``If``; what another abandoned
conversion leaves that changes state fails the build (the function runs split or eagerly).
"""

import numpy as np
import tensorflow as tf
from differential import run_differential

import janus


def vec(*values):
    return tf.constant(values, tf.float32)


SIGNS = [vec(1.0), vec(-1.0), vec(2.0), vec(-0.5), vec(3.0), vec(1.5), vec(-2.0), vec(0.5)]


def if_ops(jitted) -> int:
    ops = jitted.cache.entries[0].graph.concrete.graph.get_operations()
    return sum(op.type in ("If", "StatelessIf") for op in ops)


def test_variable_update_in_a_branch_that_sets_different_numbers_runs_once():
    def make():
        v = tf.Variable(0.0)

        def step(x):
            if tf.reduce_sum(x) > 0:
                v.assign_add(1.0)
                scale = 2
            else:
                scale = 1
            return x * scale

        return step, lambda: v

    jitted = run_differential(make, [(x,) for x in SIGNS * 2], min_graph_calls=8)
    assert if_ops(jitted) == 1


def test_optimizer_step_in_a_branch_with_a_python_counter():
    """The shape of a training step that skips an update on a bad batch and counts the skips.
    ``grads`` is made in one branch only, and nothing reads it after the ``if``."""

    def make():
        w = tf.Variable([1.0, -2.0])
        opt = tf.keras.optimizers.SGD(0.1)

        def step(x):
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum((w * x) ** 2)
            if loss < 50.0:
                grads = tape.gradient(loss, [w])
                opt.apply_gradients(zip(grads, [w]))
                skipped = 0
            else:
                skipped = 1
            return loss, skipped

        return step, lambda: w

    calls = [(vec(0.5, 1.0),), (vec(10.0, 10.0),), (vec(1.0, -1.0),), (vec(9.0, 8.0),)] * 3
    jitted = run_differential(make, calls, min_graph_calls=6)
    assert if_ops(jitted) == 1


def test_conditional_expression_whose_side_updates_a_variable_runs_it_once():
    def make():
        v = tf.Variable(0.0)

        def bump():
            v.assign_add(1.0)
            return 2

        def step(x):
            scale = bump() if tf.reduce_sum(x) > 0 else 1
            return x * scale

        return step, lambda: v

    run_differential(make, [(x,) for x in SIGNS * 2], min_graph_calls=8)


class Item:
    def __init__(self, label: int) -> None:
        self.label = label


def labels_of(batch):
    return lambda: [item.label for item in batch]


def test_enumerate_counter_stored_into_the_items_of_a_list_argument():
    def make():
        def step(batch):
            for i, item in enumerate(batch):
                item.label = item.label + i
            out = tf.zeros([0], tf.float64)
            for item in batch:
                out = tf.concat([out, tf.ones([1], tf.float64) * item.label], 0)
            return out

        return step, lambda: None

    rng = np.random.default_rng(3)
    batches = [[Item(int(rng.integers(0, 9))) for _ in range(int(rng.integers(2, 5)))] for _ in range(10)]
    eager_batches = [[Item(item.label) for item in batch] for batch in batches]
    eager_fn, _ = make()
    jitted = janus.jit(make()[0])
    for eager_batch, batch in zip(eager_batches, batches):
        np.testing.assert_array_equal(jitted(batch).numpy(), eager_fn(eager_batch).numpy())
        assert [item.label for item in batch] == [item.label for item in eager_batch]
    assert janus.stats(jitted)["graph_calls"] >= 5


def test_hand_written_counter_stored_into_the_items_of_a_list_argument():
    def step(batch):
        i = 0
        for item in batch:
            item.label = item.label + i
            i = i + 1
        return tf.constant(0)

    jitted = janus.jit(step)
    for n in [2, 3, 2, 3, 4, 3, 2, 4]:
        batch = [Item(10 * k) for k in range(n)]
        jitted(batch)
        assert [item.label for item in batch] == [11 * k for k in range(n)]
    assert janus.stats(jitted)["graph_calls"] >= 4


def test_long_loop_whose_else_reads_the_loop_variable_updates_once():
    """Converting the loop to a ``tf.while_loop`` fails in its ``else`` (the loop variable is not
    carried out of the loop), after the loop op was made: it must not also run."""

    def make():
        v = tf.Variable(0.0)

        def step(x):
            for i in range(300):  # noqa: B007 (read by the else)
                v.assign_add(x)
            else:
                last = i
            return last * x

        return step, lambda: v

    jitted = run_differential(make, [(tf.constant(float(k)),) for k in range(6)], min_graph_calls=0)
    assert "would still run" in janus.explain(jitted)
