"""Differential tests: Python values and effects that a graph must not fold or bake in.

Each program is run plainly in eager and under janus, call by call, and everything is
compared after every call: results, Python/TF state, and what the call printed, warned
and logged. The shapes come from ordinary TF2 user code: a loader that refills one
preallocated NumPy buffer, an epsilon schedule tested with a chained comparison, a
tensor cached on ``self`` and tested with ``is``, ``tf.executing_eagerly()`` in helper
code, validators run through ``any(...)``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np
import pytest
import tensorflow as tf
from differential import assert_same, outcome, run_differential

import janus


def vec(*values):
    return tf.constant(values, tf.float32)


# ---------------------------------------------------------------- a harness for live state
@dataclasses.dataclass
class Program:
    """One mode's copy of a program whose arguments are made (or whose state is changed) per call.

    ``args(n)`` runs right before call ``n`` in this mode and returns its arguments: it may
    refill a buffer in place or replace an attribute, as the user's driver loop would.
    ``check(n, result)`` runs right after the call in this mode (identity checks, or the
    caller mutating what it got back).
    """

    fn: Callable
    state: Callable[[], object]
    args: Callable[[int], tuple]
    check: Callable[[int, object], None] = lambda n, result: None


def run_live(make: Callable[[], Program], n_calls: int, *, min_graph_calls: int) -> janus.JitFunction:
    """``run_differential`` for programs whose driver touches their state between calls."""
    eager, janus_side = make(), make()
    jitted = janus.jit(janus_side.fn)
    for n in range(n_calls):
        expected = outcome(eager.fn, eager.args(n))
        actual = outcome(jitted, janus_side.args(n))
        assert actual[0] == expected[0], f"call {n}: eager {expected}, janus {actual}\n{janus.explain(jitted)}"
        try:
            assert_same(expected[1], actual[1], f"call {n} result")
            assert actual[2] == expected[2], f"call {n}: effects differ: eager {expected[2]}, janus {actual[2]}"
            assert_same(eager.state(), janus_side.state(), f"call {n} state")
        except AssertionError as err:
            raise AssertionError(f"{err}\n{janus.explain(jitted)}") from None
        if expected[0] == "ok":
            eager.check(n, expected[1])
            try:
                janus_side.check(n, actual[1])
            except AssertionError as err:
                raise AssertionError(f"call {n} (janus): {err}\n{janus.explain(jitted)}") from None
    stats = janus.stats(jitted)
    assert stats["graph_calls"] >= min_graph_calls, f"graphs served too few calls: {stats}\n{janus.explain(jitted)}"
    return jitted


# ---------------------------------------------------------------- tf.executing_eagerly()
def checked(t, log):
    """Library-style helper: validates values only where they exist (eager)."""
    if tf.executing_eagerly():
        log.append("eager check")
        return t
    log.append("graph check")
    return tf.debugging.check_numerics(t, "non-finite value")


class ModeRecorder:
    def __init__(self):
        self.mode = []
        self.log = []
        self.w = vec(0.5, -1.0, 2.0)

    def step(self, x):
        if tf.executing_eagerly():
            self.mode.append("eager")
        else:
            self.mode.append("graph")
        y = checked(x * self.w, self.log)
        return tf.reduce_sum(tf.tanh(y)), tf.executing_eagerly()


def test_executing_eagerly_is_true_inside_the_jitted_function():
    def make():
        rec = ModeRecorder()
        return (lambda x: rec.step(x)), (lambda: (list(rec.mode), list(rec.log)))

    calls = [(vec(float(i), 1.0, -0.5 * i),) for i in range(8)]
    run_differential(make, calls, min_graph_calls=0)


# ---------------------------------------------------------------- host copies of a tensor attribute
class HostScale:
    def __init__(self):
        self.t = tf.constant(2.0)
        self.seen = []

    def scale_with_float(self, x):
        s = float(self.t.numpy())
        self.seen.append(s)
        return x * s

    def shift_with_asarray(self, x):
        host = np.asarray(self.t)
        self.seen.append(host)
        return x + host


@pytest.mark.parametrize("method", ["scale_with_float", "shift_with_asarray"])
def test_host_copy_of_a_tensor_attribute_follows_its_replacement(method):
    values = [2.0, 2.0, 2.0, 3.0, 3.0, -1.5, 0.25, 0.25, 7.0, 2.0]

    def make():
        obj = HostScale()

        def args(n):
            obj.t = tf.constant(values[n])  # the driver swaps the tensor between calls
            return obj, vec(1.0, -2.0)

        return Program(getattr(HostScale, method), lambda: list(obj.seen), args)

    jitted = run_live(make, len(values), min_graph_calls=0)
    if janus.stats(jitted)["graph_calls"] == 0:  # imperative is acceptable, but must say why
        report = janus.explain(jitted).lower()
        assert "numpy" in report or "asarray" in report, report


# ---------------------------------------------------------------- NumPy arrays as arguments
class BatchLoader:
    """Refills the same preallocated arrays with every batch (no per-batch allocation)."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.x_buf = np.empty((4, 3), np.float32)
        self.y_buf = np.empty((4,), np.float32)

    def next_batch(self):
        self.x_buf[:] = self.rng.normal(size=(4, 3))
        self.y_buf[:] = self.rng.normal(size=4)
        return self.x_buf, self.y_buf


