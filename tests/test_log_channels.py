"""Named log channels: ``JANUS_LOG=fallbacks,guards,builds,breaks`` (and ``transparent``, ``profile``,
``all``, or a level): each a ``logging`` logger ``janus.<channel>`` that janus's messages go to."""

import logging
import os
import subprocess
import sys
import time

import pytest
import tensorflow as tf

import janus
from janus.diagnostics import logs


@pytest.mark.parametrize(
    "spec, level, channels",
    [
        ("", logging.WARNING, set()),
        ("warning", logging.WARNING, set()),
        ("info", logging.INFO, set()),
        ("debug", logging.DEBUG, set()),
        ("fallbacks,guards,builds,breaks", logging.WARNING, {"fallbacks", "guards", "builds", "breaks"}),
        (" Guards ; info ", logging.INFO, {"guards"}),
        ("all", logging.WARNING, set(logs.CHANNELS)),
    ],
)
def test_parse(spec, level, channels):
    assert logs.parse(spec) == (level, channels, [])


def test_unknown_words_are_named_with_the_channels(caplog):
    assert logs.parse("guards,bogus")[2] == ["bogus"]
    with caplog.at_level(logging.WARNING, logger="janus"):
        janus.config.log_level = "guards,bogus"
    assert "JANUS_LOG: unknown word bogus; channels are fallbacks, guards, builds, breaks" in caplog.text


def test_levels_of_the_loggers():
    janus.config.log_level = "guards,builds"
    assert logging.getLogger("janus").level == logging.WARNING
    assert logging.getLogger("janus.guards").getEffectiveLevel() == logging.DEBUG
    assert logging.getLogger("janus.builds").getEffectiveLevel() == logging.DEBUG
    assert logging.getLogger("janus.fallbacks").getEffectiveLevel() == logging.WARNING
    janus.config.log_level = "warning"
    assert logging.getLogger("janus.guards").getEffectiveLevel() == logging.WARNING
    with pytest.raises(ValueError, match="no log channel 'nope'"):
        logs.logger("nope")


def scaled(x, n):
    return x * n


def clocked(x):
    return x * time.time()  # refused: the function runs imperatively


def _records(caplog, channel):
    return [r for r in caplog.records if r.name == f"janus.{channel}"]


def _run_guard_miss_and_refusal():
    f, g = janus.jit(scaled), janus.jit(clocked)
    for _ in range(4):
        f(tf.ones([2]), 2)
        g(tf.ones([2]))
    f(tf.ones([2]), 3)  # a guard fails: eager, then a second graph


def test_channels_route_janus_messages(caplog):
    caplog.set_level(logging.DEBUG)  # the capturing handler; janus's own levels decide
    janus.config.log_level = "fallbacks,guards,builds,breaks"
    _run_guard_miss_and_refusal()
    guards = [r.getMessage() for r in _records(caplog, "guards")]
    assert any(m.startswith("scaled: guard failed: argument n == 2 (") for m in guards), guards
    fallbacks = [r.getMessage() for r in _records(caplog, "fallbacks")]
    assert any(m.startswith("scaled: a call runs eagerly [guard]: argument n == 2") for m in fallbacks), fallbacks
    builds = [r.getMessage() for r in _records(caplog, "builds")]
    assert any(m.startswith("built graph 2 for scaled in") for m in builds), builds
    assert any("guards" in m and "JanusAsserts" in m for m in builds), builds
    breaks = [r for r in _records(caplog, "breaks") if "clocked" in r.getMessage()]
    assert [r.levelno for r in breaks] == [logging.WARNING] and "[library call]" in breaks[0].getMessage()
    assert not _records(caplog, "profile")  # not chosen: DEBUG records of other channels stay off


def test_only_the_chosen_channel_speaks_below_warning(caplog):
    caplog.set_level(logging.DEBUG)
    janus.config.log_level = "guards"
    _run_guard_miss_and_refusal()
    below_warning = {r.name for r in caplog.records if r.name.startswith("janus") and r.levelno < logging.WARNING}
    assert below_warning == {"janus.guards"}
    assert _records(caplog, "breaks")  # warnings show whatever is chosen


def test_transparent_channel(caplog):
    caplog.set_level(logging.DEBUG)
    janus.config.log_level = "transparent"

    def plain_python(n):
        return n + 1

    with janus.enabled():
        plain_python(1)
    messages = [r.getMessage() for r in _records(caplog, "transparent")]
    assert any("plain_python" in m and "does not use TensorFlow" in m for m in messages), messages


def test_janus_log_environment_variable(tmp_path):
    script = tmp_path / "logged.py"
    script.write_text(
        "import tensorflow as tf\nimport janus\n\n\n@janus.jit\ndef f(x, n):\n    return x * n\n\n\n"
        "for n in (2, 2, 2, 2, 3):\n    f(tf.ones([2]), n)\n"
    )
    env = dict(os.environ, JANUS_LOG="guards,builds", TF_CPP_MIN_LOG_LEVEL="2")
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "DEBUG janus.guards: f: guard failed: argument n == 2" in proc.stderr
    assert "INFO janus.builds: built graph 1 for f" in proc.stderr
    assert "janus.fallbacks" not in proc.stderr and "janus.profile" not in proc.stderr
