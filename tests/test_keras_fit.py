"""Keras ``model.fit`` with graphs from janus: ``compile(run_eagerly=True)`` and ``@janus.jit`` on the
model's ``train_step`` (README "Keras model.fit"). Without ``run_eagerly`` Keras traces ``train_step``
with ``tf.function``, and janus is a pass-through inside that trace."""

import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from differential import assert_same

import janus
from janus import transparent

pytestmark = pytest.mark.keras
keras = tf.keras


class Regressor(keras.Model):
    def __init__(self):
        super().__init__()
        self.hidden = keras.layers.Dense(8, activation="relu")
        self.out = keras.layers.Dense(1)
        self.mse = keras.losses.MeanSquaredError()
        self.loss_tracker = keras.metrics.Mean(name="loss")

    def call(self, x, training=False):
        return self.out(self.hidden(x))

    def train_step(self, data):
        x, y = data
        with tf.GradientTape() as tape:
            loss = self.mse(y, self(x, training=True))
        grads = tape.gradient(loss, self.trainable_variables)
        self.optimizer.apply_gradients(zip(grads, self.trainable_variables))
        self.loss_tracker.update_state(loss)
        return {"loss": self.loss_tracker.result()}

    @property
    def metrics(self):
        return [self.loss_tracker]


class JanusRegressor(Regressor):
    train_step = janus.jit(Regressor.train_step)


def _fit(model_class, run_eagerly=True, samples=72):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(samples, 4)).astype("float32")
    y = rng.normal(size=(samples, 1)).astype("float32")
    keras.utils.set_random_seed(0)
    model = model_class()
    model.compile(optimizer=keras.optimizers.SGD(0.05), run_eagerly=run_eagerly)
    history = model.fit(x, y, batch_size=16, epochs=4, verbose=0, shuffle=False)
    return history.history["loss"], [v.numpy() for v in model.weights]


def test_fit_run_eagerly_with_jitted_train_step_uses_graphs_and_matches_eager():
    janus.reset()
    eager_losses, eager_weights = _fit(Regressor)
    losses, weights = _fit(JanusRegressor)  # 4 full batches and a ragged one of 8, per epoch
    stats = janus.stats(JanusRegressor.train_step)
    assert stats["calls"] == 20
    assert stats["graph_calls"] >= 12, stats
    assert_same(eager_losses, losses, "loss history")
    assert_same(eager_weights, weights, "weights")


def test_fit_without_run_eagerly_gets_no_janus_graph():
    """Keras wraps train_step in tf.function: janus's function runs as plain Python in that trace."""
    janus.reset()
    eager_losses, _ = _fit(Regressor)
    losses, _ = _fit(JanusRegressor, run_eagerly=False)
    assert janus.stats(JanusRegressor.train_step)["calls"] == 0
    np.testing.assert_allclose(losses, eager_losses, rtol=1e-5)


def test_enable_routes_the_train_step_of_fit_run_eagerly():
    """Keras runs a run_eagerly step under autograph's ``do_not_convert`` wrapper: still eager, so
    transparent mode routes it (it once mistook that wrapper for a tf.function trace)."""
    janus.reset()
    eager_losses, eager_weights = _fit(Regressor)
    with janus.enabled():
        losses, weights = _fit(Regressor)
        routed = {r.function.__qualname__: r.jitted for r in transparent.routed_functions()}
        report = "\n".join(transparent.report())
    assert "Regressor.train_step" in routed, report
    assert routed["Regressor.train_step"].stats.graph_calls >= 12, report
    assert_same(eager_losses, losses, "loss history")
    assert_same(eager_weights, weights, "weights")


def test_enable_leaves_a_tf_function_alone():
    janus.reset()
    v = tf.Variable(1.0)

    @tf.function
    def traced_step(x):
        v.assign_add(tf.reduce_sum(x))
        return v * 2.0

    with janus.enabled():
        for _ in range(8):
            traced_step(tf.ones([2]))
        report = "\n".join(transparent.report())
        assert not [r for r in transparent.routed_functions() if "traced_step" in r.function.__qualname__]
    assert "traced_step" in report and "called while TensorFlow traces a graph" in report, report
    assert float(v.numpy()) == 17.0


_EXIT_SCRIPT = """
import numpy as np
import tensorflow as tf
import janus
from janus import transparent  # a module global at teardown: the order that once reached the hook
janus.enable()

class Regressor(tf.keras.Model):
    def __init__(self):
        super().__init__()
        self.dense1 = tf.keras.layers.Dense(8, activation="relu")
        self.dense2 = tf.keras.layers.Dense(1)
    def call(self, x, training=False):
        return self.dense2(self.dense1(x))

rng = np.random.default_rng(0)
x, y = rng.normal(size=(64, 4)).astype("float32"), rng.normal(size=(64, 1)).astype("float32")
m = Regressor()
m.compile(optimizer="sgd", loss="mse", run_eagerly=True)
m.fit(x, y, batch_size=16, epochs=3, verbose=0)
"""


def test_enable_with_fit_exits_cleanly(tmp_path):
    """Transparent mode stops watching at exit: calls during interpreter teardown never reach its hook."""
    script = tmp_path / "fit_enable.py"
    script.write_text(_EXIT_SCRIPT)
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr and "Exception ignored" not in proc.stderr, proc.stderr
