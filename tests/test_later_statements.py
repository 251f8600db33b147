"""Statements run in Python after the graph (``janus.graphgen.later``): a refused statement whose
result only Python uses runs after the whole graph, on the values it read; eager's answer always.

Every test is differential (values, Python state, variables, stdout, warnings, log records after
every call) and checks how janus served the calls: one graph, no split, or the split it falls back
to where running the statement later could be seen.
"""

from __future__ import annotations

import logging

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st

import janus
from tests.differential import assert_same, outcome, run_differential

keras = tf.keras


def _batches(n: int, seed: int = 0, classes: int = 3) -> list[tuple]:
    rng = np.random.default_rng(seed)
    return [
        (tf.constant(rng.random((16, 6), dtype=np.float32)), tf.constant(rng.integers(0, classes, 16), tf.int32))
        for _ in range(n)
    ]


def _later_served(jitted, statements: int) -> None:
    stats = janus.stats(jitted)
    text = janus.explain(jitted)
    assert stats["graph_calls"] > 0 and stats["split_calls"] == 0, text
    assert text.count("runs in Python after the graph") == statements, text


def _split_served(jitted) -> None:
    stats = janus.stats(jitted)
    assert stats["split_calls"] > 0 and stats["segment_calls"] > 0, janus.explain(jitted)
    assert "runs in Python after the graph" not in janus.explain(jitted)


def _classifier():
    model = keras.Sequential(
        [keras.layers.Input((6,)), keras.layers.Dense(8, activation="relu"), keras.layers.Dense(3)]
    )
    return model, keras.optimizers.SGD(0.1, momentum=0.9)


def _weights(model) -> list[np.ndarray]:
    return [v.numpy() for v in model.weights]


def test_scikit_learn_metrics_inside_the_tape_run_after_one_update_graph():
    from sklearn.metrics import accuracy_score, f1_score

    def make():
        keras.utils.set_random_seed(0)
        model, opt = _classifier()
        history: list = []

        def train_step(x, y):
            with tf.GradientTape() as tape:
                logits = model(x, training=True)
                predicted = tf.argmax(logits, axis=1).numpy()
                labels = y.numpy()
                history.append(
                    {"acc": accuracy_score(labels, predicted), "f1": f1_score(labels, predicted, average="macro")}
                )
                loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(y, logits))
            grads = tape.gradient(loss, model.trainable_variables)
            opt.apply_gradients(zip(grads, model.trainable_variables))
            return loss

        return train_step, lambda: (list(history), _weights(model), int(opt.iterations.numpy()))

    jitted = run_differential(make, _batches(10), min_graph_calls=5)
    _later_served(jitted, 3)


def test_numpy_logging_in_program_order_with_prints_and_log_records(caplog):
    log = logging.getLogger("user.train")

    def make():
        w = tf.Variable([[0.5], [-0.25], [0.1]])
        seen: list = []

        def step(x):
            print("start")
            y = tf.matmul(x, w)
            print(f"mean {y.numpy().mean():.5f}")
            log.warning("max %.5f", float(tf.reduce_max(y)))
            seen.append(round(float(y.numpy().sum()), 4))
            w.assign_sub(0.01 * tf.reduce_mean(x, axis=0)[:, None])
            print("end")
            return y

        return step, lambda: (w.numpy(), list(seen))

    calls = [(tf.constant(np.random.default_rng(i).random((4, 3), dtype=np.float32)),) for i in range(8)]
    jitted = run_differential(make, calls, min_graph_calls=3)
    _later_served(jitted, 3)


def test_a_statement_that_raises_leaves_eager_state_and_the_next_calls_agree():
    def make():
        w = tf.Variable(2.0)
        history: list = []

        def check(value: float) -> float:
            if value > 2.3:
                raise ValueError(f"diverged at {value:.3f}")
            return value

        def step(x):
            y = w * x
            history.append(check(float(y.numpy())))
            w.assign_add(0.05)
            return y

        return step, lambda: (float(w.numpy()), list(history))

    jitted = run_differential(make, [(tf.constant(1.0),)] * 10, min_graph_calls=2)
    _later_served(jitted, 1)


def test_keyboard_interrupt_in_a_statement_puts_back_the_later_updates():
    def make():
        w = tf.Variable([1.0, 2.0])
        calls = [0]

        def report(value: np.ndarray) -> None:
            calls[0] += 1
            if calls[0] == 7:
                raise KeyboardInterrupt

        def step(x):
            y = w * x
            report(y.numpy())
            w.assign_add(x)
            return y

        return step, lambda: (w.numpy(), calls[0])

    eager, eager_state = make()
    raw, jit_state = make()
    jitted = janus.jit(raw)
    x = tf.constant([0.5, 0.25])
    for n in range(9):
        results = []
        for fn in (eager, jitted):
            try:
                results.append(("ok", fn(x)))
            except KeyboardInterrupt:
                results.append(("interrupted", None))
        assert results[0][0] == results[1][0], f"call {n}: {results}"
        if results[0][0] == "ok":
            assert_same(results[0][1], results[1][1], f"call {n}")
        assert_same(eager_state(), jit_state(), f"call {n} state")
    _later_served(jitted, 1)


def test_a_statement_sees_locals_as_they_were_at_its_line():
    def make():
        log: list = []

        def step(x):
            y = x * 2.0
            log.append(y.numpy().tolist())
            y = y + 1.0
            x = x - 3.0
            log.append((y.numpy().tolist(), x.numpy().tolist()))
            return y * x

        return step, lambda: [list(v) if isinstance(v, list) else v for v in log]

    jitted = run_differential(make, [(tf.constant([1.0, 2.0]),)] * 6, min_graph_calls=2)
    _later_served(jitted, 2)


