"""[perf] An update that no op which may raise depends on waits for those ops instead of being saved.

``janus/graphgen/ordering.py``: a TF state update before an op that may raise (program order) used
to be saved by the runner before every call and put back when that op raised. BatchNormalization's
moving statistics come before the loss's ``SparseSoftmaxCrossEntropyWithLogits`` (it raises on a
label out of range): Inception-v3's 188 statistics were read before each step (about 0.25 ms) and
each update then copied its buffer. Now such an update waits for the ops that may raise; an update
that one of them reads still runs first and is saved. Each test runs the program eagerly and under
janus, a call raising part-way, and compares every result and variable after every call.
"""

import numpy as np
import pytest
import tensorflow as tf
from differential import run_differential

import janus


def _graphs(jitted) -> list:
    return [runner.graph for runner in janus.driver.resolve(jitted).cache.entries]


class Counted:
    def __init__(self):
        self.step = tf.Variable(0, dtype=tf.int64)
        self.table = tf.Variable(np.arange(12, dtype=np.float32).reshape(6, 2))

    def lookup(self, ids):
        self.step.assign_add(1)  # nothing below reads it
        return tf.reduce_sum(tf.gather(self.table, ids))  # raises on an id out of range

    def lookup_at_step(self, ids):
        self.step.assign_add(1)
        return tf.gather(self.table, ids + tf.cast(self.step % 2, tf.int32))  # reads the new count


IDS = [[0, 1], [2, 3], [4, 5], [1, 1], [0, 9], [3, 2], [-1, 0], [5, 4]]


def test_a_counter_before_a_gather_that_raises_waits_for_it():
    def make():
        c = Counted()
        return (lambda ids: Counted.lookup(c, ids)), lambda: (c.step, c.table)

    jitted = run_differential(make, [(tf.constant(i),) for i in IDS], min_graph_calls=3)
    assert all(g.snapshot == () for g in _graphs(jitted)), "a counter nothing reads was saved"


def test_a_counter_the_gather_reads_runs_first_and_is_put_back():
    def make():
        c = Counted()
        return (lambda ids: Counted.lookup_at_step(c, ids)), lambda: (c.step, c.table)

    jitted = run_differential(make, [(tf.constant(i),) for i in IDS], min_graph_calls=3)
    assert all(g.snapshot for g in _graphs(jitted)), "the counter the gather reads was not saved"


class TwoTables:
    def __init__(self):
        self.seen = tf.Variable(tf.zeros([4]))
        self.offset = tf.Variable(0, name="offset")
        self.table = tf.Variable(tf.ones([5, 3]))

    def step(self, ids):
        self.seen.assign_add(tf.ones([4]))  # not read again
        self.offset.assign(tf.reduce_max(ids) % 2)  # read by the gather's ids
        rows = tf.gather(self.table, ids + self.offset)
        self.table.assign_add(tf.fill([5, 3], 0.5))  # after the gather: waits for it already
        return tf.reduce_sum(rows)


def test_only_the_update_a_fallible_op_reads_is_saved():
    def make():
        t = TwoTables()
        return (lambda ids: TwoTables.step(t, ids)), lambda: (t.seen, t.offset, t.table)

    ids = [[0, 1], [2, 2], [3, 0], [1, 2], [4, 4], [3, 1], [2, 0], [5, 1], [0, 0]]
    jitted = run_differential(make, [(tf.constant(i),) for i in ids], min_graph_calls=3)
    graphs = _graphs(jitted)
    saved = [[v.name for v in g.snapshot] for g in graphs]
    assert graphs and all(names == ["offset:0"] for names in saved), saved


class Branchy:
    def __init__(self):
        self.hits = tf.Variable(0.0)
        self.table = tf.Variable(tf.ones([4]))

    def step(self, i, flag):
        if flag:  # a tensor both ways while profiling: a tf.cond with an update inside
            self.hits.assign_add(1.0)
        return tf.gather(self.table, i)


def test_an_update_in_a_branch_before_a_gather_that_raises():
    def make():
        b = Branchy()
        return (lambda i, flag: Branchy.step(b, i, flag)), lambda: (b.hits, b.table)

    flags = (True, False, True, False, True, True, False, True)
    indices = (0, 1, 2, 1, 5, 2, 7, 3)
    calls = [(tf.constant(i), tf.constant(f)) for i, f in zip(indices, flags)]
    jitted = run_differential(make, calls, min_graph_calls=3)
    assert janus.stats(jitted)["imperative_calls"] == 0, janus.explain(jitted)


