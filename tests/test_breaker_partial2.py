"""[partial] A second breaker's reproducers for split functions (janus/partial, issue #17): programs in
the shapes TF2 users write, each of which gave a different answer than eager (or raised where eager
did not) before its fix, and programs around today's additions (generators run split, the cost
check that sends a segment back to Python, explain's segment counts) that are compared with eager
after every call and every generator step."""

import functools
import threading

import numpy as np
import pytest
import tensorflow as tf
from differential import assert_same, assert_same_call, outcome, run_differential

import janus

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
