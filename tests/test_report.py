"""``janus.report()``: functions, graph-served share, build and saved seconds, why calls ran eagerly by
kind; plain text, or a rich table where rich is installed; printed by the examples at exit."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import tensorflow as tf

import janus
from janus.diagnostics import report as report_module

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def served(x):
    return tf.reduce_sum(x * x)


def refused(x):
    return x * time.time()  # a library call janus refuses: imperative [library call]


def keyed(x, n):
    return x * n


@pytest.fixture
def three_functions():
    fns = janus.jit(served), janus.jit(refused), janus.jit(keyed)
    for _ in range(8):
        fns[0](tf.ones([3]))
        fns[1](tf.ones([3]))
    for _ in range(6):
        fns[2](tf.ones([2]), 2)
    fns[2](tf.ones([2]), 3)  # a guard miss: eager under the profiler, then a graph for n == 3
    fns[2](tf.ones([2]), 3)
    return fns


def test_plain_report(three_functions):
    text = janus.report(*three_functions, use_rich=False)
    lines = text.splitlines()
    assert lines[0] == "janus: 3 functions (2 served by graphs, 1 imperative), 24 calls, 9 served by graphs (37.5%)"
    assert lines[1].startswith("  graph builds ") and "saved by graphs" in lines[1]
    assert lines[2] == "  eager calls by kind (profiling aside): imperative [library call] 5, guard 1"
    row = {line.split()[0]: line.split() for line in lines if line.startswith("  ") and "(test_report.py:" in line}
    assert row["served"][2:5] == ["8", "62.5", "1"] and row["served"][-1] == "graphs"
    assert row["refused"][2:5] == ["8", "0.0", "0"] and row["refused"][-3:] == ["imperative", "[library", "call]"]
    assert row["keyed"][2:5] == ["8", "50.0", "2"]
    why = text[text.index("why calls ran eagerly") :]
    assert "imperative [library call]      5  refused   time.time()" in why
    assert "guard                          1  keyed     argument n == 2 (" in why


def test_rich_report_keeps_the_brackets(three_functions):
    pytest.importorskip("rich")
    text = janus.report(*three_functions, use_rich=True)
    assert text.splitlines()[0].startswith("janus: 3 functions (2 served by graphs, 1 imperative), 24 calls")
    assert "imperative [library call]" in text  # a Text cell, not rich markup
    assert "keyed (test_report.py:" in text and "argument n == 2" in text
    assert not any(line != line.rstrip() for line in text.splitlines())


def test_report_over_every_function_and_when_there_is_none(three_functions, monkeypatch):
    assert "served (test_report.py:" in janus.report(use_rich=False)
    monkeypatch.setattr(report_module, "all_functions", list)
    assert janus.report() == "janus: no function has been jitted yet."


def test_fallback_kinds_are_counted_per_call(three_functions):
    keyed_fn = janus.driver.resolve(three_functions[2])
    assert sum(keyed_fn.fallback_reasons.values()) == keyed_fn.stats.guard_misses == 1


@pytest.mark.keras
def test_examples_print_the_report_at_exit():
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / "subclassed_model.py"), "--janus", "--steps", "12"],
        env=env, cwd=EXAMPLES, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "subclassed_model [janus]:" in out
    report = out[out.index("\njanus: ") :]
    assert "served by graphs" in report and "janus.enable() routed" in report
    assert "Trainer.step (subclassed_model.py:" in report
