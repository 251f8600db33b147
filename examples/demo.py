"""`make demo`: one small imperative training program, run in eager and under janus.

Both runs start from the same weights and see the same batches. The program is plain
TF2 eager code; janus only wraps the training step with ``janus.jit``. The demo prints
throughput side by side and the final loss of each, which agree.
"""

from __future__ import annotations

import time

import numpy as np
import tensorflow as tf

import janus

keras = tf.keras
STEPS = 60
BATCH = 50


def build(seed=0):
    keras.utils.set_random_seed(seed)
    model = keras.Sequential(
        [
            keras.layers.Input((28, 28, 1)),
            keras.layers.Conv2D(8, 5, activation="relu"),
            keras.layers.MaxPooling2D(2),
            keras.layers.Flatten(),
            keras.layers.Dense(64, activation="relu"),
            keras.layers.Dense(10),
        ]
    )
    return model, keras.optimizers.SGD(0.05)


def make_train_step(model, opt):
    def train_step(x, y):
        with tf.GradientTape() as tape:
            logits = model(x, training=True)
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    return train_step


def data():
    rng = np.random.default_rng(0)
    centers = rng.normal(size=(10, 28, 28, 1)).astype(np.float32)
    out = []
    for _ in range(8):
        y = rng.integers(0, 10, BATCH)
        x = centers[y] + 0.5 * rng.normal(size=(BATCH, 28, 28, 1)).astype(np.float32)
        out.append((tf.constant(x), tf.constant(y.astype(np.int32))))
    return out


def run(step, batches):
    loss = None
    start = time.perf_counter()
    for i in range(STEPS):
        x, y = batches[i % len(batches)]
        loss = step(x, y)
    loss = float(loss)
    return STEPS * BATCH / (time.perf_counter() - start), loss


def main():
    batches = data()
    eager_step = make_train_step(*build())
    janus_step = janus.jit(make_train_step(*build()))
    eager_ips, eager_loss = run(eager_step, batches)
    janus_ips, janus_loss = run(janus_step, batches)
    print(f"{'mode':<8}{'images/s':>12}{'final loss':>14}")
    print(f"{'eager':<8}{eager_ips:>12.0f}{eager_loss:>14.6f}")
    print(f"{'janus':<8}{janus_ips:>12.0f}{janus_loss:>14.6f}")
    stats = janus.stats(janus_step)
    print(
        f"janus served {stats['graph_calls']}/{stats['calls']} steps from its graph "
        f"(profiled {stats['profiled_calls']}, built {stats['graphs_built']} graph "
        f"in {stats['build_seconds']:.2f}s); speedup {janus_ips / eager_ips:.2f}x"
    )
    if not np.isclose(eager_loss, janus_loss, rtol=1e-5):
        raise SystemExit(f"final losses differ: eager {eager_loss} vs janus {janus_loss}")
    print("final losses agree (rtol 1e-5)")
    print()
    print(janus.report())


if __name__ == "__main__":
    main()
