"""[partial] A second breaker's reproducers for split functions (janus/partial, issue #17): programs in
the shapes TF2 users write, each of which gave a different answer than eager (or raised where eager
did not) before its fix, and programs around today's additions (generators run split, the cost
check that sends a segment back to Python, explain's segment counts) that are compared with eager
after every call and every generator step."""

import contextlib
import functools
import gc
import hashlib
import io
import linecache
import logging
import os
import textwrap
import threading
import warnings

import numpy as np
import pytest
import tensorflow as tf
from differential import assert_same, assert_same_call, captured_effects, outcome, run_differential
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_partial_generators import lockstep

import janus
from janus.executor import cost

pytestmark = pytest.mark.usefixtures("split_only")  # tests the split itself (conftest.py)


CALLS = 12


@pytest.fixture(autouse=True)
def segments_keep_their_graphs(monkeypatch):
    """Small segments, which the cost check could run eagerly: tests of the cost check turn it on."""
    monkeypatch.setattr(janus.config, "segment_cost_check", False)


def vec(i: int) -> tf.Tensor:
    return tf.constant([float(i), 2.0])


def segments_served(jitted, at_least: int = 1) -> dict:
    stats = janus.stats(jitted)
    assert stats["segment_calls"] >= at_least, f"segments served too few calls: {stats}\n{janus.explain(jitted)}"
    assert stats["split_calls"] > 0, stats
    return stats


# ------------------------------------------------------- a name a segment binds, then deleted
# `del name` reads nothing, so the segment that bound the name did not hand it out: Python's `del`
# then raised UnboundLocalError where eager deletes the name.


def test_a_persistent_tape_deleted_after_its_gradients():
    def make():
        w = tf.Variable(2.0)

        def step(x):
            with tf.GradientTape(persistent=True) as tape:
                y = tf.reduce_sum(x) * w
                z = tf.square(y)
            g1 = tape.gradient(y, w)
            g2 = tape.gradient(z, w)
            del tape  # the TF guide's advice for a persistent tape
            print(f"g1 {float(g1):.3f}")
            w.assign_sub(0.001 * g2)
            return g1, g2

        return step, lambda: w

    jitted = run_differential(make, [(vec(i),) for i in range(CALLS)], min_graph_calls=0)
    segments_served(jitted)


def test_a_temporary_deleted_after_a_break():
    def make():
        def f(x):
            y = tf.reduce_sum(x) * 2.0
            print(y.numpy())
            big = tf.square(y) + 1.0
            out = big * 2.0
            del big
            return out

        return f, lambda: None

    jitted = run_differential(make, [(vec(i),) for i in range(CALLS)], min_graph_calls=0)
    segments_served(jitted)


# ------------------------------------------------------- a name rebound on one path only
# A run of statements that rebinds a local on one path only (an `if` branch, an `except` handler)
# returns it, but did not take it in: on the other path the segment returned a name it never bound
# (UnboundLocalError) instead of the value it had before.


def test_a_loss_computed_only_when_training_is_printed_after_a_break():
    def make():
        w = tf.Variable([0.5, -0.5])

        def step(x, training):
            loss = tf.constant(0.0)
            pred = tf.reduce_sum(w * x)
            print(f"pred {pred.numpy():.3f}")
            if training:
                with tf.GradientTape() as tape:
                    loss = tf.square(tf.reduce_sum(w * x) - 1.0)
                w.assign_sub(0.01 * tape.gradient(loss, w))
            print(f"loss {float(loss):.3f}")
            return pred

        return step, lambda: w

    jitted = run_differential(make, [(vec(i), i % 3 != 2) for i in range(CALLS)], min_graph_calls=0)
    segments_served(jitted)


def test_a_value_replaced_in_an_except_handler_only():
    def make():
        seen = []

        def f(x, n):
            mean = tf.reduce_mean(x)
            seen.append(float(mean))
            try:
                y = tf.reduce_sum(x) * (1 / (n - 3))  # ZeroDivisionError when n == 3
            except ZeroDivisionError:
                y = tf.reduce_sum(x)
                mean = tf.constant(0.0)
            seen.append(float(y))
            return mean

        return f, lambda: list(seen)

    jitted = run_differential(make, [(vec(i), i % 4) for i in range(CALLS)], min_graph_calls=0)
    segments_served(jitted)


# ------------------------------------------------------- a def or lambda made in a graph
# A graph returned (or stored on the heap) the interpreter's stand-in for a `lambda` or `def` it
# evaluated: the caller got a janus object that is not callable. With a break between the
# `lambda` and its next use, the segment before the break returns it.


def test_an_activation_lambda_defined_before_a_break_is_called_after_it():
    def make():
        def f(x):
            act = lambda t: tf.nn.relu(t) * 2.0  # noqa: E731
            h = act(x * 3.0 - 1.0)
            print(h.numpy())
            return act(h - 5.0)

        return f, lambda: None

    jitted = run_differential(make, [(vec(i),) for i in range(CALLS)], min_graph_calls=0)
    assert jitted.split is not None, janus.explain(jitted)


