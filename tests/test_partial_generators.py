"""[partial] A generator function runs split: the runs of statements between its ``yield``s are
served by graph segments while the caller iterates. Eager and janus are stepped in lockstep (every
``next``/``send``/``close``) and compared after every step: yielded values, printed text, variables
and Python state."""

import numpy as np
import pytest
import tensorflow as tf
from differential import assert_same_call, outcome

import janus

pytestmark = pytest.mark.usefixtures("split_only")  # tests the split itself (conftest.py)


@pytest.fixture(autouse=True)
def segments_keep_their_graphs(monkeypatch):
    """Small segments, which the cost check could run eagerly (test_segment_cost.py tests it)."""
    monkeypatch.setattr(janus.config, "segment_cost_check", False)


def lockstep(make, calls, steps=None) -> janus.JitFunction:
    """Runs ``make()``'s generator function eagerly and under janus over ``calls``; each call's
    generator is driven by ``steps(generator)`` (a list of ``(method, args)``; default: ``next``
    until it stops), comparing each step's outcome and the state after it."""
    eager_fn, eager_state = make()
    raw_fn, jit_state = make()
    jitted = janus.jit(raw_fn)
    for n, args in enumerate(calls):
        eager_gen, jit_gen = eager_fn(*args), jitted(*args)
        plan = steps(n) if steps else [("__next__", ())] * 1000
        for k, (method, step_args) in enumerate(plan):
            expected = outcome(getattr(eager_gen, method), step_args)
            actual = outcome(getattr(jit_gen, method), step_args)
            assert_same_call(f"{n}.{k}", expected, actual, eager_state, jit_state)
            if expected[0] == "raised":
                break
    return jitted


def segments_served(jitted, at_least: int) -> dict:
    stats = janus.stats(jitted)
    assert stats["segment_calls"] >= at_least, f"{stats}\n{janus.explain(jitted)}"
    assert stats["split_calls"] > 0 and stats["imperative_calls"] == 0, stats
    return stats


def batches(n: int, count: int = 3) -> list:
    rng = np.random.default_rng(n)
    return [
        (tf.constant(rng.normal(size=(4, 3)), tf.float32), tf.constant(rng.normal(size=(4, 1)), tf.float32))
        for _ in range(count)
    ]


def test_a_training_generator_yields_each_batch_loss():
    def make():
        w = tf.Variable(np.linspace(-1, 1, 3).reshape(3, 1), dtype=tf.float32)
        seen = {"steps": 0}

        def train_epoch(data, lr):
            for x, y in data:
                with tf.GradientTape() as tape:
                    loss = tf.reduce_mean((tf.tanh(x @ w) - y) ** 2)
                w.assign_sub(lr * tape.gradient(loss, w))
                seen["steps"] += 1
                yield loss

        return train_epoch, lambda: (w, dict(seen))

    jitted = lockstep(make, [(batches(n), 0.1) for n in range(8)])
    segments_served(jitted, 3 * 4)
    text = janus.explain(jitted)
    assert "a generator function" in text and "runs split into" in text and "segment calls in all" in text


def test_an_augmentation_generator_with_host_logging_between_yields():
    def make():
        counts = []

        def augmented(images, scale):
            for i, image in enumerate(images):
                image = tf.image.flip_left_right(image) * scale
                image = tf.clip_by_value(image + 0.25, 0.0, 1.0)
                if i % 2 == 0:
                    print(f"image {i} mean {image.numpy().mean():.4f}")
                counts.append(i)
                yield image, tf.reduce_max(image)

        return augmented, lambda: list(counts)

    rng = np.random.default_rng(3)
    images = [tf.constant(rng.uniform(size=(5, 6, 2)), tf.float32) for _ in range(4)]
    jitted = lockstep(make, [(images, s) for s in (0.5, 0.75, 1.0, 0.5, 0.8, 0.9, 0.6, 0.7)])
    segments_served(jitted, 4 * 4)


def test_closed_early_the_finally_runs_and_only_consumed_steps_are_applied():
    def make():
        w = tf.Variable([1.0, 2.0])
        log = []

        def steps(xs):
            try:
                for x in xs:
                    w.assign(w * x + 1.0)
                    total = tf.reduce_sum(w)
                    yield total
            finally:
                log.append(float(tf.reduce_sum(w)))

        return steps, lambda: (w, list(log))

    xs = [tf.constant(v) for v in (0.5, 1.5, 2.0, 0.25)]

    def consume_two_then_close(n):
        return [("__next__", ())] * (1 + n % 3) + [("close", ())]

    jitted = lockstep(make, [(xs,)] * 8, steps=consume_two_then_close)
    segments_served(jitted, 4)


def test_an_exception_between_yields_reaches_the_caller_after_the_earlier_updates():
    def make():
        w = tf.Variable(0.0)

        def walk(values):
            for v in values:
                w.assign_add(tf.square(v))
                if float(v) < 0:
                    raise ValueError(f"negative {float(v)}")
                yield w.read_value() * 2.0

        return walk, lambda: w

    calls = [([tf.constant(1.0), tf.constant(2.0), tf.constant(-1.0 - n), tf.constant(3.0)],) for n in range(8)]
    jitted = lockstep(make, calls)
    segments_served(jitted, 8)


def test_values_sent_into_the_generator_feed_its_next_segment():
    def make():
        w = tf.Variable([0.5, -0.5])

        def controller(x):
            lr = 0.1
            while True:
                grad = tf.reduce_sum(x * w) * x
                w.assign_sub(lr * grad)
                sent = yield tf.reduce_sum(w)
                if sent is None:
                    return float(tf.reduce_sum(w))
                lr = sent

        return controller, lambda: w

    def plan(n):
        return [("__next__", ()), ("send", (0.05,)), ("send", (0.2 + n / 10,)), ("__next__", ())]

    jitted = lockstep(make, [(tf.constant([1.0, 2.0]),)] * 8, steps=plan)
    segments_served(jitted, 8)


def test_the_generators_return_value_reaches_stop_iteration():
    def make():
        def counted(xs):
            total = tf.constant(0.0)
            for x in xs:
                total = total + tf.reduce_sum(x * x)
                yield total
            return float(total)

        return counted, lambda: None

    xs = [tf.constant([1.0, 2.0]), tf.constant([3.0])]
    eager_fn, _ = make()
    raw, _ = make()
    jitted = janus.jit(raw)
    for _ in range(6):
        for fn_ in (eager_fn, jitted):
            gen = fn_(xs)
            list(gen.__next__() for _ in range(2))
            with pytest.raises(StopIteration) as stopped:
                next(gen)
            assert stopped.value.value == 14.0
    assert janus.stats(jitted)["segment_calls"] > 0


@pytest.mark.keras
def test_a_keras_model_trained_by_a_generator_that_yields_logs():
    def make():
        tf.keras.utils.set_random_seed(7)
        model = tf.keras.Sequential([tf.keras.layers.Dense(4, activation="relu"), tf.keras.layers.Dense(1)])
        model.build((None, 3))
        opt = tf.keras.optimizers.SGD(0.05)

        def fit_steps(data):
            for step, (x, y) in enumerate(data):
                with tf.GradientTape() as tape:
                    loss = tf.reduce_mean(tf.square(model(x) - y))
                grads = tape.gradient(loss, model.trainable_variables)
                opt.apply_gradients(zip(grads, model.trainable_variables))
                yield {"step": step, "loss": float(loss)}

        return fit_steps, lambda: [v.numpy() for v in model.trainable_variables]

    jitted = lockstep(make, [(batches(n),) for n in range(6)])
    segments_served(jitted, 6)
