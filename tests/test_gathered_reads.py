"""[perf] A generated function gathers rows from a variable instead of copying it whole first.

``tf.gather(variable, ids)`` traces as ``GatherV2(ReadVariableOp(v), ids)``; once an optimizer has
scattered into the variable, each read copies the whole table (``janus/graphgen/gathered_reads.py``).
The rewrite must keep eager's values where the step updates the same variable before and after the
gather, and eager's error (and state) for ids out of range.
"""

from __future__ import annotations

import collections

import numpy as np
import pytest
import tensorflow as tf
from differential import run_differential
from tensorflow.python.eager import context

import janus
from janus.graphgen import gathered_reads

keras = tf.keras


def _registered_ops(jitted) -> collections.Counter:
    """Op counts of the functions janus registered for ``jitted``'s graphs (the rewritten ones)."""
    counts: collections.Counter = collections.Counter()
    for runner in janus.driver.resolve(jitted).cache.entries:
        fdef = context.context().get_function_def(runner.graph.function_name)
        counts.update(node.op for node in fdef.node_def)
    return counts


def _gathers_of_whole_reads(jitted) -> int:
    found = 0
    for runner in janus.driver.resolve(jitted).cache.entries:
        fdef = context.context().get_function_def(runner.graph.function_name)
        ops = {node.name: node.op for node in fdef.node_def}
        for node in fdef.node_def:
            if node.op == "GatherV2" and ops.get(node.input[0].split(":", 1)[0]) == "ReadVariableOp":
                found += 1
    return found


def _take(table: tf.Variable, ids: tf.Tensor) -> tf.Tensor:
    """A gather from the variable's value, as ``keras.ops.take`` does on a Keras 3 variable (a
    ``tf.Variable`` gathered directly is a ``ResourceGather`` already)."""
    return tf.gather(tf.convert_to_tensor(table), ids)


def _ids(seed: int, shape=(4, 3), high: int = 50) -> tf.Tensor:
    return tf.constant(np.random.RandomState(seed).randint(0, high, shape), tf.int32)


@pytest.mark.keras
@pytest.mark.parametrize("optimizer", ["adagrad", "sgd", "adam"])
def test_an_embedding_trained_by_sparse_updates_is_gathered_by_rows(optimizer):
    def make():
        keras.utils.set_random_seed(3)
        emb = keras.layers.Embedding(50, 8)
        emb.build((None,))
        dense = keras.layers.Dense(1)
        dense.build((None, 8))
        opt = {
            "adagrad": keras.optimizers.Adagrad(0.5),
            "sgd": keras.optimizers.SGD(0.5),
            "adam": keras.optimizers.Adam(0.1),
        }[optimizer]
        variables = [*emb.trainable_variables, *dense.trainable_variables]

        def step(ids, target):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean((dense(tf.reduce_mean(emb(ids), axis=1))[:, 0] - target) ** 2)
            opt.apply_gradients(zip(tape.gradient(loss, variables), variables))
            return loss

        return step, lambda: [v.numpy() for v in variables]

    calls = [(_ids(i), tf.constant(np.linspace(-1, 1, 4), tf.float32)) for i in range(8)]
    jitted = run_differential(make, calls, min_graph_calls=3)
    assert _registered_ops(jitted)["ResourceGather"] >= 1, _registered_ops(jitted)
    assert _gathers_of_whole_reads(jitted) == 0


def _slow_zero() -> tf.Tensor:
    """0.0, computed by a chain of matmuls: an op waiting for it runs late unless it is ordered."""
    x = tf.ones([200, 200]) / 200.0
    for _ in range(6):
        x = tf.matmul(x, x)
    return tf.reduce_sum(x) * 0.0


def test_updates_before_and_after_the_gathers_of_one_step_are_seen_as_in_eager():
    """The update before a gather comes late (it waits for a slow zero), the one after could come
    early (the gather's ids wait for it): only the ordering TF gave the read orders them."""

    def make():
        table = tf.Variable(np.arange(40, dtype=np.float32).reshape(10, 4))

        def step(ids, other):
            table.assign_add(tf.ones([10, 4]) + _slow_zero())  # the first gather must see this
            first = _take(table, ids)
            table.scatter_sub(tf.IndexedSlices(first * 0.5, ids))
            second = _take(table, other + tf.cast(_slow_zero(), tf.int32))  # sees the halved rows
            table.scatter_add(tf.IndexedSlices(tf.ones([2, 4]), tf.constant([0, 9])))  # must not be seen
            return first, second

        return step, lambda: table.numpy()

    calls = [(tf.constant([i % 10, (3 * i) % 10, 2]), tf.constant([9, i % 10])) for i in range(8)]
    jitted = run_differential(make, calls, min_graph_calls=3)
    assert _registered_ops(jitted)["ResourceGather"] >= 2, _registered_ops(jitted)
    assert _gathers_of_whole_reads(jitted) == 0
    for runner in janus.driver.resolve(jitted).cache.entries:  # the order, not only this run's luck
        fdef = context.context().get_function_def(runner.graph.function_name)
        nodes = {node.name: node for node in fdef.node_def}
        gathers = [n for n in fdef.node_def if n.op == "ResourceGather" and not n.name.startswith("janus_row_save")]
        assert len(gathers) == 2, [n.name for n in gathers]
        first, second = sorted(gathers, key=lambda n: len(_upstream_names(n, nodes)))  # the second waits for the first
        assert "AssignAddVariableOp" in _upstream(first, nodes)
        assert {"ResourceScatterSub"} <= _upstream(second, nodes)
        last_scatter = [n for n in fdef.node_def if n.op == "ResourceScatterAdd"]
        assert all(second.name in _upstream_names(n, nodes) for n in last_scatter)


