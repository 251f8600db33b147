"""A custom training loop: a subclassed Keras model runs a hand-written recurrent cell
(``h = tanh(x_t W + h U + b)``) over 12 time steps of a batch of 16, and the training step keeps
Python-side state: a step counter, a loss history and a log line every few steps.

Plain TF2 eager code. Run it as it is, or with ``--janus``, which adds only ``janus.enable()``.
``benchmarks/recurrent_cell.py`` imports it to time eager, ``janus.enable()`` and a hand-written
``tf.function`` side by side.
"""

import numpy as np
import tensorflow as tf

keras = tf.keras
TIME, BATCH, FEATURES, HIDDEN = 12, 16, 8, 32
LOG_EVERY = 25


class RecurrentRegressor(keras.Model):
    """A tanh RNN cell written out by hand, unrolled over the time axis, and a linear read-out."""

    def __init__(self):
        super().__init__()
        self.w = self.add_weight(shape=(FEATURES, HIDDEN), initializer="glorot_uniform", name="w")
        self.u = self.add_weight(shape=(HIDDEN, HIDDEN), initializer="orthogonal", name="u")
        self.b = self.add_weight(shape=(HIDDEN,), initializer="zeros", name="b")
        self.head = keras.layers.Dense(1)

    def call(self, x):
        h = tf.zeros([x.shape[0], HIDDEN])
        for t in range(x.shape[1]):
            h = tf.tanh(tf.matmul(x[:, t], self.w) + tf.matmul(h, self.u) + self.b)
        return self.head(h)


class Trainer:
    """The training step, with the bookkeeping a custom loop keeps in Python."""

    def __init__(self, model, log_every=LOG_EVERY):
        self.model = model
        self.optimizer = keras.optimizers.SGD(0.05)
        self.log_every = log_every
        self.steps = 0
        self.history = []

    def train_step(self, x, y):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(self.model(x) - y))
        grads = tape.gradient(loss, self.model.trainable_variables)
        self.optimizer.apply_gradients(zip(grads, self.model.trainable_variables))
        self.steps += 1
        self.history.append(loss)
        if self.steps % self.log_every == 0:
            tf.print("step", self.steps, "loss", loss)
        return loss


def batches(count, seed=0):
    """``count`` batches of sequences whose target is a damped sum of their first feature."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(count, BATCH, TIME, FEATURES)).astype(np.float32)
    y = (x[..., 0] * 0.8 ** np.arange(TIME)[::-1]).sum(-1, keepdims=True).astype(np.float32)
    return [(tf.constant(a), tf.constant(b)) for a, b in zip(x, y)]


def make_trainer(seed=0, log_every=LOG_EVERY):
    keras.utils.set_random_seed(seed)
    model = RecurrentRegressor()
    model(tf.zeros([BATCH, TIME, FEATURES]))
    return Trainer(model, log_every)


def main():
    from _common import Meter, jit_if_requested, parse, save

    args = parse(__doc__, steps=100)
    Trainer.train_step = jit_if_requested(Trainer.train_step)  # benchmarks only (--jit); a no-op otherwise
    trainer = make_trainer()
    data = batches(args.steps)
    meter = Meter(args.steps)
    for x, y in data:
        loss = trainer.train_step(x, y)
        meter.step(BATCH)
    meter.report("recurrent_cell_enable", float(loss), args)
    mean = float(tf.reduce_mean(tf.stack(trainer.history)))
    print(f"steps counted on the Python side: {trainer.steps}, mean loss {mean:.6f}")
    save(args, float(loss), [*trainer.model.trainable_variables, np.float32(trainer.steps), mean])


if __name__ == "__main__":
    main()
