"""[enable] How transparent mode watches calls (``janus.watchers``): a function first called late
(after discovery went quiet) is still routed and listed; on Python 3.12+ it watches through
``sys.monitoring`` beside a debugger's ``sys.settrace`` function and another monitoring tool; on 3.11
it warns when it replaces a trace function and puts it back."""

import contextlib
import gc
import logging
import sys
import time
import warnings

import pytest
import tensorflow as tf
from differential import assert_same

import janus
from janus import transparent, watchers
from janus.transparent import routed_functions

MONITORING = sys.version_info >= (3, 12)


@pytest.fixture(autouse=True)
def transparent_mode_off():
    yield
    janus.disable()


def train_step(w, x):
    with tf.GradientTape() as tape:
        tape.watch(w)
        loss = tf.reduce_sum(tf.tanh(x * w))
    return loss, tape.gradient(loss, w)


def eval_step(w, x):
    return tf.reduce_sum(tf.nn.relu(x * w - 1.0))


def probe(x):
    return x + 1


W, X = tf.constant([0.5, -0.5, 2.0]), tf.constant([1.0, 2.0, 3.0])


@contextlib.contextmanager
def frequent_collections():
    """A gen-0 collection every 10 allocations, and no older ones (they walk TF's whole heap): the
    3.11 watcher looks at the stack when the garbage collector runs, a few times a second in eager
    TF code; this makes it happen within each call of a short test."""
    saved = gc.get_threshold()
    gc.set_threshold(10, 10**6, 10**6)
    try:
        yield
    finally:
        gc.set_threshold(*saved)


def quiet_discovery():
    """Trains until the 3.11 watcher paused (3.12+: it never pauses); returns the jitted step."""
    for _ in range(8):
        train_step(W, X)
    time.sleep(2 * janus.config.discovery_quiet_seconds)
    train_step(W, X)  # a known function after a quiet window: the 3.11 watcher pauses here
    watcher = transparent._mode.watcher
    if isinstance(watcher, watchers.TraceWatcher):
        assert not watcher.watching and sys.gettrace() != watcher._trace
    assert not transparent.is_watching()  # benchmarks/recurrent_cell.py times from here
    return next(r.jitted for r in routed_functions() if r.function is train_step)


def served_lines(text: str) -> list[str]:
    """The lines of ``explain()``'s "routed and served by graphs" group."""
    lines, group = [], None
    for line in text.split("\n\n", 1)[0].splitlines()[1:]:
        if not line.startswith("    "):
            group = line.strip()
        elif group.startswith("routed and served by graphs"):
            lines.append(line.strip())
    return lines


@pytest.mark.skipif(MONITORING, reason="Python 3.11's watcher: 3.12+ never slows calls once they are decided")
def test_is_watching_while_discovery_runs_and_not_after_it_went_quiet():
    janus.config.discovery_quiet_seconds = 0.05
    janus.config.rediscovery_seconds = 60.0
    assert not transparent.is_watching()
    janus.enable()
    assert transparent.is_watching()
    quiet_discovery()
    janus.disable()
    assert not transparent.is_watching()


def test_an_eval_step_first_called_after_discovery_went_quiet_is_routed_and_listed(caplog):
    janus.config.discovery_quiet_seconds = 0.05
    janus.config.rediscovery_seconds = 0.0
    janus.config.hot_calls = 3
    expected = eval_step(W, X)
    janus.enable()
    assert isinstance(transparent._mode.watcher, watchers.MonitoringWatcher if MONITORING else watchers.TraceWatcher)
    train_jit = quiet_discovery()
    with frequent_collections(), caplog.at_level(logging.INFO, logger="janus.transparent"):
        results = [eval_step(W, X) for _ in range(12)]
    text = janus.explain()
    eval_jit = next((r.jitted for r in routed_functions() if r.function is eval_step), None)
    assert eval_jit is not None, text
    assert janus.stats(eval_jit)["graph_calls"] > 0 and janus.stats(train_jit)["graph_calls"] > 0
    for got in results:
        assert_same(expected, got)
    served = served_lines(text)
    assert [line.split(" (", 1)[0] for line in served] == ["train_step", "eval_step"], served
    assert "routed through janus: hot function running TensorFlow" in served[1]
    if not MONITORING:
        assert "watches calls again (a function it has not seen is running)" in caplog.text


@pytest.mark.skipif(MONITORING, reason="Python 3.11's watcher: 3.12+ never pauses")
def test_a_loop_that_calls_only_known_functions_does_not_wake_the_paused_watcher(caplog):
    """The stack samples find only decided functions and frames that were running all along (this
    test's own): discovery stays paused, at no cost."""
    janus.config.discovery_quiet_seconds = 0.05
    janus.config.rediscovery_seconds = 0.0
    janus.enable()
    probe(1)  # decided while watching: it does not use TensorFlow
    quiet_discovery()
    watcher = transparent._mode.watcher
    with frequent_collections(), caplog.at_level(logging.INFO, logger="janus.transparent"):
        for _ in range(20):
            train_step(W, X)
            probe(1)
    assert not watcher.watching and sys.gettrace() is None
    assert "watches calls again" not in caplog.text


