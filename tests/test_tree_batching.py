"""[perf] Level batching (``janus.graphgen.tree_batching``): the calls a ``for tree in batch`` loop
makes of a recursive encoder run level by level, all trees at once, with eager's answers.

Every test asserts that graphs served calls and whether the batch's walk ran (``walks``), so a
janus that never batched, or never built a graph, fails them."""

import copy
import sys

import numpy as np
import pytest
import tensorflow as tf
from differential import run_differential
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import janus
from janus.config import config
from janus.graphgen import tree_batching

VOCAB = 20


class Node:
    """A parse-tree node as users write it: a word at leaves (None inside), children, a flag."""

    def __init__(self, word=None, left=None, right=None, label=0):
        self.word, self.left, self.right, self.label = word, left, right, label
        self.is_leaf = left is None


def tree(rng, n):
    if n == 1:
        return Node(word=int(rng.integers(0, VOCAB)), label=int(rng.integers(0, 3)))
    k = int(rng.integers(1, n))
    return Node(left=tree(rng, k), right=tree(rng, n - k), label=int(rng.integers(0, 3)))


def batches(seed, sizes, max_words=9):
    rng = np.random.default_rng(seed)
    return [[tree(rng, int(rng.integers(1, max_words))) for _ in range(size)] for size in sizes]


class Encoder:
    """TreeRNN's encoder; ``leaf_test`` picks how a leaf is told apart, as users write it."""

    def __init__(self, leaf_test="is_leaf", hidden=5):
        gen = tf.random.Generator.from_seed(7)
        self.embedding = tf.Variable(gen.normal([VOCAB, hidden]))
        self.combine = tf.keras.layers.Dense(hidden, activation="tanh")
        self.combine.build((None, 2 * hidden))
        self.combine.kernel.assign(gen.normal([2 * hidden, hidden]) * 0.5)
        self.combine.bias.assign(gen.normal([hidden]) * 0.1)
        self.out = tf.Variable(gen.normal([hidden, 3]))
        self.variables = [self.embedding, *self.combine.trainable_variables, self.out]
        self.encode = getattr(self, f"encode_{leaf_test}")

    def encode_is_leaf(self, node):
        if node.is_leaf:
            return tf.nn.embedding_lookup(self.embedding, [node.word])
        return self.combine(tf.concat([self.encode(node.left), self.encode(node.right)], axis=1))

    def encode_word(self, node):
        if node.word is not None:
            return tf.nn.embedding_lookup(self.embedding, [node.word])
        left = self.encode(node.left)
        right = self.encode(node.right)
        return self.combine(tf.concat([left, right], axis=1))

    def encode_left_none(self, node):
        if node.left is None:
            return tf.nn.embedding_lookup(self.embedding, [node.word])
        return tf.tanh(self.combine(tf.concat([self.encode(node.left), self.encode(node.right)], 1)) * 2.0 + 0.5)


class LSTMEncoder:
    """TreeLSTM's cell: each node returns ``(h, c)``; gates come from ``tf.split``."""

    def __init__(self, hidden=4):
        gen = tf.random.Generator.from_seed(8)
        self.embedding = tf.Variable(gen.normal([VOCAB, hidden]))
        self.leaf = tf.Variable(gen.normal([hidden, 3 * hidden]) * 0.5)
        self.node = tf.Variable(gen.normal([2 * hidden, 5 * hidden]) * 0.5)
        self.bias = tf.Variable(gen.normal([5 * hidden]) * 0.1)
        self.variables = [self.embedding, self.leaf, self.node, self.bias]

    def encode(self, node):
        if node.is_leaf:
            i, o, u = tf.split(tf.matmul(tf.nn.embedding_lookup(self.embedding, [node.word]), self.leaf), 3, axis=1)
            c = tf.sigmoid(i) * tf.tanh(u)
            return tf.sigmoid(o) * tf.tanh(c), c
        h_left, c_left = self.encode(node.left)
        h_right, c_right = self.encode(node.right)
        gates = tf.nn.bias_add(tf.matmul(tf.concat([h_left, h_right], axis=1), self.node), self.bias)
        i, f_left, f_right, o, u = tf.split(gates, 5, axis=1)
        c = tf.sigmoid(i) * tf.tanh(u) + tf.sigmoid(f_left) * c_left + tf.sigmoid(f_right) * c_right
        return tf.sigmoid(o) * tf.tanh(c), c


