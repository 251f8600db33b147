"""[perf] Sparse updates before an op that may raise are saved row by row, not as whole variables.

A failing call must leave eager's state, so the runner puts back what the graph updated before
the error and re-runs the call eagerly. A variable updated only by scatters (an embedding table
under a sparse optimizer step) is saved by the graph itself, the rows each scatter changes, instead
of being copied whole before every call (``janus/graphgen/row_saves.py``).
"""

import numpy as np
import pytest
import tensorflow as tf
from differential import run_differential
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import janus


def _graphs(jitted) -> list:
    return [runner.graph for runner in janus.driver.resolve(jitted).cache.entries]


class Table:
    """An embedding-like table updated by sparse scatters, then a lookup that may raise."""

    def __init__(self):
        self.table = tf.Variable(np.arange(12, dtype=np.float32).reshape(6, 2))
        self.probe = tf.Variable([10.0, 20.0, 30.0])
        self.updates = 0

    def step(self, ids, delta, j):
        self.table.scatter_add(tf.IndexedSlices(delta, ids))
        self.table.scatter_sub(tf.IndexedSlices(delta * 0.5, ids[::-1]))
        self.updates += 1
        return tf.gather(self.probe, j)  # out of range on some calls: after the updates


def test_a_lookup_that_raises_after_two_scatters_leaves_eagers_table():
    def make():
        t = Table()
        return (lambda ids, delta, j: Table.step(t, ids, delta, j)), lambda: (t.table, t.updates)

    ids = [[0, 2], [1, 1], [5, 0], [2, 2], [3, 4], [0, 5], [1, 3], [4, 4], [2, 3], [5, 5]]
    js = [0, 1, 2, 1, 0, 7, 1, 9, 2, 0]
    calls = [
        (tf.constant(i), tf.constant(np.full((2, 2), n + 1.0, np.float32)), tf.constant(j))
        for n, (i, j) in enumerate(zip(ids, js))
    ]
    jitted = run_differential(make, calls, min_graph_calls=4)
    assert janus.stats(jitted)["imperative_calls"] == 0, janus.explain(jitted)
    graphs = _graphs(jitted)
    assert graphs and all(g.row_saves and not g.snapshot for g in graphs), [(g.row_saves, g.snapshot) for g in graphs]


def test_a_scattered_index_out_of_range_raises_eagers_error_with_eagers_state():
    """The scatter's own bounds check: the gather that saves its rows raises first, recoverably."""

    def make():
        t = Table()
        return (lambda ids, delta, j: Table.step(t, ids, delta, j)), lambda: (t.table, t.updates)

    ids = [[0, 2], [1, 1], [5, 0], [2, 3], [3, 4], [0, 5], [2, 9], [1, 4], [-1, 0], [3, 3]]
    calls = [(tf.constant(i), tf.ones([2, 2]), tf.constant(0)) for i in ids]
    run_differential(make, calls, min_graph_calls=3)


class Mixed:
    def __init__(self):
        self.table = tf.Variable(np.ones((4, 3), np.float32))
        self.probe = tf.Variable([1.0, 2.0])

    def step(self, ids, j):
        self.table.scatter_add(tf.IndexedSlices(tf.ones([2, 3]), ids))
        self.table.assign_add(tf.fill([4, 3], 0.5))  # a dense update of the same table
        return tf.gather(self.probe, j)


def test_a_table_also_updated_densely_is_saved_whole():
    def make():
        m = Mixed()
        return (lambda ids, j: Mixed.step(m, ids, j)), lambda: m.table

    ids = [[0, 1], [2, 2], [3, 0], [1, 2], [0, 0], [3, 1], [2, 0], [1, 1]]
    calls = [(tf.constant(i), tf.constant(j)) for i, j in zip(ids, [0, 1, 0, 1, 0, 5, 1, 0])]
    jitted = run_differential(make, calls, min_graph_calls=3)
    assert all(g.snapshot and not g.row_saves for g in _graphs(jitted))


def test_a_successful_call_leaves_no_rows_to_put_back():
    """The graph clears its flags last: a later failure of an eager op puts nothing back."""
    t = Table()
    jitted = janus.jit(lambda ids, delta, j: Table.step(t, ids, delta, j))
    for n in range(6):
        jitted(tf.constant([n % 6, (n + 1) % 6]), tf.ones([2, 2]), tf.constant(1))
    saves = [s for g in _graphs(jitted) for s in g.row_saves]
    assert saves and not any(bool(s.saved.read()) for s in saves)
    assert janus.stats(jitted)["graph_calls"] >= 2


SCATTER_KINDS = ("scatter_add", "scatter_sub", "scatter_update", "scatter_max", "scatter_min", "scatter_mul")


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    kinds=st.lists(st.sampled_from(SCATTER_KINDS), min_size=1, max_size=3),
    ids=st.lists(st.lists(st.integers(0, 4), min_size=3, max_size=3), min_size=6, max_size=6),
    js=st.lists(st.integers(0, 4), min_size=6, max_size=6),
)
def test_property_scatters_then_a_lookup_that_may_raise(kinds, ids, js):
    """Any sequence of scatters (duplicate indices included), then a lookup: eager's state after every call."""

    def make():
        table = tf.Variable(np.arange(10, dtype=np.float32).reshape(5, 2) + 1.0)
        probe = tf.Variable([1.0, 2.0, 3.0])

        def step(i, u, j):
            for k, kind in enumerate(kinds):
                getattr(table, kind)(tf.IndexedSlices(u * (k + 1.0), i))
            return tf.gather(probe, j)

        return step, lambda: table

    profiled = [([0, 1, 2], 0), ([2, 3, 4], 1), ([4, 0, 1], 2)]  # values vary: not specialised to constants
    calls = [
        (tf.constant(i), tf.constant(np.full((3, 2), n + 0.5, np.float32)), tf.constant(j))
        for n, (i, j) in enumerate([*profiled, *zip(ids, js)])
    ]
    # a graph serves a call only where eager's lookup does not raise (j < 3; all six j may be 3 or 4)
    run_differential(make, calls, min_graph_calls=1 if any(j < 3 for j in js) else 0)


@pytest.mark.keras
def test_a_sparse_optimizer_step_then_a_lookup_that_may_raise():
    """The LM benchmark's shape: an embedding trained by Adagrad (sparse updates), then a lookup."""

    def make():
        tf.keras.utils.set_random_seed(3)
        embedding = tf.keras.layers.Embedding(8, 4)
        embedding.build((None,))
        dense = tf.keras.layers.Dense(3)
        dense.build((None, 4))
        opt = tf.keras.optimizers.Adagrad(0.1)
        variables = [*embedding.trainable_variables, *dense.trainable_variables]
        opt.build(variables)
        probe = tf.Variable([0.0, 1.0, 2.0])

        def step(x, y, j):
            with tf.GradientTape() as tape:
                logits = dense(embedding(x))
                loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(y, logits))
            grads = tape.gradient(loss, variables)
            opt.apply_gradients(zip(grads, variables))
            return loss, tf.gather(probe, j)

        return step, lambda: [v.numpy() for v in (*variables, *opt.variables)]

    xs = [[0, 3], [1, 1], [7, 2], [4, 5], [6, 0], [2, 3], [5, 5]]
    js = [0, 1, 2, 1, 8, 0, 2]
    calls = [(tf.constant(x), tf.constant([1, 2]), tf.constant(j)) for x, j in zip(xs, js)]
    jitted = run_differential(make, calls, min_graph_calls=3)
    assert any(g.row_saves for g in _graphs(jitted)), janus.explain(jitted)
