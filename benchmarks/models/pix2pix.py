"""pix2pix (U-Net generator + PatchGAN discriminator) as in the TensorFlow pix2pix tutorial.

The imperative program is the tutorial's ``train_step``: two ``GradientTape``s, the
generator and the discriminator called with ``training=True`` (BatchNorm batch
statistics, the generator's Dropout), a GAN + L1 generator loss, and one Adam optimizer
per network. Keras 3 Dropout draws its mask from the layer's own seed-generator variable
(stateless RNG), so eager and graph runs draw the same masks. The symbolic baseline is the
same step as a hand-written ``tf.function`` with a fixed input signature and no autograph.
"""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import tensorflow as tf

keras = tf.keras

# Agreement tolerance: Adam divides by the root of tiny second moments, so graph rounding (~1e-7)
# moves single weights by up to ~2e-5 after six steps; the weights as a whole stay within ~1.5e-4 (1e-3 allowed).
AGREEMENT_RTOL = 1e-3
NAME = "pix2pix"
UNIT = "images/s"
BATCH, CHANNELS, LAMBDA = 1, 3, 100
SIDE = {True: 32, False: 128}
SCALING = (
    "paper: 256x256 facades, batch 1; here synthetic 128x128 image pairs, batch 1, with the tutorial's "
    "U-Net cut to 7 down/6 up blocks to fit 128x128 (quick: 32x32, 5/4 blocks); filters and PatchGAN unchanged"
)
DYNAMIC = "two networks, two GradientTapes, two optimizers; training flags (BatchNorm, Dropout)"

DOWN_FILTERS = (64, 128, 256, 512, 512, 512, 512, 512)  # the tutorial's 256x256 encoder


def downsample(filters, size, apply_batchnorm=True):
    initializer = keras.initializers.RandomNormal(0.0, 0.02)
    result = keras.Sequential()
    result.add(
        keras.layers.Conv2D(filters, size, strides=2, padding="same", kernel_initializer=initializer, use_bias=False)
    )
    if apply_batchnorm:
        result.add(keras.layers.BatchNormalization())
    result.add(keras.layers.LeakyReLU(0.3))
    return result


def upsample(filters, size, apply_dropout=False):
    initializer = keras.initializers.RandomNormal(0.0, 0.02)
    result = keras.Sequential()
    result.add(
        keras.layers.Conv2DTranspose(
            filters, size, strides=2, padding="same", kernel_initializer=initializer, use_bias=False
        )
    )
    result.add(keras.layers.BatchNormalization())
    if apply_dropout:
        result.add(keras.layers.Dropout(0.5))
    result.add(keras.layers.ReLU())
    return result


def Generator(side: int):
    depth = side.bit_length() - 1  # 256 -> 8 downsamplings, as in the tutorial
    filters = DOWN_FILTERS[:depth]
    down_stack = [downsample(f, 4, apply_batchnorm=i > 0) for i, f in enumerate(filters)]
    up_stack = [upsample(f, 4, apply_dropout=i < 3) for i, f in enumerate(reversed(filters[:-1]))]
    initializer = keras.initializers.RandomNormal(0.0, 0.02)
    last = keras.layers.Conv2DTranspose(
        CHANNELS, 4, strides=2, padding="same", kernel_initializer=initializer, activation="tanh"
    )

    inputs = keras.layers.Input(shape=[side, side, 3])
    x = inputs
    skips = []
    for down in down_stack:
        x = down(x)
        skips.append(x)
    skips = reversed(skips[:-1])
    for up, skip in zip(up_stack, skips):
        x = up(x)
        x = keras.layers.Concatenate()([x, skip])
    x = last(x)
    return keras.Model(inputs=inputs, outputs=x)


def Discriminator(side: int):
    initializer = keras.initializers.RandomNormal(0.0, 0.02)
    inp = keras.layers.Input(shape=[side, side, 3], name="input_image")
    tar = keras.layers.Input(shape=[side, side, 3], name="target_image")
    x = keras.layers.concatenate([inp, tar])
    down1 = downsample(64, 4, False)(x)
    down2 = downsample(128, 4)(down1)
    down3 = downsample(256, 4)(down2)
    zero_pad1 = keras.layers.ZeroPadding2D()(down3)
    conv = keras.layers.Conv2D(512, 4, strides=1, kernel_initializer=initializer, use_bias=False)(zero_pad1)
    batchnorm1 = keras.layers.BatchNormalization()(conv)
    leaky_relu = keras.layers.LeakyReLU(0.3)(batchnorm1)
    zero_pad2 = keras.layers.ZeroPadding2D()(leaky_relu)
    last = keras.layers.Conv2D(1, 4, strides=1, kernel_initializer=initializer)(zero_pad2)
    return keras.Model(inputs=[inp, tar], outputs=last)


