"""Recursion depth: a recursive graph gives eager's answer where Python's stack runs out.

Eager raises ``RecursionError`` when a recursion goes deeper than ``sys.getrecursionlimit()``
allows from where the call is made; a graph function has no such limit. Each invocation gets
the invocations left (``janus.graphgen.recursion.recursion_budget``, fed per call): where none are
left the call runs in eager, which raises, or gives the answer when the budget was cautious.
"""

from __future__ import annotations

import contextlib
import sys

import pytest
import tensorflow as tf
from differential import outcome, run_differential

import janus
from janus.graphgen import recursion


class Link:
    def __init__(self, count, rest=None):
        self.count, self.rest = count, rest


def chain(n: int, start: int = 0) -> Link:
    link = None
    for c in reversed(range(start, start + n)):
        link = Link(c, link)
    return link


def total(link):
    if link.rest is None:
        return tf.constant(float(link.count))
    return tf.constant(float(link.count)) + total(link.rest)


def total_child_first(link):
    """The recursive call before any op: eager's RecursionError strikes at a call of it, never inside
    TensorFlow (where ``total``'s ``tf.constant`` at the deepest level can meet it: TensorFlow's
    conversion then crashes the process at some stack depths, in plain eager too)."""
    if link.rest is None:
        return tf.constant(float(link.count))
    rest = total_child_first(link.rest)
    return tf.constant(float(link.count)) + rest


def total_through_generator(link):
    """Two frames a level: the function and its generator expression."""
    if link.rest is None:
        return tf.constant(float(link.count))
    return tf.constant(float(link.count)) + sum(total_through_generator(r) for r in [link.rest])


@contextlib.contextmanager
def recursion_limit(limit: int):
    previous = sys.getrecursionlimit()
    sys.setrecursionlimit(limit)
    try:
        yield
    finally:
        sys.setrecursionlimit(previous)


def at_depth(frames: int, fn, *args):
    """``fn(*args)`` called with ``frames`` more Python frames on the stack."""
    return fn(*args) if frames <= 0 else at_depth(frames - 1, fn, *args)


def stack_depth() -> int:
    frame, depth = sys._getframe(1), 0
    while frame is not None:
        depth += 1
        frame = frame.f_back
    return depth


def test_deeper_than_the_limit_raises_and_the_graph_serves_the_rest():
    def make():
        lists = [chain(5, i) for i in range(6)] + [chain(sys.getrecursionlimit() + 200)]
        return (lambda i: total_child_first(lists[i])), lambda: None

    calls = [(i,) for i in range(6)] + [(6,)] + [(i,) for i in range(6)] + [(6,), (2,)]
    jitted = run_differential(make, calls, min_graph_calls=8)
    assert "recursion stays within Python's recursion limit" in janus.explain(jitted)
    before = janus.stats(jitted)
    assert outcome(jitted, (6,))[:2] == ("raised", RecursionError)
    jitted(0)
    after = janus.stats(jitted)
    assert after["graphs_built"] == before["graphs_built"]  # no rebuild: such calls are eager's alone
    assert after["graph_calls"] == before["graph_calls"] + 1


def test_the_limit_is_read_at_each_call():
    """A raised limit lets the graph serve deeper lists; lowered again, eager's error comes back."""
    lists = [chain(4, i) for i in range(6)] + [chain(1500), chain(3000)]
    jitted = janus.jit(lambda i: total(lists[i]))
    for i in range(6):
        jitted(i)
    with recursion_limit(4000):
        expected = float(sum(range(1500)))
        before = janus.stats(jitted)["graph_calls"]
        assert float(jitted(6)) == expected
        assert janus.stats(jitted)["graph_calls"] == before + 1  # 1500 levels: within 4000's budget
    kind, error, _ = outcome(jitted, (6,))
    assert (kind, error) == ("raised", RecursionError)
    with recursion_limit(2000):
        assert outcome(jitted, (7,))[:2] == ("raised", RecursionError)


def test_called_from_deep_in_the_stack():
    """The caller's own frames count: 60 levels left of the stack, a 200-long list raises as eager."""
    lists = [chain(4, i) for i in range(6)] + [chain(200), chain(30)]
    jitted = janus.jit(lambda i: total(lists[i]))
    for i in range(6):
        jitted(i)
    frames = sys.getrecursionlimit() - stack_depth() - 60
    assert outcome(at_depth, (frames, total, lists[6]))[:2] == ("raised", RecursionError)
    assert outcome(at_depth, (frames, jitted, 6))[:2] == ("raised", RecursionError)
    before = janus.stats(jitted)["graph_calls"]
    assert float(at_depth(20, jitted, 7)) == float(sum(range(30)))
    assert janus.stats(jitted)["graph_calls"] == before + 1


def test_two_frames_a_level_halve_the_budget():
    def make():
        limit = sys.getrecursionlimit()
        # 0.55 of the limit: too deep for eager at two frames a level, not for a budget of one frame
        lists = [chain(5, i) for i in range(6)] + [chain(limit * 11 // 20), chain(limit // 4)]
        return (lambda i: total_through_generator(lists[i])), lambda: None

    jitted = run_differential(make, [(i,) for i in range(8)] + [(6,), (7,)], min_graph_calls=3)
    assert "2 frame(s) a level" in janus.explain(jitted)


@pytest.mark.parametrize("limit", [1000, 3000])
def test_budget_is_below_what_eager_reaches(limit):
    """The budget fed from a frame is fewer levels than eager recurses from the same frame."""
    with recursion_limit(limit):
        budget = int(recursion.recursion_budget(1))
        assert budget > 0
        deepest = 0

        def down(n):
            nonlocal deepest
            deepest = n
            down(n + 1)

        with pytest.raises(RecursionError):
            down(1)
        assert budget + recursion.SPARE_FRAMES // 2 < deepest


def test_state_after_a_call_that_runs_out_is_eagers():
    """A training-loop shape: a Python log, a counter attribute and a variable updated around the
    recursion. The call that runs out of depth re-runs eagerly: nothing of the graph's attempt may be
    left behind (no log line, update or count twice), and the calls after it are served again."""

    def make():
        lists = [chain(5, i) for i in range(6)] + [chain(sys.getrecursionlimit() + 50)]
        seen = tf.Variable(0.0)
        log: list = []

        class Meter:
            def __init__(self):
                self.calls = 0

        meter = Meter()

        def step(i):
            seen.assign_add(1.0)
            value = total_child_first(lists[i])
            meter.calls += 1
            log.append(i)
            return value * 2.0

        return step, lambda: (float(seen.numpy()), list(log), meter.calls)

    calls = [(i,) for i in range(6)] + [(6,), (3,), (6,), (1,), (4,)]
    run_differential(make, calls, min_graph_calls=3)
