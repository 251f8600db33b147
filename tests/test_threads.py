"""[robustness] A jitted function called from many threads: no lost update, no exception, exact stats.

Data loaders, RL actors and serving code call steps from several threads. Each test compares
with a serial eager run, and joins its threads with a timeout, so a deadlock fails the test.
"""

import threading

import numpy as np
import pytest
import tensorflow as tf

import janus

TIMEOUT = 240


def run_threads(target, threads: int) -> list[BaseException]:
    errors: list[BaseException] = []

    def guarded(i: int) -> None:
        try:
            target(i)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)

    workers = [threading.Thread(target=guarded, args=(i,), daemon=True) for i in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(TIMEOUT)
        assert not w.is_alive(), "a thread is stuck: deadlock?"
    return errors


def assert_counters_add_up(stats: dict, calls: int) -> None:
    assert stats["calls"] == calls, stats
    assert stats["graph_calls"] + stats["profiled_calls"] + stats["imperative_calls"] == calls, stats


def test_a_pure_function_from_eight_threads():
    def f(x):
        return tf.reduce_sum(tf.tanh(x) * 2.0)

    jitted = janus.jit(f)
    inputs = [tf.constant(np.linspace(-1, 1, 6, dtype=np.float32) * (i + 1)) for i in range(8)]
    expected = [f(x).numpy() for x in inputs]
    results: dict[int, list] = {}

    def work(i: int) -> None:
        results[i] = [jitted(inputs[i]).numpy() for _ in range(300)]

    assert run_threads(work, 8) == []
    for i, got in results.items():
        np.testing.assert_allclose(got, [expected[i]] * 300, rtol=1e-6)
    stats = janus.stats(jitted)
    assert_counters_add_up(stats, 8 * 300)
    assert stats["graph_calls"] > 2000, stats


class Counter:
    def __init__(self):
        self.n = 0
        self.total = tf.Variable(0.0)

    def step(self, x):
        self.n += 1
        self.total.assign_add(tf.reduce_sum(x))
        return self.n


def test_a_python_counter_and_a_variable_lose_no_update():
    counter = Counter()
    jitted = janus.jit(Counter.step)
    x = tf.constant([0.5, 0.5])

    def work(i: int) -> None:
        for _ in range(500):
            jitted(counter, x)

    assert run_threads(work, 4) == []
    assert counter.n == 2000
    assert counter.total.numpy() == 2000.0
    stats = janus.stats(jitted)
    assert_counters_add_up(stats, 2000)
    assert stats["graph_calls"] > 1500, janus.explain(jitted)


def test_threads_that_break_a_speculated_branch_at_once():
    log = []

    def f(x):
        s = tf.reduce_sum(x)
        if s > 0:
            y = s * 2.0
        else:
            y = -s
        log.append(1)
        return y

    jitted = janus.jit(f)
    positive, negative = tf.constant([1.0, 2.0]), tf.constant([-1.0, -3.0])
    for _ in range(4):  # profiled on positive inputs only: the branch is speculated
        jitted(positive)
    results: dict[int, list] = {}

    def work(i: int) -> None:
        x = positive if i % 2 else negative
        results[i] = [float(jitted(x)) for _ in range(150)]

    assert run_threads(work, 8) == []
    for i, got in results.items():
        assert got == [6.0] * 150 if i % 2 else got == [4.0] * 150, (i, got[:5])
    assert len(log) == 4 + 8 * 150
    stats = janus.stats(jitted)
    assert_counters_add_up(stats, 4 + 8 * 150)
    assert stats["graph_calls"] > 0, janus.explain(jitted)


DEADLOCK_PROGRAMS = {
    "fan_out": """
import tensorflow as tf, janus
from concurrent.futures import ThreadPoolExecutor
pool = ThreadPoolExecutor(4)
w = [tf.Variable(float(k)) for k in range(4)]

class Counter:
    n = 0

def member(k, x):
    Counter.n += 1
    return x * w[k]

jitted_member = janus.jit(member)

@janus.jit
def ensemble(x):
    return tf.add_n(list(pool.map(jitted_member, range(4), [x] * 4)))

print([float(ensemble(tf.constant(1.0 + i))) for i in range(5)], Counter.n)
""",
    "queue": """
import queue, threading, tensorflow as tf, janus
q = queue.Queue()

class Box:
    def __init__(self):
        self.n = 0
        self.seen = []

    def produce(self, x):
        self.n += 1
        q.put(x * 2.0)

    def consume(self):
        item = q.get()
        self.seen.append(item)
        return item

box = Box()
produce, consume = janus.jit(Box.produce), janus.jit(Box.consume)
out = []
consumer = threading.Thread(target=lambda: out.extend(float(consume(box)) for _ in range(6)))
consumer.start()
for i in range(6):
    produce(box, tf.constant(float(i)))
consumer.join()
print(out, box.n, len(box.seen))
""",
}


@pytest.mark.slow
def test_calls_that_wait_on_other_threads_never_deadlock(tmp_path):
    import os
    import subprocess
    import sys

    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    for name, program in DEADLOCK_PROGRAMS.items():
        outputs = []
        for mode in ("0", "1"):
            done = subprocess.run(
                [sys.executable, "-c", program], env={**env, "JANUS_DISABLE": mode},
                capture_output=True, text=True, timeout=180,
            )  # fmt: skip
            assert done.returncode == 0, f"{name}: {done.stderr[-2000:]}"
            outputs.append(done.stdout.strip().splitlines()[-1])
        assert outputs[0] == outputs[1], (name, outputs)
