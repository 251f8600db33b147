"""Breaker tests of row saves (janus/graphgen/row_saves.py): sparse updates put back row by row.

A graph that scatters into a variable before an op that may raise saves the rows each scatter
changes, and the runner writes them back when the call fails, so that it can re-run eagerly. Each
test here runs a program eagerly and under janus (tests/differential.py) where that could go wrong.
"""

import contextlib
import threading

import numpy as np
import pytest
import tensorflow as tf
from differential import assert_same_call, outcome, run_differential

import janus


def _graphs(jitted) -> list:
    return [runner.graph for runner in janus.driver.resolve(jitted).cache.entries]


def _ints(rows) -> list:
    return [tf.constant(r) for r in rows]


# ---------------------------------------------------------------- one scatter that raises itself


def test_a_lone_scatter_out_of_range_is_not_applied_twice():
    """ResourceScatterAdd applies the rows before a bad index, then raises: the re-run must not add them again."""

    def make():
        table = tf.Variable(np.zeros((4, 2), np.float32))

        def step(ids):
            table.scatter_add(tf.IndexedSlices(tf.ones([3, 2]), ids))
            return tf.constant(1)

        return step, lambda: table

    ids = [[0, 1, 2], [1, 2, 3], [2, 3, 0], [0, 1, 2], [0, 9, 1], [3, 3, 3], [2, -1, 0], [1, 1, 1]]
    jitted = run_differential(make, [(tf.constant(i),) for i in ids], min_graph_calls=3)
    assert all(g.row_saves and not g.snapshot for g in _graphs(jitted))  # its rows are saved, not the table


def test_a_lone_scatter_nd_out_of_range_is_not_applied_twice():
    def make():
        table = tf.Variable(np.zeros((4, 2), np.float32))

        def step(ids):
            table.scatter_nd_add(ids, tf.ones([3, 2]))
            return tf.constant(1)

        return step, lambda: table

    ids = [[[0], [1], [2]], [[1], [2], [3]], [[2], [3], [0]], [[0], [9], [1]], [[3], [3], [3]], [[1], [1], [1]],
           [[2], [-1], [0]], [[0], [0], [2]], [[3], [1], [2]]]  # fmt: skip
    run_differential(make, [(tf.constant(i),) for i in ids], min_graph_calls=3)


def test_a_lone_sparse_momentum_step_out_of_range_is_not_applied_twice():
    def make():
        table = tf.Variable(np.ones((4, 2), np.float32))
        accum = tf.Variable(np.zeros((4, 2), np.float32))

        def step(ids):
            before = tf.reduce_sum(table) + tf.reduce_sum(accum)  # read: the graph knows them as variables
            tf.raw_ops.ResourceSparseApplyMomentum(
                var=table.handle, accum=accum.handle, lr=0.1, grad=tf.ones([3, 2]), indices=ids, momentum=0.9
            )
            return before

        return step, lambda: (table, accum)

    ids = [[0, 1, 2], [1, 2, 3], [2, 3, 0], [0, 9, 1], [3, 3, 3], [1, 1, 1], [2, 0, -1], [0, 0, 3], [1, 2, 1]]
    run_differential(make, [(tf.constant(i),) for i in ids], min_graph_calls=3)


# ---------------------------------------------------------------- several scatters, one variable


class Paths:
    """Scatters into one table from different methods, then reads that may raise."""

    def __init__(self):
        self.table = tf.Variable(np.arange(12, dtype=np.float32).reshape(6, 2) + 1.0)
        self.probe = tf.Variable([1.0, 2.0, 3.0])
        self.n = 0

    def grow(self, ids, u):
        self.table.scatter_add(tf.IndexedSlices(u, ids))

    def cap(self, ids, u):
        self.table.scatter_min(tf.IndexedSlices(u * 3.0, ids))

    def step(self, ids, other, u, j):
        self.grow(ids, u)
        row = tf.cast(self.table[0, 0], tf.int32) % 6  # read after the first scatter
        self.cap(tf.concat([other, [row]], 0), tf.concat([u, u[:1]], 0))
        self.table.scatter_update(tf.IndexedSlices(-u, ids[::-1]))
        self.n += 1
        return tf.gather(self.probe, j) + self.table[1, 1]


