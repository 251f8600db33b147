"""[enable]: janus.enable() on unmodified code, the examples, and restoring everything on disable()."""

import functools
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from differential import assert_same

import janus
from janus.transparent import routed_functions

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


@pytest.fixture(autouse=True)
def transparent_mode_off():
    yield
    janus.disable()


def run_example(name: str, tmp_path: Path, *flags: str) -> dict:
    out = tmp_path / f"{name}{'-'.join(flags)}.json"
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    subprocess.run(
        [sys.executable, str(EXAMPLES / f"{name}.py"), "--steps", "12", "--save", str(out), *flags],
        check=True, env=env, cwd=EXAMPLES, capture_output=True, text=True,
    )  # fmt: skip
    return json.loads(out.read_text())


@pytest.mark.keras
@pytest.mark.parametrize(
    "name",
    [
        *(pytest.param(name, marks=pytest.mark.slow) for name in ("mnist_cnn", "rnn_lm", "gpt_decoder")),
        "subclassed_model",  # one example for every Python in CI (3.12+ watch calls with sys.monitoring)
        pytest.param("recurrent_cell_enable", marks=pytest.mark.slow),
    ],
)
def test_examples_give_the_same_loss_and_weights_with_enable(name, tmp_path):
    plain = run_example(name, tmp_path)
    transparent = run_example(name, tmp_path, "--janus")
    np.testing.assert_allclose(transparent["loss"], plain["loss"], rtol=1e-5)
    for a, b in zip(transparent["weights"], plain["weights"]):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)
    steps = [s for q, s in transparent["stats"].items() if "step" in q.lower()]
    assert steps, transparent["stats"]
    for stats in steps:  # graphs served most training steps
        assert stats["graph_calls"] >= stats["calls"] / 2, transparent["stats"]


@pytest.mark.keras
def test_the_recurrent_cell_example_keeps_its_log_lines_counter_and_history(tmp_path):
    """Its training step prints every 25 steps and counts and records in Python: all kept under enable()."""
    runs = {}
    for flags in ((), ("--janus",)):
        out = tmp_path / f"run{len(flags)}.json"
        done = subprocess.run(
            [sys.executable, "recurrent_cell_enable.py", "--steps", "60", "--save", str(out), *flags],
            check=True, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"), cwd=EXAMPLES, capture_output=True, text=True,
        )  # fmt: skip
        logged = [line for line in done.stderr.splitlines() if line.startswith("step ")]
        counted = [line for line in done.stdout.splitlines() if line.startswith("steps counted")]
        runs[flags] = (logged, counted, json.loads(out.read_text()))
    (plain_log, plain_count, plain), (log, count, transparent) = runs[()], runs[("--janus",)]
    assert (
        [line.split(" loss")[0] for line in log]
        == ["step 25", "step 50"]
        == [line.split(" loss")[0] for line in plain_log]
    )
    assert count == plain_count == ["steps counted on the Python side: 60, mean loss " + plain_count[0].split()[-1]]
    np.testing.assert_allclose(transparent["loss"], plain["loss"], rtol=1e-5)
    stats = transparent["stats"]["Trainer.train_step"]
    assert stats["graph_calls"] >= 50, transparent["stats"]


def train_like(x, w):
    with tf.GradientTape() as tape:
        tape.watch(w)
        loss = tf.reduce_sum(tf.tanh(x * w))
    return loss, tape.gradient(loss, w)


def test_enable_disable_round_trip_restores_code_objects():
    original = train_like.__code__
    x, w = tf.constant([1.0, 2.0]), tf.constant([0.5, -0.5])
    expected = train_like(x, w)
    janus.enable()
    for _ in range(6):
        assert_same(expected, train_like(x, w))
    assert train_like.__code__ is not original
    jitted = next(r.jitted for r in routed_functions() if r.function is train_like)
    assert janus.stats(jitted)["graph_calls"] >= 2
    assert "routed through janus: training step" in janus.explain()
    janus.disable()
    assert train_like.__code__ is original
    assert_same(expected, train_like(x, w))


def hot_helper(x):
    return tf.nn.relu(x) * 2.0


def test_hot_functions_are_routed_after_the_threshold_and_library_is_untouched():
    janus.config.hot_calls = 3
    relu_code = tf.nn.relu.__code__ if hasattr(tf.nn.relu, "__code__") else None
    with janus.enabled():
        for _ in range(8):
            assert_same(tf.nn.relu(tf.constant([-1.0, 2.0])) * 2.0, hot_helper(tf.constant([-1.0, 2.0])))
        routed = routed_functions()
        assert any(r.function is hot_helper for r in routed)
        assert all(not r.function.__module__.startswith(("tensorflow", "keras")) for r in routed)
    if relu_code is not None:
        assert tf.nn.relu.__code__ is relu_code
    assert not routed_functions()  # the context manager disabled transparent mode again


def logged(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs)

    return wrapper


@logged
def decorated_step(x):
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = tf.reduce_sum(x * x)
    return tape.gradient(y, x)


def recursive_sum(x, n):
    if n == 0:
        return x
    return recursive_sum(x + tf.ones_like(x), n - 1)


def counter_gen(x):
    for i in range(3):
        yield x * i


def test_robust_to_decorators_closures_recursion_generators_and_lambdas():
    janus.config.hot_calls = 2
    scale = tf.constant(3.0)

    def closure(x):
        return x * scale

    lam = lambda x: tf.sin(x)  # noqa: E731
    x = tf.constant([1.0, 2.0])
    expected = [decorated_step(x), closure(x), recursive_sum(x, 3), [t.numpy() for t in counter_gen(x)], lam(x)]
    with janus.enabled():
        for _ in range(6):
            got = [decorated_step(x), closure(x), recursive_sum(x, 3), [t.numpy() for t in counter_gen(x)], lam(x)]
            assert_same(expected[:3] + [expected[4]], got[:3] + [got[4]])
            np.testing.assert_allclose(np.array(expected[3]), np.array(got[3]))
        report = janus.explain()
    assert "generator" in report
