"""TreeRNN (Socher et al.) over SST-shaped binary parse trees, trained on the root label.

The imperative program recurses over Python tree objects, as users write it. The symbolic
baseline linearises each batch in Python (post order) and runs one ``tf.while_loop`` over
the nodes with a ``TensorArray`` of node states: the usual hand-written graph for trees.
"""

from __future__ import annotations

import itertools

import tensorflow as tf

from benchmarks.models import trees as tree_data

keras = tf.keras
NAME = "treernn"
UNIT = "trees/s"
SCALING = (
    "Paper: SST, batch 25, hidden 150 (GPU host). Here: synthetic SST-shaped trees (19±9 words), batch 25, "
    "vocabulary 2,000, hidden 64 (quick: batch 5, hidden 16)."
)
DYNAMIC = "recursion over Python tree objects, a tree-dependent base case, a Python loop over the batch"
VOCAB = 2000


def sizes(quick: bool) -> tuple[int, int]:
    return (5, 16) if quick else (25, 64)


def items_per_step(quick: bool) -> float:
    return sizes(quick)[0]


class TreeRNN:
    def __init__(self, hidden: int) -> None:
        self.embedding = tf.Variable(tf.random.uniform([VOCAB, hidden], -0.1, 0.1), name="embedding")
        self.combine = keras.layers.Dense(hidden, activation="tanh")
        self.combine.build((None, 2 * hidden))
        self.classify = keras.layers.Dense(tree_data.CLASSES)
        self.classify.build((None, hidden))
        self.variables = [self.embedding, *self.combine.trainable_variables, *self.classify.trainable_variables]

    def encode(self, node):
        if node.is_leaf:
            return tf.nn.embedding_lookup(self.embedding, [node.word])
        left = self.encode(node.left)
        right = self.encode(node.right)
        return self.combine(tf.concat([left, right], axis=1))


class Program:
    def __init__(self, quick: bool, seed: int) -> None:
        batch, hidden = sizes(quick)
        keras.utils.set_random_seed(seed)
        self.model = TreeRNN(hidden)
        self.optimizer = keras.optimizers.SGD(0.05)
        self.batches = tree_data.sst_batches(4, batch, VOCAB, seed)
        self.linearized = [tree_data.linearize(b) for b in self.batches]
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
                logits = model.classify(model.encode(tree))
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

            def body(i, states):
                def leaf():
                    return tf.nn.embedding_lookup(model.embedding, words[i : i + 1])

                def inner():
                    children = tf.concat([states.read(left[i])[None], states.read(right[i])[None]], axis=1)
                    return model.combine(children)

                h = tf.cond(is_leaf[i], leaf, inner)
                return i + 1, states.write(i, h[0])

            states = tf.TensorArray(tf.float32, size=n, element_shape=[hidden], clear_after_read=False)
            _, states = tf.while_loop(lambda i, s: i < n, body, (0, states))
            root_states = tf.gather(states.stack(), roots)
            logits = model.classify(root_states)
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