def test_scatters_from_different_paths_with_indices_read_between_them():
    def make():
        p = Paths()
        return (lambda ids, other, u, j: Paths.step(p, ids, other, u, j)), lambda: (p.table, p.n)

    rows = [
        ([0, 2], [1, 1], 0), ([1, 1], [5, 0], 1), ([5, 0], [2, 2], 2), ([2, 2], [3, 3], 7),
        ([3, 4], [0, 5], 1), ([0, 5], [6, 1], 0), ([1, 3], [4, -1], 2), ([4, 4], [2, 3], 0),
        ([-1, 3], [2, 3], 0), ([2, 3], [1, 0], 5), ([5, 5], [5, 5], 1), ([0, 1], [2, 3], 0),
        ([4, 3], [1, 0], 1), ([2, 5], [3, 3], 2), ([1, 0], [4, 4], 0), ([3, 3], [0, 2], 1),
    ]  # fmt: skip
    calls = [
        (tf.constant(a), tf.constant(b), tf.constant(np.full((2, 2), n + 1.5, np.float32)), tf.constant(j))
        for n, (a, b, j) in enumerate(rows)
    ]
    jitted = run_differential(make, calls, min_graph_calls=4)
    assert any(g.row_saves for g in _graphs(jitted)), janus.explain(jitted)


def test_indices_gathered_from_the_table_after_an_earlier_scatter():
    """The second scatter's indices are the table's own values after the first: its save reads them then."""

    def make():
        table = tf.Variable(np.array([[1], [2], [3], [0]], np.int32))
        probe = tf.Variable([1, 2, 3])

        def step(ids, j):
            table.scatter_add(tf.IndexedSlices(tf.ones([2, 1], tf.int32), ids))
            nxt = tf.reshape(tf.gather(table, ids), [-1]) % 5  # 4 is out of range: the second scatter raises
            table.scatter_update(tf.IndexedSlices(tf.reshape(ids, [2, 1]) * 10, nxt))
            return tf.gather(probe, j)

        return step, lambda: table

    ids = [[0, 1], [1, 2], [2, 3], [3, 3], [0, 0], [1, 3], [2, 0], [0, 1], [3, 2]]
    js = [0, 1, 2, 1, 0, 4, 1, 2, 0]
    jitted = run_differential(make, [(tf.constant(i), tf.constant(j)) for i, j in zip(ids, js)], min_graph_calls=3)
    assert any(g.row_saves for g in _graphs(jitted)), janus.explain(jitted)


def test_scalar_and_matrix_indices_int64():
    def make():
        table = tf.Variable(np.arange(15, dtype=np.float64).reshape(5, 3))
        probe = tf.Variable([1.0, 2.0])

        def step(i, m, j):
            table.scatter_mul(
                tf.IndexedSlices(tf.fill([3], tf.constant(2.0, tf.float64)), i)
            )  # a scalar index: one row
            table.scatter_sub(tf.IndexedSlices(tf.ones([2, 2, 3], tf.float64), m))  # a matrix of indices
            table.scatter_max(tf.IndexedSlices(tf.fill([2, 2, 3], tf.constant(7.0, tf.float64)), m[::-1]))
            return tf.gather(probe, j)

        return step, lambda: table

    rows = [(0, [[0, 1], [2, 3]], 0), (1, [[1, 1], [4, 0]], 1), (4, [[2, 2], [2, 2]], 0),
            (2, [[0, 4], [3, 1]], 3), (3, [[1, 2], [3, 4]], 1), (0, [[0, 5], [1, 1]], 0),
            (5, [[0, 0], [1, 1]], 0), (1, [[4, 3], [2, 1]], 1)]  # fmt: skip
    calls = [(tf.constant(i, tf.int64), tf.constant(m, tf.int64), tf.constant(j)) for i, m, j in rows * 2]
    jitted = run_differential(make, calls, min_graph_calls=3)
    assert any(g.row_saves for g in _graphs(jitted)), janus.explain(jitted)


