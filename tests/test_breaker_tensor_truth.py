"""Breaker probes for values.truth_tensor (a scalar truth value is not reshaped) and for recursive
functions full of constant shape arithmetic (zeros, fills, concats, splits, gathers), which
answer as eager."""

import numpy as np
import tensorflow as tf
from differential import run_differential
from tensorflow.python.eager import context
from test_breaker_trim import _weights
from test_recursion import Node, linear_tree, random_tree, tree_program

from janus.graphgen import recursion_grad


def _trees(rng, n, size=(1, 8)):
    return [random_tree(rng, int(rng.integers(*size))) for _ in range(n)]


def test_tree_lstm_keras_dense_zeros_like_leaf_cell():
    def make():
        tf.keras.utils.set_random_seed(3)
        emb = tf.Variable(tf.random.uniform([20, 4], -0.5, 0.5))
        gates = tf.keras.layers.Dense(5 * 4)
        gates.build((None, 8))

        def enc(node):
            if node.is_leaf:
                x = tf.nn.embedding_lookup(emb, [node.word])
                return tf.tanh(x), tf.zeros_like(x)
            hl, cl = enc(node.left)
            hr, cr = enc(node.right)
            i, fl, fr, o, u = tf.split(gates(tf.concat([hl, hr], 1)), 5, axis=1)
            c = tf.sigmoid(i) * tf.tanh(u) + tf.sigmoid(fl) * cl + tf.sigmoid(fr) * cr
            return tf.sigmoid(o) * tf.tanh(c), c

        def step(ts):
            with tf.GradientTape() as tape:
                loss = 0.0
                for t in ts:
                    h, c = enc(t)
                    loss += tf.reduce_sum(h) + 0.1 * tf.reduce_sum(c)
            gs = tape.gradient(loss, [emb] + gates.trainable_variables)
            return loss, [tf.convert_to_tensor(g) for g in gs]

        return step, lambda: None

    rng = np.random.default_rng(11)
    calls = [(_trees(rng, 2),) for _ in range(8)] + [([Node(word=5)],)]
    run_differential(make, calls, min_graph_calls=3)


def test_float64_concat_of_three_zeros_fill_stack_split_int64_gather():
    def make():
        emb = tf.Variable(tf.random.stateless_normal([20, 4], seed=[1, 2], dtype=tf.float64))
        w = tf.Variable(tf.random.stateless_normal([12, 4], seed=[3, 4], dtype=tf.float64) * 0.3)
        u = tf.Variable(tf.random.stateless_normal([4, 4], seed=[5, 6], dtype=tf.float64) * 0.3)

        def enc(node):
            if node.is_leaf:
                h = tf.gather(emb, tf.cast([node.word], tf.int64))
                half = tf.fill([1, 4], tf.constant(0.5, tf.float64))
                return h + tf.zeros([1, 4], tf.float64) + half * tf.reduce_sum(tf.ones([1, 4], tf.float64)) * 0.0
            left, r = enc(node.left), enc(node.right)
            x = tf.concat(
                [left, tf.zeros([1, 4], tf.float64) + r, tf.reshape(tf.stack([left, r]), [2, 4])[0:1] * 0.5], -1
            )
            a, b = tf.split(tf.tanh(tf.matmul(x, w)), 2, axis=1)
            return tf.concat([a, b], 1) + tf.matmul(left, u)

        def step(ts):
            with tf.GradientTape() as tape:
                loss = tf.constant(0.0, tf.float64)
                for t in ts:
                    loss += tf.reduce_sum(enc(t) ** 2)
            g = tape.gradient(loss, [emb, u])  # not w: gradients of some variables only
            return loss, tf.convert_to_tensor(g[0]), g[1]

        return step, lambda: None

    rng = np.random.default_rng(11)
    calls = [(_trees(rng, 3),) for _ in range(8)] + [([Node(word=3)],), ([linear_tree(rng, 60)],)]
    run_differential(make, calls, min_graph_calls=3)


