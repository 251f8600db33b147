"""[partial] A breaker's reproducers for split functions (janus/partial): each gave a different
answer than eager, or raised where eager did not. All are fixed: tapes made or entered in a
segment (a function returning its GradientTape runs eagerly), and a segment in a try body split
again (the handler's locals come from every frame the split segment ran). Two more findings are
not tests here: global-seed random ops differ from eager as tf.function's do (allowed), and a
one-op segment per loop turn costs about 1.8x eager (a timing, noted on #17/#19)."""

import contextlib

import pytest
import tensorflow as tf
from differential import run_differential
from tensorflow.python.eager import record

import janus


@pytest.fixture(autouse=True)
def segments_keep_their_graphs(monkeypatch):
    """These segments are a few small ops each, which the cost check would run eagerly (it has its
    own tests in test_segment_cost.py): here every segment keeps its graph, so its use is asserted."""
    monkeypatch.setattr(janus.config, "segment_cost_check", False)


CALLS = 14


def vec(i):
    return tf.constant([float(i), 2.0])


def segments_served(jitted):
    stats = janus.stats(jitted)
    assert stats["split_calls"] > 0, janus.explain(jitted)
    return stats


# ------------------------------------------------------- wrong answers: a segment split again
# The `try` is what janus refuses first, so the whole try body becomes one segment; that segment
# then refuses (`.numpy()`) and is split again. The inner split's segments are not guarded: when
# the body raises, the handler (and everything after) sees the locals from *before* the body,
# not the ones eager's statements had bound before the raise.


def test_python_raise_in_a_try_body_that_also_holds_numpy():
    def make():
        def f(x, i):
            y = tf.constant(0.0)
            try:
                y = tf.reduce_sum(x)
                if i % 4 == 1:
                    raise ValueError("bad")
                print(y.numpy())
            except ValueError:
                pass
            return y  # eager: sum(x) on raising calls; janus (call 9): 0.0

        return f, lambda: None

    jitted = run_differential(make, [(vec(i), i) for i in range(CALLS)], min_graph_calls=0)
    segments_served(jitted)


def test_tf_assert_in_a_try_body_that_also_holds_numpy():
    def make():
        w = tf.Variable(0.0)

        def f(x, i):
            a = tf.constant(-1.0)
            try:
                a = tf.reduce_sum(x)
                w.assign_add(a)
                if i % 3 == 0:
                    tf.debugging.assert_less(a, 5.0)
                a = tf.multiply(a, 10.0)
                c = x.numpy()  # noqa: F841 - the break under test
            except tf.errors.InvalidArgumentError:
                a = tf.add(a, 0.5)  # eager (call 6): 8.5; janus: -0.5
            return a

        return f, lambda: w

    jitted = run_differential(make, [(vec(i), i) for i in range(CALLS)], min_graph_calls=0)
    segments_served(jitted)


def test_contextlib_suppress_around_a_body_that_raises_and_logs_numpy():
    def make():
        seen = []

        def f(x, i):
            y = tf.constant(0.0)
            with contextlib.suppress(ValueError):
                y = tf.reduce_sum(x)
                seen.append(1)
                if i % 3 == 0:
                    raise ValueError
                y = tf.multiply(y, 2.0)
                print(y.numpy())
            return tf.add(y, 1.0)  # eager (call 6): 9.0; janus: 1.0

        return f, lambda: list(seen)

    jitted = run_differential(make, [(vec(i), i) for i in range(CALLS)], min_graph_calls=0)
    segments_served(jitted)


# ------------------------------------------------------- a tape made by a segment
# Only `with tf.GradientTape() as tape:` keeps the `with` out of segments. A tape bound by an
# assignment (`tape = tf.GradientTape(...)`, then `with tape:`) goes into a segment, whose graph
# returns the tape it held while it was built: later gradients come from that stale tape.


def test_persistent_tape_assigned_then_entered_gradient_after_a_break():
    def make():
        w = tf.Variable(2.0)

        def f(x):
            tape = tf.GradientTape(persistent=True)
            with tape:
                y = tf.multiply(w, tf.reduce_sum(x))
                z = tf.square(y)
            v = float(z)
            g = tape.gradient(z, w)
            g2 = tape.gradient(y, w)
            w.assign_sub(tf.multiply(g, 0.001))  # janus: g is None here, ValueError
            return g, g2, v

        return f, lambda: w

    run_differential(make, [(vec(i),) for i in range(CALLS)], min_graph_calls=0)


def test_tape_assigned_then_entered_gradient_after_a_break():
    def make():
        w = tf.Variable(2.0)

        def f(x):
            tape = tf.GradientTape()
            with tape:
                y = tf.multiply(w, tf.reduce_sum(x))
            v = float(y)
            g = tape.gradient(y, w)
            return g, v

        return f, lambda: w

    run_differential(make, [(vec(i),) for i in range(CALLS)], min_graph_calls=0)


def test_tape_entered_by_hand_across_a_break():
    def make():
        w = tf.Variable(2.0)

        def f(x):
            tape = tf.GradientTape()
            tape.__enter__()
            y = tf.multiply(w, tf.reduce_sum(x))
            v = y.numpy()
            z = tf.square(y)
            tape.__exit__(None, None, None)
            g = tape.gradient(z, w)
            w.assign_sub(tf.multiply(g, 0.001))
            return g, v

        return f, lambda: w

    run_differential(make, [(vec(i),) for i in range(CALLS)], min_graph_calls=0)
    # generating must not have entered a tape: one left on TF's stack broke every later test's graphs
    assert not record.could_possibly_record()