class LinearModel:
    def __init__(self):
        self.w = tf.Variable([[0.1], [-0.2], [0.3]])
        self.losses = []

    def train_step(self, x, y):
        with tf.GradientTape() as tape:
            pred = tf.squeeze(tf.matmul(x, self.w), 1)
            loss = tf.reduce_mean(tf.square(pred - y))
        grad = tape.gradient(loss, self.w)
        self.w.assign_sub(0.1 * grad)
        self.losses.append(loss)
        return loss


def test_numpy_buffer_refilled_in_place_between_steps():
    def make():
        loader, model = BatchLoader(seed=7), LinearModel()

        def args(n):
            x_buf, y_buf = loader.next_batch()
            assert x_buf is loader.x_buf  # one buffer, refilled
            return model, x_buf, y_buf

        return Program(LinearModel.train_step, lambda: (model.w, list(model.losses)), args)

    run_live(make, 8, min_graph_calls=3)


class Summariser:
    def __init__(self):
        self.buf = np.zeros(3, np.float32)
        self.calls = 0

    def fresh_array(self, x):
        self.calls += 1
        summary = np.zeros(3)
        return tf.reduce_sum(x) * 2.0, summary

    def shared_buffer(self, x):
        self.calls += 1
        return tf.reduce_sum(x) + 1.0, self.buf


def test_returned_numpy_array_is_fresh_every_call():
    def make():
        obj = Summariser()
        previous = []

        def check(n, result):
            loss, summary = result
            assert isinstance(summary, np.ndarray) and summary.dtype == np.float64
            np.testing.assert_array_equal(summary, np.zeros(3))  # untouched by what the caller did before
            assert all(summary is not p for p in previous), "the same array was returned twice"
            previous.append(summary)
            summary[:] = float(loss)  # the caller reuses the array it was given

        return Program(Summariser.fresh_array, lambda: obj.calls, lambda n: (obj, vec(float(n), 1.0)), check)

    run_live(make, 8, min_graph_calls=0)  # a fresh array per call: a graph may or may not serve it


def test_returned_attribute_array_is_the_attribute_itself():
    def make():
        obj = Summariser()

        def check(n, result):
            assert result[1] is obj.buf, "a copy of self.buf was returned"
            np.testing.assert_array_equal(obj.buf, [n, 0.0, 0.0])
            result[1][0] = n + 1  # the caller writes into what it got: that is self.buf

        return Program(
            Summariser.shared_buffer, lambda: (obj.calls, obj.buf.copy()), lambda n: (obj, vec(float(n), 2.0)), check
        )

    run_live(make, 8, min_graph_calls=3)