def test_tensor_predicates_rank0_shape1_reduce_any_not_inside_recursion():
    def make():
        w = tf.Variable(tf.constant([[0.9, 0.1], [-0.2, 0.7]]))

        def enc(node):
            if node.is_leaf:
                return tf.one_hot([node.word % 2], 2)
            h = tf.matmul(enc(node.left) + enc(node.right), w)
            if tf.reduce_any(h > 0.5):
                h = h * 0.5
            if tf.reduce_sum(h) > 0.0:
                h = h - 0.1
            if tf.reshape(tf.reduce_sum(h), [1]) < 1.0:
                h = h + 0.2
            if not tf.reduce_all(h < 0.0):
                h = tf.tanh(h)
            cnt = tf.reduce_sum(tf.cast(h > 0.3, tf.int32))
            if cnt:
                h = h / 2.0
            while tf.reduce_max(h) > 0.4:
                h = h * 0.5
            return h

        def step(ts):
            with tf.GradientTape() as tape:
                loss = tf.add_n([tf.reduce_sum(enc(t)) for t in ts])
            return loss, tape.gradient(loss, w)

        return step, lambda: None

    rng = np.random.default_rng(12)
    calls = [(_trees(rng, 2),) for _ in range(8)] + [([linear_tree(rng, 40)],)]
    run_differential(make, calls, min_graph_calls=3)


def test_integer_division_by_zero_of_constants_fails_at_run_time_on_one_call_only():
    """A division by zero of constants inside the recursion: eager's error on the call that reaches it."""

    def make():
        emb, w = _weights()

        def enc(node):
            if node.is_leaf:
                h = tf.nn.embedding_lookup(emb, [node.word])
                if node.word == 19:
                    h = h + tf.cast(tf.constant(1) // (tf.constant(3) - tf.constant(3)), tf.float32)
                return tf.concat([h, tf.zeros([0, 3])], 0) + tf.fill([1, 3], tf.constant(0.25))
            x = tf.concat([enc(node.left), tf.zeros([1, 0]), enc(node.right)], 1)
            return tf.tanh(tf.matmul(x, w))

        def step(t):
            with tf.GradientTape() as tape:
                y = tf.reduce_sum(enc(t))
            return y, tape.gradient(y, [w, emb])[0]

        return step, lambda: None

    rng = np.random.default_rng(12)
    trees = _trees(rng, 9, (2, 8))
    leaf = trees[6]
    while not leaf.is_leaf:
        leaf = leaf.right
    leaf.word = 19
    trees[4] = Node(word=3)
    run_differential(make, [(t,) for t in trees], min_graph_calls=3)


def _if(x):
    if x:
        return x + 1
    return x - 1


def _not(x):
    if not x:
        return x * 2
    return x


def _and_or(x, y):
    return x and y, x or y, not x


def test_if_on_rank0_unknown_rank_and_multi_element_tensors():
    C = tf.constant
    calls = [(C(1.0),), (C([0.0]),), (C([[2.0]]),), (C(0.0),), (C([1.0]),), (C([[0.0]]),)]
    calls += [(C([1.0, 2.0]),), (C([0.0]),), (C(float("nan")),), (C(-0.0),), (C(3.0),)]
    run_differential(lambda: (_if, lambda: None), calls, min_graph_calls=2)
    run_differential(lambda: (_not, lambda: None), calls, min_graph_calls=2)
    shape1 = [(C([1.0]),), (C([0.0]),), (C([2.0]),), (C([0.0]),), (C([1.0, 0.0]),), (C([1.0]),)]
    run_differential(lambda: (_if, lambda: None), shape1, min_graph_calls=2)


def test_and_or_not_on_int_tensors():
    C = tf.constant
    calls = [(C(1), C(2)), (C(0), C(3)), (C(2), C(0)), (C(0), C(0)), (C(5), C(7)), (C(0), C(1))]
    run_differential(lambda: (_and_or, lambda: None), calls, min_graph_calls=2)


def test_a_scalar_predicate_reads_without_a_reshape():
    """``if node.is_leaf`` on a heap read known to be a scalar bool: the recursive function runs no
    ``Reshape`` of it at every tree node (a value of unknown shape still is reshaped, and fails
    where eager's ``bool()`` does: test_if_on_rank0_unknown_rank_and_multi_element_tensors)."""
    rng = np.random.default_rng(2)
    calls = [([random_tree(rng, int(rng.integers(2, 9))) for _ in range(2)],) for _ in range(6)]
    run_differential(tree_program(train=False), calls, min_graph_calls=2)
    forward = context.context().get_function_def(list(recursion_grad.registry.values())[-1].name)
    ops = [n.op for n in forward.node_def]
    assert {"If", "StatelessIf"} & set(ops) and "Reshape" not in ops