def lstm_training():
    model = LSTMEncoder()
    out = tf.Variable(tf.random.Generator.from_seed(9).normal([4, 3]))

    def step(batch):
        with tf.GradientTape() as tape:
            loss = 0.0
            for t in batch:
                h, c = model.encode(t)
                logits = tf.matmul(h + 0.5 * c, out)
                loss += tf.reduce_sum(tf.nn.sparse_softmax_cross_entropy_with_logits([t.label], logits))
        variables = [*model.variables, out]
        grads = tape.gradient(loss, variables)
        for v, g in zip(variables, grads):
            v.assign_sub(0.05 * tf.convert_to_tensor(g))
        return loss

    return step, lambda: [v.numpy() for v in [*model.variables, out]]


def test_a_cell_returning_a_tuple(walks):
    run_differential(lstm_training, [(b,) for b in batches(22, [3, 4, 2, 4, 3, 4, 2])], min_graph_calls=4)
    assert walks[0] >= 4


class AttentionEncoder(Encoder):
    """More row-by-row ops: a layer norm by hand, a softmax over the two children, reshapes,
    ``expand_dims``/``squeeze``, a gather of columns, a reduction over the row's axis."""

    def __init__(self):
        super().__init__()
        self.encode = self.encode_attention

    def encode_attention(self, node):
        if node.is_leaf:
            x = tf.nn.embedding_lookup(self.embedding, node.word)  # a scalar index: one [5] row
            return tf.expand_dims(x * tf.reduce_max(x) + 0.1, 0)
        left, right = self.encode(node.left), self.encode(node.right)
        both = tf.stack([tf.squeeze(left, 0), tf.squeeze(right, 0)], axis=0)  # [2, 5]
        weights = tf.reshape(tf.nn.softmax(tf.expand_dims(tf.reduce_sum(both, axis=1), 0)), [2, 1])
        mixed = tf.reshape(tf.reduce_sum(weights * both, axis=0), [1, -1])
        centred = mixed - tf.reduce_mean(mixed, axis=-1, keepdims=True)
        normed = centred * tf.math.rsqrt(tf.reduce_mean(tf.square(centred), axis=-1, keepdims=True) + 1e-3)
        return self.combine(tf.concat([normed, tf.gather(mixed, [4, 3, 2, 1, 0], axis=1)], axis=1))


def test_more_row_by_row_ops(walks):
    def make():
        model = AttentionEncoder()

        def encode_all(batch):
            out = tf.zeros([0, 5])
            for t in batch:
                out = tf.concat([out, model.encode(t)], 0)
            return out

        return encode_all, lambda: None

    run_differential(make, [(b,) for b in batches(23, [4, 3, 4, 2, 3, 4, 3])], min_graph_calls=4)
    assert walks[0] >= 4


LEAF_TESTS = ("is_leaf", "word", "left_none")


@pytest.fixture
def walks(monkeypatch):
    """How many times a batch was walked (the graphs bind ``_walk`` when they are built)."""
    count = [0]
    walk = tree_batching._walk

    def counted(*args):
        count[0] += 1
        return walk(*args)

    monkeypatch.setattr(tree_batching, "_walk", counted)
    return count


def training(leaf_test="is_leaf"):
    def make():
        model = Encoder(leaf_test)

        def step(batch):
            with tf.GradientTape() as tape:
                loss = 0.0
                for t in batch:
                    logits = tf.matmul(model.encode(t), model.out)
                    loss += tf.reduce_sum(tf.nn.sparse_softmax_cross_entropy_with_logits([t.label], logits))
                loss = loss / len(batch)
            grads = tape.gradient(loss, model.variables)
            for v, g in zip(model.variables, grads):
                v.assign_sub(0.1 * tf.convert_to_tensor(g))
            return loss

        return step, lambda: [v.numpy() for v in model.variables]

    return make


def gradients(leaf_test="is_leaf"):
    """The tape's gradients themselves: the embedding's is ``IndexedSlices`` in eager."""

    def make():
        model = Encoder(leaf_test)

        def grads(batch):
            with tf.GradientTape() as tape:
                loss = 0.0
                for t in batch:
                    loss += tf.reduce_sum(tf.matmul(model.encode(t), model.out))
            return tape.gradient(loss, model.variables)

        return grads, lambda: None

    return make