# ---------------------------------------------------------------- aliasing
class Trainer:
    def __init__(self):
        self.metrics = {"loss": tf.constant(0.0), "scale": 2.0}
        self.w = tf.Variable([1.0, -0.5])
        self.steps = 0
        self.last = None

    def step(self, x, metrics):
        loss = tf.reduce_sum(tf.square(x * self.w))
        metrics["loss"] = loss  # written through the argument ...
        self.steps += 1
        self.w.assign_add(0.01 * x)
        return self.metrics["loss"] * self.metrics["scale"]  # ... read back through self

    def record(self, x):
        out = {"loss": tf.reduce_mean(x * self.w)}
        self.last = out
        return out


def test_dict_argument_aliasing_an_attribute():
    def make():
        tr = Trainer()

        def check(n, result):
            assert tr.steps == n + 1

        return Program(
            Trainer.step,
            lambda: (dict(tr.metrics), tr.w, tr.steps),
            lambda n: (tr, vec(float(n), 1.0), tr.metrics),
            check,
        )

    run_live(make, 8, min_graph_calls=3)


def test_returned_dict_is_the_one_stored_on_self():
    def make():
        tr = Trainer()
        seen = []

        def check(n, result):
            assert result is tr.last, "the returned dict is not the one stored on self"
            assert all(result is not s for s in seen)
            seen.append(result)

        return Program(Trainer.record, lambda: dict(tr.last), lambda n: (tr, vec(float(n), -1.0)), check)

    run_live(make, 8, min_graph_calls=3)


# ---------------------------------------------------------------- chained comparisons
class Explorer:
    def __init__(self):
        self.eps = 2.0
        self.explored = 0

    def act(self, q):
        explore = 0.0 < self.eps <= 1.0
        out = q * self.eps if explore else q - 1.0
        self.eps -= 0.25  # decays past 1.0 (exactly), then 0.0 (exactly), then below
        return tf.reduce_sum(out), explore

    def act_counting(self, q):
        if 0.0 < self.eps <= 1.0:
            self.explored += 1
            out = q * self.eps
        else:
            out = q - 1.0
        self.eps -= 0.25
        return tf.reduce_sum(out)


def test_chained_comparison_on_a_decaying_epsilon():
    def make():
        agent = Explorer()
        return (lambda q: agent.act(q)), (lambda: (agent.eps, agent.explored))

    calls = [(vec(1.0, float(i)),) for i in range(12)]  # eps: 2.0, 1.75, ..., 1.0, ..., 0.0, -0.25, -0.5, -0.75
    run_differential(make, calls, min_graph_calls=2)


def test_chained_comparison_on_a_decaying_epsilon_guarding_a_counter():
    """The counter is written under the comparison: eager's count of explored steps."""

    def make():
        agent = Explorer()
        return (lambda q: agent.act_counting(q)), (lambda: (agent.eps, agent.explored))

    calls = [(vec(1.0, float(i)),) for i in range(12)]
    run_differential(make, calls, min_graph_calls=0)


def test_chained_comparison_with_a_python_float_argument():
    def f(q, eps):
        inside = 0.0 < eps <= 1.0
        if inside:
            return q * eps, inside
        return q, inside

    eps = [0.5, 0.5, 0.5, 1.0, 0.0, 1.5, 0.25, -0.5, 0.75, 1.0, 2.0, 0.1]
    run_differential(lambda: (f, lambda: None), [(vec(1.0, 2.0), e) for e in eps], min_graph_calls=2)


def windowed_sum(x, n):
    total = tf.zeros_like(x)
    picked = tf.TensorArray(tf.float32, size=0, dynamic_size=True)
    j = 0
    for i in tf.range(n):
        if 1 <= i < 3:
            total += x * tf.cast(i, tf.float32)
            picked = picked.write(j, tf.reduce_sum(x) + tf.cast(i, tf.float32))
            j += 1
    return total, picked.stack()


def test_chained_comparison_on_a_loop_index():
    # n = 0, 1 (first link false only), 2, 3 (both links true), 4, 5 (second link false)
    ns = [4, 4, 4, 5, 0, 1, 2, 3, 5, 4, 2]
    calls = [(vec(1.0, -0.5 * k), tf.constant(n)) for k, n in enumerate(ns)]
    run_differential(lambda: (windowed_sum, lambda: None), calls, min_graph_calls=0)


