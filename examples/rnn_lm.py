"""An RNN language model that keeps its recurrent state on the model object between batches.

Plain TF2 eager code. Run it as it is, or with ``--janus``, which adds only ``janus.enable()``.
"""

import numpy as np
import tensorflow as tf
from _common import Meter, jit_if_requested, parse, save

args = parse(__doc__, steps=30)
keras = tf.keras
keras.utils.set_random_seed(0)
VOCAB, HIDDEN, BATCH, STEPS = 500, 64, 16, 10


class LanguageModel:
    def __init__(self):
        self.embedding = tf.Variable(tf.random.uniform([VOCAB, HIDDEN], -0.1, 0.1))
        self.cell = keras.layers.GRUCell(HIDDEN)
        self.cell.build((BATCH, HIDDEN))
        self.head = keras.layers.Dense(VOCAB)
        self.head.build((BATCH, HIDDEN))
        self.state = tf.zeros([BATCH, HIDDEN])
        self.optimizer = keras.optimizers.SGD(0.5)

    @property
    def weights(self):
        return [self.embedding, *self.cell.trainable_variables, *self.head.trainable_variables]

    def train_step(self, x, y):
        h = self.state
        with tf.GradientTape() as tape:
            loss = 0.0
            for t in range(x.shape[1]):
                h, _ = self.cell(tf.nn.embedding_lookup(self.embedding, x[:, t]), h)
                logits = self.head(h)
                loss += tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y[:, t], logits=logits))
            loss = loss / x.shape[1]
        weights = [self.embedding, *self.cell.trainable_variables, *self.head.trainable_variables]
        self.optimizer.apply_gradients(zip(tape.gradient(loss, weights), weights))
        self.state = h
        return loss


LanguageModel.train_step = jit_if_requested(LanguageModel.train_step)  # benchmarks only (--jit); a no-op otherwise
model = LanguageModel()
rng = np.random.default_rng(0)
corpus = rng.integers(0, VOCAB, size=(args.steps, BATCH, STEPS + 1)).astype(np.int32)
meter = Meter(args.steps)
for batch in corpus:
    loss = model.train_step(tf.constant(batch[:, :-1]), tf.constant(batch[:, 1:]))
    meter.step(BATCH * STEPS)
meter.report("rnn_lm", float(loss), args)
save(args, float(loss), [*model.weights, model.state])
