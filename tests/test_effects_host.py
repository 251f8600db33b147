"""[effects/host]: host randomness, clocks, iterators, the environment and files.

A call such as ``random.random()``, ``time.time()``, ``next(it)``, ``os.environ[...]`` or
``open(path).read()`` is not known to be free of Python effects: its value changes from call
to call and calling it advances host state. Evaluating it once while building a graph and
baking the value in would serve every later call a stale answer. janus must refuse to convert
such a function and run it imperatively, naming the callable in ``janus.explain``; every call
then still equals eager.
"""

import itertools
import os
import random
import time

import numpy as np
import pytest
import tensorflow as tf
from differential import assert_same, outcome, run_differential

import janus


def vec(*values):
    return tf.constant(values, tf.float32)


def imperative_reason(jitted) -> str:
    """The "runs imperatively:" (or "runs split ...; break at") parts of explain(), lower-cased (the
    header names the test, not the reason)."""
    lines = [ln for ln in janus.explain(jitted).splitlines() if "runs imperatively" in ln or "runs split" in ln]
    return "\n".join(lines).lower()


def assert_refused(jitted, *names):
    """The call was never baked into a graph: the function runs imperatively, or split with the
    refused statement left to Python (janus.partial), and explain() names it."""
    stats = janus.stats(jitted)
    report = janus.explain(jitted)
    python_calls = stats["imperative_calls"] + stats["split_calls"]
    assert python_calls > 0, f"janus never ran the function imperatively or split: {stats}\n{report}"
    reason = imperative_reason(jitted)
    assert reason, f"explain() gives no imperative reason:\n{report}"
    assert any(name in reason for name in names), f"the reason names none of {names}:\n{report}"


def run_interleaved(eager_fn, jitted, calls, before_each, state=None):
    """Per call index: ``before_each(i)`` (sets what both modes read), the eager call, the janus call."""
    for i, args in enumerate(calls):
        before_each(i)
        expected = outcome(eager_fn, args, {})
        before_each(i)
        actual = outcome(jitted, args, {})
        assert actual[0] == expected[0], f"call {i}: eager {expected}, janus {actual}"
        assert_same(expected[1], actual[1], f"call {i} result")
        assert actual[2] == expected[2], f"call {i}: effects differ: eager {expected[2]}, janus {actual[2]}"
        if state is not None:
            assert_same(state[0](), state[1](), f"call {i} state")


# ---------------------------------------------------------------------------------- randomness


def test_random_instance_decides_a_horizontal_flip():
    """Augmentation: flip the image when a coin from a seeded ``random.Random`` comes up heads."""

    def make():
        coin = random.Random(0)

        def augment(image):
            if coin.random() < 0.5:
                image = tf.image.flip_left_right(image)
            return image * 2.0

        return augment, coin.getstate

    image = tf.reshape(tf.range(12, dtype=tf.float32), [2, 3, 2])
    jitted = run_differential(make, [(image + float(i),) for i in range(8)], min_graph_calls=0)
    assert_refused(jitted, "random")


def test_random_instance_draws_a_crop_offset_and_a_gain():
    """``randint`` and ``uniform`` picked per call: a random crop start and a random brightness gain."""

    class Augmenter:
        def __init__(self):
            self.rng = random.Random(7)

        def __call__(self, signal):
            start = self.rng.randint(0, 3)
            gain = self.rng.uniform(0.5, 1.5)
            return signal[start : start + 4] * gain

    def make():
        aug = Augmenter()

        def step(signal):
            return tf.reduce_sum(aug(signal))

        return step, aug.rng.getstate

    signal = tf.range(8, dtype=tf.float32)
    jitted = run_differential(make, [(signal,)] * 8, min_graph_calls=0)
    assert_refused(jitted, "randint", "uniform", "random")


def test_random_reached_through_a_helper_function():
    """The host call sits one call deeper, in a helper the step calls."""

    def make():
        rng = random.Random(11)

        def dropout_rate():
            return 0.1 + 0.4 * rng.random()

        def step(x):
            rate = dropout_rate()
            return x * (1.0 - rate)

        return step, rng.getstate

    jitted = run_differential(make, [(vec(1.0, float(i)),) for i in range(8)], min_graph_calls=0)
    assert_refused(jitted, "random")