def windowed_total(x, n):
    total = tf.constant(0.0)
    for i in tf.range(n):
        if 1 <= i < 3:
            total += tf.reduce_sum(x) * tf.cast(i, tf.float32)
        else:
            total -= 1.0
    return total


def test_chained_comparison_on_a_loop_index_summing():
    ns = [3, 3, 3, 0, 1, 2, 5, 4, 3, 6]
    calls = [(vec(2.0, float(k)), tf.constant(n)) for k, n in enumerate(ns)]
    run_differential(lambda: (windowed_total, lambda: None), calls, min_graph_calls=0)


# ---------------------------------------------------------------- `is` on tensors
KEY = tf.constant([1.0, 2.0, 3.0])


class Memo:
    def __init__(self):
        self.cached_key = KEY
        self.cached_value = tf.constant(-1.0)
        self.hits = 0
        self.misses = 0

    def lookup(self, x):
        same = x is self.cached_key
        if same:
            self.hits += 1
            return self.cached_value, same
        self.misses += 1
        return tf.reduce_sum(x * 2.0), same


def test_identity_of_a_tensor_against_one_cached_on_self():
    def make():
        memo = Memo()
        return (lambda x: memo.lookup(x)), (lambda: (memo.hits, memo.misses))

    twin = tf.constant([1.0, 2.0, 3.0])  # equal to KEY, but another object
    order = [KEY, KEY, KEY, twin, KEY, twin, twin, KEY, tf.constant([1.0, 2.0, 3.0]), KEY]
    run_differential(make, [(x,) for x in order], min_graph_calls=0)


class LastCallCache:
    """Skips the work when called again with the very tensor it saw last."""

    def __init__(self):
        self._last_in = None
        self._last_out = None
        self.computed = 0

    def __call__(self, x):
        if x is self._last_in:
            return self._last_out
        self.computed += 1
        out = tf.tanh(x) * 3.0
        self._last_in, self._last_out = x, out
        return out


def test_identity_cache_keyed_on_the_last_input():
    def make():
        cache = LastCallCache()
        return (lambda x: cache(x)), (lambda: cache.computed)

    a, b, c = vec(0.5, 1.0), vec(0.5, 1.0), vec(-2.0, 0.0)  # a and b are equal, not identical
    order = [a, a, b, b, a, c, c, c, a, b, b]
    run_differential(make, [(x,) for x in order], min_graph_calls=0)


# ---------------------------------------------------------------- short-circuiting any()/all()
def too_long(owner, x):
    owner.log.append("too_long")
    return x.shape[0] > owner.max_len


def not_vector(owner, x):
    owner.log.append("not_vector")
    return len(x.shape) != 1


def is_empty(owner, x):
    owner.log.append("empty")
    return x.shape[0] == 0


class Validator:
    def __init__(self, max_len=4):
        self.max_len = max_len
        self.log = []
        self.rejected = 0
        self.checks = [too_long, not_vector, is_empty]

    def validate_any(self, x):
        if any(check(self, x) for check in self.checks):
            self.rejected += 1
            return tf.constant(0.0)
        return tf.reduce_sum(x)

    def validate_all(self, x):
        ok = all(not check(self, x) for check in self.checks)
        if not ok:
            self.rejected += 1
        return tf.reduce_mean(x), ok


@pytest.mark.parametrize("method", ["validate_any", "validate_all"])
def test_short_circuiting_generator_of_checks_with_side_effects(method):
    def make():
        v = Validator()

        def run_any(x):
            return v.validate_any(x)

        def run_all(x):
            return v.validate_all(x)

        return (run_any if method == "validate_any" else run_all), (lambda: (list(v.log), v.rejected))

    long_ = tf.ones([6])  # too_long is True: the other checks never run
    matrix = tf.ones([2, 2])  # not_vector is True: `empty` never runs
    empty = tf.zeros([0])
    ok = vec(1.0, 2.0, 3.0)
    order = [ok, ok, ok, long_, long_, long_, ok, matrix, matrix, matrix, empty, long_, ok]
    run_differential(make, [(x,) for x in order], min_graph_calls=3)