def test_a_helper_function_of_the_users_runs_later():
    totals: dict = {"seen": 0}

    def summarize(values: np.ndarray, k: int) -> tuple:
        top = np.sort(values)[-k:]
        return float(top.mean()), int((values > 0).sum())

    def make():
        stats: list = []

        def step(x):
            z = tf.tanh(x) - 0.2
            stats.append(summarize(z.numpy(), 2))
            return tf.reduce_sum(z)

        return step, lambda: list(stats)

    calls = [(tf.constant(np.random.default_rng(i).normal(size=5).astype(np.float32)),) for i in range(6)]
    jitted = run_differential(make, calls, min_graph_calls=2)
    _later_served(jitted, 1)
    assert totals == {"seen": 0}


# ------------------------------------------------------------------ where janus must split instead
def test_a_result_the_graph_uses_splits_as_before():
    def make():
        def step(x):
            n = int(tf.reduce_sum(tf.cast(x > 0, tf.int32)).numpy())
            return tf.tanh(x) * float(n)

        return step, lambda: None

    jitted = run_differential(make, [(tf.constant([1.0, -2.0, 3.0]),)] * 12, min_graph_calls=0)
    _split_served(jitted)


def test_a_statement_reaching_keras_weights_splits():
    def make():
        keras.utils.set_random_seed(1)
        model, opt = _classifier()
        norms: list = []

        def step(x, y):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(y, model(x)))
            norms.append(float(np.abs(model.weights[0].numpy()).sum()))
            opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
            return loss

        return step, lambda: (list(norms), _weights(model))

    jitted = run_differential(make, _batches(12, seed=2), min_graph_calls=0)
    _split_served(jitted)


def test_a_list_the_graph_also_reads_splits():
    def make():
        seen: list = []

        def step(x):
            seen.append(x.numpy().sum())
            return x * float(len(seen))

        return step, lambda: [float(v) for v in seen]

    jitted = run_differential(make, [(tf.constant([1.0, 2.0]),)] * 8, min_graph_calls=0)
    assert "runs in Python after the graph" not in janus.explain(jitted)


def test_an_update_before_and_after_the_statement_of_one_variable_splits():
    def make():
        w = tf.Variable(1.0)
        seen: list = []

        def step(x):
            w.assign_add(x)
            seen.append(float(w.numpy()))
            w.assign_add(1.0)
            return w * 1.0

        return step, lambda: (float(w.numpy()), list(seen))

    jitted = run_differential(make, [(tf.constant(0.5),)] * 8, min_graph_calls=0)
    assert "runs in Python after the graph" not in janus.explain(jitted)


def test_off_by_config_the_function_runs_split():
    def make():
        out: list = []

        def step(x):
            y = tf.sin(x) + 1.0
            out.append(y.numpy().tolist())
            return tf.tanh(y) * 3.0

        return step, lambda: list(out)

    janus.config.later_statements = False
    try:
        jitted = run_differential(make, [(tf.constant([1.0]),)] * 12, min_graph_calls=0)
    finally:
        janus.config.later_statements = True
    _split_served(jitted)


# ------------------------------------------------------------------ generated programs
_OPS = ("scale", "shift", "log_sum", "print_max", "update", "record_len")


def _program(ops: list[str]):
    def make():
        v = tf.Variable(1.0)
        log: list = []
        other: list = []

        def step(x):
            y = x
            for op in ops:  # unrolled while janus builds: a straight line of statements
                if op == "scale":
                    y = y * 1.5
                elif op == "shift":
                    y = y - v
                elif op == "log_sum":
                    log.append(round(float(y.numpy().sum()), 3))
                elif op == "print_max":
                    print(f"max {float(tf.reduce_max(y)):.3f}")
                elif op == "update":
                    v.assign_add(0.125)
                elif op == "record_len":
                    other.append(len(log))
            return y

        return step, lambda: (float(v.numpy()), list(log), list(other))

    return make


@settings(max_examples=12, deadline=None)
@given(st.lists(st.sampled_from(_OPS), min_size=1, max_size=6))
def test_generated_steps_match_eager(ops):
    # 8 calls: a program split around a first statement (log_sum) profiles its segment for 4 of them
    calls = [(tf.constant([0.5, -1.0, 2.0]),)] * 8
    make = _program(ops)
    eager, eager_state = make()
    raw, jit_state = make()
    jitted = janus.jit(raw)
    for n, args in enumerate(calls):
        expected, actual = outcome(eager, args), outcome(jitted, args)
        assert actual[0] == expected[0], f"{ops} call {n}"
        assert_same(expected[1], actual[1], f"{ops} call {n}")
        assert actual[2] == expected[2], f"{ops} call {n}: {expected[2]} != {actual[2]}"
        assert_same(eager_state(), jit_state(), f"{ops} call {n} state")
    stats = janus.stats(jitted)
    if "log_sum" in ops and "record_len" not in ops:
        assert stats["graph_calls"] > 0 or stats["segment_calls"] > 0, janus.explain(jitted)


@pytest.mark.keras
def test_keras_metrics_logging_step_under_both_keras_flavours():
    from sklearn.metrics import accuracy_score

    def make():
        keras.utils.set_random_seed(3)
        model, opt = _classifier()
        accs: list = []

        def train_step(x, y):
            with tf.GradientTape() as tape:
                logits = model(x, training=True)
                loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(y, logits))
            accs.append(accuracy_score(y.numpy(), logits.numpy().argmax(1)))
            opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
            return loss

        return train_step, lambda: (list(accs), _weights(model))

    jitted = run_differential(make, _batches(8, seed=4), min_graph_calls=3)
    _later_served(jitted, 1)