def _upstream_names(node, nodes: dict) -> set[str]:
    return gathered_reads._ancestors([node], nodes, skip="")


def _upstream(node, nodes: dict) -> set[str]:
    """The op types ``node`` waits for or reads, transitively."""
    return {nodes[name].op for name in _upstream_names(node, nodes)}


def test_ids_out_of_range_raise_eagers_error_and_leave_eagers_state():
    def make():
        table = tf.Variable(np.arange(20, dtype=np.float32).reshape(5, 4))
        counter = tf.Variable(0)

        def step(ids):
            counter.assign_add(1)
            rows = _take(table, ids)
            table.scatter_add(tf.IndexedSlices(tf.ones_like(rows), tf.zeros_like(ids)))
            return tf.reduce_sum(rows)

        return step, lambda: (table.numpy(), counter.numpy())

    ids = [[0, 1], [2, 3], [4, 0], [1, 1], [7, 0], [3, 2], [0, -1], [4, 4], [1, 2]]
    jitted = run_differential(make, [(tf.constant(i),) for i in ids], min_graph_calls=3)
    assert _gathers_of_whole_reads(jitted) == 0 and _registered_ops(jitted)["ResourceGather"] >= 1


def test_a_table_also_read_whole_keeps_its_read():
    def make():
        table = tf.Variable(np.arange(24, dtype=np.float32).reshape(6, 4))

        def step(ids):
            value = tf.convert_to_tensor(table)
            rows = tf.gather(value, ids)
            table.scatter_add(tf.IndexedSlices(rows * 0.25, ids))
            return tf.reduce_sum(rows) + tf.reduce_sum(value)

        return step, lambda: table.numpy()

    jitted = run_differential(make, [(tf.constant([i % 6, (i + 2) % 6]),) for i in range(7)], min_graph_calls=3)
    assert _gathers_of_whole_reads(jitted) == 1


def test_ids_computed_after_an_update_that_waits_for_the_read_are_not_rewritten_into_a_cycle():
    """The gather's ids come from a read after an update that TF orders after the gathered read:
    the gather cannot take over that read's place (the update would wait for the gather, which
    waits for the update). It stays a whole read, with eager's values."""

    def make():
        table = tf.Variable(np.arange(12, dtype=np.float32).reshape(6, 2) % 5)

        def step(delta):
            before = tf.convert_to_tensor(table)
            table.assign_add(tf.fill([6, 2], delta))
            ids = tf.cast(tf.convert_to_tensor(table)[:3, 0], tf.int32) % 6
            return tf.gather(before, ids)

        return step, lambda: table.numpy()

    jitted = run_differential(make, [(tf.constant(float(i % 3)),) for i in range(7)], min_graph_calls=3)
    assert _gathers_of_whole_reads(jitted) == 1


def test_the_rewrite_leaves_a_function_without_such_reads_unchanged():
    @tf.function(autograph=False)
    def f(x):
        return tf.gather(x, [0, 1]) * 2.0

    fdef = f.get_concrete_function(tf.TensorSpec([4], tf.float32)).function_def
    rewritten, changed = gathered_reads.rewrite(fdef)
    assert changed == 0 and rewritten == fdef


def test_an_unused_read_is_dropped_only_where_another_node_reads_its_variable():
    table = tf.Variable(tf.ones([5, 3]))

    @tf.function(autograph=False)
    def only_read(ids):
        tf.raw_ops.ReadVariableOp(resource=table.handle, dtype=tf.float32)  # its value is not used
        return ids + 1

    @tf.function(autograph=False)
    def also_gathered(ids):
        tf.raw_ops.ReadVariableOp(resource=table.handle, dtype=tf.float32)
        return tf.gather(tf.raw_ops.ReadVariableOp(resource=table.handle, dtype=tf.float32), ids)

    spec = tf.TensorSpec([2], tf.int32)
    _, changed = gathered_reads.rewrite(only_read.get_concrete_function(spec).function_def)
    assert changed == 0
    rewritten, changed = gathered_reads.rewrite(also_gathered.get_concrete_function(spec).function_def)
    assert changed == 2, rewritten
    assert [n.op for n in rewritten.node_def if "Variable" in n.op or "Gather" in n.op] == ["ResourceGather"]
