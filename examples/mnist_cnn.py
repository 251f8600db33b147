"""A custom training loop for an MNIST-shaped CNN fed by tf.data, with a ragged last batch.

Plain TF2 eager code. Run it as it is, or with ``--janus``, which adds only ``janus.enable()``.
"""

import numpy as np
import tensorflow as tf
from _common import Meter, jit_if_requested, parse, save

args = parse(__doc__, steps=40)
keras = tf.keras
keras.utils.set_random_seed(0)

rng = np.random.default_rng(0)
images = rng.random((args.steps * 32 - 13, 28, 28, 1), dtype=np.float32)  # the last batch is ragged
labels = rng.integers(0, 10, len(images)).astype(np.int32)
dataset = tf.data.Dataset.from_tensor_slices((images, labels)).batch(32)

model = keras.Sequential(
    [
        keras.layers.Input((28, 28, 1)),
        keras.layers.Conv2D(16, 5, activation="relu"),
        keras.layers.MaxPooling2D(),
        keras.layers.Flatten(),
        keras.layers.Dense(64, activation="relu"),
        keras.layers.Dense(10),
    ]
)
optimizer = keras.optimizers.SGD(0.05)


def loss_fn(logits, y):
    return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))


def train_step(x, y):
    with tf.GradientTape() as tape:
        loss = loss_fn(model(x, training=True), y)
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return loss


train_step = jit_if_requested(train_step)  # benchmarks only (--jit); a no-op otherwise
meter = Meter((len(images) + 31) // 32)
for x, y in dataset:
    loss = train_step(x, y)
    meter.step(int(x.shape[0]))
meter.report("mnist_cnn", float(loss), args)
save(args, float(loss), model.trainable_variables)
