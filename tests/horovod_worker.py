"""One Horovod worker of tests/test_horovod.py: a plain-tape training loop under janus.

Run as ``horovodrun --gloo -np 2 -H localhost:2 python tests/horovod_worker.py SCENARIO OUTDIR``.
Each rank trains on its half of every global batch of 8 and writes its final weights and
janus statistics to OUTDIR/rank<N>.json.
"""

import json
import sys

import horovod.tensorflow as hvd
import numpy as np
import tensorflow as tf

import janus

hvd.init()
scenario, out = sys.argv[1], sys.argv[2]
rank = hvd.rank()
keras = tf.keras


def build():
    keras.utils.set_random_seed(rank)  # different on purpose: janus broadcasts rank 0's weights
    model = keras.Sequential(
        [keras.layers.Input((4,)), keras.layers.Dense(8, activation="tanh"), keras.layers.Dense(1)]
    )
    return model, keras.optimizers.SGD(0.1)


model, opt = build()


def train_step(x, y):
    with tf.GradientTape() as tape:
        pred = model(x)
        if tf.reduce_max(x) > 50.0:  # never while profiling: speculated away behind a JanusAssert
            pred = pred * 1.0
        loss = tf.reduce_mean((pred - y) ** 2)
    grads = tape.gradient(loss, model.trainable_variables)
    opt.apply_gradients(zip(grads, model.trainable_variables))
    return loss


if scenario == "dtape":  # the user already reduces: hvd.DistributedGradientTape on tf.Variables
    tf.random.set_seed(0)
    w = tf.Variable(tf.random.normal([4, 1], seed=rank))
    b = tf.Variable(tf.zeros([1]))

    def train_step(x, y):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean((tf.matmul(x, w) + b - y) ** 2)
        tape = hvd.DistributedGradientTape(tape)
        grads = tape.gradient(loss, [w, b])
        w.assign_sub(0.1 * grads[0])
        b.assign_sub(0.1 * grads[1])
        return loss

    hvd.broadcast_variables([w, b], root_rank=0)
    model = type("Vars", (), {"trainable_variables": [w, b]})()

step = janus.jit(train_step)
rng = np.random.default_rng(1)
for i in range(10):
    X = rng.normal(size=(8, 4)).astype(np.float32)
    Y = rng.normal(size=(8, 1)).astype(np.float32)
    if scenario == "diverge" and i == 6:
        X[0, 0] = 100.0  # only rank 0's half holds it: rank 0's assumption breaks, rank 1's holds
    step(tf.constant(X[rank * 4 : (rank + 1) * 4]), tf.constant(Y[rank * 4 : (rank + 1) * 4]))

graph = step.cache.entries[0].graph.concrete.graph
nodes = [(op.type, op.name) for op in graph.get_operations()]
nodes += [(n.op, n.name) for fn in graph.as_graph_def().library.function for n in fn.node_def]
collectives = sorted(name.split("/")[-1] for kind, name in nodes if kind.startswith("Horovod"))
with open(f"{out}/rank{rank}.json", "w") as f:
    json.dump({"weights": [v.numpy().tolist() for v in model.trainable_variables], "stats": janus.stats(step),
               "collectives": collectives}, f)  # fmt: skip