@pytest.mark.keras
def test_a_batchnorm_training_step_with_a_label_out_of_range():
    """Keras's BatchNormalization updates its moving statistics in the forward pass, before the
    loss, which raises on a label out of range (on the CPU): eager has updated them then."""
    keras = tf.keras

    def make():
        keras.utils.set_random_seed(1)
        model = keras.Sequential(
            [keras.Input((6,)), keras.layers.Dense(8), keras.layers.BatchNormalization(), keras.layers.Dense(3)]
        )
        optimizer = keras.optimizers.SGD(0.1, momentum=0.9)
        loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

        def train_step(x, y):
            with tf.GradientTape() as tape:
                loss = loss_fn(y, model(x, training=True))
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
            return loss

        return train_step, lambda: [np.array(v) for v in [*model.variables, *optimizer.variables]]

    rng = np.random.default_rng(0)
    labels = [[0, 1, 2, 1], [2, 2, 0, 1], [1, 0, 0, 2], [0, 1, 2, 2], [0, 7, 1, 1], [2, 1, 0, 0], [1, 1, 2, 0]]
    calls = [(tf.constant(rng.standard_normal((4, 6)), tf.float32), tf.constant(y)) for y in labels]
    jitted = run_differential(make, calls, min_graph_calls=3)
    assert all(g.snapshot == () for g in _graphs(jitted)), [[v.name for v in g.snapshot] for g in _graphs(jitted)]


class PrintedThenGathered:
    """An update, a graph ``tf.print`` of its variable (to the process's stderr), then ops that may raise."""

    def __init__(self):
        self.count = tf.Variable(0.0)
        self.table = tf.Variable([1.0, 2.0])

    def step(self, i):
        self.count.assign_add(1.0)
        tf.print("count", self.count)
        return tf.gather(self.table, i)

    def step_checked(self, i):
        self.count.assign_add(1.0)
        tf.print("count", self.count)
        tf.debugging.assert_less(i, 2)  # chained after the print (both stateful, no resource): cannot wait
        return tf.gather(self.table, i)


def _printed(method):
    def make():
        p = PrintedThenGathered()
        return (lambda i: method(p, i)), lambda: (p.count, p.table)

    return make


def _each_printed_twice(capfd, calls: int) -> None:
    """Eager and janus both printed each count once: the comparison does not see the process's stderr."""
    lines = [line for line in capfd.readouterr().err.splitlines() if line.startswith("count ")]
    assert sorted(lines) == sorted(f"count {n}" for n in range(1, calls + 1) for _ in range(2)), lines


def test_a_print_none_of_the_later_ops_depends_on_waits_for_them(capfd):
    """The print and the update before it wait for the gather: when it raises, neither has run, the
    call re-runs eagerly (printing once, as eager does) and later calls are served by the graph."""
    calls = [(tf.constant(i),) for i in (0, 1, 0, 1, 0, 1, 0, 7, 1, 9, 0, 1, 1, 0)]
    capfd.readouterr()
    jitted = run_differential(_printed(PrintedThenGathered.step), calls, min_graph_calls=3)
    _each_printed_twice(capfd, len(calls))
    assert janus.stats(jitted)["graph_calls"] >= 8, janus.stats(jitted)  # served after the errors too
    assert all(g.snapshot == () for g in _graphs(jitted))


def test_an_update_before_a_print_an_assert_waits_on_stays_applied(capfd):
    """An assertion chained after the print fails: the print ran, so the call is not re-run, and the
    update before the print stays applied, as in eager (the runner used to put it back)."""
    calls = [(tf.constant(i),) for i in (0, 1, 0, 1, 0, 1, 0, 5, 1, 0)]
    capfd.readouterr()
    run_differential(_printed(PrintedThenGathered.step_checked), calls, min_graph_calls=3)
    _each_printed_twice(capfd, len(calls))


class Accumulated:
    def __init__(self):
        self.total = tf.Variable(0.0)
        self.steps = tf.Variable(0.0)
        self.table = tf.Variable([1.0, 2.0, 3.0])

    def state(self):
        return self.total, self.steps, self.table


LOOP_CALLS = [(tf.constant(n), tf.constant(i)) for n, i in ((2, 0), (3, 0), (2, 1), (2, 0), (3, 1), (1, 2), (3, 0))]


def test_an_update_after_a_loop_that_raises_in_a_later_turn():
    """The loop updates and may raise in a later turn: the update after it waits for it (it ran
    anyway, so the eager re-run applied it a second time)."""

    def make():
        a = Accumulated()

        def step(n, i):
            for k in tf.range(n):
                a.total.assign_add(tf.gather(a.table, i + k))
            a.steps.assign_add(1.0)
            return a.steps.read_value()

        return step, a.state

    run_differential(make, LOOP_CALLS, min_graph_calls=3)


def test_an_update_after_a_scatter_at_a_bad_index():
    def make():
        a = Accumulated()

        def step(n, i):
            a.table.scatter_nd_update([[i + n - 2]], [tf.cast(n, tf.float32)])
            a.steps.assign_add(1.0)
            return a.steps.read_value()

        return step, a.state

    run_differential(
        make, LOOP_CALLS + [(tf.constant(5), tf.constant(0)), (tf.constant(2), tf.constant(1))], min_graph_calls=3
    )
