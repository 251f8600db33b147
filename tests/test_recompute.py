"""A refused statement whose results the rest needs, inside a tape (``janus.partial.recompute``): the
code before it runs as a graph with no effect, the statement in Python, then the whole function as one
graph fed its results. Differential against eager after every call (values, gradients through the
update, Python state, printed text, warnings), with how janus served the calls.

Also NumPy reductions of arrays fed by value (``array.sum()``, ``max(1.0, array.sum())``), which the
whole graph of such a step needs (``janus.graphgen.numpy_values.NumpyScalar``).
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import janus
from janus.partial import recompute
from tests.differential import run_differential

keras = tf.keras


def _recomputed(jitted, min_whole: int = 1) -> None:
    text = janus.explain(jitted)
    version = jitted.split
    assert version is not None and hasattr(version, "prefix"), text
    assert version.prefix.stats.graph_calls > 0, text
    whole = version.segments[0].jit
    assert whole.stats.graph_calls >= min_whole and whole.split is None, text


def _not_recomputed(jitted) -> None:
    assert "recomputed prefix" not in janus.explain(jitted), janus.explain(jitted)


def _soft_targets(probabilities: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Targets that depend on the predictions (a prediction-aware assignment): the label, smoothed
    towards the predicted class where the prediction is confident."""
    targets = np.zeros_like(probabilities)
    targets[np.arange(len(labels)), labels] = 1.0
    confident = (probabilities.max(1) > 0.4).astype(np.float32)
    targets = 0.9 * targets + 0.1 * probabilities * confident[:, None]
    return targets, confident


def _data(n: int, seed: int = 0, batch: int = 12) -> list[tuple]:
    rng = np.random.default_rng(seed)
    return [(tf.constant(rng.normal(size=(batch, 5)).astype(np.float32)), rng.integers(0, 3, batch)) for _ in range(n)]


@pytest.mark.keras
def test_targets_from_predictions_inside_the_tape_one_whole_graph():
    def make():
        keras.utils.set_random_seed(0)
        model = keras.Sequential([keras.layers.Input((5,)), keras.layers.Dense(8, activation="tanh"),
                                  keras.layers.Dense(3)])  # fmt: skip
        opt = keras.optimizers.Adam(0.01)

        def step(x, labels):
            with tf.GradientTape() as tape:
                logits = model(x, training=True)
                targets, confident = _soft_targets(tf.nn.softmax(logits).numpy(), labels)
                loss = tf.reduce_mean(tf.reduce_sum(tf.square(tf.nn.softmax(logits) - targets), axis=1))
                loss = loss + 0.01 * tf.reduce_sum(confident * tf.reduce_max(logits, axis=1)) / max(
                    1.0, confident.sum()
                )
            opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
            return loss

        return step, lambda: [v.numpy() for v in [*model.trainable_variables, *opt.variables]]

    jitted = run_differential(make, _data(14), min_graph_calls=0)
    _recomputed(jitted, 5)


@pytest.mark.parametrize("linked_calls", [2, 100])
def test_a_statement_returning_a_tensor_gets_eagers_gradients_then_splits(monkeypatch, linked_calls):
    monkeypatch.setattr(recompute, "MAX_LINKED_CALLS", linked_calls)

    def make():
        w = tf.Variable([[0.5, -0.2], [0.3, 0.8]])

        def step(x):
            with tf.GradientTape() as tape:
                h = tf.tanh(x @ w)
                scaled = h * float(np.abs(h.numpy()).max())  # a tensor the loss needs, through h
                loss = tf.reduce_sum(scaled * scaled)
            w.assign_sub(0.1 * tape.gradient(loss, w))
            return loss

        return step, lambda: w.numpy()

    calls = [(tf.constant(np.random.default_rng(i).normal(size=(3, 2)).astype(np.float32)),) for i in range(10)]
    jitted = run_differential(make, calls, min_graph_calls=0)
    if linked_calls == 2:  # linked twice (eager, the custom gradient), then split
        assert jitted.split is not None and not hasattr(jitted.split, "prefix"), janus.explain(jitted)
        assert janus.stats(jitted)["segment_calls"] > 0
    else:  # every call after the profile linked: eager's gradients through the statement's tensor
        assert jitted.split.prefix.stats.imperative_calls == len(calls) - 3, janus.explain(jitted)


