"""PTB-shaped LSTM language model (batch 20, hidden 200, 20 time steps, vocabulary 10,000).

The imperative step loops over time in Python and passes the LSTM state in as an
argument and back out as a result. The symbolic baseline is the same computation as a
hand-written ``tf.function`` with a fixed input signature.
"""

from __future__ import annotations

import itertools

import numpy as np
import tensorflow as tf

keras = tf.keras
BATCH, STEPS, HIDDEN, VOCAB = 20, 20, 200, 10_000


class PTBModel:
    def __init__(
        self, seed: int = 0, *, batch: int = BATCH, steps: int = STEPS, hidden: int = HIDDEN, vocab: int = VOCAB
    ) -> None:
        keras.utils.set_random_seed(seed)
        self.batch, self.steps, self.hidden, self.vocab = batch, steps, hidden, vocab
        self.embedding = tf.Variable(tf.random.uniform([vocab, hidden], -0.1, 0.1), name="embedding")
        self.cell = keras.layers.LSTMCell(hidden)
        self.cell.build((batch, hidden))
        self.softmax = keras.layers.Dense(vocab)
        self.softmax.build((batch, hidden))
        self.variables = [self.embedding, *self.cell.trainable_variables, *self.softmax.trainable_variables]


def zero_state(batch: int = BATCH, hidden: int = HIDDEN):
    return (tf.zeros([batch, hidden]), tf.zeros([batch, hidden]))


def batches(n: int = 4, seed: int = 0, *, batch: int = BATCH, steps: int = STEPS, vocab: int = VOCAB):
    rng = np.random.default_rng(seed)
    data = rng.integers(0, vocab, size=(n, batch, steps + 1)).astype(np.int32)
    return [(tf.constant(d[:, :-1]), tf.constant(d[:, 1:])) for d in data]


def imperative_step(model: PTBModel, opt):
    def train_step(x, y, state):
        h, c = state
        with tf.GradientTape() as tape:
            loss = 0.0
            for t in range(x.shape[1]):
                emb = tf.nn.embedding_lookup(model.embedding, x[:, t])
                out, (h, c) = model.cell(emb, (h, c))
                logits = model.softmax(out)
                loss += tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y[:, t], logits=logits))
            loss = loss / x.shape[1]
        grads = tape.gradient(loss, model.variables)
        opt.apply_gradients(zip(grads, model.variables))
        return loss, (h, c)

    return train_step


def symbolic_step(model: PTBModel, opt):
    spec = tf.TensorSpec([model.batch, model.steps], tf.int32)
    state_spec = (tf.TensorSpec([model.batch, model.hidden]), tf.TensorSpec([model.batch, model.hidden]))

    @tf.function(input_signature=[spec, spec, state_spec], autograph=False)
    def train_step(x, y, state):
        h, c = state
        with tf.GradientTape() as tape:
            losses = []
            for t in range(model.steps):
                out, (h, c) = model.cell(tf.nn.embedding_lookup(model.embedding, x[:, t]), (h, c))
                logits = model.softmax(out)
                losses.append(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y[:, t], logits=logits))
            loss = tf.reduce_mean(tf.stack(losses))
        opt.apply_gradients(zip(tape.gradient(loss, model.variables), model.variables))
        return loss, (h, c)

    return train_step


def feeder(step, data, state=None):
    """Runs ``step`` on the next batch, passing the LSTM state out of one step into the next."""
    cycle = itertools.cycle(data)
    state = state if state is not None else [zero_state()]

    def run():
        x, y = next(cycle)
        loss, state[0] = step(x, y, state[0])
        return loss

    return run


# ---- The Table-3 contract (benchmarks/models/workload.py) ----

NAME = "lstm"
UNIT = "words/s"
SCALING = (
    "Paper: PTB small LSTM (batch 20, 20 steps, hidden 200, vocabulary 10k). Here: the same sizes on "
    "PTB-shaped synthetic token ids (4 cycled batches); quick mode: batch 20, 10 steps, hidden 100, "
    "vocabulary 2k, 2 batches."
)
DYNAMIC = "dynamic control flow (a Python loop over time steps) and state carried across steps (h, c)"

_QUICK = {"batch": 20, "steps": 10, "hidden": 100, "vocab": 2_000}
_FULL = {"batch": BATCH, "steps": STEPS, "hidden": HIDDEN, "vocab": VOCAB}


class Program:
    """Model, optimizer, data and the LSTM state ``[(h, c)]`` that each step passes to the next."""

    def __init__(self, quick: bool, seed: int) -> None:
        dims = _QUICK if quick else _FULL
        self.model = PTBModel(seed, **dims)
        self.opt = keras.optimizers.SGD(1.0)
        self.data = batches(2 if quick else 4, seed=seed, batch=dims["batch"], steps=dims["steps"], vocab=dims["vocab"])
        self.state = [zero_state(dims["batch"], dims["hidden"])]


def items_per_step(quick: bool) -> float:
    dims = _QUICK if quick else _FULL
    return float(dims["batch"] * dims["steps"])


def build(quick: bool, seed: int = 0) -> Program:
    return Program(quick, seed)


def _runner(step, program: Program):
    run = feeder(step, program.data, program.state)

    def step_and_state():
        loss = run()
        return loss, program.state[0]

    return step_and_state


def imperative(program: Program, wrap):
    return _runner(wrap(imperative_step(program.model, program.opt)), program)


def symbolic(program: Program):
    return _runner(symbolic_step(program.model, program.opt), program)


def weights(program: Program) -> list:
    return [*program.model.variables, *program.opt.variables, *program.state[0]]
