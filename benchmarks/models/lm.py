"""One-Billion-Word-style LSTM language model with a projection and a sampled softmax.

The imperative program keeps the LSTM state across batches in ``model.state`` (truncated
backpropagation through time, reset at the start of every pass over the data) and a step
counter in ``model.steps``; the training step loops over the time steps in Python. The
sampled softmax draws its log-uniform candidates from a seeded ``tf.random.Generator``
(``tf.nn.sampled_softmax_loss``'s default sampler uses the global seed, whose draws differ
between eager and graph execution). The symbolic baseline is the same step as a
``tf.function`` with a fixed signature that takes and returns the state explicitly.
"""

from __future__ import annotations

import dataclasses
import itertools
import math

import numpy as np
import tensorflow as tf

keras = tf.keras

NAME = "lm"
UNIT = "words/s"
SCALING = (
    "The paper trains the One Billion Word LM (793k-word vocabulary, LSTM-2048 with a 512 projection, "
    "batch 128 x 20 steps, sampled softmax over 8,192 classes, Adagrad); here: a 50,000-word vocabulary, "
    "LSTM-512 with a 128 projection, batch 32 x 20 steps, 1,024 sampled classes, Adagrad, on synthetic "
    "Zipf-distributed token ids (quick: 10,000 words, LSTM-64/32, batch 8 x 8, 128 samples)."
)
DYNAMIC = (
    "dynamic control flow (a Python loop over each batch's time steps); impure function (the LSTM state "
    "carried across batches in model.state, a Python step counter model.steps)"
)


@dataclasses.dataclass(frozen=True)
class Config:
    vocab: int
    hidden: int
    proj: int
    batch: int
    steps: int
    samples: int
    batches: int = 4


CONFIGS = {
    False: Config(vocab=50_000, hidden=512, proj=128, batch=32, steps=20, samples=1024),
    True: Config(vocab=10_000, hidden=64, proj=32, batch=8, steps=8, samples=128),
}


class ProjectedLSTMCell(keras.layers.Layer):
    """LSTM cell whose output (and recurrent state h) is projected down (Sak et al. 2014)."""

    def __init__(self, units: int, proj: int, **kwargs) -> None:
        super().__init__(**kwargs)
        self.units, self.proj = units, proj

    def build(self, input_shape) -> None:
        self.kernel = self.add_weight(shape=(input_shape[-1] + self.proj, 4 * self.units), name="kernel")
        self.bias = self.add_weight(shape=(4 * self.units,), initializer="zeros", name="bias")
        self.projection = self.add_weight(shape=(self.units, self.proj), name="projection")

    def call(self, x, state):
        h, c = state
        gates = tf.matmul(tf.concat([x, h], axis=1), self.kernel) + self.bias
        i, j, f, o = tf.split(gates, 4, axis=1)
        c = tf.sigmoid(f + 1.0) * c + tf.sigmoid(i) * tf.tanh(j)
        h = tf.matmul(tf.sigmoid(o) * tf.tanh(c), self.projection)
        return h, (h, c)


class LanguageModel(keras.Model):
    def __init__(self, cfg: Config, seed: int) -> None:
        super().__init__()
        self.cfg = cfg
        self.embedding = keras.layers.Embedding(cfg.vocab, cfg.proj)
        self.cell = ProjectedLSTMCell(cfg.hidden, cfg.proj)
        self.softmax_w = self.add_weight(shape=(cfg.vocab, cfg.proj), name="softmax_w")
        self.softmax_b = self.add_weight(shape=(cfg.vocab,), initializer="zeros", name="softmax_b")
        self.embedding.build((None,))
        self.cell.build((None, cfg.proj))
        self.sampler = tf.random.Generator.from_seed(seed)
        self.steps = 0
        self.reset_state()

    def reset_state(self) -> None:
        self.state = (tf.zeros([self.cfg.batch, self.cfg.proj]), tf.zeros([self.cfg.batch, self.cfg.hidden]))

    def sample_candidates(self, labels):
        """Log-uniform (Zipfian) candidates, as tf.nn.log_uniform_candidate_sampler with unique=False."""
        cfg = self.cfg
        log_range = math.log(cfg.vocab + 1.0)
        u = self.sampler.uniform([cfg.samples], dtype=tf.float64)
        sampled = tf.minimum(tf.cast(tf.floor(tf.exp(u * log_range)), tf.int64) - 1, cfg.vocab - 1)

        def expected(ids):
            ids = tf.cast(ids, tf.float64)
            return tf.cast(cfg.samples * tf.math.log((ids + 2.0) / (ids + 1.0)) / log_range, tf.float32)

        return sampled, expected(labels), expected(sampled)


