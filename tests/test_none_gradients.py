"""[generalize] A variable the call never read has gradient None in eager: kept where the graph reads
it only inside a tensor-dependent branch, a converted loop or a recursive function."""

import numpy as np
import tensorflow as tf
from differential import run_differential

import janus


def test_a_weight_used_only_in_the_branch_not_taken_has_no_gradient():
    def make():
        w = tf.Variable([[2.0, 0.0], [0.0, 3.0]])
        b = tf.Variable([0.5, -0.5])

        def step(x):
            with tf.GradientTape() as tape:
                h = x + b
                if tf.reduce_sum(x) > 0:  # a tensor `if`: tf.cond
                    h = tf.matmul(h, w)
                loss = tf.reduce_sum(h * h)
            grads = tape.gradient(loss, [w, b])
            for v, g in zip([w, b], grads):
                if g is not None:
                    v.assign_sub(0.01 * g)
            return loss, [g is None for g in grads]

        return step, lambda: (w, b)

    signs = [1, -1, 1, 1, -1, 1, -1, -1, 1]
    jitted = run_differential(make, [(tf.constant([[s * 1.0, 2.0 * s]]),) for s in signs], min_graph_calls=3)
    assert janus.stats(jitted)["graphs_built"] <= 2


def test_a_weight_used_only_in_a_loop_that_ran_zero_times_has_no_gradient():
    def make():
        w = tf.Variable([1.5, -0.5])

        def step(x, n):
            with tf.GradientTape() as tape:
                tape.watch(x)
                y = x
                for _ in tf.range(n):  # a loop over a tensor count: tf.while_loop
                    y = y * w
                loss = tf.reduce_sum(y)
            gw, gx = tape.gradient(loss, [w, x])
            return loss, gw is None, gx

        return step, lambda: w

    counts = [2, 3, 1, 2, 0, 3, 0, 1]
    run_differential(make, [(tf.constant([1.0, 2.0]), tf.constant(n)) for n in counts], min_graph_calls=3)


class Node:
    def __init__(self, word=None, left=None, right=None):
        self.word, self.left, self.right = word, left, right


def test_a_single_leaf_tree_leaves_the_combiner_without_gradient_under_a_keras_optimizer():
    """Adam moves a weight with a zero gradient (its moments decay); eager skips a None one."""

    def make():
        emb = tf.Variable(np.linspace(-1, 1, 20).reshape(10, 2).astype("float32"))
        w = tf.Variable(np.eye(4, 2).astype("float32"))
        opt = tf.keras.optimizers.Adam(0.1)

        def encode(node):
            if node.word is not None:
                return tf.nn.embedding_lookup(emb, [node.word])
            return tf.tanh(tf.matmul(tf.concat([encode(node.left), encode(node.right)], 1), w))

        def step(tree):
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(encode(tree) ** 2)
            grads = tape.gradient(loss, [emb, w])
            opt.apply_gradients([(g, v) for g, v in zip(grads, [emb, w]) if g is not None])
            return loss

        return step, lambda: (emb, w)

    rng = np.random.default_rng(0)

    def tree(n):
        if n == 1:
            return Node(word=int(rng.integers(0, 10)))
        k = int(rng.integers(1, n))
        return Node(left=tree(k), right=tree(n - k))

    sizes = [3, 4, 2, 5, 1, 3, 1, 4, 2]
    run_differential(make, [(tree(n),) for n in sizes], min_graph_calls=4)
