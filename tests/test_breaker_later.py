"""Breaking statements run after the graph (``janus.graphgen.later``) with users' code shapes.

Each test is a shape from a real training script that once gave a different answer than eager
(or checks how it is served now): differential after every call, with how janus served it.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

import janus
from tests.differential import assert_same, outcome, run_differential


def _later_served(jitted, statements: int | None = None) -> None:
    stats, text = janus.stats(jitted), janus.explain(jitted)
    assert stats["graph_calls"] > 0 and stats["split_calls"] == 0, text
    assert "runs in Python after the graph" in text, text
    if statements is not None:
        assert text.count("runs in Python after the graph") == statements, text


def _not_later(jitted) -> None:
    text = janus.explain(jitted)
    assert janus.stats(jitted)["split_calls"] > 0, text
    assert "runs in Python after the graph" not in text, text


# ------------------------------------------------------------------ try / except / finally
def test_a_user_check_in_a_try_is_caught_by_its_handler():
    """``try: history.append(check(float(y.numpy()))) except ValueError: ...``: run after the graph,
    the check raised outside the ``try`` (the call raised where eager's handler caught it)."""

    def make():
        w = tf.Variable(2.0)
        history: list = []

        def check(value: float) -> float:
            if value > 2.2:
                raise ValueError(f"diverged at {value:.3f}")
            return value

        def step(x):
            y = w * x
            try:
                history.append(check(float(y.numpy())))
            except ValueError:
                history.append(-1.0)
            w.assign_add(0.05)
            return y

        return step, lambda: (float(w.numpy()), list(history))

    jitted = run_differential(make, [(tf.constant(1.0),)] * 10, min_graph_calls=0)
    _not_later(jitted)


def test_a_finally_block_runs_when_the_statement_raises():
    """``try: log(...) finally: w.assign_add(...)``: where the statement raises, eager still ran the
    ``finally`` block; janus put its update back with the rest of the graph's after the statement."""

    def make():
        w = tf.Variable(1.0)
        seen: list = []

        def log(value: float) -> None:
            seen.append(value)
            if len(seen) % 4 == 0:
                raise ValueError("every fourth")

        def step(x):
            y = w * x
            try:
                log(float(y.numpy()))
            finally:
                w.assign_add(1.0)
            return y

        return step, lambda: (float(w.numpy()), list(seen))

    jitted = run_differential(make, [(tf.constant(0.5),)] * 10, min_graph_calls=0)
    assert "runs in Python after the graph" not in janus.explain(jitted)


# ------------------------------------------------------------------ NumPy buffers
def test_a_statement_writing_a_numpy_argument_the_graph_reads_after_it():
    """A preallocated NumPy buffer passed in: ``buf[0] = loss.numpy()`` then ``x * buf`` reads the
    new contents in eager; the graph was fed the buffer at the call's start."""

    def make():
        buf = np.ones(3, np.float32)

        def step(x, b):
            loss = tf.reduce_sum(x)
            b[0] = loss.numpy()
            return tf.reduce_sum(x * b)

        return step, buf

    eager, eager_buf = make()
    raw, jit_buf = make()
    jitted = janus.jit(raw)
    for n in range(8):
        x = tf.constant([1.0, 2.0, float(n)])
        expected, actual = outcome(eager, (x, eager_buf)), outcome(jitted, (x, jit_buf))
        assert actual[0] == expected[0] and actual[2] == expected[2], f"call {n}: {expected} {actual}"
        assert_same(expected[1], actual[1], f"call {n}")
        assert_same(eager_buf, jit_buf, f"call {n} buffer")
    _not_later(jitted)


def test_a_numpy_argument_read_by_the_graph_before_the_statement_still_runs_later():
    """Labels as a NumPy batch: the loss reads them, then scikit-learn does; no read after it."""
    from sklearn.metrics import accuracy_score

    def make():
        accs: list = []

        def step(x, labels):
            logits = tf.stack([x, -x], axis=1)
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits))
            accs.append(accuracy_score(labels, logits.numpy().argmax(1)))
            return loss

        return step, lambda: list(accs)

    rng = np.random.default_rng(0)
    calls = [(tf.constant(rng.normal(size=6).astype(np.float32)), rng.integers(0, 2, 6)) for _ in range(8)]
    jitted = run_differential(make, calls, min_graph_calls=3)
    _later_served(jitted, 1)


