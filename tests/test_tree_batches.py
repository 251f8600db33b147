"""[generalize] Trees as users write them: leaves marked by a field that is None on inner nodes,
batches of trees as Python lists of any length, one graph for every batch, with gradients."""

import numpy as np
import pytest
import tensorflow as tf
from differential import run_differential

import janus


class Node:
    """A parse-tree node: ``word`` is an int at leaves and None at inner nodes (no ``is_leaf``)."""

    def __init__(self, word=None, left=None, right=None, label=0):
        self.word, self.left, self.right, self.label = word, left, right, label


def random_tree(rng, n):
    if n == 1:
        return Node(word=int(rng.integers(0, 20)), label=int(rng.integers(0, 3)))
    k = int(rng.integers(1, n))
    return Node(left=random_tree(rng, k), right=random_tree(rng, n - k), label=int(rng.integers(0, 3)))


class Encoder:
    def __init__(self, hidden=6):
        gen = tf.random.Generator.from_seed(3)
        self.embedding = tf.Variable(gen.normal([20, hidden], dtype=tf.float64))
        self.w = tf.Variable(gen.normal([2 * hidden, hidden], dtype=tf.float64) * 0.4)
        self.out = tf.Variable(gen.normal([hidden, 3], dtype=tf.float64))
        self.variables = [self.embedding, self.w, self.out]

    def encode(self, node):
        if node.word is not None:
            return tf.nn.embedding_lookup(self.embedding, [node.word])
        return tf.tanh(tf.matmul(tf.concat([self.encode(node.left), self.encode(node.right)], 1), self.w))


def batches(seed, sizes, max_nodes=12):
    rng = np.random.default_rng(seed)
    return [([random_tree(rng, int(rng.integers(2, max_nodes))) for _ in range(size)],) for size in sizes]


def training_program():
    model = Encoder()

    def step(batch):
        with tf.GradientTape() as tape:
            loss = 0.0
            for tree in batch:
                logits = tf.matmul(model.encode(tree), model.out)
                loss += tf.reduce_sum(tf.nn.sparse_softmax_cross_entropy_with_logits([tree.label], logits))
            loss = loss / len(batch)
        grads = tape.gradient(loss, model.variables)
        for v, g in zip(model.variables, grads):
            v.assign_sub(0.1 * tf.convert_to_tensor(g))  # the embedding's gradient is IndexedSlices
        return loss

    return step, lambda: [v.numpy() for v in model.variables]


def test_gradients_keep_eagers_types():
    """The embedding's gradient is ``IndexedSlices`` in eager: ``0.1 * g`` raises TypeError there."""

    def make():
        model = Encoder()

        def step(batch):
            with tf.GradientTape() as tape:
                loss = 0.0
                for tree in batch:
                    loss += tf.reduce_sum(model.encode(tree))
            grads = tape.gradient(loss, model.variables[:2])
            return [isinstance(g, tf.IndexedSlices) for g in grads], tf.convert_to_tensor(grads[0])

        return step, lambda: None

    jitted = run_differential(make, batches(7, [3, 3, 3, 2, 3, 1, 3]), min_graph_calls=3)
    assert janus.stats(jitted)["graphs_built"] == 1


def test_batches_of_any_size_train_from_one_graph():
    calls = batches(0, [4, 4, 4, 3, 2, 1, 4, 2, 3, 4])
    jitted = run_differential(training_program, calls, min_graph_calls=7)
    assert janus.stats(jitted)["graphs_built"] == 1


def test_a_longer_batch_than_profiled_builds_once_more_then_serves():
    """The bound on the batch length doubles once; smaller batches are served by the new graph."""
    calls = batches(8, [3, 3, 3, 2, 5, 3, 1, 6, 2, 4])
    jitted = run_differential(training_program, calls, min_graph_calls=6)
    assert janus.stats(jitted)["graphs_built"] == 2


def test_an_empty_batch_runs_eagerly_and_the_graph_keeps_serving():
    """``loss = 0.0`` stays a Python float when the loop never runs: eager's answer, from eager."""
    calls = batches(1, [3, 3, 3, 0, 2, 3, 0, 1, 3])

    def forward():
        model = Encoder()

        def step(batch):
            total = 0.0
            for tree in batch:
                total += tf.reduce_sum(model.encode(tree))
            return total

        return step, lambda: None

    jitted = run_differential(forward, calls, min_graph_calls=4)
    assert janus.stats(jitted)["graphs_built"] == 2, janus.driver.resolve(
        jitted
    ).failure_log  # the second empty batch builds nothing


def test_the_optional_word_used_as_a_number_and_tested_for_truth():
    """``int(node.word)``, ``node.word + 1`` and ``if node.word:`` (0 and None are false) on leaves."""

    def make():
        model = Encoder()

        def count(node):
            if node.word is None:
                return count(node.left) + count(node.right)
            bonus = 1.0 if node.word else 0.0  # word 0 is a leaf too, but falsy
            return tf.reduce_sum(tf.nn.embedding_lookup(model.embedding, [int(node.word) % 20])) + bonus

        def step(batch):
            return [count(tree) for tree in batch]

        return step, lambda: None

    rng = np.random.default_rng(2)
    calls = []
    for _ in range(8):
        trees = [random_tree(rng, int(rng.integers(1, 9))) for _ in range(3)]
        trees[0] = Node(left=Node(word=0), right=trees[0])
        calls.append((trees,))
    run_differential(make, calls, min_graph_calls=4)