def encodings(leaf_test="is_leaf"):
    def make():
        model = Encoder(leaf_test)

        def encode_all(batch):
            out = tf.zeros([0, 5])
            for t in batch:
                out = tf.concat([out, model.encode(t)], 0)
            return out

        return encode_all, lambda: None

    return make


@pytest.mark.parametrize("leaf_test", LEAF_TESTS)
def test_training_steps_give_eagers_losses_weights_and_gradient_types(leaf_test, walks):
    calls = [(b,) for b in batches(0, [3, 4, 2, 5, 3, 4, 1, 6])]
    run_differential(training(leaf_test), calls, min_graph_calls=4)
    assert walks[0] >= 4


def dense(grads):
    return [tf.convert_to_tensor(g) for g in grads]


@pytest.mark.parametrize("leaf_test", LEAF_TESTS)
def test_gradients_of_eagers_types(leaf_test, walks):
    """Values within tolerance, types alike; the order of an ``IndexedSlices``' rows is the tape's
    (it differs from eager's with invocations per node too)."""
    eager, _ = gradients(leaf_test)()
    raw, _ = gradients(leaf_test)()
    jitted = janus.jit(raw)
    for (b,) in [(b,) for b in batches(20, [3, 2, 4, 3, 2, 4])]:
        expected, actual = eager(b), jitted(b)
        assert [type(g) for g in actual] == [type(g) for g in expected]
        for e, a in zip(dense(expected), dense(actual)):
            np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-6)
    assert janus.stats(jitted)["graph_calls"] >= 3
    assert walks[0] >= 3


@pytest.mark.parametrize("leaf_test", LEAF_TESTS)
def test_each_trees_encoding_returned(leaf_test, walks):
    run_differential(encodings(leaf_test), [(b,) for b in batches(1, [4, 3, 4, 2, 3, 4, 1, 3])], min_graph_calls=4)
    assert walks[0] >= 4


def test_switched_off_invokes_per_node(walks, monkeypatch):
    monkeypatch.setattr(config, "batch_trees", False)
    run_differential(training(), [(b,) for b in batches(2, [3, 4, 2, 3, 4])], min_graph_calls=2)
    assert walks[0] == 0


def test_batches_of_single_leaves_and_a_batch_of_one(walks):
    leaves = [[Node(word=3), Node(word=4)], [Node(word=5)]]
    calls = [(b,) for b in batches(3, [3, 2, 4, 3])] + [(b,) for b in leaves] + [(b,) for b in batches(4, [1, 1, 3])]
    run_differential(encodings(), calls, min_graph_calls=3)
    assert walks[0] >= 3


def test_trees_changed_between_calls(walks):
    """Subtrees whose words and shapes change between calls, under new roots each call (the same
    roots every call would be specialised on, one by one)."""
    trees = batches(5, [4])[0]
    eager, _ = encodings()()
    raw, _ = encodings()()
    jitted = janus.jit(raw)
    for k in range(10):
        node = trees[k % 4]
        while node.left is not None:
            node = node.right
        node.word = (node.word + 3 + k) % VOCAB
        if k % 3 == 1:
            trees[k % 4] = Node(left=trees[k % 4], right=Node(word=k))
        batch = [Node(left=t, right=Node(word=k % VOCAB)) for t in trees]
        np.testing.assert_allclose(jitted(batch), eager(batch), rtol=1e-5, atol=1e-6)
    assert janus.stats(jitted)["graph_calls"] >= 5
    assert walks[0] >= 5


def test_shared_subtrees(walks):
    shared = Node(left=Node(word=1), right=Node(word=2))
    dag = [Node(left=shared, right=shared), Node(left=Node(word=3), right=shared), shared]
    calls = [(b,) for b in batches(6, [3, 3, 2])] + [(list(dag),) for _ in range(4)]
    run_differential(training(), calls, min_graph_calls=4)
    assert walks[0] >= 4


def deep(n):
    node = Node(word=1)
    for _ in range(n):
        node = Node(left=node, right=Node(word=2))
    return node