def test_compat_v1_scatters_then_a_lookup():
    def make():
        table = tf.Variable(np.arange(8, dtype=np.float32).reshape(4, 2))
        probe = tf.Variable([1.0, 2.0])

        def step(ids, j):
            tf.compat.v1.scatter_add(table, ids, tf.ones([2, 2]))
            tf.compat.v1.scatter_update(table, ids[:1], tf.fill([1, 2], -3.0))
            tf.compat.v1.scatter_div(table, ids, tf.fill([2, 2], 2.0))
            return tf.gather(probe, j)

        return step, lambda: table

    ids = [[0, 1], [1, 2], [2, 3], [3, 3], [0, 0], [1, 3], [2, 0], [0, 1]]
    js = [0, 1, 0, 1, 2, 0, 1, 0]
    run_differential(make, [(tf.constant(i), tf.constant(j)) for i, j in zip(ids, js)], min_graph_calls=3)


def test_a_scatter_inside_a_cond_and_one_outside():
    def make():
        table = tf.Variable(np.arange(8, dtype=np.float32).reshape(4, 2))
        probe = tf.Variable([1.0, 2.0])

        def step(ids, flag, j):
            table.scatter_add(tf.IndexedSlices(tf.ones([2, 2]), ids))
            if flag > 0:
                table.scatter_sub(tf.IndexedSlices(tf.fill([2, 2], 0.5), ids[::-1]))
            return tf.gather(probe, j)

        return step, lambda: table

    rows = [([0, 1], 1, 0), ([1, 2], 0, 1), ([2, 3], 1, 0), ([3, 3], 0, 2), ([0, 0], 1, 0), ([1, 3], 1, 5),
            ([2, 0], 0, 1), ([0, 1], 1, 0), ([0, 7], 1, 0)]  # fmt: skip
    calls = [(tf.constant(i), tf.constant(f), tf.constant(j)) for i, f, j in rows]
    run_differential(make, calls, min_graph_calls=3)


def test_scatters_in_a_loop_then_a_lookup():
    def make():
        table = tf.Variable(np.arange(8, dtype=np.float32).reshape(4, 2))
        probe = tf.Variable([1.0, 2.0])

        def step(ids, n, j):
            for k in tf.range(n):
                table.scatter_add(tf.IndexedSlices(tf.ones([2, 2]) * tf.cast(k, tf.float32), ids))
            table.scatter_add(tf.IndexedSlices(tf.ones([2, 2]), ids))
            return tf.gather(probe, j)

        return step, lambda: table

    rows = [([0, 1], 2, 0), ([1, 2], 3, 1), ([2, 3], 1, 0), ([3, 3], 2, 2), ([0, 0], 3, 0), ([1, 3], 2, 1),
            ([0, 1], 2, 0), ([9, 1], 1, 0)]  # fmt: skip
    calls = [(tf.constant(i), tf.constant(n), tf.constant(j)) for i, n, j in rows]
    run_differential(make, calls, min_graph_calls=3)


def test_a_dense_read_between_scatters_and_one_after_the_error():
    def make():
        table = tf.Variable(np.arange(8, dtype=np.float32).reshape(4, 2))
        probe = tf.Variable([1.0, 2.0])
        seen = []

        def step(ids, j):
            table.scatter_add(tf.IndexedSlices(tf.ones([2, 2]), ids))
            total = tf.reduce_sum(table)
            table.scatter_mul(tf.IndexedSlices(tf.fill([2, 2], 3.0), ids))
            seen.append(1)
            return total + tf.gather(probe, j) + tf.reduce_sum(table.read_value())

        return step, lambda: (table, len(seen))

    ids = [[0, 1], [1, 2], [2, 3], [3, 3], [0, 0], [1, 3], [2, 0], [0, 1]]
    js = [0, 1, 0, 1, 2, 0, 1, 0]
    run_differential(make, [(tf.constant(i), tf.constant(j)) for i, j in zip(ids, js)], min_graph_calls=3)


# ---------------------------------------------------------------- after a failure, and other graphs


