"""[semantics] The allow-list of what may run while a graph is generated (janus.source.purity).

Anything not listed is refused: these tests pin the verdict of callables real training steps
reach, and that explain() names deferred and refused calls.
"""

import json
import logging
import math
import os
import random
import time
import warnings

import numpy as np
import pytest
import tensorflow as tf

import janus
from janus.source.purity import Effect, classify

_T = tf.constant([1.0, 2.0])
_V = tf.Variable(1.0)


@pytest.mark.parametrize(
    "callee, effect",
    [
        (tf.reduce_sum, Effect.GRAPH),
        (tf.nn.relu, Effect.GRAPH),
        (tf.GradientTape, Effect.GRAPH),
        (_V.assign_add, Effect.GRAPH),
        (tf.print, Effect.GRAPH),
        (math.sqrt, Effect.PURE),
        (np.sqrt, Effect.PURE),
        (np.float32, Effect.PURE),
        ("abc".upper, Effect.PURE),
        (print, Effect.DEFERRED),
        (logging.info, Effect.DEFERRED),
        (logging.getLogger("user.train").warning, Effect.DEFERRED),
        (warnings.warn, Effect.DEFERRED),
        (tf.summary.scalar, Effect.DEFERRED),
        (tf.summary.experimental.set_step, Effect.DEFERRED),
        (tf.executing_eagerly, Effect.CONVERTED),
        (random.random, Effect.REFUSED),
        (random.Random(0).uniform, Effect.REFUSED),
        (np.random.rand, Effect.REFUSED),
        (np.random.default_rng(0).normal, Effect.REFUSED),
        (time.time, Effect.REFUSED),
        (time.perf_counter, Effect.REFUSED),
        (os.getenv, Effect.REFUSED),
        (json.dumps, Effect.REFUSED),
        (open, Effect.REFUSED),
        (np.save, Effect.REFUSED),
        (tf.random.set_seed, Effect.REFUSED),
        (tf.config.list_physical_devices, Effect.REFUSED),
        (tf.summary.experimental.get_step, Effect.REFUSED),
        (tf.init_scope, Effect.REFUSED),
        (tf.Variable, Effect.REFUSED),
        (tf.keras.layers.Dense, Effect.REFUSED),
        (_T.numpy, Effect.REFUSED),
        (_V.numpy, Effect.REFUSED),
    ],
    ids=lambda v: getattr(v, "__qualname__", None) or str(v),
)
def test_verdicts(callee, effect):
    assert classify(callee).effect is effect, classify(callee)


def test_a_refused_call_is_named_in_explain_and_the_function_runs_imperatively():
    rng = random.Random(3)

    def step(x):
        return x * rng.random()

    jitted = janus.jit(step)
    for _ in range(5):
        jitted(_T)
    assert janus.stats(jitted)["imperative_calls"] == 2
    assert "random.Random.random() is not known to be free of Python effects" in janus.explain(jitted)


def test_a_deferred_call_is_noted_in_explain_and_graphs_serve():
    log = logging.getLogger("janus.tests.purity")

    def step(x):
        y = tf.reduce_sum(x * 2.0)
        log.debug("loss %s", y)
        return y

    jitted = janus.jit(step)
    for _ in range(5):
        jitted(_T)
    assert janus.stats(jitted)["graph_calls"] == 2
    assert "Logger.debug() at" in janus.explain(jitted) and "is deferred" in janus.explain(jitted)


def test_the_result_of_a_deferred_call_cannot_be_used():
    def step(x):
        handle = logging.info("x")  # eager: None; janus cannot know that while deferring
        return x if handle is None else -x

    jitted = janus.jit(step)
    for _ in range(5):
        np.testing.assert_array_equal(jitted(_T), _T)
    assert "the result of logging.info() is used" in janus.explain(jitted)


def test_pure_math_on_values_known_while_generating_is_folded():
    scales = {"vocab": 10}

    def step(x):
        return x * math.log(scales["vocab"] + 1.0) + np.sqrt(4.0)

    jitted = janus.jit(step)
    for _ in range(5):
        np.testing.assert_allclose(jitted(_T), _T * math.log(11.0) + 2.0, rtol=1e-6)
    assert janus.stats(jitted)["graph_calls"] == 2, janus.explain(jitted)


def test_horovod_collectives_are_graph_ops():
    hvd = pytest.importorskip("horovod.tensorflow")
    assert classify(hvd.allreduce).effect is Effect.GRAPH
    assert classify(hvd.DistributedGradientTape).effect is Effect.GRAPH
    assert classify(hvd.init).effect is Effect.REFUSED
