"""A Keras subclassed model with a `training` branch, trained with a Python-side step counter.

Plain TF2 eager code. Run it as it is, or with ``--janus``, which adds only ``janus.enable()``.
"""

import numpy as np
import tensorflow as tf
from _common import Meter, jit_if_requested, parse, save

args = parse(__doc__, steps=40)
keras = tf.keras
keras.utils.set_random_seed(0)


class Classifier(keras.Model):
    def __init__(self):
        super().__init__()
        self.hidden = keras.layers.Dense(32, activation="relu")
        self.out = keras.layers.Dense(3)

    def call(self, x, training=False):
        h = self.hidden(x)
        if training:
            h = h * 0.9  # a deterministic stand-in for dropout
        return self.out(h)


class Trainer:
    def __init__(self, model):
        self.model = model
        self.optimizer = keras.optimizers.SGD(0.1)
        self.steps = 0
        self.total_loss = 0.0

    def step(self, x, y):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(
                tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=self.model(x, training=True))
            )
        grads = tape.gradient(loss, self.model.trainable_variables)
        self.optimizer.apply_gradients(zip(grads, self.model.trainable_variables))
        self.steps += 1
        self.total_loss = self.total_loss + loss
        return loss


Trainer.step = jit_if_requested(Trainer.step)  # benchmarks only (--jit); a no-op otherwise
model = Classifier()
model(tf.zeros([1, 8]))
trainer = Trainer(model)
rng = np.random.default_rng(0)
meter = Meter(args.steps)
for _ in range(args.steps):
    x = rng.normal(size=(64, 8)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int32) + (x[:, 1] > 1).astype(np.int32)
    loss = trainer.step(tf.constant(x), tf.constant(y))
    meter.step(64)
    if trainer.steps % 10 == 0:
        accuracy = tf.reduce_mean(tf.cast(tf.argmax(model(tf.constant(x)), 1) == y, tf.float32))
meter.report("subclassed_model", float(loss), args)
print(f"steps counted on the Python side: {trainer.steps}, mean loss {float(trainer.total_loss) / trainer.steps:.6f}")
save(args, float(loss), [*model.trainable_variables, np.float32(trainer.steps)])