def test_called_again_after_failures_the_flags_are_clear():
    def make():
        table = tf.Variable(np.zeros((4, 2), np.float32))
        probe = tf.Variable([1.0, 2.0])

        def step(ids, j):
            table.scatter_add(tf.IndexedSlices(tf.ones([2, 2]), ids))
            table.scatter_add(tf.IndexedSlices(tf.ones([2, 2]), ids[::-1]))
            return tf.gather(probe, j)

        return step, lambda: table

    rows = [([0, 1], 0), ([1, 2], 1), ([2, 3], 0), ([0, 1], 5), ([3, 0], 1), ([1, 8], 0), ([2, 2], 1)] * 2
    jitted = run_differential(make, [(tf.constant(i), tf.constant(j)) for i, j in rows], min_graph_calls=4)
    saves = [s for g in _graphs(jitted) for s in g.row_saves]
    assert saves and not any(bool(s.saved.read()) for s in saves)


def test_two_functions_update_one_table_alternately():
    def make():
        table = tf.Variable(np.arange(8, dtype=np.float32).reshape(4, 2))
        probe = tf.Variable([1.0, 2.0])

        def up(ids, j):
            table.scatter_add(tf.IndexedSlices(tf.ones([2, 2]), ids))
            table.scatter_max(tf.IndexedSlices(tf.fill([2, 2], 4.0), ids))
            return tf.gather(probe, j)

        def down(ids, j):
            table.scatter_sub(tf.IndexedSlices(tf.fill([2, 2], 0.5), ids))
            table.scatter_mul(tf.IndexedSlices(tf.fill([2, 2], 1.5), ids[::-1]))
            return tf.gather(probe, j)

        return (up, down), lambda: table

    (eu, ed), estate = make()
    (ju, jd), jstate = make()
    ju, jd = janus.jit(ju), janus.jit(jd)
    ids = [[0, 1], [1, 2], [2, 3], [3, 3], [0, 0], [1, 3], [2, 0], [0, 1], [3, 1], [2, 2]]
    js = [0, 1, 0, 1, 2, 0, 1, 0, 3, 1]
    for n, (i, j) in enumerate(zip(ids * 2, js[::-1] + js)):
        args = (tf.constant(i), tf.constant(j))
        assert_same_call(n, outcome(eu, args), outcome(ju, args), estate, jstate)
        assert_same_call(n, outcome(ed, args), outcome(jd, args), estate, jstate)
    assert janus.stats(ju)["graph_calls"] >= 3 and janus.stats(jd)["graph_calls"] >= 3


class Swappable:
    """The table an attribute holds is replaced by another variable between calls."""

    def __init__(self):
        self.table = tf.Variable(np.zeros((4, 2), np.float32))
        self.old = []
        self.probe = tf.Variable([1.0, 2.0])

    def step(self, ids, j):
        self.table.scatter_add(tf.IndexedSlices(tf.ones([2, 2]), ids))
        self.table.scatter_add(tf.IndexedSlices(tf.ones([2, 2]), ids[::-1]))
        return tf.gather(self.probe, j)

    def swap(self):
        self.old.append(self.table)
        self.table = tf.Variable(np.full((4, 2), 10.0, np.float32))


def test_a_table_replaced_by_another_variable_between_calls():
    """The graph scatters into whichever variable the attribute holds: its saves must follow it."""
    eager, jit = Swappable(), Swappable()
    jitted = janus.jit(lambda ids, j: Swappable.step(jit, ids, j))

    def state(s):
        return lambda: [s.table.numpy(), *[v.numpy() for v in s.old]]

    rows = [([0, 1], 0, 0), ([1, 2], 1, 0), ([2, 3], 0, 0), ([3, 3], 1, 0), ([0, 2], 0, 1), ([1, 3], 1, 0),
            ([2, 0], 5, 0), ([0, 1], 0, 1), ([3, 1], 1, 0), ([2, 2], 7, 0), ([1, 2], 0, 0)]  # fmt: skip
    for n, (i, j, swap) in enumerate(rows):
        if swap:
            eager.swap()
            jit.swap()
        args = (tf.constant(i), tf.constant(j))
        assert_same_call(n, outcome(lambda *a: Swappable.step(eager, *a), args), outcome(jitted, args),
                         state(eager), state(jit))  # fmt: skip
    assert janus.stats(jitted)["graph_calls"] >= 3, janus.explain(jitted)