def test_a_tree_deeper_than_the_recursion_limit_raises_as_eager(walks):
    limit = sys.getrecursionlimit()
    calls = [(b,) for b in batches(7, [3, 2, 3, 2])] + [([deep(limit + 50)],), ([deep(30)],)]
    calls += [(b,) for b in batches(8, [2, 3])]
    run_differential(encodings(), calls, min_graph_calls=4)
    assert walks[0] >= 4


def test_a_cycle_raises_recursion_error_as_eager(walks):
    looped = Node(left=Node(word=1), right=Node(word=2))
    looped.left.left, looped.left.right, looped.left.is_leaf = looped, Node(word=3), False
    calls = [(b,) for b in batches(9, [3, 2, 3, 2])] + [([looped],)] + [(b,) for b in batches(10, [2, 3])]
    run_differential(encodings(), calls, min_graph_calls=3)
    assert walks[0] >= 4  # the cycle's call walked too, and failed


@pytest.mark.parametrize(
    "spoil",
    [
        lambda t: setattr(t, "word", 2.0),  # a float word: eager's lookup raises
        lambda t: setattr(t, "word", VOCAB + 4),  # out of the table: eager's lookup raises
        lambda t: setattr(t, "word", None),  # a leaf without a word
        lambda t: setattr(t, "word", True),  # a bool word: eager looks up row 1
        lambda t: delattr(t, "word"),  # no attribute: AttributeError
        lambda t: setattr(t, "is_leaf", 1),  # not a bool: eager's `if` takes it as true
        lambda t: (setattr(t, "is_leaf", False), setattr(t, "left", None)),  # a missing child
    ],
)
def test_a_node_janus_did_not_see_gives_eagers_outcome(spoil, walks):
    """The odd node fails a check (its read's, or the batching's): the call re-runs eagerly. Later
    calls may run split, as they do without batching (janus types a node's attributes)."""
    rng = np.random.default_rng(11)
    odd = [tree(rng, 1), tree(rng, 3)]
    spoil(odd[0])
    calls = [(b,) for b in batches(12, [3, 2, 3, 2, 3])] + [(odd,)] + [(b,) for b in batches(13, [2, 3, 2])]
    run_differential(training(), calls, min_graph_calls=2)
    assert walks[0] >= 3


class Leafish(Node):
    pass


def test_a_node_of_a_subclass(walks):
    odd = batches(14, [3])[0] + [Leafish(word=4)]
    calls = [(b,) for b in batches(15, [3, 2, 3, 2, 3])] + [(odd,)] + [(b,) for b in batches(16, [2, 3])]
    run_differential(encodings(), calls, min_graph_calls=2)
    assert walks[0] >= 3


def state_writing(kind):
    def make():
        model = Encoder()
        seen = tf.Variable(0)

        def encode_all(batch):
            out = tf.zeros([0, 5])
            for t in batch:
                out = tf.concat([out, model.encode(t)], 0)
                if kind == "variable":
                    seen.assign_add(1)
                elif kind == "embedding":
                    model.embedding.assign_add(tf.ones_like(model.embedding) * 0.01)
                else:
                    t.label = t.label + 1
            return out

        return encode_all, lambda: (seen.numpy(), model.embedding.numpy())

    return make


@pytest.mark.parametrize("kind", ["variable", "embedding", "tree"])
def test_a_loop_that_writes_state_is_not_batched(kind, walks):
    """The batch's rows would be computed before the loop's updates: janus builds again without
    batching that loop (an update of the table it reads would otherwise be missed)."""
    jitted = run_differential(state_writing(kind), [(b,) for b in batches(17, [3, 2, 4, 3, 2])], min_graph_calls=2)
    assert walks[0] == 0
    assert "run level by level" not in janus.explain(jitted)  # the graph serving the calls invokes per node