def test_a_whole_graph_stores_and_returns_functions_it_defined():
    def make():
        hooks = []

        def f(x):
            def hook(t):
                return t + 1.0

            hooks.append(hook)
            scale = lambda t: t * 2.0  # noqa: E731
            return scale(x), scale

        def state():
            return [h(1.0) for h in hooks]

        return f, state

    def calls_of_the_returned_function(fn):
        def call(x):
            y, scale = fn(x)
            return y, scale(tf.constant(3.0))

        return call

    def make_calling():
        f, state = make()
        return calls_of_the_returned_function(f), state

    eager_fn, eager_state = make_calling()
    raw, jit_state = make()
    jitted = janus.jit(raw)
    calling = calls_of_the_returned_function(jitted)
    for i in range(CALLS):
        expected, actual = eager_fn(vec(i)), calling(vec(i))
        np.testing.assert_allclose(actual[0], expected[0])
        np.testing.assert_allclose(actual[1], expected[1])
        assert jit_state() == eager_state()


# ------------------------------------------------------- explain's segment counts under threads
# A split call counted the segment calls made while it ran, by every thread: with four threads
# calling one function of two segments, explain() said a call ran "0-15" segments.


def test_threads_calling_one_split_function_each_count_their_own_segments():
    def f(x):
        y = tf.reduce_sum(x) * 2.0
        v = float(y)
        return tf.square(y) + v

    jitted = janus.jit(f)
    results: dict[int, list[float]] = {}

    def worker(k: int) -> None:
        results[k] = [float(jitted(vec(k * 100 + i))) for i in range(25)]

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for k in range(4):
        assert results[k] == [float(f(vec(k * 100 + i))) for i in range(25)]
    version = jitted.split
    assert version is not None and len(version.segments) == 2, janus.explain(jitted)
    counted = version.segments_per_call
    assert set(counted) == {2}, f"{dict(counted)}\n{janus.explain(jitted)}"
    assert sum(counted.values()) == janus.stats(jitted)["split_calls"]
    segments_served(jitted)


# ------------------------------------------------------- private names in a method
# Python's compiler writes `self.__w` in class `Trainer` as `self._Trainer__w`. The rewritten
# function was compiled outside any class: its Python statements read `self.__w` as written and
# raised AttributeError.


class PrivateTrainer:
    def __init__(self):
        self.__w = tf.Variable([0.5, -0.5])
        self.__steps = 0
        self.__log = []

    def step(self, x, limit):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum((self.__w * x - 1.0) ** 2)
        self.__w.assign_sub(0.01 * tape.gradient(loss, self.__w))
        self.__steps += 1
        self.__log.append(float(loss))
        __scaled = loss
        try:
            __scaled = loss * 2.0
            tf.debugging.assert_less(__scaled, limit)
        except tf.errors.InvalidArgumentError:
            self.__log.append(("over", float(__scaled)))
        return loss, self.__steps

    def batches(self, xs):
        for x in xs:
            y = tf.reduce_sum(self.__w * x)
            self.__steps += 1
            yield y, self.__steps

    def state(self):
        return self.__w, self.__steps, list(self.__log)


def test_a_method_with_private_attributes_and_locals_runs_split():
    def make():
        trainer = PrivateTrainer()
        return functools.partial(PrivateTrainer.step, trainer), trainer.state

    def jitted_make():
        trainer = PrivateTrainer()
        return functools.partial(janus_step, trainer), trainer.state

    janus_step = janus.jit(PrivateTrainer.step)
    calls = [(vec(i), 50.0 if i % 3 else 1.0) for i in range(CALLS)]
    eager_fn, eager_state = make()
    jit_fn, jit_state = jitted_make()
    for n, args in enumerate(calls):
        assert_same_call(n, outcome(eager_fn, args), outcome(jit_fn, args), eager_state, jit_state)
    segments_served(janus_step)


def test_a_generator_method_with_private_attributes_runs_split():
    eager, split = PrivateTrainer(), PrivateTrainer()
    batches = janus.jit(PrivateTrainer.batches)
    for n in range(6):
        xs = [vec(n), vec(n + 1)]
        for k, (expected, actual) in enumerate(zip(eager.batches(xs), batches(split, xs), strict=True)):
            assert_same(expected, actual, f"{n}.{k}")
            assert_same(eager.state(), split.state(), f"{n}.{k} state")
    assert janus.stats(batches)["segment_calls"] > 0, janus.explain(batches)


# ------------------------------------------------------- generators run split
# These shapes gave eager's answers: each step (next, send, throw, close, garbage collection) is
# compared with eager's, and the segments must have served calls.


def generator_segments_served(jitted) -> None:
    stats = janus.stats(jitted)
    assert stats["segment_calls"] > 0 and stats["split_calls"] > 0, f"{stats}\n{janus.explain(jitted)}"


def test_a_generator_yielding_inside_its_gradient_tape():
    def make():
        w = tf.Variable([1.0, -1.0])

        def train(xs):
            for x in xs:
                with tf.GradientTape() as tape:
                    y = tf.reduce_sum(w * x)
                    scale = yield y  # the caller sees the forward value and may send a loss scale
                    loss = y * y * (1.0 if scale is None else scale)
                g = tape.gradient(loss, w)
                w.assign_sub(0.01 * g)
                yield g

        return train, lambda: w

    def plan(n):
        return [("__next__", ()), ("send", (0.5 + n,)), ("__next__", ()), ("__next__", ()), ("__next__", ())]

    jitted = lockstep(make, [([vec(i), vec(i + 1)],) for i in range(8)], steps=plan)
    generator_segments_served(jitted)


