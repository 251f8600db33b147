"""AN: a generative adversarial network (MLP generator and discriminator) on MNIST-shaped data.

Every training step alternates the two players (Goodfellow et al. 2014, Algorithm 1 with
k = 1): a discriminator update under one tape and optimizer, then a generator update under
a second tape and optimizer against the freshly updated discriminator. The imperative
program keeps a step counter on the GAN object and the level of the instance noise added to
the discriminator's inputs, a Python float annealed (multiplied by 0.995) every step. Latent and
instance noise come from a seeded ``tf.random.Generator``. The symbolic baseline is the same
step as a ``tf.function`` with a fixed signature that takes the noise level as an argument.
"""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import tensorflow as tf

keras = tf.keras

NAME = "an"
UNIT = "images/s"
SCALING = (
    "The paper trains an adversarial network on MNIST; here: MLP generator (100-256-512-784) and "
    "discriminator (784-512-256-1), batch 64, Adam for both players, on synthetic MNIST-shaped images in "
    "[-1, 1] (quick: 100-64-784 / 784-64-1, batch 16)."
)
DYNAMIC = (
    "two GradientTapes and two optimizers with alternating updates in one step; impure function (a Python "
    "step counter and the annealed instance-noise level, Python numbers on the GAN object)"
)

LATENT = 100
NOISE_START, NOISE_DECAY = 0.1, 0.995


@dataclasses.dataclass(frozen=True)
class Config:
    g_hidden: tuple
    d_hidden: tuple
    batch: int
    batches: int = 4


CONFIGS = {False: Config((256, 512), (512, 256), 64), True: Config((64,), (64,), 16)}


class GAN:
    def __init__(self, cfg: Config, seed: int) -> None:
        self.generator = keras.Sequential(
            [keras.layers.Input((LATENT,))]
            + [keras.layers.Dense(n, activation="relu") for n in cfg.g_hidden]
            + [keras.layers.Dense(784, activation="tanh")]
        )
        self.discriminator = keras.Sequential(
            [keras.layers.Input((784,))]
            + [keras.layers.Dense(n, activation=keras.layers.LeakyReLU(0.2)) for n in cfg.d_hidden]
            + [keras.layers.Dense(1)]
        )
        self.g_opt = keras.optimizers.Adam(2e-4, beta_1=0.5)
        self.d_opt = keras.optimizers.Adam(2e-4, beta_1=0.5)
        self.g_opt.build(self.generator.trainable_variables)
        self.d_opt.build(self.discriminator.trainable_variables)
        self.noise = tf.random.Generator.from_seed(seed)
        self.steps = 0
        self.sigma = NOISE_START  # instance noise on the discriminator's inputs, annealed every step


def bce(labels_are_real: bool, logits):
    labels = tf.ones_like(logits) if labels_are_real else tf.zeros_like(logits)
    return tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits))


@dataclasses.dataclass
class Program:
    cfg: Config
    gan: GAN
    data: list


def items_per_step(quick: bool) -> float:
    return float(CONFIGS[quick].batch)


def build(quick: bool, seed: int = 0) -> Program:
    cfg = CONFIGS[quick]
    keras.utils.set_random_seed(seed)
    gan = GAN(cfg, seed)
    rng = np.random.default_rng(seed)
    data = [tf.constant(rng.uniform(-1, 1, (cfg.batch, 784)).astype(np.float32)) for _ in range(cfg.batches)]
    return Program(cfg, gan, data)


def imperative(program: Program, wrap):
    gan = program.gan
    G, D = gan.generator, gan.discriminator

    def train_step(real):
        batch = real.shape[0]
        sigma = gan.sigma
        # discriminator update
        z = gan.noise.normal([batch, LATENT])
        with tf.GradientTape() as d_tape:
            fake = G(z, training=True)
            real_logits = D(real + sigma * gan.noise.normal(real.shape), training=True)
            fake_logits = D(fake + sigma * gan.noise.normal(fake.shape), training=True)
            d_loss = bce(True, real_logits) + bce(False, fake_logits)
        d_grads = d_tape.gradient(d_loss, D.trainable_variables)
        gan.d_opt.apply_gradients(zip(d_grads, D.trainable_variables))
        # generator update against the updated discriminator
        z = gan.noise.normal([batch, LATENT])
        with tf.GradientTape() as g_tape:
            g_loss = bce(True, D(G(z, training=True), training=True))
        g_grads = g_tape.gradient(g_loss, G.trainable_variables)
        gan.g_opt.apply_gradients(zip(g_grads, G.trainable_variables))
        gan.steps += 1
        gan.sigma *= NOISE_DECAY
        return d_loss, g_loss

    train_step = wrap(train_step)
    batches = itertools.cycle(program.data)
    return lambda: train_step(next(batches))


def symbolic(program: Program):
    gan, cfg = program.gan, program.cfg
    G, D = gan.generator, gan.discriminator
    g_vars, d_vars = G.trainable_variables, D.trainable_variables

    @tf.function(input_signature=[tf.TensorSpec([cfg.batch, 784]), tf.TensorSpec([])], autograph=False)
    def train_step(real, sigma):
        z = gan.noise.normal([cfg.batch, LATENT])
        with tf.GradientTape() as d_tape:
            fake = G(z, training=True)
            real_logits = D(real + sigma * gan.noise.normal([cfg.batch, 784]), training=True)
            fake_logits = D(fake + sigma * gan.noise.normal([cfg.batch, 784]), training=True)
            d_loss = bce(True, real_logits) + bce(False, fake_logits)
        gan.d_opt.apply_gradients(zip(d_tape.gradient(d_loss, d_vars), d_vars))
        z = gan.noise.normal([cfg.batch, LATENT])
        with tf.GradientTape() as g_tape:
            g_loss = bce(True, D(G(z, training=True), training=True))
        gan.g_opt.apply_gradients(zip(g_tape.gradient(g_loss, g_vars), g_vars))
        return d_loss, g_loss

    batches = itertools.cycle(program.data)

    def step():
        out = train_step(next(batches), gan.sigma)
        gan.steps += 1
        gan.sigma *= NOISE_DECAY
        return out

    return step


def weights(program: Program) -> list:
    gan = program.gan
    return [
        *gan.generator.trainable_variables,
        *gan.discriminator.trainable_variables,
        *gan.g_opt.variables,
        *gan.d_opt.variables,
        gan.noise.state,
        gan.steps,
        gan.sigma,
    ]