# ---------------------------------------------------------------- assumptions and try


def test_an_assumption_on_the_updated_table_fails_after_the_scatter():
    def make():
        table = tf.Variable(np.zeros((4, 2), np.float32))
        probe = tf.Variable([1.0, 2.0])
        log = []

        def step(ids, j):
            table.scatter_add(tf.IndexedSlices(tf.ones([2, 2]), ids))
            table.scatter_add(tf.IndexedSlices(tf.ones([2, 2]), ids[::-1]))
            if table[0, 0] > 6.0:  # true only after a while: the profiled branch is assumed
                log.append("big")
                table.scatter_update(tf.IndexedSlices(tf.zeros([1, 2]), [0]))
            return tf.gather(probe, j)

        return step, lambda: (table, list(log))

    ids = [[1, 2], [2, 3], [1, 3], [0, 1], [1, 2], [0, 0], [3, 0], [0, 2], [0, 0], [1, 1], [0, 3], [0, 0]]
    js = [0, 1, 0, 1, 0, 4, 1, 0, 1, 0, 1, 0]
    run_differential(make, [(tf.constant(i), tf.constant(j)) for i, j in zip(ids, js)], min_graph_calls=2)


def test_shapes_change_across_calls_after_sparse_updates():
    def make():
        table = tf.Variable(np.zeros((6, 2), np.float32))
        probe = tf.Variable([1.0, 2.0])

        def step(ids, j):
            table.scatter_add(tf.IndexedSlices(tf.ones([tf.shape(ids)[0], 2]), ids))
            table.scatter_add(tf.IndexedSlices(tf.ones([tf.shape(ids)[0], 2]) * 2.0, ids[::-1]))
            if ids.shape[0] > 2:
                table.scatter_sub(tf.IndexedSlices(tf.ones([1, 2]), ids[:1]))
            return tf.gather(probe, j)

        return step, lambda: table

    ids = [[0, 1], [1, 2], [2, 3], [3, 4, 5], [0, 0, 1, 2], [1], [2, 9], [5, 4, 3, 9], [0, 1], [1, 2, 3]] * 3
    js = [0, 1, 0, 1, 2, 0, 1, 0, 1, 3, 0, 1, 0, 1, 0] * 2
    run_differential(make, [(tf.constant(i), tf.constant(j)) for i, j in zip(ids, js)], min_graph_calls=2)


def test_a_try_around_a_failing_lookup_after_sparse_updates():
    def make():
        table = tf.Variable(np.zeros((4, 2), np.float32))
        probe = tf.Variable([1.0, 2.0])
        caught = []

        def step(ids, j):
            table.scatter_add(tf.IndexedSlices(tf.ones([2, 2]), ids))
            table.scatter_mul(tf.IndexedSlices(tf.fill([2, 2], 2.0), ids[::-1]))
            try:
                out = tf.gather(probe, j)
            except tf.errors.InvalidArgumentError:
                caught.append(1)
                table.scatter_add(tf.IndexedSlices(tf.ones([2, 2]), ids))
                out = tf.constant(-1.0)
            return out

        return step, lambda: (table, len(caught))

    ids = [[0, 1], [1, 2], [2, 3], [3, 3], [0, 0], [1, 3], [2, 0], [0, 1], [3, 1]]
    js = [0, 1, 0, 1, 2, 0, 1, 5, 0]
    run_differential(make, [(tf.constant(i), tf.constant(j)) for i, j in zip(ids, js)], min_graph_calls=3)


# ---------------------------------------------------------------- threads and export