def test_yield_from_a_split_generator_and_its_return_value():
    def make(jit_inner):
        w = tf.Variable([1.0, -1.0])

        def inner(x):
            y = tf.reduce_sum(w * x)
            yield y
            w.assign_add(x * 0.1)
            yield float(y)
            return y * 3.0

        sub = janus.jit(inner) if jit_inner else inner

        def outer(xs):
            total = tf.constant(0.0)
            for x in xs:
                got = yield from sub(x)
                total = total + got
            return total

        return outer, sub, lambda: w

    eager_fn, _, eager_state = make(False)
    raw, jitted_inner, jit_state = make(True)
    jitted = janus.jit(raw)
    for n in range(6):
        xs = [vec(n), vec(n + 1)]
        eager_gen, jit_gen = eager_fn(xs), jitted(xs)
        for k in range(10):
            expected, actual = step_or_return(eager_gen), step_or_return(jit_gen)
            assert_same(expected, actual, f"{n}.{k}")
            assert_same(eager_state(), jit_state(), f"{n}.{k} state")
            if expected[0] == "return":
                break
    generator_segments_served(jitted)
    generator_segments_served(jitted_inner)


def step_or_return(gen) -> tuple:
    """``("yield", value)`` of ``next(gen)``, or ``("return", value)`` where it stops."""
    try:
        return "yield", next(gen)
    except StopIteration as stop:
        return "return", stop.value


def test_a_generator_dropped_mid_way_runs_its_finally_when_collected():
    def make():
        w = tf.Variable(0.0)
        log = []

        def running(xs):
            try:
                for x in xs:
                    w.assign_add(tf.reduce_sum(x))
                    yield w.read_value()
            finally:
                w.assign(w * 0.5 + 1.0)
                log.append(round(float(w), 4))

        return running, lambda: (w, list(log))

    eager_fn, eager_state = make()
    raw, jit_state = make()
    jitted = janus.jit(raw)
    for n in range(8):
        xs = [vec(n), vec(n + 1), vec(n + 2)]
        eager_gen, jit_gen = eager_fn(xs), jitted(xs)
        for k in range(1 + n % 2):
            assert_same_call(f"{n}.{k}", outcome(next, (eager_gen,)), outcome(next, (jit_gen,)), eager_state, jit_state)
        del eager_gen, jit_gen  # collected at once (no cycle): GeneratorExit runs each finally
        gc.collect()
        assert_same(eager_state(), jit_state(), f"{n} after collection")
    generator_segments_served(jitted)


def test_an_exception_thrown_into_a_generator_is_handled_by_segments():
    def make():
        w = tf.Variable([1.0, 2.0])
        log = []

        def steps(xs):
            for x in xs:
                try:
                    y = tf.reduce_sum(w * x)
                    yield y * 2.0
                    w.assign_add(x * 0.1)
                except KeyError:
                    r = tf.reduce_mean(w) + y
                    log.append(float(r))
                    yield r
                finally:
                    w.assign(w * 0.9)

        return steps, lambda: (w, list(log))

    def plan(n):
        steps = [("__next__", ()), ("throw", (KeyError,)), ("__next__", ()), ("send", (3,)), ("close", ())]
        return steps[: 3 + n % 3]

    jitted = lockstep(make, [([vec(i), vec(i + 1), vec(3)],) for i in range(8)], steps=plan)
    generator_segments_served(jitted)


def test_two_instances_of_a_split_generator_interleaved_on_one_variable():
    def make():
        w = tf.Variable(1.0)

        def walk(xs, k):
            for x in xs:
                y = tf.reduce_sum(x) * w + k
                w.assign(w * 0.5 + y * 0.01)
                yield y, w.read_value()

        return walk, lambda: w

    eager_fn, eager_state = make()
    raw, jit_state = make()
    jitted = janus.jit(raw)
    for n in range(6):
        xs = [vec(n), vec(1), vec(2)]
        eager_gens, jit_gens = [eager_fn(xs, 1.0), eager_fn(xs, 2.0)], [jitted(xs, 1.0), jitted(xs, 2.0)]
        for k, which in enumerate([0, 1, 1, 0, 0, 1, 1, 0]):
            expected, actual = outcome(next, (eager_gens[which],)), outcome(next, (jit_gens[which],))
            assert_same_call(f"{n}.{k}", expected, actual, eager_state, jit_state)
    generator_segments_served(jitted)


def test_a_split_generator_feeding_a_dataset_from_generator():
    def make():
        def series(n):
            x = tf.constant([1.0, 2.0])
            for _ in range(n):
                x = tf.linalg.matvec(tf.eye(2) * 0.9, tf.tanh(x * 1.5 + 1.0))
                print(f"{float(x[0]):.5f}")
                yield x

        return series

    eager_fn, jitted = make(), janus.jit(make())
    spec = tf.TensorSpec([2], tf.float32)
    for n in range(4):
        with captured_effects() as eager_effects:
            expected = list(tf.data.Dataset.from_generator(functools.partial(eager_fn, 3 + n), output_signature=spec))
        with captured_effects() as jit_effects:
            actual = list(tf.data.Dataset.from_generator(functools.partial(jitted, 3 + n), output_signature=spec))
        assert_same(expected, actual, f"call {n}")
        assert jit_effects == eager_effects
    generator_segments_served(jitted)


def test_sum_of_a_generator_expression_of_tensors_between_breaks():
    def make():
        def f(xs):
            total = sum(tf.reduce_sum(x * x) for x in xs)
            print(float(total))
            biggest = sum(float(tf.reduce_max(x)) for x in xs)
            return total * 2.0, biggest

        return f, lambda: None

    jitted = run_differential(make, [([vec(i), vec(i + 1)],) for i in range(CALLS)], min_graph_calls=0)
    segments_served(jitted)


# ------------------------------------------------------- the cost check
# The probe runs a segment's first warm calls eagerly, interleaved with graph calls, then keeps
# the faster. Which is faster depends on the machine: `decision` fixes it (the times it reads),
# so both ways are tested, with eager's answers on the probe's calls and on every call after.