def test_a_statement_that_raises_leaves_no_update():
    def make():
        w = tf.Variable([1.0, 2.0])
        seen: list = []

        def check(values: np.ndarray) -> np.ndarray:
            if values.sum() > 4.0:
                raise ValueError(f"too large: {values.sum():.2f}")
            return values * 0.5

        def step(x):
            with tf.GradientTape() as tape:
                y = w * x
                half = check(y.numpy())
                loss = tf.reduce_sum(y * half)
            w.assign_sub(0.05 * tape.gradient(loss, w))
            seen.append(1)
            return loss

        return step, lambda: (w.numpy(), len(seen))

    calls = [(tf.constant([1.0, 1.0]),)] * 6 + [(tf.constant([2.0, 2.0]),)] + [(tf.constant([0.5, 1.0]),)] * 4
    jitted = run_differential(make, calls, min_graph_calls=0)
    _recomputed(jitted)


def _weigh(values: np.ndarray) -> np.ndarray:
    weights = np.exp(-np.abs(values))
    print(f"weights {weights.sum():.4f}")
    return weights


def test_printing_and_a_shape_change_and_a_prefix_assumption():
    def make():
        w = tf.Variable([[1.0], [0.5]])
        log: list = []

        def step(x, flag):
            with tf.GradientTape() as tape:
                y = x @ w
                if flag:
                    y = y * 2.0
                weights = _weigh(y.numpy())
                loss = tf.reduce_mean(weights * y)
            w.assign_sub(0.1 * tape.gradient(loss, w))
            log.append(len(weights))
            return loss

        return step, lambda: (w.numpy(), list(log))

    rng = np.random.default_rng(3)
    calls = [(tf.constant(rng.normal(size=(4, 2)).astype(np.float32)), False) for _ in range(6)]
    calls += [(tf.constant(rng.normal(size=(5, 2)).astype(np.float32)), False)]  # another batch size
    calls += [(tf.constant(rng.normal(size=(4, 2)).astype(np.float32)), True)]  # another flag
    calls += [(tf.constant(rng.normal(size=(4, 2)).astype(np.float32)), False) for _ in range(3)]
    jitted = run_differential(make, calls, min_graph_calls=0)
    _recomputed(jitted)


def test_a_prefix_with_state_updates_is_not_recomputed():
    def make():
        keras.utils.set_random_seed(2)
        model = keras.Sequential([keras.layers.Input((5,)), keras.layers.Dense(4), keras.layers.BatchNormalization(),
                                  keras.layers.Dense(3)])  # fmt: skip
        opt = keras.optimizers.SGD(0.05)

        def step(x, labels):
            with tf.GradientTape() as tape:
                logits = model(x, training=True)  # moving statistics: updated twice if computed twice
                targets, _ = _soft_targets(tf.nn.softmax(logits).numpy(), labels)
                loss = tf.reduce_mean(tf.square(tf.nn.softmax(logits) - targets))
            opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
            return loss

        return step, lambda: [v.numpy() for v in model.variables]

    jitted = run_differential(make, _data(10, seed=5), min_graph_calls=0)
    _not_recomputed(jitted)


def test_a_statement_changing_what_the_prefix_read_is_not_recomputed():
    scales = [1.0]

    def make():
        w = tf.Variable([0.5, 0.25])
        scales[:] = [1.0]

        def step(x):
            with tf.GradientTape() as tape:
                y = w * x * scales[-1]
                scales.append(float(y.numpy().sum()) * 0.0 + 1.0)
                target = y.numpy() * 0.5
                loss = tf.reduce_sum((y - target) ** 2)
            w.assign_sub(0.1 * tape.gradient(loss, w))
            return loss

        return step, lambda: (w.numpy(), len(scales))

    eager, eager_state = make()
    expected = [eager(tf.constant([1.0, 2.0])).numpy() for _ in range(8)]
    raw, jit_state = make()
    jitted = janus.jit(raw)
    actual = [jitted(tf.constant([1.0, 2.0])).numpy() for _ in range(8)]
    np.testing.assert_allclose(actual, expected, rtol=1e-5)
    assert "recomputed prefix" not in janus.explain(jitted) or jitted.split.prefix.stats.graph_calls == 0


def test_off_by_config():
    def make():
        w = tf.Variable([0.5, 0.25])

        def step(x):
            with tf.GradientTape() as tape:
                y = w * x
                target = y.numpy() * 0.5
                loss = tf.reduce_sum((y - target) ** 2)
            w.assign_sub(0.1 * tape.gradient(loss, w))
            return loss

        return step, lambda: w.numpy()

    janus.config.recompute_prefix = False
    jitted = run_differential(make, [(tf.constant([1.0, 2.0]),)] * 10, min_graph_calls=0)
    _not_recomputed(jitted)
    assert janus.stats(jitted)["segment_calls"] > 0


