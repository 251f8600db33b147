"""[generalize] Loud fallbacks: a function that becomes imperative says so once, at the default log
level, with the reason; ``strict`` raises instead; ``tf.config.run_functions_eagerly`` is honoured."""

import linecache
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


def _scaled_by_exec(filename: str = "<string>"):
    """``scaled(x) = x * 2.0``, compiled by exec under ``filename``, jitted."""
    namespace: dict = {}
    exec(compile("def scaled(x):\n    return x * 2.0\n", filename, "exec"), {}, namespace)  # noqa: S102
    return janus.jit(namespace["scaled"])


def _doubled_six_times(jitted) -> None:
    """Six calls: eager's answers whether or not a graph served them."""
    assert [float(jitted(tf.constant(float(i)))) for i in range(6)] == [2.0 * i for i in range(6)]


def test_a_function_without_source_says_so_once_with_the_fix(caplog):
    """Defined through exec (as in `python -c` or the REPL): eager's answers, one warning saying why."""
    jitted = _scaled_by_exec()
    with caplog.at_level(logging.WARNING, logger="janus"):
        _doubled_six_times(jitted)
    warnings = [r.getMessage() for r in caplog.records if "runs imperatively" in r.getMessage()]
    assert len(warnings) == 1 and "source unavailable" in warnings[0] and ".py file" in warnings[0], warnings


def _keyed_step(x, metrics):
    total = tf.reduce_sum(x)
    for value in metrics.values():
        total += value
    return total


def test_the_build_budget_stops_building_and_says_so_once(caplog):
    """A dict with a new key at every call: every graph misses. Past ``free_builds`` graphs, a build
    must pay back within ``build_budget`` (zero here): calls run eagerly, with one warning."""
    janus.config.free_builds, janus.config.build_budget = 2, 0.0
    jitted = janus.jit(_keyed_step)
    x = tf.constant([1.0, 2.0])
    with caplog.at_level(logging.WARNING, logger="janus"):
        results = [float(jitted(x, {f"m{i}": float(i)})) for i in range(12)]
    assert results == [3.0 + i for i in range(12)]
    stats = janus.stats(jitted)
    assert stats["graphs_built"] == 2 and stats["eager_seconds"] > 0 and stats["build_seconds"] > 0, stats
    warnings = [r.getMessage() for r in caplog.records if "pay back" in r.getMessage()]
    assert len(warnings) == 1 and "_keyed_step" in warnings[0], warnings


def test_graphs_that_serve_report_the_time_they_saved():
    jitted = janus.jit(_keyed_step)
    x, metrics = tf.constant([1.0, 2.0]), {"loss": 1.0}
    for _ in range(30):
        jitted(x, metrics)
    stats = janus.stats(jitted)
    assert stats["graph_calls"] >= 26 and stats["graph_seconds"] > 0 and "saved_seconds" in stats, stats


def _generator_user(x):
    return sum(v for v in (yield_values(x)))


def yield_values(x):
    yield x


def _numpy_of(x):
    return x * float(x.numpy()[0])


@pytest.mark.parametrize(
    ("fn", "kind"),
    [(stamped, "library call"), (_numpy_of, "tensor value"), (_generator_user, "construct")],
)
def test_refusals_carry_a_stable_kind(fn, kind):
    """Tests and explain() group refusals by kind, not by their prose."""
    jitted = janus.jit(fn)
    for _ in range(5):
        jitted(tf.constant([1.0]))
    resolved = janus.driver.resolve(jitted)
    assert resolved.imperative_kind == kind, (resolved.imperative_kind, resolved.imperative_reason)
    assert f"runs imperatively [{kind}]" in janus.explain(jitted)


def test_an_internal_error_is_its_own_kind(monkeypatch):
    import janus.driver

    def broken(*_args, **_kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr(janus.driver, "generate", broken)
    jitted = janus.jit(lambda x: x + 1.0)
    for _ in range(5):
        jitted(tf.constant(1.0))
    assert janus.driver.resolve(jitted).imperative_kind == "internal error"


def test_lines_of_another_program_under_the_same_file_name_are_not_read(caplog, monkeypatch):
    """Python 3.13 keeps `python -c`'s program in linecache as ``<string>`` (pytest-xdist's workers are
    such programs), the name exec gives code too: janus must not build from those lines."""
    monkeypatch.setitem(
        linecache.cache, "<string>", (40, None, ["def scaled(x):\n", "    return x * 3.0\n"], "<string>")
    )
    jitted = _scaled_by_exec()
    with caplog.at_level(logging.WARNING, logger="janus"):
        _doubled_six_times(jitted)
    assert "source unavailable" in janus.explain(jitted)


@pytest.mark.parametrize(
    "found",
    [
        "def other(x):\n    return x * 3.0\n",  # another function's name
        "def scaled(x, y=1.0):\n    return x * 3.0\n",  # another signature
        "import sys\n",  # not a definition at all
    ],
)
def test_a_file_whose_lines_are_not_the_functions_gives_eagers_answers(found, monkeypatch, tmp_path):
    """The lines linecache holds for a file name are not the function's (a file rewritten since, or
    another program under its name): janus reads them as unavailable, never builds from them."""
    filename = str(tmp_path / "edited.py")
    monkeypatch.setitem(linecache.cache, filename, (len(found), None, found.splitlines(True), filename))
    jitted = _scaled_by_exec(filename)
    _doubled_six_times(jitted)
    assert janus.stats(jitted)["graph_calls"] == 0


def test_an_async_def_runs_eagerly_without_raising():
    """janus.jit on a coroutine function: eager's coroutines, every call (an earlier version raised
    NotConvertible from the third call on, while looking for a statement to run after the graph)."""
    import asyncio

    async def doubled(t):
        return t * 2.0

    jitted = janus.jit(doubled)
    results = [float(asyncio.run(jitted(tf.constant(float(i))))) for i in range(6)]
    assert results == [2.0 * i for i in range(6)]
    assert "generators and coroutines run imperatively" in janus.explain(jitted)


@pytest.mark.xfail(
    strict=True,
    reason="known: a file rewritten after its function was compiled, keeping the function's name and "
    "parameters (an edit while training runs; a traceback's linecache.checkcache() re-reads it): janus "
    "builds from the new lines, as tf.function's AutoGraph does (both read source through inspect)",
)
def test_a_file_rewritten_with_the_same_signature_gives_eagers_answers(monkeypatch, tmp_path):
    filename = str(tmp_path / "edited.py")
    rewritten = "def scaled(x):\n    return x * 3.0\n"
    monkeypatch.setitem(linecache.cache, filename, (len(rewritten), None, rewritten.splitlines(True), filename))
    jitted = _scaled_by_exec(filename)
    _doubled_six_times(jitted)
