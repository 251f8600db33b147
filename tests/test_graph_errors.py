"""[robustness] A graph that raises the program's own error leaves the state eager leaves.

Every TF state update in a graph waits for every op before it in the program, so an op that
raises before the first update has changed nothing, and the call is re-run eagerly: eager raises
its own exception (the type and message users catch) after making its own Python writes.
"""

import numpy as np
import pytest
import tensorflow as tf
from differential import run_differential

import janus


class Lookup:
    def __init__(self):
        self.lookups = 0
        self.table = tf.Variable([1.0, 2.0, 3.0])
        self.hits = tf.Variable(0)

    def get(self, i):
        self.lookups += 1
        value = tf.gather(self.table, i)
        self.hits.assign_add(1)
        return value


def test_a_gather_out_of_range_after_a_python_write():
    def make():
        lookup = Lookup()
        return (lambda i: Lookup.get(lookup, i)), lambda: (lookup.lookups, lookup.hits)

    calls = [(tf.constant(i),) for i in (0, 1, 2, 1, 7, 2, 9, 0)]
    jitted = run_differential(make, calls, min_graph_calls=3)
    assert janus.stats(jitted)["imperative_calls"] == 0, janus.explain(jitted)


@pytest.mark.keras
def test_a_batch_skipped_by_check_numerics_does_not_advance_the_optimizer():
    def make():
        w = tf.Variable([1.0, -1.0])
        opt = tf.keras.optimizers.SGD(0.1)

        def step(x):
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(tf.square(w * x))
            tf.debugging.check_numerics(loss, "loss is not finite")
            grads = tape.gradient(loss, [w])
            opt.apply_gradients(zip(grads, [w]))
            return loss

        return step, lambda: (w, opt.iterations)

    values = [1.0, 2.0, 0.5, 1.5, np.inf, 1.0, np.nan, 2.0]
    run_differential(make, [(tf.constant([v, 1.0]),) for v in values], min_graph_calls=3)


class Scores:
    def __init__(self):
        self.values = [0.5, 1.5, 2.5]
        self.n = 0
        self.reads = tf.Variable(0)

    def total(self):
        total = tf.constant(0.0)
        for i in range(self.n):  # self.n keeps changing: a Python int known only at run time
            total += self.values[i]  # read through the heap ops
        self.reads.assign_add(1)
        return total


def test_a_heap_list_read_past_its_end_raises_index_error():
    eager, graphed = Scores(), Scores()
    jitted = janus.jit(Scores.total)
    for n in (1, 2, 3, 2, 1, 3, 2, 4, 3, 1, 5, 2):
        outcomes = []
        for obj, fn in ((eager, Scores.total), (graphed, jitted)):
            obj.n = n
            try:
                outcomes.append(("ok", float(fn(obj))))
            except IndexError as err:
                outcomes.append(("IndexError", str(err)))
        assert outcomes[0] == outcomes[1], (n, outcomes)
        assert int(eager.reads.numpy()) == int(graphed.reads.numpy())
    assert janus.stats(jitted)["graph_calls"] >= 3, janus.explain(jitted)


class Accumulator:
    def __init__(self):
        self.n = 0
        self.w = tf.Variable([1.0, 2.0, 3.0])

    def step(self, i):
        self.n += 1
        self.w.assign_add([1.0, 1.0, 1.0])  # a TF update first ...
        return tf.gather(self.w, i)  # ... then an op that may raise


def test_an_op_that_raises_after_a_tf_update_leaves_eagers_state():
    def make():
        acc = Accumulator()
        return (lambda i: Accumulator.step(acc, i)), lambda: (acc.n, acc.w)

    calls = [(tf.constant(i),) for i in (0, 1, 2, 1, 5, 2, 7, 0, 1)]
    jitted = run_differential(make, calls, min_graph_calls=4)
    assert janus.stats(jitted)["imperative_calls"] == 0, janus.explain(jitted)


@pytest.mark.keras
def test_labels_out_of_range_after_batch_norm_updated_its_statistics():
    def make():
        tf.keras.utils.set_random_seed(1)
        model = tf.keras.Sequential([tf.keras.layers.Dense(4), tf.keras.layers.BatchNormalization()])
        model.build((None, 3))
        opt = tf.keras.optimizers.SGD(0.1)

        def step(x, y):
            with tf.GradientTape() as tape:
                logits = model(x, training=True)  # updates the moving statistics
                loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(y, logits))
            grads = tape.gradient(loss, model.trainable_variables)
            opt.apply_gradients(zip(grads, model.trainable_variables))
            return loss

        return step, lambda: [v.numpy() for v in model.variables]

    x = tf.constant(np.arange(6, dtype=np.float32).reshape(2, 3) / 6.0)
    labels = [[0, 1], [2, 3], [1, 0], [3, 2], [0, 9], [1, 1], [7, 0], [2, 2]]
    run_differential(make, [(x, tf.constant(y)) for y in labels], min_graph_calls=3)


class Bookkeeper:
    """A training step that counts, records and logs in Python after its optimizer update."""

    def __init__(self):
        self.w = tf.Variable([1.0, -1.0])
        self.opt = tf.keras.optimizers.SGD(0.1)
        self.steps = 0
        self.history = []

    def step(self, x):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.square(self.w * x))
        grads = tape.gradient(loss, [self.w])
        self.opt.apply_gradients(zip(grads, [self.w]))
        self.steps += 1
        self.history.append(loss)
        if self.steps % 3 == 0:
            print("step", self.steps)
        return loss


@pytest.mark.keras
def test_bookkeeping_after_the_optimizer_keeps_no_snapshot_of_the_weights():
    """A counter, a list and a log line after the update cannot raise: no variable is saved per call."""

    def make():
        keeper = Bookkeeper()
        return (lambda x: Bookkeeper.step(keeper, x)), lambda: (keeper.w, keeper.steps, keeper.history)

    jitted = run_differential(make, [(tf.constant([v, 1.0]),) for v in (1.0, 2.0, 0.5, 1.5, 1.0, 2.0, 3.0)],
                              min_graph_calls=3)  # fmt: skip
    graphs = [runner.graph for runner in janus.driver.resolve(jitted).cache.entries]
    assert graphs and all(g.state_writes and not g.snapshot for g in graphs), janus.explain(jitted)


class BranchAfterUpdate:
    def __init__(self):
        self.w = tf.Variable([1.0, 2.0, 3.0])

    def step(self, i, look):
        self.w.assign_add([1.0, 1.0, 1.0])
        if look:  # a tensor: both ways while profiling, so a tf.cond
            return tf.gather(self.w, i)  # may raise, inside the branch, after the update
        return tf.reduce_sum(self.w)


def test_an_op_that_raises_in_a_branch_after_a_tf_update_leaves_eagers_state():
    def make():
        obj = BranchAfterUpdate()
        return (lambda i, look: BranchAfterUpdate.step(obj, i, look)), lambda: obj.w

    flags = (True, False, True, False, True, True, False, True)
    indices = (0, 1, 2, 1, 5, 2, 7, 9)
    calls = [(tf.constant(i), tf.constant(f)) for i, f in zip(indices, flags)]
    jitted = run_differential(make, calls, min_graph_calls=3)
    assert janus.stats(jitted)["imperative_calls"] == 0, janus.explain(jitted)
    assert all(runner.graph.snapshot for runner in janus.driver.resolve(jitted).cache.entries)