@dataclasses.dataclass
class Program:
    cfg: Config
    model: LanguageModel
    opt: object
    data: list


def items_per_step(quick: bool) -> float:
    cfg = CONFIGS[quick]
    return float(cfg.batch * cfg.steps)


def build(quick: bool, seed: int = 0) -> Program:
    cfg = CONFIGS[quick]
    keras.utils.set_random_seed(seed)
    model = LanguageModel(cfg, seed)
    opt = keras.optimizers.Adagrad(0.2)
    opt.build(model.trainable_variables)
    rng = np.random.default_rng(seed)
    tokens = np.minimum(rng.zipf(1.3, size=(cfg.batches, cfg.batch, cfg.steps + 1)), cfg.vocab) - 1
    data = [(tf.constant(t[:, :-1], tf.int32), tf.constant(t[:, 1:], tf.int32)) for t in tokens.astype(np.int32)]
    return Program(cfg, model, opt, data)


def imperative(program: Program, wrap):
    model, opt = program.model, program.opt
    cfg = program.cfg

    def train_step(x, y):
        h, c = model.state
        with tf.GradientTape() as tape:
            emb = model.embedding(x)
            outputs = []
            for t in range(x.shape[1]):
                out, (h, c) = model.cell(emb[:, t], (h, c))
                outputs.append(out)
            outputs = tf.reshape(tf.stack(outputs, axis=1), [-1, cfg.proj])
            labels = tf.reshape(tf.cast(y, tf.int64), [-1, 1])
            losses = tf.nn.sampled_softmax_loss(
                weights=model.softmax_w,
                biases=model.softmax_b,
                labels=labels,
                inputs=outputs,
                num_sampled=cfg.samples,
                num_classes=cfg.vocab,
                sampled_values=model.sample_candidates(labels),
            )
            loss = tf.reduce_mean(losses)
        grads = tape.gradient(loss, model.trainable_variables)
        grads, _ = tf.clip_by_global_norm(grads, 1.0)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        model.state = (h, c)
        model.steps += 1
        return loss

    train_step = wrap(train_step)
    batches = itertools.cycle(enumerate(program.data))

    def step():
        i, (x, y) = next(batches)
        if i == 0:  # a new pass over the corpus starts from a zero state
            model.reset_state()
        return train_step(x, y)

    return step


def symbolic(program: Program):
    model, opt = program.model, program.opt
    cfg = program.cfg
    variables = model.trainable_variables
    tokens = tf.TensorSpec([cfg.batch, cfg.steps], tf.int32)
    h_spec, c_spec = tf.TensorSpec([cfg.batch, cfg.proj]), tf.TensorSpec([cfg.batch, cfg.hidden])

    @tf.function(input_signature=[tokens, tokens, h_spec, c_spec], autograph=False)
    def train_step(x, y, h, c):
        with tf.GradientTape() as tape:
            emb = model.embedding(x)
            outputs = []
            for t in range(cfg.steps):
                out, (h, c) = model.cell(emb[:, t], (h, c))
                outputs.append(out)
            outputs = tf.reshape(tf.stack(outputs, axis=1), [-1, cfg.proj])
            labels = tf.reshape(tf.cast(y, tf.int64), [-1, 1])
            loss = tf.reduce_mean(
                tf.nn.sampled_softmax_loss(
                    model.softmax_w, model.softmax_b, labels, outputs, cfg.samples, cfg.vocab,
                    sampled_values=model.sample_candidates(labels),
                )
            )  # fmt: skip
        grads, _ = tf.clip_by_global_norm(tape.gradient(loss, variables), 1.0)
        opt.apply_gradients(zip(grads, variables))
        return loss, h, c

    batches = itertools.cycle(enumerate(program.data))

    def step():
        i, (x, y) = next(batches)
        if i == 0:
            model.reset_state()
        loss, h, c = train_step(x, y, *model.state)
        model.state = (h, c)
        model.steps += 1
        return loss

    return step


def weights(program: Program) -> list:
    model = program.model
    return [*model.trainable_variables, *program.opt.variables, model.sampler.state, *model.state, model.steps]
