"""Binary TreeLSTM (Tai et al., 2015) over SST-shaped parse trees, trained on the root label.

The imperative program recurses over Python tree objects and returns an ``(h, c)`` pair per
node. The symbolic baseline linearises each batch (post order) and runs one
``tf.while_loop`` over the nodes with ``TensorArray``s of node states.
"""

from __future__ import annotations

import itertools

import tensorflow as tf

from benchmarks.models import trees as tree_data

keras = tf.keras
NAME = "treelstm"
UNIT = "trees/s"
SCALING = (
    "Paper: SST, batch 25, hidden 150 (GPU host). Here: synthetic SST-shaped trees (19±9 words), batch 25, "
    "vocabulary 2,000, hidden 64 (quick: batch 5, hidden 16)."
)
DYNAMIC = "recursion over Python tree objects returning (h, c) tuples, a tree-dependent base case, a Python batch loop"
VOCAB = 2000


def sizes(quick: bool) -> tuple[int, int]:
    return (5, 16) if quick else (25, 64)


def items_per_step(quick: bool) -> float:
    return sizes(quick)[0]


class TreeLSTM:
    def __init__(self, hidden: int) -> None:
        self.hidden = hidden
        self.embedding = tf.Variable(tf.random.uniform([VOCAB, hidden], -0.1, 0.1), name="embedding")
        self.leaf = keras.layers.Dense(3 * hidden)  # i, o, u gates of a leaf
        self.leaf.build((None, hidden))
        self.node = keras.layers.Dense(5 * hidden)  # i, f_left, f_right, o, u from [h_left, h_right]
        self.node.build((None, 2 * hidden))
        self.classify = keras.layers.Dense(tree_data.CLASSES)
        self.classify.build((None, hidden))
        self.variables = [
            self.embedding,
            *self.leaf.trainable_variables,
            *self.node.trainable_variables,
            *self.classify.trainable_variables,
        ]

    def encode(self, node):
        if node.is_leaf:
            x = tf.nn.embedding_lookup(self.embedding, [node.word])
            i, o, u = tf.split(self.leaf(x), 3, axis=1)
            c = tf.sigmoid(i) * tf.tanh(u)
            return tf.sigmoid(o) * tf.tanh(c), c
        h_left, c_left = self.encode(node.left)
        h_right, c_right = self.encode(node.right)
        i, f_left, f_right, o, u = tf.split(self.node(tf.concat([h_left, h_right], axis=1)), 5, axis=1)
        c = tf.sigmoid(i) * tf.tanh(u) + tf.sigmoid(f_left) * c_left + tf.sigmoid(f_right) * c_right
        return tf.sigmoid(o) * tf.tanh(c), c


class Program:
    def __init__(self, quick: bool, seed: int) -> None:
        batch, hidden = sizes(quick)
        keras.utils.set_random_seed(seed)
        self.model = TreeLSTM(hidden)
        self.optimizer = keras.optimizers.SGD(0.05)
        self.batches = tree_data.sst_batches(4, batch, VOCAB, seed)
        self.hidden = hidden


def build(quick: bool, seed: int = 0) -> Program:
    return Program(quick, seed)


def weights(program: Program) -> list:
    return program.model.variables


def imperative(program: Program, wrap) -> callable:
    model, opt = program.model, program.optimizer

    def train_step(batch):
        with tf.GradientTape() as tape:
            loss = 0.0
            for tree in batch:
                h, _ = model.encode(tree)
                logits = model.classify(h)
                loss += tf.reduce_sum(tf.nn.sparse_softmax_cross_entropy_with_logits([tree.label], logits))
            loss = loss / len(batch)
        grads = tape.gradient(loss, model.variables)
        opt.apply_gradients(zip(grads, model.variables))
        return loss

    step = wrap(train_step)
    cycle = itertools.cycle(program.batches)
    return lambda: step(next(cycle))


def symbolic(program: Program) -> callable:
    model, opt, hidden = program.model, program.optimizer, program.hidden
    spec = tf.TensorSpec([None], tf.int32)

    @tf.function(input_signature=[spec, spec, spec, tf.TensorSpec([None], tf.bool), spec, spec], autograph=False)
    def train_step(words, left, right, is_leaf, roots, labels):
        with tf.GradientTape() as tape:
            n = tf.shape(words)[0]

            def body(i, hs, cs):
                def leaf():
                    x = tf.nn.embedding_lookup(model.embedding, words[i : i + 1])
                    gi, go, gu = tf.split(model.leaf(x), 3, axis=1)
                    c = tf.sigmoid(gi) * tf.tanh(gu)
                    return tf.sigmoid(go) * tf.tanh(c), c

                def inner():
                    h_l, h_r = hs.read(left[i])[None], hs.read(right[i])[None]
                    c_l, c_r = cs.read(left[i])[None], cs.read(right[i])[None]
                    gi, fl, fr, go, gu = tf.split(model.node(tf.concat([h_l, h_r], axis=1)), 5, axis=1)
                    c = tf.sigmoid(gi) * tf.tanh(gu) + tf.sigmoid(fl) * c_l + tf.sigmoid(fr) * c_r
                    return tf.sigmoid(go) * tf.tanh(c), c

                h, c = tf.cond(is_leaf[i], leaf, inner)
                return i + 1, hs.write(i, h[0]), cs.write(i, c[0])

            def array():
                return tf.TensorArray(tf.float32, size=n, element_shape=[hidden], clear_after_read=False)

            _, hs, _ = tf.while_loop(lambda i, h, c: i < n, body, (0, array(), array()))
            logits = model.classify(tf.gather(hs.stack(), roots))
            losses = tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits)
            loss = tf.reduce_sum(losses) / tf.cast(tf.shape(roots)[0], tf.float32)
        grads = tape.gradient(loss, model.variables)
        opt.apply_gradients(zip(grads, model.variables))
        return loss

    cycle = itertools.cycle(program.batches)

    def step():
        b = tree_data.linearize(next(cycle))  # per-step Python preprocessing is part of the baseline
        return train_step(b.words, b.left, b.right, b.is_leaf, b.roots, b.labels)

    return step