@pytest.mark.skipif(MONITORING, reason="Python 3.12+ watches through sys.monitoring and replaces nothing")
def test_enable_warns_when_it_replaces_a_trace_function_and_puts_it_back():
    seen = []

    def debugger(frame, event, arg):
        seen.append(frame.f_code.co_name)

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        janus.enable()  # no trace function set: no warning
    janus.disable()
    janus.config.discovery_quiet_seconds = 0.05
    sys.settrace(debugger)
    try:
        with pytest.warns(RuntimeWarning, match=r"replaces the trace function already set \(<function"):
            janus.enable()
        assert sys.gettrace() is not debugger
        quiet_discovery()  # pausing puts the debugger back
        assert sys.gettrace() is debugger
        probe(1)
        assert "probe" in seen
    finally:
        sys.settrace(None)


def served_train_step() -> None:
    expected = train_step(W, X)
    for _ in range(8):
        assert_same(expected, train_step(W, X))
    (jitted,) = [r.jitted for r in routed_functions() if r.function is train_step]
    assert janus.stats(jitted)["graph_calls"] > 0


@pytest.mark.skipif(not MONITORING, reason="sys.monitoring is Python 3.12+")
def test_a_debuggers_trace_function_keeps_working_beside_enable():
    seen = []

    def debugger(frame, event, arg):
        if frame.f_code is probe.__code__:
            seen.append(event)

    sys.settrace(debugger)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # nothing replaced: no warning
            janus.enable()
        tool = transparent._mode.watcher.tool
        assert sys.monitoring.get_tool(tool) == "janus"
        served_train_step()
        probe(1)
        assert sys.gettrace() is debugger and seen == ["call"]
        janus.disable()
        assert sys.monitoring.get_tool(tool) is None
        probe(1)
        assert seen == ["call", "call"]
    finally:
        sys.settrace(None)


@pytest.mark.skipif(not MONITORING, reason="sys.monitoring is Python 3.12+")
def test_another_monitoring_tool_keeps_working_beside_enable():
    monitoring = sys.monitoring
    other = monitoring.DEBUGGER_ID
    seen = []

    def on_start(code, offset):
        if code is probe.__code__:
            seen.append(code.co_name)
        # never DISABLE: janus's restart_events() must not be needed for this tool to see calls

    monitoring.use_tool_id(other, "a debugger")
    try:
        monitoring.register_callback(other, monitoring.events.PY_START, on_start)
        monitoring.set_events(other, monitoring.events.PY_START)
        janus.enable()
        assert transparent._mode.watcher.tool not in (None, other)
        served_train_step()
        probe(1)
        janus.disable()
        probe(1)
        assert seen == ["probe", "probe"]
        assert monitoring.get_tool(other) == "a debugger"
    finally:
        monitoring.set_events(other, 0)
        monitoring.register_callback(other, monitoring.events.PY_START, None)
        monitoring.free_tool_id(other)


@pytest.mark.skipif(not MONITORING, reason="sys.monitoring is Python 3.12+")
def test_a_function_left_alone_before_disable_is_seen_again_after_enable():
    """Transparent mode disables PY_START for code it decided about; that outlives its tool id, so a
    new enable() must restart the events or it would never see that code again."""
    janus.config.hot_calls = 2
    expected = eval_step(W, X)
    for _ in range(2):
        janus.enable()
        for _ in range(8):
            assert_same(expected, eval_step(W, X))
        (jitted,) = [r.jitted for r in routed_functions() if r.function is eval_step]
        assert janus.stats(jitted)["graph_calls"] > 0
        janus.disable()


@pytest.mark.skipif(not MONITORING, reason="sys.monitoring is Python 3.12+")
def test_a_decided_function_costs_nothing_its_events_are_disabled(monkeypatch):
    asked = []
    decided = transparent._mode.decided

    def counting(code):
        asked.append(code is probe.__code__)
        return decided(code)

    monkeypatch.setattr(transparent._mode, "decided", counting)
    janus.enable()
    for i in range(20):
        assert probe(i) == i + 1
    janus.disable()
    assert 1 <= sum(asked) <= 3, sum(asked)  # at the first call only (see() asks again)
    assert "does not use TensorFlow" not in janus.explain()  # disable() forgot it


@pytest.mark.skipif(not MONITORING, reason="sys.monitoring is Python 3.12+")
def test_with_every_tool_id_it_may_use_taken_enable_warns_and_watches_with_settrace():
    taken = [tool for tool in (5, 4, 3) if sys.monitoring.get_tool(tool) is None]
    for tool in taken:
        sys.monitoring.use_tool_id(tool, "another tool")
    try:
        with pytest.warns(RuntimeWarning, match="every sys.monitoring tool id it may use"):
            janus.enable()
        assert isinstance(transparent._mode.watcher, watchers.TraceWatcher)
        served_train_step()
        assert [sys.monitoring.get_tool(tool) for tool in taken] == ["another tool"] * len(taken)
    finally:
        janus.disable()
        for tool in taken:
            sys.monitoring.free_tool_id(tool)