def test_module_level_random_and_numpy_random_reseeded_per_call():
    """The global ``random`` / ``np.random`` functions, seeded identically before each mode's call."""

    def jitter(x):
        scale = random.random()
        shift = np.random.uniform(-1.0, 1.0)
        return x * scale + shift

    jitted = janus.jit(jitter)

    def reseed(i):
        random.seed(100 + i)
        np.random.seed(200 + i)

    calls = [(vec(1.0, 2.0, 3.0),)] * 8
    eager_states, janus_states = [], []
    for i, args in enumerate(calls):
        reseed(i)
        expected = outcome(jitter, args, {})
        eager_states.append((random.getstate(), np.random.get_state()[2]))
        reseed(i)
        actual = outcome(jitted, args, {})
        janus_states.append((random.getstate(), np.random.get_state()[2]))
        assert actual[0] == expected[0], f"call {i}: eager {expected}, janus {actual}"
        assert_same(expected[1], actual[1], f"call {i} result")
        assert actual[2] == expected[2], f"call {i}: effects differ"
        assert janus_states[-1] == eager_states[-1], f"call {i}: the host generators were advanced differently"
    assert_refused(jitted, "random", "uniform")


@pytest.mark.parametrize("kind", ["default_rng", "RandomState"])
def test_numpy_generator_noise_added_to_a_tensor(kind):
    def make():
        if kind == "default_rng":
            gen = np.random.default_rng(0)

            def noisy(x):
                noise = gen.normal(0.0, 0.1, size=3).astype(np.float32)
                return x + noise

            return noisy, lambda: gen.bit_generator.state
        rs = np.random.RandomState(0)

        def noisy_rs(x):
            noise = rs.uniform(-0.1, 0.1, size=(3,)).astype(np.float32)
            return x + tf.constant(noise)

        return noisy_rs, lambda: int(rs.get_state()[2])

    jitted = run_differential(make, [(vec(1.0, 2.0, float(i)),) for i in range(8)], min_graph_calls=0)
    assert_refused(jitted, "normal" if kind == "default_rng" else "uniform", "random")


class EpsilonGreedyAgent:
    """A DQN actor: explore with probability eps (decaying), otherwise act greedily on the Q-values."""

    def __init__(self, n_actions, seed):
        self.rng = np.random.RandomState(seed)
        self.n_actions = n_actions
        self.eps = 0.9
        self.steps = 0

    def act(self, q_values):
        self.steps += 1
        if self.rng.rand() < self.eps:
            action = self.rng.randint(self.n_actions)
        else:
            action = tf.argmax(q_values)
        self.eps = max(0.1, self.eps * 0.8)
        return action


def test_epsilon_greedy_action_choice():
    def make():
        agent = EpsilonGreedyAgent(4, seed=3)

        def act(q):
            return agent.act(q)

        return act, lambda: (agent.eps, agent.steps, int(agent.rng.get_state()[2]))

    qs = [(vec(0.1, 0.9 - 0.1 * i, 0.3, 0.2 + 0.1 * i),) for i in range(10)]
    jitted = run_differential(make, qs, min_graph_calls=0)
    assert_refused(jitted, "rand")


# ---------------------------------------------------------------------------------- clocks


def increasing(stamps):
    return [b > a for a, b in zip(stamps, stamps[1:])]


def test_monotonic_ns_stamp_stored_on_self_each_call():
    class Tracker:
        def __init__(self):
            self.stamps = []
            self.last = None

        def step(self, x):
            now = time.monotonic_ns()
            self.last = now
            self.stamps.append(now)
            return x * 2.0

    def make():
        tracker = Tracker()

        def step(x):
            return tracker.step(x)

        # raw clock readings differ between runs: compare that every stamp is strictly newer
        return step, lambda: (len(tracker.stamps), increasing(tracker.stamps), tracker.last == tracker.stamps[-1])

    jitted = run_differential(make, [(vec(1.0, float(i)),) for i in range(8)], min_graph_calls=0)
    assert_refused(jitted, "monotonic_ns", "time")


