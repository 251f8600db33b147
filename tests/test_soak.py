"""[robustness] Soak: 20,000 calls of a training step while a thread reads janus.stats.

No call fails, memory stays bounded (RSS grows less than 50 MiB after warm-up), and the
counters add up. Marked slow; make test and CI run it.
"""

import os
import threading

import pytest
import tensorflow as tf

import janus

CALLS = 20_000
WARMUP = 2_000


def rss_mib() -> float:
    with open("/proc/self/statm") as statm:
        pages = int(statm.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


class Trainer:
    def __init__(self):
        self.w = tf.Variable(tf.fill([8, 1], 0.1))
        self.steps = 0
        self.seen = 0.0
        self.history = []

    def step(self, x, y):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(tf.matmul(x, self.w) - y))
        grad = tape.gradient(loss, self.w)
        self.w.assign_sub(0.01 * grad)
        self.steps += 1
        self.seen += 0.5  # a relaxed float: fed each call (once leaked through TF's scalar cache)
        if len(self.history) < 4:
            self.history.append(loss)
        return loss


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs /proc to read RSS")
def test_twenty_thousand_steps_with_a_stats_reader():
    trainer = Trainer()
    step = janus.jit(Trainer.step)
    x, y = tf.random.stateless_normal([16, 8], seed=[1, 2]), tf.ones([16, 1])
    stop = threading.Event()
    reads: list[dict] = []

    def reader() -> None:
        while not stop.is_set():
            reads.append(janus.stats(step))
            stop.wait(0.01)

    watcher = threading.Thread(target=reader, daemon=True)
    watcher.start()
    try:
        for n in range(CALLS):
            step(trainer, x, y)
            if n == WARMUP:
                baseline = rss_mib()
    finally:
        stop.set()
        watcher.join(10)
    growth = rss_mib() - baseline
    print(f"soak: RSS grew {growth:.1f} MiB over {CALLS - WARMUP} calls")
    stats = janus.stats(step)
    assert trainer.steps == CALLS and trainer.seen == CALLS * 0.5
    assert stats["calls"] == CALLS and stats["graph_calls"] + stats["profiled_calls"] == CALLS, stats
    assert stats["graph_calls"] > CALLS - 10, janus.explain(step)
    assert growth < 50, f"RSS grew {growth:.1f} MiB over {CALLS - WARMUP} calls"
    assert reads and all(r["calls"] <= CALLS for r in reads)