@pytest.fixture(params=["python", "graph"])
def decision(request, monkeypatch):
    """The cost check on, its verdict fixed: every segment goes back to Python, or none does."""
    monkeypatch.setattr(janus.config, "segment_cost_check", True)
    medians = (1.0, 0.0) if request.param == "python" else (0.0, 1.0)  # (graph, eager) seconds
    monkeypatch.setattr(cost.CostProbe, "fastest", lambda self: medians)
    # three samples a side and under tapes too: every probe here finishes within the calls made,
    # so both verdicts are exercised wherever a segment could be probed
    monkeypatch.setattr(cost.CostProbe.__init__, "__defaults__", (3,))
    monkeypatch.setattr(cost.CostProbe, "fair_now", staticmethod(lambda: True))
    return request.param


def assert_decided(jitted, decision: str) -> None:
    """Each segment that finished its probe went the way ``decision`` says."""
    kinds = {seg.jit.imperative_kind for seg in jitted.split.segments if seg.jit.cost_probe is None}
    assert kinds, janus.explain(jitted)
    assert kinds <= ({"too small", "construct", "tensor value"} if decision == "python" else {""}), janus.explain(
        jitted
    )
    if decision == "python":
        assert "too small" in kinds, janus.explain(jitted)


def test_cost_check_on_a_segment_whose_assertion_fails_on_some_calls(decision):
    def make():
        seen = []

        def f(x, limit):
            y = tf.reduce_sum(x)
            tf.debugging.assert_less(y, limit)
            z = y * 2.0
            seen.append(float(z))
            return z + 1.0

        return f, lambda: list(seen)

    calls = [(vec(i), 100.0 if i % 3 else 3.0) for i in range(30)]
    jitted = run_differential(make, calls, min_graph_calls=0)
    assert_decided(jitted, decision)


def test_cost_check_on_segments_recorded_by_the_callers_tape(decision):
    def make():
        w = tf.Variable([[0.5], [-0.3]])
        b = tf.Variable([0.1])
        hist = []

        def step(x, y):
            with tf.GradientTape() as tape:
                pred = x @ w + b
                loss = tf.reduce_mean((pred - y) ** 2)
                hist.append(float(loss))
                loss2 = loss + 0.01 * tf.reduce_sum(w * w)
            gw, gb = tape.gradient(loss2, [w, b])
            w.assign_sub(0.1 * gw)
            b.assign_sub(0.1 * gb)
            return gw, gb

        return step, lambda: (w, b, list(hist))

    rng = np.random.default_rng(0)
    calls = [
        (tf.constant(rng.normal(size=(4, 2)), tf.float32), tf.constant(rng.normal(size=(4, 1)), tf.float32))
        for _ in range(16)
    ]
    jitted = run_differential(make, calls, min_graph_calls=0)
    assert_decided(jitted, decision)


def test_cost_check_on_segments_writing_python_state_read_by_a_handler(decision):
    def make():
        log = []
        counts = {"steps": 0}

        def f(x, cap):
            total = tf.constant(0.0)
            try:
                for i in range(4):
                    total = total + tf.reduce_sum(x) * (i + 1)
                    counts["steps"] += 1
                    log.append(i)
                    if float(total) > cap:
                        raise ValueError("over")
            except ValueError:
                log.append(("handled", float(total), counts["steps"]))
            return total

        return f, lambda: (list(log), dict(counts))

    calls = [(vec(i), 1000.0 if i % 3 else 8.0) for i in range(16)]
    jitted = run_differential(make, calls, min_graph_calls=0)
    assert_decided(jitted, decision)


def test_cost_check_on_a_segment_that_raises_after_binding_what_its_handler_reads(decision):
    def make():
        log = []

        def f(x, limit):
            scaled = tf.constant(0.0)
            log.append(float(tf.reduce_max(x)))
            try:
                scaled = tf.reduce_sum(x) * 2.0  # bound before the assertion raises
                tf.debugging.assert_less(scaled, limit)
                scaled = scaled + 1.0
            except tf.errors.InvalidArgumentError:
                log.append(("over", float(scaled)))
            return scaled

        return f, lambda: list(log)

    calls = [(vec(i), 1000.0 if i % 3 else 5.0) for i in range(30)]
    jitted = run_differential(make, calls, min_graph_calls=0)
    assert_decided(jitted, decision)


def test_cost_check_switches_the_segments_of_a_suspended_generator(decision):
    def make():
        w = tf.Variable(1.0)

        def walk(xs):
            acc = tf.constant(0.0)
            for x in xs:
                acc = acc + tf.reduce_sum(x) * w
                w.assign_add(0.01)
                yield acc

        return walk, lambda: w

    def take_three_then_close(n):
        return [("__next__", ())] * 3 + [("close", ())]

    jitted = lockstep(make, [([vec(i)] * 6,) for i in range(8)], steps=take_three_then_close)
    assert_decided(jitted, decision)


def test_cost_check_with_threads_calling_one_split_function(decision):
    w = tf.Variable([1.0, 2.0])

    def f(x):
        y = tf.reduce_sum(x * w) * 2.0
        v = float(y)
        return tf.square(y) + v

    jitted = janus.jit(f)
    results: dict[int, list[float]] = {}

    def worker(k: int) -> None:
        results[k] = [float(jitted(vec(k * 100 + i))) for i in range(20)]

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for k in range(4):
        assert results[k] == [float(f(vec(k * 100 + i))) for i in range(20)]
    assert_decided(jitted, decision)


