"""[generalize] Loud fallbacks: a function that becomes imperative says so once, at the default log
level, with the reason; ``strict`` raises instead; ``tf.config.run_functions_eagerly`` is honoured."""

import logging
import time

import pytest
import tensorflow as tf

import janus


def stamped(x):
    return x * time.time()  # refused: a clock read while generating would be baked in


def test_going_imperative_is_one_warning_with_the_reason(caplog):
    jitted = janus.jit(stamped)
    with caplog.at_level(logging.WARNING, logger="janus"):
        for _ in range(8):
            jitted(tf.constant(1.0))
    warnings = [r.getMessage() for r in caplog.records if "runs imperatively" in r.getMessage()]
    assert len(warnings) == 1, warnings
    assert "stamped" in warnings[0] and "time.time() is not known to be free of Python effects" in warnings[0]


def test_strict_raises_instead_of_falling_back():
    jitted = janus.jit(stamped, strict=True)
    for _ in range(2):
        jitted(tf.constant(1.0))
    with pytest.raises(janus.StrictModeError, match=r"time\.time\(\)"):
        jitted(tf.constant(1.0))
    with pytest.raises(janus.StrictModeError):
        jitted(tf.constant(1.0))


def test_config_strict_applies_to_every_function():
    janus.config.strict = True
    jitted = janus.jit(stamped)
    with pytest.raises(janus.StrictModeError):
        for _ in range(4):
            jitted(tf.constant(1.0))


def test_a_convertible_function_is_unaffected_by_strict():
    jitted = janus.jit(lambda x: tf.reduce_sum(x * 2.0), strict=True)
    for _ in range(6):
        assert float(jitted(tf.constant([1.0, 2.0]))) == 6.0
    assert janus.stats(jitted)["graph_calls"] == 3


def test_run_functions_eagerly_is_honoured():
    calls = []

    def f(x):
        calls.append(1)
        return x + 1.0

    jitted = janus.jit(f)
    tf.config.run_functions_eagerly(True)
    try:
        for _ in range(6):
            jitted(tf.constant(1.0))
    finally:
        tf.config.run_functions_eagerly(False)
    assert len(calls) == 6 and janus.stats(jitted)["calls"] == 0
