"""One worker of the Horovod scale-factor benchmark (benchmarks/horovod_scale.py).

``python benchmarks/horovod_worker.py MODEL MODE STEPS OUT`` (under horovodrun for several
workers) trains LeNet (synthetic MNIST-shaped data, batch 50 per worker) or the PTB-shaped
LSTM (batch 20 × 20 steps per worker) in one of three ways:
``janus`` (plain tape, janus inserts the allreduce), ``eager`` (hvd.DistributedGradientTape)
or ``tf_function`` (a hand-written tf.function with hvd.DistributedGradientTape).
"""

import json
import sys
import time

import horovod.tensorflow as hvd
import tensorflow as tf

import janus
from benchmarks.models import lenet, lstm

hvd.init()
model_name, mode, steps, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
if model_name == "lenet":
    model, opt = lenet.build_model(0)
    data, per_step = lenet.batches(4, seed=hvd.rank()), lenet.BATCH
    variables = model.trainable_variables

    def loss_of(x, y):
        return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=model(x, training=True)))
else:
    ptb = lstm.PTBModel(0)
    opt = lstm.keras.optimizers.SGD(1.0)
    data, per_step = lstm.batches(4, seed=hvd.rank()), lstm.BATCH * lstm.STEPS
    variables = ptb.variables

    def loss_of(x, y):
        h, c = lstm.zero_state()
        loss = 0.0
        for t in range(x.shape[1]):
            out, (h, c) = ptb.cell(tf.nn.embedding_lookup(ptb.embedding, x[:, t]), (h, c))
            logits = ptb.softmax(out)
            loss += tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y[:, t], logits=logits))
        return loss / x.shape[1]


def plain_step(x, y):
    with tf.GradientTape() as tape:
        loss = loss_of(x, y)
    grads = tape.gradient(loss, variables)
    opt.apply_gradients(zip(grads, variables))
    return loss


def dtape_step(x, y):
    with tf.GradientTape() as tape:
        loss = loss_of(x, y)
    tape = hvd.DistributedGradientTape(tape) if hvd.size() > 1 else tape
    values = [getattr(v, "value", v) if not isinstance(v, tf.Variable) else v for v in variables]  # Keras 3: #4290
    grads = tape.gradient(loss, values)
    opt.apply_gradients(zip(grads, variables))
    return loss


step = {"janus": janus.jit(plain_step), "eager": dtape_step,
        "tf_function": tf.function(dtape_step, autograph=False)}[mode]  # fmt: skip
for i in range(5):  # warm-up: profiling, graph builds, tracing
    step(*data[i % 4])
start = time.perf_counter()
for i in range(steps):
    loss = step(*data[i % 4])
float(loss)
rate = steps * per_step / (time.perf_counter() - start)
if hvd.rank() == 0:
    with open(out, "w") as f:
        json.dump({"model": model_name, "mode": mode, "size": hvd.size(), "items_per_s_per_worker": rate}, f)