@pytest.mark.keras
def test_cost_check_on_an_adam_step_between_logging_statements(decision):
    def make():
        tf.keras.utils.set_random_seed(2)
        model = tf.keras.Sequential([tf.keras.layers.Dense(4, activation="tanh"), tf.keras.layers.Dense(1)])
        model.build((None, 3))
        opt = tf.keras.optimizers.Adam(0.01)  # its slots are made by its first apply_gradients
        losses = []

        def step(x, y):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.square(model(x) - y))
            grads = tape.gradient(loss, model.trainable_variables)
            losses.append(float(loss))
            opt.apply_gradients(zip(grads, model.trainable_variables))
            return loss

        return step, lambda: ([v.numpy() for v in model.variables], [v.numpy() for v in opt.variables], losses[:])

    rng = np.random.default_rng(4)
    calls = [
        (tf.constant(rng.normal(size=(5, 3)), tf.float32), tf.constant(rng.normal(size=(5, 1)), tf.float32))
        for _ in range(16)
    ]
    jitted = run_differential(make, calls, min_graph_calls=0)
    assert_decided(jitted, decision)


# ------------------------------------------------------- shapes TF2 users write (passing)
@pytest.mark.keras
def test_a_keras_custom_training_loop_with_metrics_logged_every_few_steps():
    def make():
        tf.keras.utils.set_random_seed(3)
        model = tf.keras.Sequential(
            [
                tf.keras.layers.Dense(8, activation="relu"),
                tf.keras.layers.BatchNormalization(),
                tf.keras.layers.Dense(3),
            ]
        )
        model.build((None, 5))  # Keras 2 draws the initial weights when it builds: here, after the seed
        opt = tf.keras.optimizers.Adam(0.01)
        loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        accuracy = tf.keras.metrics.SparseCategoricalAccuracy()
        mean_loss = tf.keras.metrics.Mean()
        steps = {"n": 0}

        def train_step(x, y):
            with tf.GradientTape() as tape:
                logits = model(x, training=True)
                loss_value = loss_fn(y, logits)
            grads = tape.gradient(loss_value, model.trainable_weights)
            opt.apply_gradients(zip(grads, model.trainable_weights))
            accuracy.update_state(y, logits)
            mean_loss.update_state(loss_value)
            steps["n"] += 1
            if steps["n"] % 3 == 0:
                print(f"step {steps['n']} loss {float(loss_value):.4f} acc {float(accuracy.result()):.4f}")
                accuracy.reset_state()
            return loss_value

        def state():
            return (
                [v.numpy() for v in model.variables],
                [v.numpy() for v in opt.variables],
                float(accuracy.result()),
                float(mean_loss.result()),
                dict(steps),
            )

        return train_step, state

    def batch(n):
        rng = np.random.default_rng(n)
        x = tf.constant(rng.normal(size=(8, 5)), tf.float32)
        return x, tf.constant(rng.integers(0, 3, size=(8,)), tf.int32)

    jitted = run_differential(make, [batch(n) for n in range(14)], min_graph_calls=0)
    segments_served(jitted)


@pytest.mark.keras
def test_keras_fit_run_eagerly_with_a_jitted_train_step_that_logs_the_float_loss():
    def build():
        tf.keras.utils.set_random_seed(1)
        log = []

        class Regressor(tf.keras.Model):
            def __init__(self):
                super().__init__()
                self.dense = tf.keras.layers.Dense(1)
                self.tracker = tf.keras.metrics.Mean(name="loss")

            def call(self, x):
                return self.dense(x)

            def train_step(self, data):
                x, y = data
                with tf.GradientTape() as tape:
                    loss = tf.reduce_mean(tf.square(self(x, training=True) - y))
                grads = tape.gradient(loss, self.trainable_variables)
                self.optimizer.apply_gradients(zip(grads, self.trainable_variables))
                log.append(float(loss))
                self.tracker.update_state(loss)
                return {"loss": self.tracker.result()}

        return Regressor, log

    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 3)).astype("float32")
    y = x @ np.array([[1.0], [-2.0], [0.5]], "float32")
    models, logs = [], []
    for jit in (False, True):
        regressor, log = build()
        if jit:
            regressor.train_step = janus.jit(regressor.train_step)
        model = regressor()
        model.compile(optimizer=tf.keras.optimizers.SGD(0.1), run_eagerly=True)
        model.fit(x, y, batch_size=8, epochs=2, verbose=0, shuffle=False)
        models.append(model)
        logs.append(log)
    np.testing.assert_allclose(logs[1], logs[0], rtol=1e-5)
    for expected, actual in zip(models[0].get_weights(), models[1].get_weights(), strict=True):
        np.testing.assert_allclose(actual, expected, rtol=1e-5)
    segments_served(regressor.train_step)


def test_a_loop_that_breaks_on_a_float_and_returns_from_its_else():
    def make():
        def f(xs, cap):
            total = tf.constant(0.0)
            for x in xs:
                total = total + tf.reduce_sum(x)
                if float(total) > cap:
                    break
                total = total * 0.9
            else:
                return None
            return total * 2.0

        return f, lambda: None

    calls = [([vec(i), vec(i + 1), vec(2)], 5.0 + (i % 4) * 3) for i in range(CALLS)]
    jitted = run_differential(make, calls, min_graph_calls=0)
    segments_served(jitted)


