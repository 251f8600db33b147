"""[state] benchmark: the PTB LSTM keeping ``(h, c)`` in ``self.state``, as the paper's Fig. 1.

janus runs the unmodified stateful program; the baseline is the hand-written ``tf.function``
that passes the state explicitly (benchmarks.models.lstm.symbolic_step).
"""

from __future__ import annotations

import itertools

import tensorflow as tf

import janus
from benchmarks.harness import measure
from benchmarks.models import lstm


class StatefulLM:
    """The imperative program: the recurrent state lives on the object across calls."""

    def __init__(self, model: lstm.PTBModel, opt) -> None:
        self.model = model
        self.opt = opt
        self.state = lstm.zero_state()

    def train_step(self, x, y):
        h, c = self.state
        with tf.GradientTape() as tape:
            loss = 0.0
            for t in range(x.shape[1]):
                out, (h, c) = self.model.cell(tf.nn.embedding_lookup(self.model.embedding, x[:, t]), (h, c))
                logits = self.model.softmax(out)
                loss += tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y[:, t], logits=logits))
            loss = loss / x.shape[1]
        grads = tape.gradient(loss, self.model.variables)
        self.opt.apply_gradients(zip(grads, self.model.variables))
        self.state = (h, c)
        return loss


def _runner(step, data):
    cycle = itertools.cycle(data)

    def run():
        return step(*next(cycle))

    return run


def stateful_lstm(quick: bool = False) -> dict:
    data = lstm.batches()
    eager_lm = StatefulLM(lstm.PTBModel(0), lstm.keras.optimizers.SGD(1.0))
    janus_lm = StatefulLM(lstm.PTBModel(0), lstm.keras.optimizers.SGD(1.0))
    jitted = janus.jit(StatefulLM.train_step)
    symbolic = lstm.feeder(lstm.symbolic_step(lstm.PTBModel(0), lstm.keras.optimizers.SGD(1.0)), data)
    variants = {
        "imperative": _runner(eager_lm.train_step, data),
        "janus": _runner(lambda x, y: jitted(janus_lm, x, y), data),
        "symbolic": symbolic,
    }
    m = measure("lstm_state", variants, unit="words/s", items_per_step=lstm.BATCH * lstm.STEPS,
                warmup=4, repeats=3 if quick else 7, steps=2 if quick else 5)  # fmt: skip
    stats = janus.stats(jitted)
    assert stats["graph_calls"] > 0, janus.explain(jitted)
    return {
        "name": "lstm_state",
        "unit": "words/s",
        "imperative": m.throughput("imperative"),
        "janus": m.throughput("janus"),
        "symbolic": m.throughput("symbolic"),
        "janus_over_imperative": m.ratio("janus", "imperative"),
        "janus_over_symbolic": m.ratio("janus", "symbolic"),
        "janus_graph_calls": stats["graph_calls"],
        "janus_calls": stats["calls"],
    }
