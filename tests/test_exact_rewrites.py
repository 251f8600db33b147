"""[perf] Rewrites of janus's graphs that change no value (``janus/graphgen/exact_rewrites.py``).

A BatchNormalization-shaped step's mean gradients divide a tiled tensor by the count (13.9 M
divisions a step in ResNet50); janus divides before tiling. The results must be eager's bit for
bit, where Grappler's constant folding (a multiplication by ``1 / n``) is not.
"""

import numpy as np
import tensorflow as tf
from differential import run_differential

import janus


def _live_divisions_of_tilings(jitted) -> list[tf.Operation]:
    (runner,) = janus.driver.resolve(jitted).cache.entries
    graph = runner.graph.concrete.graph
    return [
        op
        for op in graph.get_operations()
        if op.type == "RealDiv" and op.inputs[0].op.type in ("Tile", "BroadcastTo") and op.outputs[0].consumers()
    ]


def _normalising_step():
    """Per-channel mean and variance over a batch of images, as ``tf.nn.moments`` does, trained."""
    w = tf.Variable(np.linspace(0.5, 1.5, 64, dtype=np.float32))

    def step(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = x * w
            mean = tf.reduce_mean(y, axis=[0, 1, 2], keepdims=True)
            variance = tf.reduce_mean(tf.square(y - mean), axis=[0, 1, 2], keepdims=True)
            loss = tf.reduce_sum(tf.sin((y - mean) * tf.math.rsqrt(variance + 1e-3)))
        gx, gw = tape.gradient(loss, [x, w])
        w.assign_sub(0.1 * gw)
        return gx

    return step, lambda: w


def test_a_mean_gradient_divides_before_tiling_and_gives_eagers_bits():
    rng = np.random.default_rng(3)
    calls = [(tf.constant(rng.normal(size=(2, 7, 7, 64)).astype(np.float32)),) for _ in range(6)]
    jitted = run_differential(_normalising_step, calls, min_graph_calls=3)
    assert not _live_divisions_of_tilings(jitted), "a tiled tensor is still divided element by element"

    eager_step, eager_w = _normalising_step()
    jit_step, jit_w = _normalising_step()
    jit_step = janus.jit(jit_step)
    for (x,) in calls:
        expected, actual = eager_step(x).numpy(), jit_step(x).numpy()
        assert np.array_equal(expected, actual), np.max(np.abs(expected - actual))
        assert np.array_equal(eager_w().numpy(), jit_w().numpy())
    assert janus.stats(jit_step)["graph_calls"] >= 3


def test_the_count_is_not_a_power_of_two_so_a_reciprocal_would_differ():
    """Guards the test above: dividing by 98 (2 x 7 x 7) and multiplying by 1 / 98 disagree in the
    last bit on some of these values, so a rewrite to a multiplication would fail it."""
    g = np.random.default_rng(3).normal(size=10_000).astype(np.float32)
    n = np.float32(98.0)
    assert np.any(g / n != g * (np.float32(1.0) / n))


def test_a_tiling_returned_as_is_keeps_its_op():
    """The mean's gradient itself is returned: the graph's output still names the tiled division,
    which stays, and the values are eager's."""

    def make():
        def grad(x):
            with tf.GradientTape() as tape:
                tape.watch(x)
                y = tf.reduce_mean(x * 3.0)
            return tape.gradient(y, x)

        return grad, lambda: None

    calls = [(tf.fill([3, 5], float(n)),) for n in range(5)]
    run_differential(make, calls, min_graph_calls=2)