def test_a_layer_that_creates_its_variable_on_the_first_call():
    class Dense:
        def __init__(self):
            self.w = None

        def __call__(self, x):
            if self.w is None:
                self.w = tf.Variable(tf.ones([x.shape[-1], 2]) * 0.1)
            return x @ self.w

    def make():
        layer = Dense()
        hist = []

        def step(x):
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(layer(x) ** 2)
            layer.w.assign_sub(0.01 * tape.gradient(loss, layer.w))
            hist.append(float(loss))
            return loss

        return step, lambda: (layer.w, list(hist))

    rng = np.random.default_rng(1)
    calls = [(tf.constant(rng.normal(size=(3, 4)), tf.float32),) for _ in range(CALLS)]
    jitted = run_differential(make, calls, min_graph_calls=0)
    segments_served(jitted)


def test_numpy_metrics_inside_nested_user_calls():
    def make():
        log = []

        def metric(p, y):
            return float(np.mean(np.abs(p.numpy() - y.numpy())))

        def forward(x, y):
            p = tf.tanh(x)
            log.append(metric(p, y))
            return p * 2.0

        def f(x, y):
            a = tf.reduce_sum(x)
            p = forward(x, y)
            b = tf.reduce_mean(p) + a
            return b, metric(p, y)

        return f, lambda: list(log)

    jitted = run_differential(make, [(vec(i), vec(-i)) for i in range(CALLS)], min_graph_calls=0)
    segments_served(jitted)


# ------------------------------------------------------- a tape the caller made
# A graph called the caller's eager tape's methods while it was built: `tape.watch(x)` watched the
# graph's placeholder, so the caller's tape never watched `x` and its gradient was None, once the
# same tape served a few calls (a persistent tape around a loop over examples). Inside a split
# function the tape of a `with` kept in Python reaches its segments the same way.


def test_a_helper_that_watches_its_input_on_the_callers_persistent_tape():
    w = tf.constant([[1.0, 0.5], [0.2, -1.0]])

    def forward(tape, x, verbose):
        tape.watch(x)
        y = tf.reduce_sum(tf.tanh(tf.linalg.matvec(w, x)))
        if verbose:
            print(f"y {float(y):.4f}")
        return y

    def input_gradients(fn, verbose):
        tape = tf.GradientTape(persistent=True)
        xs = [tf.constant([0.1 * i, 0.2]) for i in range(5)]
        with tape:
            ys = [fn(tape, x, verbose) for x in xs]
        return [tape.gradient(y, x) for x, y in zip(xs, ys, strict=True)]

    jitted = janus.jit(forward)
    for round_ in range(3):
        with captured_effects() as eager_effects:
            expected = input_gradients(forward, round_ == 2)
        with captured_effects() as jit_effects:
            actual = input_gradients(jitted, round_ == 2)
        assert_same(expected, actual, f"round {round_}")
        assert jit_effects == eager_effects


def test_a_watch_inside_a_tape_block_that_holds_a_break():
    def make():
        w = tf.constant([[1.0, 0.5], [0.2, -1.0]])

        def saliency(x):
            with tf.GradientTape() as tape:
                tape.watch(x)
                y = tf.reduce_sum(tf.tanh(tf.linalg.matvec(w, x)))
                print(f"y {float(y):.4f}")
                z = y * y
            return tape.gradient(z, x)

        return saliency, lambda: None

    jitted = run_differential(make, [(vec(i) * 0.1,) for i in range(CALLS)], min_graph_calls=0)
    segments_served(jitted)
    # tape.watch(x) reads the tape of a `with` kept in Python: it stays Python too (split.py), where
    # a graph of it had watched its own placeholder (None gradients) or been refused
    text = janus.explain(jitted)
    assert "build failed" not in text and "897" not in text.split("segment 1:")[-1].split("\n")[0], text


# ------------------------------------------------------- janus.report() of a split function
# The report listed a split function as "imperative [tensor value]" and counted it among the
# imperative ones, while its segments' graphs served its calls.


def test_the_report_says_a_function_runs_split_not_imperatively():
    def make():
        w = tf.Variable([1.0, -1.0])

        def step(x):
            loss = tf.reduce_sum((w * x - 1.0) ** 2)
            print(f"loss {float(loss):.3f}")
            return loss

        return step, lambda: w

    jitted = run_differential(make, [(vec(i),) for i in range(CALLS)], min_graph_calls=0)
    segments_served(jitted)
    text = janus.report(jitted, *(seg.jit for seg in jitted.split.segments), use_rich=False)
    assert "(1 served by graphs, 1 split around what janus cannot convert, 0 imperative)" in text, text
    row = next(
        line for line in text.splitlines() if line.strip().startswith("test_the_report_says") and "<segment" not in line
    )
    assert row.rstrip().endswith("split [tensor value], 1 segments"), text


# ------------------------------------------------------- Python arithmetic that raises
# `1 / 0` on values the graph is specialised on raised ZeroDivisionError out of the generator: the
# build failed as an "internal error" and the whole function ran imperatively for good, with
# explain() asking for a bug report. Such a path now raises in eager only for the calls that take it.


def test_python_arithmetic_that_raises_on_one_path_is_no_internal_error():
    def make():
        def f(x, n):
            a = tf.reduce_sum(x)
            if n == 3:
                a = a + 1 / 0
            return a * 2.0

        return f, lambda: None

    jitted = run_differential(make, [(vec(i), i % 5) for i in range(CALLS)], min_graph_calls=1)
    assert jitted.imperative_reason is None, janus.explain(jitted)
    assert "truediv raises ZeroDivisionError on this path" in janus.explain(jitted)