@dataclasses.dataclass
class Program:
    generator: keras.Model
    discriminator: keras.Model
    generator_optimizer: keras.optimizers.Optimizer
    discriminator_optimizer: keras.optimizers.Optimizer
    data: list[tuple[tf.Tensor, tf.Tensor]]
    side: int


def items_per_step(quick: bool) -> float:
    return float(BATCH)


def build(quick: bool, seed: int = 0) -> Program:
    side = SIDE[quick]
    keras.utils.set_random_seed(seed)
    generator, discriminator = Generator(side), Discriminator(side)
    rng = np.random.default_rng(seed)
    data = [
        tuple(tf.constant(rng.uniform(-1, 1, (BATCH, side, side, CHANNELS)).astype(np.float32)) for _ in range(2))
        for _ in range(4)
    ]
    return Program(
        generator,
        discriminator,
        keras.optimizers.Adam(2e-4, beta_1=0.5),
        keras.optimizers.Adam(2e-4, beta_1=0.5),
        data,
        side,
    )


def _cycle(step, data):
    pairs = itertools.cycle(data)

    def run():
        return step(*next(pairs))

    return run


def imperative(program: Program, wrap):
    generator, discriminator = program.generator, program.discriminator
    generator_optimizer, discriminator_optimizer = program.generator_optimizer, program.discriminator_optimizer
    loss_object = keras.losses.BinaryCrossentropy(from_logits=True)

    def generator_loss(disc_generated_output, gen_output, target):
        gan_loss = loss_object(tf.ones_like(disc_generated_output), disc_generated_output)
        l1_loss = tf.reduce_mean(tf.abs(target - gen_output))
        total_gen_loss = gan_loss + (LAMBDA * l1_loss)
        return total_gen_loss, gan_loss, l1_loss

    def discriminator_loss(disc_real_output, disc_generated_output):
        real_loss = loss_object(tf.ones_like(disc_real_output), disc_real_output)
        generated_loss = loss_object(tf.zeros_like(disc_generated_output), disc_generated_output)
        return real_loss + generated_loss

    @wrap
    def train_step(input_image, target):
        with tf.GradientTape() as gen_tape, tf.GradientTape() as disc_tape:
            gen_output = generator(input_image, training=True)
            disc_real_output = discriminator([input_image, target], training=True)
            disc_generated_output = discriminator([input_image, gen_output], training=True)
            gen_total_loss, gen_gan_loss, gen_l1_loss = generator_loss(disc_generated_output, gen_output, target)
            disc_loss = discriminator_loss(disc_real_output, disc_generated_output)

        generator_gradients = gen_tape.gradient(gen_total_loss, generator.trainable_variables)
        discriminator_gradients = disc_tape.gradient(disc_loss, discriminator.trainable_variables)
        generator_optimizer.apply_gradients(zip(generator_gradients, generator.trainable_variables))
        discriminator_optimizer.apply_gradients(zip(discriminator_gradients, discriminator.trainable_variables))
        return gen_total_loss, disc_loss

    return _cycle(train_step, program.data)


def symbolic(program: Program):
    generator, discriminator = program.generator, program.discriminator
    gen_vars, disc_vars = generator.trainable_variables, discriminator.trainable_variables
    program.generator_optimizer.build(gen_vars)  # slot variables exist before tracing
    program.discriminator_optimizer.build(disc_vars)
    spec = tf.TensorSpec([BATCH, program.side, program.side, CHANNELS], tf.float32)

    def bce(labels_like_ones: bool, logits):
        labels = tf.ones_like(logits) if labels_like_ones else tf.zeros_like(logits)
        return tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits))

    @tf.function(input_signature=[spec, spec], autograph=False)
    def train_step(input_image, target):
        with tf.GradientTape() as gen_tape, tf.GradientTape() as disc_tape:
            gen_output = generator(input_image, training=True)
            disc_real = discriminator([input_image, target], training=True)
            disc_fake = discriminator([input_image, gen_output], training=True)
            gen_loss = bce(True, disc_fake) + LAMBDA * tf.reduce_mean(tf.abs(target - gen_output))
            disc_loss = bce(True, disc_real) + bce(False, disc_fake)
        program.generator_optimizer.apply_gradients(zip(gen_tape.gradient(gen_loss, gen_vars), gen_vars))
        program.discriminator_optimizer.apply_gradients(zip(disc_tape.gradient(disc_loss, disc_vars), disc_vars))
        return gen_loss, disc_loss

    return _cycle(train_step, program.data)


def weights(program: Program) -> list:
    return [
        *program.generator.variables,
        *program.discriminator.variables,
        *program.generator_optimizer.variables,
        *program.discriminator_optimizer.variables,
    ]