def test_a_none_word_used_as_a_number_gives_eagers_error():
    """A tree whose inner node's None word reaches arithmetic: eager raises TypeError; so does janus."""

    def make():
        def leaves(node):
            if node.left is None:
                return tf.constant(float(node.word + 1))
            return leaves(node.left) + leaves(node.right)

        return leaves, lambda: None

    rng = np.random.default_rng(3)
    calls = [(random_tree(rng, 5),) for _ in range(6)]
    broken = random_tree(rng, 5)
    broken.left = Node(word=None)  # a leaf without a word: `None + 1`
    calls.insert(4, (broken,))
    run_differential(make, calls, min_graph_calls=2)


def test_a_batch_indexed_item_by_item_goes_back_to_one_input_per_tree():
    """``batch[0]``: the pointer list cannot serve, so items are inputs again (one graph per length)."""

    def make():
        model = Encoder()

        def step(batch):
            first = model.encode(batch[0])
            return tf.reduce_sum(first) + tf.reduce_sum(model.encode(batch[-1]))

        return step, lambda: None

    jitted = run_differential(make, batches(4, [3] * 7), min_graph_calls=3)
    assert "pointer" in " ".join(what for _, what in janus.driver.resolve(jitted).failure_log)


@pytest.mark.keras
def test_keras_layers_over_batches_of_trees():
    """The user-shaped TreeRNN: Dense layers, a Keras optimizer, the leaf test on ``word``."""

    def make():
        tf.keras.utils.set_random_seed(5)
        embedding = tf.Variable(tf.random.uniform([20, 8], -0.1, 0.1))
        combine = tf.keras.layers.Dense(8, activation="tanh")
        combine.build((None, 16))
        classify = tf.keras.layers.Dense(3)
        classify.build((None, 8))
        variables = [embedding, *combine.trainable_variables, *classify.trainable_variables]
        opt = tf.keras.optimizers.SGD(0.05)

        def encode(node):
            if node.word is not None:
                return tf.nn.embedding_lookup(embedding, [node.word])
            return combine(tf.concat([encode(node.left), encode(node.right)], axis=1))

        def step(batch):
            with tf.GradientTape() as tape:
                loss = 0.0
                for tree in batch:
                    loss += tf.reduce_sum(
                        tf.nn.sparse_softmax_cross_entropy_with_logits([tree.label], classify(encode(tree)))
                    )
                loss = loss / len(batch)
            grads = tape.gradient(loss, variables)
            opt.apply_gradients(zip(grads, variables))
            return loss

        return step, lambda: [v.numpy() for v in variables]

    jitted = run_differential(make, batches(6, [5, 5, 5, 2, 5, 3, 5]), min_graph_calls=3)
    assert janus.stats(jitted)["graphs_built"] == 1


def test_enumerate_over_batches_of_any_size():
    """``for i, tree in enumerate(batch, 1)``: Python int indices, as eager's, one graph."""

    def make():
        model = Encoder()

        def step(batch):
            total = 0.0
            for i, tree in enumerate(batch, 1):
                total += float(i) * tf.reduce_sum(model.encode(tree))
            return total / len(batch)

        return step, lambda: None

    jitted = run_differential(make, batches(9, [3, 3, 3, 2, 1, 3, 2]), min_graph_calls=3)
    assert janus.stats(jitted)["graphs_built"] == 1


def comprehension_program(reduce):
    def make():
        model = Encoder()

        def step(batch):
            with tf.GradientTape() as tape:
                losses = [
                    tf.reduce_sum(
                        tf.nn.sparse_softmax_cross_entropy_with_logits([t.label], model.encode(t) @ model.out)
                    )
                    for t in batch
                ]
                loss = reduce(losses)
            grads = tape.gradient(loss, model.variables)
            for v, g in zip(model.variables, grads):
                v.assign_sub(0.1 * tf.convert_to_tensor(g))
            return loss

        return step, lambda: [v.numpy() for v in model.variables]

    return make


@pytest.mark.parametrize(
    "reduce",
    [
        lambda losses: tf.add_n(losses) / len(losses),
        lambda losses: sum(losses) / len(losses),
        lambda losses: tf.reduce_mean(tf.stack(losses)),
        lambda losses: tf.reduce_sum(losses),
    ],
    ids=["add_n", "sum", "reduce_mean_stack", "reduce_sum_list"],
)
def test_a_comprehension_over_batches_of_any_length_is_one_graph(reduce):
    """`losses = [loss(t) for t in batch]`: batches of 1 to 4 trees, then a longer one (the bound
    doubles: a second graph), and an empty one (eager raises or divides by zero, and so does janus:
    empty batches run eagerly, and the graph stays, with no rebuild)."""
    calls = batches(11, [3, 2, 4, 1, 3, 2, 4, 3, 7, 2, 5, 0, 3, 0, 4])
    jitted = run_differential(comprehension_program(reduce), calls, min_graph_calls=9)
    assert janus.stats(jitted)["graphs_built"] == 2


def test_a_comprehension_over_enumerate_of_a_batch_with_python_indices():
    def make():
        model = Encoder()

        def step(batch):
            weighted = [tf.reduce_sum(model.encode(t)) * (i + 1) for i, t in enumerate(batch, 1)]
            return tf.add_n(weighted), len(weighted)

        return step, lambda: None

    jitted = run_differential(make, batches(12, [3, 2, 3, 1, 2, 3]), min_graph_calls=3)
    assert janus.stats(jitted)["graphs_built"] == 1
