"""[partial] A segment too small to pay for a graph call (one or two ops between Python statements)
runs as plain Python after its first warm calls were timed against eager runs; a segment with real
work keeps its graph. Either way every call gives eager's answer."""

import numpy as np
import pytest
import tensorflow as tf
from differential import run_differential

import janus
from janus.executor.cost import CostProbe

pytestmark = pytest.mark.usefixtures("split_only")  # tests the split itself (conftest.py)


def test_a_one_op_segment_per_loop_turn_goes_back_to_python_with_eager_answers():
    def make():
        def running_sums(x, turns):
            acc = tf.constant(0.0)
            out = []
            for _ in range(turns):
                acc = tf.add(acc, tf.reduce_sum(x))
                out.append(float(acc))
            return out

        return running_sums, lambda: None

    x = tf.constant(np.arange(6.0).reshape(2, 3), tf.float32)
    # 20 calls: 3 profiled whole, then each segment profiles 3, warms its graph once and is timed
    # 5 + 5 times (the first segment, a constant and an empty list, once a call)
    jitted = run_differential(make, [(x * (n + 1), 10) for n in range(20)], min_graph_calls=0)
    version = jitted.split
    assert version is not None, janus.explain(jitted)
    kinds = [seg.jit.imperative_kind for seg in version.segments]
    assert "too small" in kinds, janus.explain(jitted)
    text = janus.explain(jitted)
    assert "[too small]" in text and "costs more than running its statements eagerly" in text
    # Once too small, the split function calls the statements directly: the segment's calls stop.
    tiny = next(seg.jit for seg in version.segments if seg.jit.imperative_kind == "too small")
    calls_before = tiny.stats.calls
    jitted(x, 10)
    assert tiny.stats.calls == calls_before


def test_a_segment_with_real_work_keeps_its_graph():
    def make():
        w = tf.Variable(np.full((32, 32), 0.01), dtype=tf.float32)

        def step(x):
            h = x
            for _ in range(60):  # sixty matmuls and tanhs: far more than a graph call costs
                h = tf.tanh(h @ w + 0.1)
            print(f"mean {h.numpy().mean():.5f}")
            return tf.reduce_sum(h)

        return step, lambda: w

    x = tf.constant(np.random.default_rng(0).normal(size=(8, 32)), tf.float32)
    jitted = run_differential(make, [(x + n,) for n in range(24)], min_graph_calls=0)  # the probe completes
    loop = jitted.split.segments[0]  # the return's reduce_sum is a segment of its own, too small
    assert loop.plan.first_line < loop.plan.last_line and loop.jit.imperative_kind == "", janus.explain(jitted)
    assert loop.jit.cost_probe is None and loop.jit.stats.graph_calls >= 10, janus.explain(jitted)


def test_a_too_small_segment_in_a_try_body_still_hands_its_locals_to_the_handler():
    def make():
        seen = []

        def guarded(x, limit):
            total = tf.constant(0.0)
            try:
                for _ in range(4):
                    total = total + tf.reduce_sum(x)
                    seen.append(float(total))
                    if float(total) > limit:
                        raise ValueError("over the limit")
            except ValueError:
                seen.append(("handled", float(total)))
            return total

        return guarded, lambda: list(seen)

    x = tf.constant([1.0, 2.0])
    calls = [(x, 100.0 if n % 3 else 5.0) for n in range(14)]
    jitted = run_differential(make, calls, min_graph_calls=0)
    assert jitted.split is not None


def test_explain_says_how_many_segments_a_call_ran():
    def make():
        def log_each(xs):
            for x in xs:
                y = tf.reduce_mean(tf.square(x))
                print(f"{y.numpy():.3f}")
            return len(xs)

        return log_each, lambda: None

    janus.config.segment_cost_check = False
    try:
        calls = [([tf.constant([1.0, float(n)])] * (1 + n % 3),) for n in range(9)]
        jitted = run_differential(make, calls, min_graph_calls=0)
    finally:
        janus.config.segment_cost_check = True
    text = janus.explain(jitted)
    assert "a call ran 1-3, mean" in text and "(6 split calls; the last ran 3)" in text, text


def test_the_probe_judges_each_side_by_its_fastest_sample():
    # Seen on a loaded 2-core machine: a conv net's loss segment under a tape, two of its three graph
    # calls delayed by a wait for a CPU. Medians sent it to eager for good; its graph is 3x faster.
    probe = CostProbe()
    probe.graph, probe.eager = [620e-6, 5455e-6, 5500e-6], [1745e-6, 1602e-6, 1800e-6]
    graph, eager = probe.fastest()
    assert graph < eager
    probe.graph, probe.eager = [90e-6, 85e-6, 95e-6], [30e-6, 2400e-6, 2600e-6]  # a one-op segment
    graph, eager = probe.fastest()
    assert graph > eager


def test_no_probe_while_a_tape_records_the_segment_keeps_its_graph():
    def make():
        w = tf.Variable([0.5, -0.5])

        def step(x):
            with tf.GradientTape() as tape:
                y = tf.reduce_sum(w * x)  # tiny, but under the tape: never timed against eager
                print(f"y {y.numpy():.3f}")
                loss = y * y
            return tape.gradient(loss, w)

        return step, lambda: w

    jitted = run_differential(make, [(tf.constant([1.0, float(n)]),) for n in range(20)], min_graph_calls=0)
    first = jitted.split.segments[0].jit
    assert first.imperative_kind == "" and first.cost_probe is not None and first.stats.graph_calls >= 10