def test_threads_calling_one_function_some_calls_failing():
    """Each successful call adds 1 to two rows; a failing call must add nothing (it re-runs eagerly and raises)."""
    table = tf.Variable(np.zeros((8, 1), np.float32))
    probe = tf.Variable([1.0, 2.0])

    def step(ids, j):
        table.scatter_add(tf.IndexedSlices(tf.ones([2, 1]), ids))
        table.scatter_add(tf.IndexedSlices(tf.ones([2, 1]), ids))
        return tf.gather(probe, j)

    jitted = janus.jit(step)
    for n in range(4):
        jitted(tf.constant([n, n + 1]), tf.constant(0))
    expected = np.zeros((8, 1), np.float32)
    for n in range(4):
        expected[[n, n + 1]] += 2.0
    lock = threading.Lock()

    def worker(seed):
        rng = np.random.default_rng(seed)
        for _ in range(40):
            i = rng.integers(0, 8, 2)
            j = int(rng.integers(0, 3))
            with lock:  # eager: the scatters run before the lookup raises
                np.add.at(expected, i, 2.0)
            with contextlib.suppress(tf.errors.InvalidArgumentError):
                jitted(tf.constant(i), tf.constant(j))

    threads = [threading.Thread(target=worker, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    np.testing.assert_allclose(table.numpy(), expected)
    assert janus.stats(jitted)["graph_calls"] >= 10


# ---------------------------------------------------------------- Keras optimizers, mixed precision, export


def _embedding_program(optimizer, policy=None):
    """An embedding and a dense layer trained by ``optimizer()``, then a lookup that may raise."""

    def make():
        tf.keras.utils.set_random_seed(5)
        if policy is not None:
            tf.keras.mixed_precision.set_global_policy(policy)
        try:
            embedding = tf.keras.layers.Embedding(8, 4)
            embedding.build((None,))
            dense = tf.keras.layers.Dense(3)
            dense.build((None, 4))
        finally:
            if policy is not None:
                tf.keras.mixed_precision.set_global_policy("float32")
        opt = optimizer()
        variables = [*embedding.trainable_variables, *dense.trainable_variables]
        opt.build(variables)
        probe = tf.Variable([0.0, 1.0, 2.0])

        def step(x, y, j):
            with tf.GradientTape() as tape:
                logits = tf.cast(dense(embedding(x)), tf.float32)
                loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(y, logits))
            grads = tape.gradient(loss, variables)
            opt.apply_gradients(zip(grads, variables))
            return loss, tf.gather(probe, j)

        return step, lambda: [v.numpy() for v in (*variables, *opt.variables)]

    return make


_XS = [[0, 3], [1, 1], [7, 2], [4, 5], [6, 0], [2, 3], [5, 5], [3, 3], [0, 7], [1, 6]]
_JS = [0, 1, 2, 1, 8, 0, 2, 1, 0, 5]


@pytest.mark.keras
@pytest.mark.parametrize(
    "name",
    ["Adagrad", "Adam", "SGD_momentum", "SGD_nesterov", "RMSprop", "RMSprop_momentum", "Adadelta", "Ftrl", "Adamax"],
)
def test_keras_optimizers_on_an_embedding_then_a_lookup_that_may_raise(name):
    make_opt = {
        "Adagrad": lambda: tf.keras.optimizers.Adagrad(0.1),
        "Adam": lambda: tf.keras.optimizers.Adam(0.05),
        "SGD_momentum": lambda: tf.keras.optimizers.SGD(0.1, momentum=0.9),
        "SGD_nesterov": lambda: tf.keras.optimizers.SGD(0.1, momentum=0.9, nesterov=True),
        "RMSprop": lambda: tf.keras.optimizers.RMSprop(0.05),
        "RMSprop_momentum": lambda: tf.keras.optimizers.RMSprop(0.05, momentum=0.5, centered=True),
        "Adadelta": lambda: tf.keras.optimizers.Adadelta(1.0),
        "Ftrl": lambda: tf.keras.optimizers.Ftrl(0.1),
        "Adamax": lambda: tf.keras.optimizers.Adamax(0.1),
    }[name]
    calls = [(tf.constant(x), tf.constant([1, 2]), tf.constant(j)) for x, j in zip(_XS, _JS)]
    run_differential(_embedding_program(make_opt), calls, min_graph_calls=3)


@pytest.mark.keras
def test_mixed_precision_embedding_with_a_loss_scale_optimizer():
    def make_opt():
        return tf.keras.mixed_precision.LossScaleOptimizer(tf.keras.optimizers.Adagrad(0.1))

    calls = [(tf.constant(x), tf.constant([1, 2]), tf.constant(j)) for x, j in zip(_XS, _JS)]
    # tf_keras's LossScaleOptimizer logs from apply_gradients: the step runs split there, around it
    legacy = tf.keras.__name__.startswith("tf_keras")
    run_differential(_embedding_program(make_opt, "mixed_float16"), calls, min_graph_calls=0 if legacy else 3)


def test_export_of_a_graph_that_saves_rows(tmp_path):
    """The row saves are janus's bookkeeping for re-running a call: the SavedModel serves the step alone."""
    table = tf.Variable(np.arange(8, dtype=np.float32).reshape(4, 2))
    probe = tf.Variable([1.0, 2.0])

    @janus.jit
    def step(ids, j):
        table.scatter_add(tf.IndexedSlices(tf.ones([2, 2]), ids))
        table.scatter_mul(tf.IndexedSlices(tf.fill([2, 2], 2.0), ids[::-1]))
        return tf.gather(probe, j)

    for n in range(4):
        step(tf.constant([n % 4, (n + 1) % 4]), tf.constant(n % 2))
    assert any(g.row_saves for g in _graphs(step))
    module = janus.export(step, tf.constant([0, 1]), tf.constant(0), path=tmp_path / "rows")
    before = table.numpy().copy()
    module.serve(tf.constant([2, 3]), tf.constant(1))
    expected = before.copy()
    expected[[2, 3]] += 1.0
    expected[[3, 2]] *= 2.0
    np.testing.assert_allclose(table.numpy(), expected)
    loaded = tf.saved_model.load(str(tmp_path / "rows"))
    with pytest.raises(tf.errors.InvalidArgumentError):
        loaded.serve(tf.constant([2, 3]), tf.constant(7))
    assert loaded.serve(tf.constant([0, 1]), tf.constant(1)).numpy() == 2.0


# ---------------------------------------------------------------- recursion, statements run later, tries


def _walk(table, probe, ids, n):
    table.scatter_add(tf.IndexedSlices(tf.ones([2, 1]), ids))
    if n <= 0:
        return tf.gather(probe, ids[0])  # out of range for some ids
    return _walk(table, probe, (ids + 1) % 5, n - 1) + 1.0


def test_recursion_with_scatters_at_every_level():
    """A recursive function that updates a variable is refused: its invocations only read variables."""

    def make():
        table = tf.Variable(np.zeros((5, 1), np.float32))
        probe = tf.Variable([1.0, 2.0, 3.0])

        def f(ids, n):
            table.scatter_sub(tf.IndexedSlices(tf.fill([2, 1], 0.5), ids))
            return _walk(table, probe, ids, n)

        return f, lambda: table

    rows = [([0, 1], 2), ([1, 2], 3), ([2, 0], 1), ([0, 4], 4), ([1, 1], 2), ([4, 2], 0), ([0, 2], 3), ([1, 0], 5)]
    jitted = run_differential(make, [(tf.constant(i), tf.constant(n)) for i, n in rows], min_graph_calls=0)
    # refused: its updates could neither be ordered nor put back; the scatter before it runs in a segment's graph
    assert "a recursive function updates a TF variable" in janus.explain(jitted)


@pytest.mark.parametrize("scatter_after", [False, True])
def test_a_statement_janus_refuses_raises_after_sparse_updates(scatter_after):
    """Run after the graph (nothing updated after it), or split around (a scatter after it)."""

    def make():
        table = tf.Variable(np.zeros((5, 1), np.float32))
        probe = tf.Variable([1.0, 2.0, 3.0])
        seen = []

        def step(ids, j):
            table.scatter_add(tf.IndexedSlices(tf.ones([2, 1]), ids))
            table.scatter_add(tf.IndexedSlices(tf.ones([2, 1]), ids[::-1]))
            out = tf.gather(probe, j)
            seen.append(10 // int(ids.numpy()[0]))  # ZeroDivisionError where ids[0] is 0
            if scatter_after:
                table.scatter_mul(tf.IndexedSlices(tf.fill([2, 1], 3.0), ids))
            return out

        return step, lambda: (table, list(seen))

    rows = [([1, 2], 0), ([2, 3], 1), ([3, 1], 2), ([1, 4], 1), ([0, 1], 0), ([2, 2], 5), ([4, 0], 1), ([3, 3], 2),
            ([2, 1], 0), ([0, 3], 4), ([1, 1], 1), ([4, 4], 0)]  # fmt: skip
    jitted = run_differential(make, [(tf.constant(i), tf.constant(j)) for i, j in rows], min_graph_calls=0)
    stats = janus.stats(jitted)
    assert stats["segment_calls" if scatter_after else "graph_calls"] >= 3, janus.explain(jitted)


def test_a_try_around_a_scatter_out_of_range_after_an_earlier_scatter():
    """The save's gather raises where the scatter would: the re-run's scatter applies what eager's does."""

    def make():
        table = tf.Variable(np.zeros((4, 2), np.float32))
        failed = []

        def step(ids, more):
            table.scatter_add(tf.IndexedSlices(tf.ones([2, 2]), ids))
            try:
                table.scatter_add(tf.IndexedSlices(tf.fill([3, 2], 2.0), more))
            except tf.errors.InvalidArgumentError:
                failed.append(1)
            return tf.reduce_sum(table)

        return step, lambda: (table, len(failed))

    rows = [([0, 1], [1, 2, 3]), ([1, 2], [0, 0, 3]), ([2, 3], [3, 2, 1]), ([3, 0], [1, 5, 2]), ([0, 0], [2, 2, 2]),
            ([1, 3], [0, 1, -2]), ([2, 2], [1, 1, 0]), ([0, 1], [3, 3, 3])]  # fmt: skip
    # a `try` body that raises in the graph where eager's handler catches it: the function is split
    run_differential(make, [(tf.constant(i), tf.constant(m)) for i, m in rows], min_graph_calls=1)


def test_chained_scatters_on_the_unread_variable_they_return():
    def make():
        table = tf.Variable(np.arange(8, dtype=np.float32).reshape(4, 2))
        probe = tf.Variable([1.0, 2.0])

        def step(ids, j):
            table.scatter_add(tf.IndexedSlices(tf.ones([2, 2]), ids)).scatter_mul(
                tf.IndexedSlices(tf.fill([2, 2], 2.0), ids[::-1])
            ).scatter_sub(tf.IndexedSlices(tf.ones([1, 2]), ids[:1]))
            return tf.gather(probe, j)

        return step, lambda: table

    ids = [[0, 1], [1, 2], [2, 3], [3, 3], [0, 0], [1, 3], [2, 0], [0, 1], [5, 1], [2, 1]]
    js = [0, 1, 0, 1, 2, 0, 1, 0, 0, 1]
    jitted = run_differential(make, [(tf.constant(i), tf.constant(j)) for i, j in zip(ids, js)], min_graph_calls=3)
    assert any(g.row_saves for g in _graphs(jitted)), janus.explain(jitted)


def test_empty_indices_between_scatters():
    def make():
        table = tf.Variable(np.zeros((4, 2), np.float32))
        probe = tf.Variable([1.0, 2.0])

        def step(ids, j):
            table.scatter_add(tf.IndexedSlices(tf.ones([tf.size(ids), 2]), ids))
            table.scatter_max(tf.IndexedSlices(tf.fill([tf.size(ids), 2], 1.5), ids))
            return tf.gather(probe, j)

        return step, lambda: table

    ids = [[0, 1], [1, 2], [], [3, 3], [], [1, 3], [2, 0], [0, 1], [], [2, 1], [0, 9], [], [1, 1]]
    js = [0, 1, 0, 1, 2, 0, 1, 0, 3, 1, 0, 1, 0]
    calls = [(tf.constant(i, tf.int32), tf.constant(j)) for i, j in zip(ids, js)]
    run_differential(make, calls, min_graph_calls=3)