# ------------------------------------------------------- a function that reads its own locals
# `"...".format(**locals())` after a run of statements: the segment handed out only the names other
# statements name, so locals() missed `loss` and `acc` (KeyError); and `vars()` listed janus's own
# names (the segments' cells). A function whose code reads its frame is not split.


def test_a_log_line_formatted_from_locals_after_a_run_of_statements():
    def make():
        def step(x, n):
            loss = tf.reduce_mean(x * x) * 2.0
            acc = tf.reduce_max(x)
            print("step {n}: loss {loss} acc {acc}".format(**locals()))
            return loss

        return step, lambda: None

    jitted = run_differential(make, [(vec(i), i) for i in range(CALLS)], min_graph_calls=0)
    assert jitted.split is None, janus.explain(jitted)


def test_the_names_vars_lists_after_a_break():
    def make():
        seen = []

        def step(x):
            loss = tf.reduce_mean(x * x) * 2.0
            seen.append(float(loss))
            total = loss + tf.reduce_sum(x)
            seen.append(sorted(vars()))
            return total

        return step, lambda: list(seen)

    jitted = run_differential(make, [(vec(i),) for i in range(CALLS)], min_graph_calls=0)
    assert jitted.split is None, janus.explain(jitted)


# ------------------------------------------------------- log records name the user's function
# A log record's funcName is the name of the code that logged: statements run in a segment (eagerly,
# or replayed after its graph) logged as `_janus_segment_1`, so a format with %(funcName)s printed
# janus's name where eager prints the user's.


def test_log_records_from_segments_name_the_users_function():
    def run(fn) -> list[str]:
        stream = io.StringIO()
        handler = logging.StreamHandler(stream)
        handler.setFormatter(logging.Formatter("%(funcName)s:%(lineno)d %(message)s"))
        logger = logging.getLogger("janus-breaker-funcname")
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                for i in range(CALLS):
                    fn(vec(i))
        finally:
            logger.removeHandler(handler)
        return stream.getvalue().splitlines()

    def make():
        w = tf.Variable([1.0, -1.0])
        logger = logging.getLogger("janus-breaker-funcname")

        def train_step(x):
            loss = tf.reduce_sum((w * x - 1.0) ** 2)
            logger.info("loss computed")
            w.assign_sub(0.01 * loss * x)
            print(float(loss))
            logger.info("step done")
            return loss

        return train_step

    jitted = janus.jit(make())
    assert run(jitted) == run(make())
    segments_served(jitted)


# ------------------------------------------------------- warnings aimed at the caller (not fixed)
# `warnings.warn(..., stacklevel=2)` in a function names its caller's line. Run split, the
# function's statements run in the rewritten function, whose caller is janus
# (janus/partial/segments.py), and so are its profiled calls (janus/profiler/tracer.py): the
# warning names janus's line, the "default" filter shows it once instead of once per calling line,
# and a DeprecationWarning is no longer attributed to the user's `__main__` (where Python shows it).
# Not local: every janus call path puts its frames between the user's caller and the function.


def deprecated_step(x):
    warnings.warn("deprecated_step() is deprecated", DeprecationWarning, stacklevel=2)
    y = tf.reduce_sum(x) * 2.0
    print(f"{float(y):.3f}")
    return y


@pytest.mark.xfail(
    strict=True,
    reason="warnings with stacklevel >= 2 name janus's frames (tracer.py, segments.py), not the user's caller",
)
def test_a_deprecation_warning_names_the_callers_line():
    jitted = janus.jit(deprecated_step)

    def two_calls(fn) -> list[tuple[str, int]]:
        with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("default")
            fn(vec(1))
            fn(vec(2))
        return [(os.path.basename(w.filename), w.lineno) for w in caught]

    expected = two_calls(deprecated_step)
    assert len(expected) == 2
    for n in range(6):
        assert two_calls(jitted) == expected, f"call {n}"
    segments_served(jitted)


# ------------------------------------------------------- property: random split programs
# Random functions (and generator functions) mixing tensor math, Python state and effects, the
# statements janus cannot convert, `if`/`for`/`while`/`try`/`with` around them, names rebound
# on one path, deleted, bound to lambdas, and early exits. Each call (each generator step) is
# compared with eager's: the value or exception type, what it printed, warned and logged, and
# the variables, lists and dicts it wrote.

PROPERTY_EXAMPLES = int(os.environ.get("JANUS_HYPOTHESIS_EXAMPLES", "25"))
property_runs: list[bool] = []

SIMPLE = [
    "a = a * {c} + tf.reduce_sum(x)",
    "b = tf.tanh(a) + b",
    "w.assign_add(tf.reduce_sum(x) * {c})",
    "d['k'] = a + b",
    "n += 1",
    "log.append(n)",
    "tmp = a * {c}",
    "del tmp\ntmp = b",
    "act = lambda t: tf.tanh(t) * {c}\nb = act(b)",
    "if n > 1:\n    tmp = tf.reduce_sum(x) * {c}",
]
BREAKS = [
    "log.append(round(float(a), 3))",
    "print(f'b={{b.numpy():.3f}}')",
    "e = float(np.sum(x.numpy())) + n",
    "n = n + int(tf.reduce_sum(x)) % 3",
    "warnings.warn(f'n={{n}}')",
    "logging.getLogger('split').warning('a=%.3f', float(a))",
]
RAISES = ["if float(a) > {big}:\n    raise ValueError('big')", "if n == 3:\n    q = 1 / 0"]
IN_LOOPS = ["if n % 2 == 0:\n    continue", "if float(a) > 3.0:\n    break"]
YIELDS = ["yield a", "got = yield b\nif got is not None:\n    a = a + got"]


