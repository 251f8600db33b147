"""LeNet-style CNN on MNIST-shaped synthetic data (batch 50), trained with GradientTape + SGD.

``imperative_step`` is written the way TF2 users write it; ``symbolic_step`` is the
hand-written ``tf.function`` baseline a TF expert would write for the same model.
"""

from __future__ import annotations

import itertools

import numpy as np
import tensorflow as tf

keras = tf.keras
BATCH = 50


def build_model(seed: int = 0):
    keras.utils.set_random_seed(seed)
    model = keras.Sequential(
        [
            keras.layers.Input((28, 28, 1)),
            keras.layers.Conv2D(20, 5, activation="relu"),
            keras.layers.MaxPooling2D(2),
            keras.layers.Conv2D(50, 5, activation="relu"),
            keras.layers.MaxPooling2D(2),
            keras.layers.Flatten(),
            keras.layers.Dense(500, activation="relu"),
            keras.layers.Dense(10),
        ]
    )
    return model, keras.optimizers.SGD(0.01)


def batches(n: int = 4, batch: int = BATCH, seed: int = 0) -> list[tuple[tf.Tensor, tf.Tensor]]:
    rng = np.random.default_rng(seed)
    return [
        (
            tf.constant(rng.random((batch, 28, 28, 1), dtype=np.float32)),
            tf.constant(rng.integers(0, 10, batch).astype(np.int32)),
        )
        for _ in range(n)
    ]


def imperative_step(model, opt):
    def loss_fn(logits, labels):
        return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))

    def train_step(x, y):
        with tf.GradientTape() as tape:
            logits = model(x, training=True)
            loss = loss_fn(logits, y)
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    return train_step


def symbolic_step(model, opt):
    variables = model.trainable_variables

    @tf.function(
        input_signature=[tf.TensorSpec([BATCH, 28, 28, 1], tf.float32), tf.TensorSpec([BATCH], tf.int32)],
        autograph=False,
    )
    def train_step(x, y):
        with tf.GradientTape() as tape:
            logits = model(x, training=True)
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
        opt.apply_gradients(zip(tape.gradient(loss, variables), variables))
        return loss

    return train_step


def feeder(step, data):
    cycle = itertools.cycle(data)

    def run():
        x, y = next(cycle)
        return step(x, y)

    return run


# ---- The Table-3 contract (benchmarks/models/workload.py) ----

NAME = "lenet"
UNIT = "images/s"
SCALING = (
    "Paper: LeNet on MNIST, batch 50. Here: the same LeNet and batch 50 on MNIST-shaped synthetic data "
    "(4 cycled batches; 2 in quick mode), so no download is needed."
)
DYNAMIC = "none (a static CNN: the baseline case where janus should match tf.function)"


class Program:
    """Model, optimizer and data of one run."""

    def __init__(self, quick: bool, seed: int) -> None:
        self.model, self.opt = build_model(seed)
        self.data = batches(2 if quick else 4, seed=seed)


def items_per_step(quick: bool) -> float:
    return float(BATCH)


def build(quick: bool, seed: int = 0) -> Program:
    return Program(quick, seed)


def imperative(program: Program, wrap):
    return feeder(wrap(imperative_step(program.model, program.opt)), program.data)


def symbolic(program: Program):
    return feeder(symbolic_step(program.model, program.opt), program.data)


def weights(program: Program) -> list:
    return [*program.model.trainable_variables, *program.opt.variables]
