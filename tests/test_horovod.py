"""[horovod]: janus-converted plain-tape training on 2 Horovod processes (gloo, one machine)."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

horovod = pytest.importorskip("horovod.tensorflow", reason="Horovod is not installed: run `make horovod`")
WORKER = Path(__file__).resolve().parent / "horovod_worker.py"


def horovodrun() -> str:
    path = shutil.which("horovodrun", path=os.path.dirname(sys.executable))
    if path is None:
        pytest.skip("horovodrun not found next to the Python interpreter")
    return path


def run_workers(scenario: str, tmp_path: Path) -> list[dict]:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=str(WORKER.parent.parent))
    cmd = [
        horovodrun(),
        "--gloo",
        "-np",
        "2",
        "-H",
        "localhost:2",
        sys.executable,
        str(WORKER),
        scenario,
        str(tmp_path),
    ]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]


def single_process_reference(scenario: str) -> list[np.ndarray]:
    """The same training on the full batch of 8 in one process, eagerly, from rank 0's weights."""
    keras = tf.keras
    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [keras.layers.Input((4,)), keras.layers.Dense(8, activation="tanh"), keras.layers.Dense(1)]
    )
    opt = keras.optimizers.SGD(0.1)
    rng = np.random.default_rng(1)
    for i in range(10):
        X = rng.normal(size=(8, 4)).astype(np.float32)
        Y = rng.normal(size=(8, 1)).astype(np.float32)
        if scenario == "diverge" and i == 6:
            X[0, 0] = 100.0
        with tf.GradientTape() as tape:
            # the mean of the two halves' mean losses, as the averaged gradients compute
            pred = model(tf.constant(X))
            loss = 0.5 * (tf.reduce_mean((pred[:4] - Y[:4]) ** 2) + tf.reduce_mean((pred[4:] - Y[4:]) ** 2))
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
    return [v.numpy() for v in model.trainable_variables]


def test_distributed_gradient_tape_is_not_reduced_twice(tmp_path):
    ranks = run_workers("dtape", tmp_path)
    tf.random.set_seed(0)
    w = tf.Variable(tf.random.normal([4, 1], seed=0))
    b = tf.Variable(tf.zeros([1]))
    rng = np.random.default_rng(1)
    for _ in range(10):
        X = rng.normal(size=(8, 4)).astype(np.float32)
        Y = rng.normal(size=(8, 1)).astype(np.float32)
        with tf.GradientTape() as tape:
            pred = tf.matmul(X, w) + b
            loss = 0.5 * (tf.reduce_mean((pred[:4] - Y[:4]) ** 2) + tf.reduce_mean((pred[4:] - Y[4:]) ** 2))
        gw, gb = tape.gradient(loss, [w, b])
        w.assign_sub(0.1 * gw)
        b.assign_sub(0.1 * gb)
    for got, ref in zip(ranks[0]["weights"], [w.numpy(), b.numpy()]):
        np.testing.assert_allclose(np.asarray(got), ref, rtol=1e-5, atol=1e-6)
    assert ranks[0]["stats"]["graph_calls"] >= 4
    assert ranks[0]["collectives"], "the tape's own allreduce should be in the graph"
    assert not any(name.startswith("janus_grad") for name in ranks[0]["collectives"])  # janus added none


@pytest.mark.parametrize("scenario", ["plain", "diverge"])
def test_two_ranks_stay_identical_and_match_one_process(scenario, tmp_path):
    ranks = run_workers(scenario, tmp_path)
    reference = single_process_reference(scenario)
    for w0, w1, ref in zip(ranks[0]["weights"], ranks[1]["weights"], reference):
        np.testing.assert_array_equal(np.asarray(w0), np.asarray(w1))
        np.testing.assert_allclose(np.asarray(w0), ref, rtol=1e-5, atol=1e-6)
    for r in ranks:
        assert r["stats"]["graph_calls"] >= 4, r["stats"]
        assert sum(name.startswith("janus_grad") for name in r["collectives"]) == 4  # one per gradient
    if scenario == "diverge":
        assert ranks[0]["stats"]["assumption_failures"] == 1
        assert ranks[1]["stats"]["assumption_failures"] == 0
