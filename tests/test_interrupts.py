"""[robustness] Ctrl-C during a graph call: the call is whole (TF and Python state agree), never half.

A real SIGINT is sent from a thread at several delays into a long graph call that updates a
TF variable and a Python counter together. Whenever KeyboardInterrupt arrives, both must show the
same number of completed steps.
"""

import os
import signal
import threading
import time

import pytest
import tensorflow as tf

import janus

pytestmark = pytest.mark.skipif(threading.current_thread() is not threading.main_thread(), reason="needs main thread")


class Trainer:
    def __init__(self):
        self.steps = 0
        self.w = tf.Variable(tf.eye(200) * 0.5)
        self.done = tf.Variable(0)

    def step(self, x, n):
        for _ in tf.range(n):  # a long graph: n matmuls in a tf.while_loop
            x = tf.tanh(tf.matmul(x, self.w))
        self.done.assign_add(1)
        self.steps += 1
        return tf.reduce_sum(x)


def interrupt_after(delay: float) -> threading.Thread:
    def send() -> None:
        time.sleep(delay)
        os.kill(os.getpid(), signal.SIGINT)

    thread = threading.Thread(target=send, daemon=True)
    thread.start()
    return thread


@pytest.fixture
def ctrl_c_raises():
    """SIGINT raises KeyboardInterrupt during the test, as in an interactive Python. A process started
    in the background by a shell without job control (`make test &`) inherits SIGINT ignored."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_an_interrupted_graph_call_commits_whole_or_not_at_all(ctrl_c_raises):
    trainer = Trainer()
    jitted = janus.jit(Trainer.step)
    x = tf.ones([200, 200])
    n = tf.constant(300)
    for _ in range(5):
        jitted(trainer, x, n)
    assert janus.stats(jitted)["graph_calls"] == 2
    started = time.perf_counter()
    jitted(trainer, x, n)
    call_seconds = time.perf_counter() - started
    latencies = []
    for fraction in (0.1, 0.3, 0.5, 0.7, 0.9):
        sender = interrupt_after(call_seconds * fraction)
        sent = time.perf_counter() + call_seconds * fraction
        with pytest.raises(KeyboardInterrupt):  # calls until it arrives: on a loaded machine a call's time varies
            deadline = sent + call_seconds * 3 + 5.0
            while time.perf_counter() < deadline:
                jitted(trainer, x, n)
        latencies.append(time.perf_counter() - sent)
        sender.join()
        assert trainer.steps == int(trainer.done.numpy()), f"half-committed at {fraction}"
    assert janus.stats(jitted)["graph_calls"] >= 3
    assert max(latencies) < call_seconds * 3 + 1.0, latencies  # arrives once the call in flight is whole
