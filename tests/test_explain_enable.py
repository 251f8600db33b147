"""``janus.explain()`` under ``janus.enable()``: only the user's functions, grouped: routed and served
by graphs, routed but not served (why), not routed (why). No janus guard modules, no ``exec``-made
dataclass ``__init__``, no comprehensions or class bodies."""

import dataclasses
import time

import pytest
import tensorflow as tf

import janus


@pytest.fixture(autouse=True)
def transparent_mode_off():
    yield
    janus.disable()


@dataclasses.dataclass
class Batch:
    x: tf.Tensor
    scale: float


def served_step(w, batch):
    with tf.GradientTape() as tape:
        tape.watch(w)
        loss = tf.reduce_sum([tf.reduce_sum(v) for v in [batch.x * w, batch.x]])
    return loss, tape.gradient(loss, w)


def clocked_step(w, x):
    with tf.GradientTape() as tape:
        tape.watch(w)
        loss = tf.reduce_sum(x * w) * time.time()  # a library call janus refuses
    return loss, tape.gradient(loss, w)


def python_only(n):
    return [i * 2 for i in range(n)]


def test_explain_groups_user_functions_only():
    w = tf.constant([1.0, 2.0])
    janus.reset()
    with janus.enabled():
        for _ in range(8):
            batch = Batch(tf.constant([3.0, 4.0]), 0.5)  # a dataclass __init__, made by exec
            served_step(w, batch)
            clocked_step(w, batch.x)
            python_only(3)
        text = janus.explain()
    summary = text.split("\n\n", 1)[0]
    lines = summary.splitlines()
    assert lines[0] == "janus.enable(): 3 user functions seen", summary
    groups = {}
    for line in lines[1:]:
        if not line.startswith("    "):
            title = line.strip()
            groups[title] = []
        else:
            groups[title].append(line.strip())
    assert list(groups) == [
        "routed and served by graphs (1):",
        "routed, but not served by graphs (1):",
        "not routed (1):",
    ], summary
    (served,) = groups["routed and served by graphs (1):"]
    assert served.startswith("served_step (") and "routed through janus: training step" in served
    assert "calls served by graphs" in served
    (imperative,) = groups["routed, but not served by graphs (1):"]
    assert imperative.startswith("clocked_step (") and "runs imperatively [library call]: time.time()" in imperative
    (plain,) = groups["not routed (1):"]
    assert plain.startswith("python_only (") and plain.endswith("does not use TensorFlow")
    for noise in ("<string>", "<janus guards>", "<listcomp>", "<module>", "class body", "__init__"):
        assert noise not in summary, (noise, summary)