@st.composite
def split_blocks(draw, depth=0, in_loop=False, generator=False):
    lines: list[str] = []
    for _ in range(draw(st.integers(1, 3 if depth < 2 else 2))):
        lines += draw(split_statement(depth, in_loop, generator)).split("\n")
    return lines


@st.composite
def split_statement(draw, depth, in_loop, generator):
    kinds = ["simple"] * 4 + ["break"] * 2 + ["raise", "return"]
    kinds += ["if", "for", "while", "try", "with"] if depth < 2 else []
    kinds += ["loop exit"] if in_loop else []
    kinds += ["yield"] * 2 if generator else []
    kind = draw(st.sampled_from(kinds))
    c, big = draw(st.sampled_from([-0.5, 0.5, 1.5])), draw(st.sampled_from([4.0, 20.0]))

    def inner(loop: bool = in_loop) -> str:
        return textwrap.indent("\n".join(draw(split_blocks(depth + 1, loop, generator))), "    ")

    if kind in ("simple", "break", "raise", "loop exit", "yield"):
        pool = {"simple": SIMPLE, "break": BREAKS, "raise": RAISES, "loop exit": IN_LOOPS, "yield": YIELDS}[kind]
        return draw(st.sampled_from(pool)).format(c=c, big=big)
    if kind == "return":
        return "if n > 4:\n    return a + b" if not generator else "if n > 4:\n    return"
    if kind == "if":
        test = draw(st.sampled_from(["n % 2 == 0", "float(a) > 1.0", "bool(tf.reduce_sum(x) > 1.0)"]))
        other = f"\nelse:\n{inner()}" if draw(st.booleans()) else ""
        return f"if {test}:\n{inner()}{other}"
    if kind == "for":
        return f"for i in range({draw(st.integers(0, 2))}):\n{inner(True)}\n    a = a + tf.cast(i, tf.float32)"
    if kind == "while":
        return f"k = 0\nwhile k < {draw(st.integers(0, 2))}:\n    k += 1\n{inner(True)}"
    if kind == "with":
        manager = draw(st.sampled_from(["ctx", "ctx_suppress", "tf.name_scope('s')"]))
        return f"with {manager}:\n{inner()}"
    handler = draw(st.sampled_from(["ValueError", "ZeroDivisionError", "tf.errors.InvalidArgumentError"]))
    final = f"\nfinally:\n{inner()}" if draw(st.booleans()) else ""
    return f"try:\n{inner()}\nexcept {handler}:\n{inner()}{final}"


class Ctx:
    """A context manager that logs its exits (and, ``suppress``, swallows the exception)."""

    def __init__(self, log: list, suppress: bool) -> None:
        self.log, self.suppress = log, suppress

    def __enter__(self) -> "Ctx":
        self.log.append("enter")
        return self

    def __exit__(self, kind, value, traceback) -> bool:
        self.log.append(("exit", kind.__name__ if kind else None))
        return self.suppress


def compile_split_program(lines: list[str], generator: bool):
    end = ["yield a + b, n, tmp"] if generator else ["return a + b, n, tmp"]
    body = textwrap.indent("\n".join([*lines, *end]), "        ")
    source = (
        "def make():\n"
        "    w = tf.Variable(1.0)\n"
        "    log, d, ctx_log = [], {}, []\n"
        "    ctx, ctx_suppress = Ctx(ctx_log, False), Ctx(ctx_log, True)\n"
        "    def f(x, n):\n"
        "        a = tf.reduce_sum(x)\n"
        "        b = tf.constant(0.5)\n"
        "        tmp, e = a, 0.0\n"
        "        act = lambda t: t * 2.0\n"
        f"{body}\n"
        "    return f, lambda: (w, list(log), dict(d), list(ctx_log))\n"
    )
    filename = f"<janus-split-property-{hashlib.sha1(source.encode()).hexdigest()[:12]}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace = {"tf": tf, "np": np, "logging": logging, "warnings": warnings, "Ctx": Ctx}
    exec(compile(source, filename, "exec"), namespace)  # noqa: S102 - test programs
    return namespace["make"], source


def split_program_calls() -> list[tuple]:
    return [(tf.constant([float(i % 5) - 1.0, 2.0 + i % 3]), i % 5) for i in range(10)]


@settings(max_examples=PROPERTY_EXAMPLES, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(st.booleans(), st.data())
def test_random_split_programs_match_eager(generator, data):
    lines = data.draw(split_blocks(generator=generator))
    make, source = compile_split_program(lines, generator)
    janus.config.segment_cost_check = data.draw(st.booleans())
    try:
        if generator:
            sends = data.draw(st.lists(st.sampled_from(["__next__", "send"]), min_size=8, max_size=8))
            plan = [("__next__", ())] + [(m, (1.0,) if m == "send" else ()) for m in sends]
            jitted = lockstep(make, split_program_calls(), steps=lambda n: plan)
        else:
            jitted = run_differential(make, split_program_calls(), min_graph_calls=0)
    except AssertionError as err:
        raise AssertionError(f"{err}\n{source}") from None
    stats = janus.stats(jitted)
    property_runs.append(stats["graph_calls"] + stats["segment_calls"] > 0)


def test_random_split_programs_were_mostly_served_by_graphs():
    """Runs after the property test (file order): most programs must have used graphs."""
    assert property_runs, "the property test did not run"
    assert sum(property_runs) >= 0.6 * len(property_runs), f"{sum(property_runs)} of {len(property_runs)}"
