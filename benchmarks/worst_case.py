"""[generalize] The worst case: functions whose assumptions keep failing, against eager.

janus pays for profiling, for building graphs and for the calls its graphs cannot serve. A
function whose speculation keeps failing must still end within 1.3x of eager (issue #16): the
build budget (``config.build_budget``, ``config.build_allowance``) stops building graphs that do
not pay back their build time, and relaxation makes the failing assumptions converge.

Each program runs ``CALLS`` calls from a fresh start (profiling, builds and fallbacks included),
eagerly and under a fresh ``janus.jit``, interleaved, ``REPEATS`` times; the report gives the
median total seconds and janus ÷ eager (lower is better; 1.3 is the target).

* ``new_keys``: a dict of metrics with a key never seen before at every call (every call
  misses the guards of every graph built so far);
* ``flag_soup``: a Python object with a different set of attribute values at every call,
  read in Python branches (a new specialisation at every call);
* ``shapes``: a tensor whose shape and rank change at every call, and a Python float
  that changes too (both relax: the speculation converges).

``python -m benchmarks.worst_case [--quick]``.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import tensorflow as tf

import janus
from benchmarks.harness import machine, write_json

CALLS = 1000
WIDTH = 256  # a few ms a call in eager: a small model's step
REPEATS = 3


def _model() -> tuple[tf.Variable, tf.Variable]:
    rng = np.random.default_rng(0)
    return tf.Variable(rng.normal(size=(WIDTH, WIDTH)).astype("float32") / 16), tf.Variable(np.zeros(WIDTH, "float32"))


def _forward(w, b, x):
    h = x
    for _ in range(4):
        h = tf.tanh(tf.matmul(h, w) + b)
    return tf.reduce_mean(h)


def new_keys() -> tuple[callable, callable]:
    w, b = _model()

    def step(x, metrics):
        total = _forward(w, b, x)
        for value in metrics.values():
            total += value
        return total

    x = tf.ones([64, WIDTH])
    return step, lambda i: (x, {f"metric_{i}": float(i)})


def flag_soup() -> tuple[callable, callable]:
    w, b = _model()

    class Options:
        def __init__(self, i: int) -> None:
            self.scale = 1.0 + i
            self.layers = 1 + i % 3
            self.dropout = i % 2 == 0

    def step(x, options):
        h = x * options.scale
        for _ in range(options.layers):
            h = tf.tanh(tf.matmul(h, w) + b)
        if options.dropout:
            h = h * 0.5
        return tf.reduce_mean(h)

    x = tf.ones([64, WIDTH])
    return step, lambda i: (x, Options(i))


def shapes() -> tuple[callable, callable]:
    w, _ = _model()

    def step(x, temperature):
        flat = tf.reshape(x, [-1, WIDTH])
        return tf.reduce_mean(tf.tanh(tf.matmul(flat, w)) / temperature)

    return step, lambda i: (tf.ones([32 + i % 5] + [1] * (i % 3) + [WIDTH]), 1.0 + i / 7)


PROGRAMS = {"new_keys": new_keys, "flag_soup": flag_soup, "shapes": shapes}


def _run(step, arguments, calls: int) -> float:
    started = time.perf_counter()
    out = None
    for i in range(calls):
        out = step(*arguments(i))
    float(out)
    return time.perf_counter() - started


def worst_case(quick: bool = False) -> dict:
    calls = 100 if quick else CALLS
    results = {}
    for name, make in PROGRAMS.items():
        totals: dict[str, list[float]] = {"eager": [], "janus": []}
        stats = {}
        for r in range(1 if quick else REPEATS):
            for variant in ("eager", "janus") if r % 2 == 0 else ("janus", "eager"):
                step, arguments = make()
                if variant == "janus":
                    step = janus.jit(step)
                totals[variant].append(_run(step, arguments, calls))
                if variant == "janus":
                    stats = janus.stats(step)
        eager, jit = statistics.median(totals["eager"]), statistics.median(totals["janus"])
        results[name] = {
            "seconds": {"eager": eager, "janus": jit},
            "janus_over_eager": jit / eager,
            "graphs_built": stats["graphs_built"],
            "graph_calls": stats["graph_calls"],
            "build_seconds": stats["build_seconds"],
            "saved_seconds": stats["saved_seconds"],
        }
    return {"name": "worst_case", "machine": machine(), "calls": calls, "programs": results}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    result = worst_case(parser.parse_args().quick)
    for name, r in result["programs"].items():
        graphs = f"graphs {r['graphs_built']}  graph calls {r['graph_calls']}"
        seconds = f"build {r['build_seconds']:.2f}s  saved {r['saved_seconds']:.2f}s"
        print(f"{name:10s} janus/eager {r['janus_over_eager']:.2f}  {graphs}  {seconds}")
    print(f"wrote {write_json('worst_case.json', result)}")


if __name__ == "__main__":
    main()
