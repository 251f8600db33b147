"""[robustness] How long after Ctrl-C the KeyboardInterrupt arrives, eager against janus.

A training step runs a long ``tf.while_loop`` of matmuls (about 0.4 s), then updates a TF
variable and a Python counter. A thread sends a real SIGINT at several points of a call. Eager
stops at the next op boundary of its Python loop; janus lets the graph call in flight finish and
commit (so TF and Python state agree), then raises. Reported: the median and maximum seconds from
the signal to the KeyboardInterrupt, for both, and the step's own duration.

    python -m benchmarks.interrupt_latency
"""

from __future__ import annotations

import os
import signal
import statistics
import threading
import time

import tensorflow as tf

import janus
from benchmarks.harness import write_json

SIZE = 200
FRACTIONS = (0.1, 0.3, 0.5, 0.7, 0.9)


class Trainer:
    def __init__(self) -> None:
        self.steps = 0
        self.w = tf.Variable(tf.eye(SIZE) * 0.5)
        self.done = tf.Variable(0)

    def step(self, x: tf.Tensor, n: tf.Tensor) -> tf.Tensor:
        for _ in tf.range(n):
            x = tf.tanh(tf.matmul(x, self.w))
        self.done.assign_add(1)
        self.steps += 1
        return tf.reduce_sum(x)


def _latencies(call, seconds: float) -> list[float]:
    """Seconds from SIGINT to KeyboardInterrupt, sent at each fraction of a call."""
    out = []
    for fraction in FRACTIONS:
        delay = seconds * fraction
        sender = threading.Thread(target=lambda d=delay: (time.sleep(d), os.kill(os.getpid(), signal.SIGINT)))
        sent = time.perf_counter() + delay
        sender.start()
        try:
            while True:
                call()
        except KeyboardInterrupt:
            out.append(time.perf_counter() - sent)
        sender.join()
    return out


def main() -> dict:
    x, n = tf.ones([SIZE, SIZE]), tf.constant(1000)
    eager, graphed = Trainer(), Trainer()
    jitted = janus.jit(Trainer.step)
    for _ in range(5):
        jitted(graphed, x, n)
    timings = {}
    for name, call in (("eager", lambda: eager.step(x, n)), ("janus", lambda: jitted(graphed, x, n))):
        started = time.perf_counter()
        call()
        timings[name] = time.perf_counter() - started
    result = {"step_seconds": timings, "fractions": list(FRACTIONS)}
    for name, call in (("eager", lambda: eager.step(x, n)), ("janus", lambda: jitted(graphed, x, n))):
        latencies = _latencies(call, timings[name])
        result[name] = {
            "latency_median_s": statistics.median(latencies),
            "latency_max_s": max(latencies),
            "latencies_s": latencies,
        }
    result["janus_state_whole"] = graphed.steps == int(graphed.done.numpy())
    result["eager_state_whole"] = eager.steps == int(eager.done.numpy())
    write_json("interrupt_latency.json", result)
    for name in ("eager", "janus"):
        r = result[name]
        print(f"{name:6s} step {timings[name]:.3f}s  Ctrl-C -> KeyboardInterrupt: median {r['latency_median_s']:.3f}s, "
              f"max {r['latency_max_s']:.3f}s")  # fmt: skip
    print(f"state whole after the interrupts: eager {result['eager_state_whole']}, janus {result['janus_state_whole']}")
    return result


if __name__ == "__main__":
    main()