def test_a_heap_write_before_the_loop_is_seen(walks):
    """A first loop changes the leaves' words; the walk of the second reads the call's writes."""
    model = Encoder()

    def encode_all(batch, shift):
        for t in batch:
            if t.is_leaf:
                t.word = (t.word + shift) % VOCAB
        out = tf.zeros([0, 5])
        for t in batch:
            out = tf.concat([out, model.encode(t)], 0)
        return out

    jitted = janus.jit(encode_all)
    rng = np.random.default_rng(18)
    for shift in range(3, 11):
        batch = [tree(rng, int(rng.integers(1, 4))) for _ in range(3)]
        twin = copy.deepcopy(batch)
        np.testing.assert_allclose(jitted(batch, shift), encode_all(twin, shift), rtol=1e-5, atol=1e-6)
        assert [t.word for t in batch if t.is_leaf] == [t.word for t in twin if t.is_leaf]
    assert janus.stats(jitted)["graph_calls"] >= 3
    assert walks[0] >= 3


def test_a_body_janus_does_not_batch_is_invoked_per_node(walks):
    """A product by the node's row on the right (``tf.matmul(w, h, transpose_b=True)``) is not on
    the list of ops run row by row: such a body keeps its invocations, and ``explain()`` says why."""

    def make():
        model = Encoder()
        w = tf.Variable(tf.random.Generator.from_seed(4).normal([5, 10]))

        def encode(node):
            if node.is_leaf:
                return tf.nn.embedding_lookup(model.embedding, [node.word])
            h = tf.concat([encode(node.left), encode(node.right)], axis=1)
            return model.combine(h) + tf.transpose(tf.matmul(w, h, transpose_b=True)) * 0.1

        def loop(batch):
            out = tf.zeros([0, 5])
            for t in batch:
                out = tf.concat([out, encode(t)], 0)
            return out

        return loop, lambda: None

    jitted = run_differential(make, [(b,) for b in batches(19, [3, 2, 4, 3, 2])], min_graph_calls=2)
    assert walks[0] == 0
    assert "run one invocation a node: it multiplies by a matrix of the node" in janus.explain(jitted)


class BranchingEncoder(Encoder):
    """A branch of its own inside the body: per row, each node may take another side."""

    def __init__(self, where):
        super().__init__()
        self.where = where
        self.encode = self.encode_branching

    def encode_branching(self, node):
        if node.is_leaf:
            x = tf.nn.embedding_lookup(self.embedding, [node.word])
            if self.where == "leaf" and tf.reduce_sum(x) > 0:  # a tensor `if`: a tf.cond
                return x * 2.0
            return x
        h = self.combine(tf.concat([self.encode(node.left), self.encode(node.right)], axis=1))
        if self.where == "inner":
            return tf.cond(tf.reduce_sum(h) > 0, lambda: h * 2.0, lambda: h - 1.0)
        return h


@pytest.mark.parametrize("where", ["leaf", "inner"])
def test_a_branch_inside_the_body_is_invoked_per_node(where, walks):
    """A breaker found a ``tf.cond`` inside the body run with the outer branch's side for every row
    (the batched rows took ``h - 1`` where eager took ``h * 2``)."""

    def make():
        model = BranchingEncoder(where)

        def encode_all(batch):
            out = tf.zeros([0, 5])
            for t in batch:
                out = tf.concat([out, model.encode(t)], 0)
            return out

        return encode_all, lambda: None

    jitted = run_differential(make, [(b,) for b in batches(24, [3, 4, 2, 4, 3, 4])], min_graph_calls=3)
    assert walks[0] == 0
    assert "its body is not one branch on the node" in janus.explain(jitted) or "a branch of its body runs" in (
        janus.explain(jitted)
    )


@st.composite
def shapes(draw):
    def one(depth):
        if depth > 5 or draw(st.booleans()):
            return ("leaf", draw(st.integers(0, VOCAB - 1)))
        return ("node", one(depth + 1), one(depth + 1))

    first = ("node", one(1), one(1))  # every batch has an inner node: no gradient is None
    return [first] + [one(0) for _ in range(draw(st.integers(0, 4)))]


def build(shape):
    if shape[0] == "leaf":
        return Node(word=shape[1])
    return Node(left=build(shape[1]), right=build(shape[2]))


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(shapes(), min_size=4, max_size=6), st.sampled_from(LEAF_TESTS))
def test_random_batches_of_random_trees(batch_shapes, leaf_test):
    warm = [(b,) for b in batches(21, [5, 5, 5])]  # profiled: batches of up to 10 trees then fit the graph
    calls = warm + [([build(s) for s in shape],) for shape in batch_shapes]
    run_differential(training(leaf_test), calls, min_graph_calls=len(batch_shapes) - 1)
