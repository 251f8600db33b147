"""PTB-shaped LSTM language model (batch 20, hidden 200, 20 time steps, vocabulary 10,000).

The imperative step loops over time in Python and passes the LSTM state in as an
argument and back out as a result. The symbolic baseline is the same computation as a
hand-written ``tf.function`` with a fixed input signature.
"""

from __future__ import annotations

import itertools

import numpy as np
import tensorflow as tf

keras = tf.keras
BATCH, STEPS, HIDDEN, VOCAB = 20, 20, 200, 10_000


class PTBModel:
    def __init__(self, seed: int = 0) -> None:
        keras.utils.set_random_seed(seed)
        self.embedding = tf.Variable(tf.random.uniform([VOCAB, HIDDEN], -0.1, 0.1), name="embedding")
        self.cell = keras.layers.LSTMCell(HIDDEN)
        self.cell.build((BATCH, HIDDEN))
        self.softmax = keras.layers.Dense(VOCAB)
        self.softmax.build((BATCH, HIDDEN))
        self.variables = [self.embedding, *self.cell.trainable_variables, *self.softmax.trainable_variables]


def zero_state():
    return (tf.zeros([BATCH, HIDDEN]), tf.zeros([BATCH, HIDDEN]))


def batches(n: int = 4, seed: int = 0):
    rng = np.random.default_rng(seed)
    data = rng.integers(0, VOCAB, size=(n, BATCH, STEPS + 1)).astype(np.int32)
    return [(tf.constant(d[:, :-1]), tf.constant(d[:, 1:])) for d in data]


def imperative_step(model: PTBModel, opt):
    def train_step(x, y, state):
        h, c = state
        with tf.GradientTape() as tape:
            loss = 0.0
            for t in range(x.shape[1]):
                emb = tf.nn.embedding_lookup(model.embedding, x[:, t])
                out, (h, c) = model.cell(emb, (h, c))
                logits = model.softmax(out)
                loss += tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y[:, t], logits=logits))
            loss = loss / x.shape[1]
        grads = tape.gradient(loss, model.variables)
        opt.apply_gradients(zip(grads, model.variables))
        return loss, (h, c)

    return train_step


def symbolic_step(model: PTBModel, opt):
    spec = tf.TensorSpec([BATCH, STEPS], tf.int32)
    state_spec = (tf.TensorSpec([BATCH, HIDDEN]), tf.TensorSpec([BATCH, HIDDEN]))

    @tf.function(input_signature=[spec, spec, state_spec], autograph=False)
    def train_step(x, y, state):
        h, c = state
        with tf.GradientTape() as tape:
            losses = []
            for t in range(STEPS):
                out, (h, c) = model.cell(tf.nn.embedding_lookup(model.embedding, x[:, t]), (h, c))
                logits = model.softmax(out)
                losses.append(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y[:, t], logits=logits))
            loss = tf.reduce_mean(tf.stack(losses))
        opt.apply_gradients(zip(tape.gradient(loss, model.variables), model.variables))
        return loss, (h, c)

    return train_step


def feeder(step, data):
    cycle = itertools.cycle(data)
    state = [zero_state()]

    def run():
        x, y = next(cycle)
        loss, state[0] = step(x, y, state[0])
        return loss

    return run