# ------------------------------------------------------------------ hidden TF state of libraries
def _summary_steps(logdir) -> list[tuple[str, int]]:
    files = sorted(logdir.glob("events.out.tfevents.*"))
    return [
        (value.tag, event.step)
        for path in files
        for event in tf.compat.v1.train.summary_iterator(str(path))
        for value in event.summary.value
    ]


def test_tf_summary_scalar_with_the_default_step_before_the_optimizer_update(tmp_path):
    """``tf.summary.experimental.set_step(opt.iterations)``, then in the step ``acc`` by NumPy and
    ``tf.summary.scalar("acc", acc)`` before ``apply_gradients``: run after the graph, the summary
    read the step the update had already incremented (every point logged one step late)."""
    keras = tf.keras

    def run(jit: bool) -> tuple[list, list]:
        keras.utils.set_random_seed(0)
        model = keras.Sequential([keras.layers.Input((4,)), keras.layers.Dense(2)])
        opt = keras.optimizers.SGD(0.1)
        accs: list = []

        def step(x, y):
            with tf.GradientTape() as tape:
                logits = model(x)
                loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(y, logits))
            acc = float((logits.numpy().argmax(1) == y.numpy()).mean())
            accs.append(acc)
            tf.summary.scalar("acc", acc)
            opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
            return loss

        fn = janus.jit(step) if jit else step
        logdir = tmp_path / ("janus" if jit else "eager")
        writer = tf.summary.create_file_writer(str(logdir))
        rng = np.random.default_rng(1)
        with writer.as_default():
            tf.summary.experimental.set_step(opt.iterations)
            try:
                for _ in range(8):
                    fn(tf.constant(rng.random((6, 4), dtype=np.float32)), tf.constant(rng.integers(0, 2, 6)))
            finally:
                tf.summary.experimental.set_step(None)
        writer.close()
        if jit:
            assert janus.stats(fn)["graph_calls"] + janus.stats(fn)["segment_calls"] > 0, janus.explain(fn)
        return accs, _summary_steps(logdir)

    assert run(jit=True) == run(jit=False)


def test_the_summary_step_read_by_a_statement_is_eagers():
    def make():
        step_var = tf.Variable(0, dtype=tf.int64)
        seen: list = []

        def step(x):
            loss = tf.reduce_sum(x * x)
            seen.append((float(loss.numpy()), int(tf.summary.experimental.get_step())))
            step_var.assign_add(1)
            return loss

        return step, step_var, seen

    eager, eager_step, eager_seen = make()
    raw, jit_step, jit_seen = make()
    jitted = janus.jit(raw)
    try:
        for n in range(8):
            for fn, step_var in ((eager, eager_step), (jitted, jit_step)):
                tf.summary.experimental.set_step(step_var)
                fn(tf.constant([1.0, float(n)]))
            assert jit_seen == eager_seen, f"call {n}"
    finally:
        tf.summary.experimental.set_step(None)
    assert "runs in Python after the graph" not in janus.explain(jitted)


# ------------------------------------------------------------------ the globals of a user's helper
REPORTER = None  # a wandb/TensorBoard-style hook, set once training is under way


def _report(value: float) -> None:
    if REPORTER is not None:
        REPORTER(value)


def test_a_helpers_global_rebound_after_the_build_is_walked_again():
    """``report(float(y.numpy()))`` whose helper calls a global hook, None while janus built; set
    later to an object reading a variable the graph updates after the statement: unguarded, the
    statement ran with it after the graph and read the variable's later value."""
    global REPORTER

    def make():
        w = tf.Variable(1.0)
        seen: list = []

        def step(x):
            y = x * w
            _report(float(y.numpy()))
            w.assign_add(1.0)
            return y

        def hook(value: float) -> None:
            seen.append((value, float(w.numpy())))

        return step, hook, lambda: (float(w.numpy()), list(seen))

    eager, eager_hook, eager_state = make()
    raw, jit_hook, jit_state = make()
    jitted = janus.jit(raw)
    try:
        for n in range(10):
            for fn, hook in ((eager, eager_hook), (jitted, jit_hook)):
                REPORTER = hook if n >= 6 else None
                fn(tf.constant(1.0))
            assert_same(eager_state(), jit_state(), f"call {n}")
    finally:
        REPORTER = None
    assert janus.stats(jitted)["graph_calls"] > 0, janus.explain(jitted)
