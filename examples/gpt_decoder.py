"""A small GPT-2-style decoder trained with a custom loop: decoder blocks kept in a list attribute,
causal self-attention written with tf ops, the training step a method that counts steps in Python.

Plain TF2 eager code. Run it as it is, or with ``--janus``, which adds only ``janus.enable()``:
the whole step (model, loss, gradients, optimizer) is served from one graph.
"""

import numpy as np
import tensorflow as tf
from _common import Meter, jit_if_requested, parse, save

args = parse(__doc__, steps=40)
keras = tf.keras
keras.utils.set_random_seed(0)
VOCAB, WIDTH, HEADS, LAYERS, CONTEXT, BATCH = 64, 32, 4, 3, 16, 8


class CausalSelfAttention(keras.layers.Layer):
    def __init__(self, width, heads):
        super().__init__()
        self.width, self.heads = width, heads
        self.qkv = keras.layers.Dense(3 * width)
        self.proj = keras.layers.Dense(width)

    def split_heads(self, x):
        batch, time = tf.shape(x)[0], tf.shape(x)[1]
        x = tf.reshape(x, [batch, time, self.heads, self.width // self.heads])
        return tf.transpose(x, [0, 2, 1, 3])

    def call(self, x):
        q, k, v = tf.split(self.qkv(x), 3, axis=-1)
        q, k, v = self.split_heads(q), self.split_heads(k), self.split_heads(v)
        time = tf.shape(x)[1]
        scores = tf.matmul(q, k, transpose_b=True) / tf.math.sqrt(float(self.width // self.heads))
        causal = tf.linalg.band_part(tf.ones([time, time]), -1, 0)
        scores = tf.where(causal == 0, -1e9, scores)
        mixed = tf.transpose(tf.matmul(tf.nn.softmax(scores, axis=-1), v), [0, 2, 1, 3])
        return self.proj(tf.reshape(mixed, [tf.shape(x)[0], time, self.width]))


class DecoderBlock(keras.layers.Layer):
    def __init__(self, width, heads):
        super().__init__()
        self.norm1 = keras.layers.LayerNormalization()
        self.norm2 = keras.layers.LayerNormalization()
        self.attention = CausalSelfAttention(width, heads)
        self.expand = keras.layers.Dense(4 * width, activation="gelu")
        self.contract = keras.layers.Dense(width)

    def call(self, x):
        x = x + self.attention(self.norm1(x))
        return x + self.contract(self.expand(self.norm2(x)))


class TinyGPT(keras.Model):
    def __init__(self):
        super().__init__()
        self.tokens = keras.layers.Embedding(VOCAB, WIDTH)
        self.positions = keras.layers.Embedding(CONTEXT, WIDTH)
        self.blocks = [DecoderBlock(WIDTH, HEADS) for _ in range(LAYERS)]
        self.norm = keras.layers.LayerNormalization()
        self.logits = keras.layers.Dense(VOCAB)

    def call(self, ids):
        x = self.tokens(ids) + self.positions(tf.range(tf.shape(ids)[1]))
        for block in self.blocks:
            x = block(x)
        return self.logits(self.norm(x))


class Trainer:
    def __init__(self, model):
        self.model = model
        self.optimizer = keras.optimizers.SGD(0.05, momentum=0.9)
        self.loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        self.steps = 0

    def train_step(self, inputs, targets):
        with tf.GradientTape() as tape:
            loss = self.loss_fn(targets, self.model(inputs))
        grads = tape.gradient(loss, self.model.trainable_variables)
        self.optimizer.apply_gradients(zip(grads, self.model.trainable_variables))
        self.steps += 1
        return loss


Trainer.train_step = jit_if_requested(Trainer.train_step)  # benchmarks only (--jit); a no-op otherwise
model = TinyGPT()
model(tf.zeros([1, CONTEXT], tf.int32))
trainer = Trainer(model)
rng = np.random.default_rng(0)
text = rng.integers(0, VOCAB, size=20_000)
meter = Meter(args.steps)
for _ in range(args.steps):
    starts = rng.integers(0, len(text) - CONTEXT - 1, size=BATCH)
    window = np.stack([text[s : s + CONTEXT + 1] for s in starts]).astype(np.int32)
    loss = trainer.train_step(tf.constant(window[:, :-1]), tf.constant(window[:, 1:]))
    meter.step(BATCH)
meter.report("gpt_decoder", float(loss), args)
print(f"steps counted on the Python side: {trainer.steps}")
save(args, float(loss), [*model.trainable_variables, np.float32(trainer.steps)])