# ------------------------------------------------------------------ NumPy reductions of fed arrays
def test_sum_and_mean_of_a_fed_array_in_a_graph():
    def make():
        def loss(pred, mask, weights):
            denominator = max(1.0, mask.sum())
            scale = weights.mean() * 2.0 + 1.0
            return tf.reduce_sum(pred * mask) / denominator * scale

        return loss, lambda: None

    rng = np.random.default_rng(0)
    calls = [
        (
            tf.constant(rng.normal(size=6).astype(np.float32)),
            (rng.random(6) > 0.5).astype(np.float32),
            rng.random(6).astype(np.float32),
        )
        for _ in range(8)
    ]
    calls.append((calls[0][0], np.zeros(6, np.float32), calls[0][2]))  # max() keeps 1.0
    calls.append((calls[0][0], calls[0][1], np.array([np.inf, 1, 1, 1, 1, 1], np.float32)))  # not finite
    jitted = run_differential(make, calls, min_graph_calls=4)
    assert "JanusAssert" in janus.explain(jitted)


def test_a_division_by_a_zero_sum_warns_as_numpy_does():
    def make():
        def ratio(x, mask):
            inverse = 1.0 / mask.sum()
            return x * inverse

        return ratio, lambda: None

    calls = [(tf.constant([1.0, 2.0]), np.array([1.0, 0.0], np.float32))] * 5
    calls += [(tf.constant([1.0, 2.0]), np.array([0.0, 0.0], np.float32))]  # RuntimeWarning: divide by zero
    calls += [(tf.constant([1.0, 2.0]), np.array([1.0, 1.0], np.float32))] * 2
    run_differential(make, calls, min_graph_calls=2)


def test_a_numpy_scalar_is_not_printed_or_returned_from_a_graph():
    def make():
        def f(x, mask):
            total = mask.sum()
            print(total)
            return x * total

        return f, lambda: None

    calls = [(tf.constant([1.0]), np.array([1.0, 2.0], np.float32))] * 6
    jitted = run_differential(make, calls, min_graph_calls=0)
    assert janus.stats(jitted)["graph_calls"] == 0 or "print" in janus.explain(jitted)


def test_a_statement_returning_a_tensor_of_watched_arguments_keeps_their_gradients(monkeypatch):
    monkeypatch.setattr(recompute, "MAX_LINKED_CALLS", 100)

    def scaled(x: tf.Tensor, n: int) -> tf.Tensor:
        peak = float(np.abs(x.numpy()).max())  # refused inside the helper: the call's statement breaks
        return x * (peak + n)

    def make():
        def step(x, y, n):
            with tf.GradientTape() as tape:
                tape.watch([x, y])
                out = scaled(x, n)
                total = tf.reduce_sum(out * y)
            return total, tape.gradient(total, [x, y])

        return step, lambda: None

    rng = np.random.default_rng(7)
    calls = [
        (tf.constant(rng.normal(size=3).astype(np.float32)), tf.constant(rng.normal(size=3).astype(np.float32)), 2)
        for _ in range(8)
    ]
    jitted = run_differential(make, calls, min_graph_calls=0)
    assert jitted.split.prefix.stats.imperative_calls == len(calls) - 3, janus.explain(jitted)


def _rescale(scales: list, values: np.ndarray) -> None:
    scales[0] = float(values.sum())


def test_a_statement_changing_an_argument_the_prefix_read_runs_eagerly():
    def make():
        w = tf.Variable([0.5, 0.25])

        def step(x, scales):
            with tf.GradientTape() as tape:
                y = w * x * scales[0]  # the prefix reads the list passed in
                _rescale(scales, y.numpy())  # which the statement changes
                loss = tf.reduce_sum(y * y) * scales[0]
            w.assign_sub(0.01 * tape.gradient(loss, w))
            return loss

        return step, lambda: w.numpy()

    eager, eager_state = make()
    raw, jit_state = make()
    jitted = janus.jit(raw)
    for n in range(8):
        expected_scales, actual_scales = [1.0], [1.0]
        expected = eager(tf.constant([1.0, 2.0]), expected_scales)
        actual = jitted(tf.constant([1.0, 2.0]), actual_scales)
        np.testing.assert_allclose(actual.numpy(), expected.numpy(), rtol=1e-5, err_msg=f"call {n}")
        np.testing.assert_allclose(jit_state(), eager_state(), rtol=1e-5, err_msg=f"call {n}")
        assert actual_scales == pytest.approx(expected_scales, rel=1e-5)
    assert "recomputed prefix" not in janus.explain(jitted), janus.explain(jitted)  # the prefix reads the list