def test_wall_clock_step_timing():
    """``time.time()`` at the start of the step, the elapsed seconds kept per step."""

    class Timed:
        def __init__(self):
            self.started = []
            self.durations = []

        def __call__(self, x):
            t0 = time.time()
            self.started.append(t0)
            y = tf.reduce_sum(tf.tanh(x) * 3.0)
            self.durations.append(time.time() - t0)
            return y

    def make():
        timed = Timed()

        def train_step(x):
            return timed(x)

        def state():
            return (len(timed.started), increasing(timed.started), [d > 0.0 for d in timed.durations])

        return train_step, state

    jitted = run_differential(make, [(vec(0.5, float(i)),) for i in range(8)], min_graph_calls=0)
    assert_refused(jitted, "time")


# ---------------------------------------------------------------------------------- iterators


def test_next_on_an_itertools_counter():
    class Stepper:
        def __init__(self):
            self.counter = itertools.count()

        def __call__(self, x):
            i = next(self.counter)
            return x * float(i) + 1.0

    def make():
        stepper = Stepper()

        def step(x):
            return stepper(x)

        return step, lambda: repr(stepper.counter)

    jitted = run_differential(make, [(vec(1.0, 2.0),)] * 8, min_graph_calls=0)
    assert_refused(jitted, "next", "count")


def test_next_on_a_learning_rate_schedule_iterator():
    """A Python iterator over a schedule of floats; it runs dry on the last call (StopIteration)."""

    def make():
        schedule = iter([0.5, 0.4, 0.3, 0.25, 0.2, 0.15, 0.1])

        def update(w, g):
            lr = next(schedule)
            return w - lr * g

        def state():
            reduced = schedule.__reduce__()
            return reduced[2] if len(reduced) > 2 else "exhausted"

        return update, state

    calls = [(vec(1.0, 1.0), vec(0.5, float(i))) for i in range(8)]  # 8 calls, 7 values
    jitted = run_differential(make, calls, min_graph_calls=0)
    assert_refused(jitted, "next")


# ---------------------------------------------------------------------------------- environment, files


def read_scale_environ(x):
    scale = float(os.environ["SCALE"])
    return x * scale


def read_scale_getenv(x):
    scale = float(os.getenv("SCALE", "1.0"))
    return x * scale + 1.0


@pytest.mark.parametrize("fn,name", [(read_scale_environ, "environ"), (read_scale_getenv, "getenv")])
def test_environment_variable_re_read_each_call(monkeypatch, fn, name):
    values = ["1.0", "2.0", "0.5", "3.0", "1.5", "-1.0", "4.0", "0.25"]
    jitted = janus.jit(fn)

    def set_scale(i):
        monkeypatch.setenv("SCALE", values[i])

    run_interleaved(fn, jitted, [(vec(1.0, 2.0),)] * len(values), set_scale)
    assert_refused(jitted, name)


def test_config_file_re_read_each_call(tmp_path):
    path = tmp_path / "lr.txt"

    class Trainer:
        def __init__(self, config_path):
            self.config_path = config_path

        def step(self, w, g):
            with open(self.config_path) as fh:
                lr = float(fh.read().strip())
            return w - lr * g

    eager_trainer, janus_trainer = Trainer(str(path)), Trainer(str(path))

    def eager_step(w, g):
        return eager_trainer.step(w, g)

    def janus_step(w, g):
        return janus_trainer.step(w, g)

    jitted = janus.jit(janus_step)
    rates = ["0.1", "0.2", "0.05", "0.5", "0.3", "0.01", "1.0", "0.4"]

    def rewrite(i):
        path.write_text(rates[i] + "\n")

    run_interleaved(eager_step, jitted, [(vec(1.0, -1.0), vec(0.5, 2.0))] * len(rates), rewrite)
    assert_refused(jitted, "open", "read")
