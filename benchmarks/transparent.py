"""[enable] benchmarks: each example run eager, under janus.enable() and with @janus.jit; and what
transparent mode's watcher costs a program once discovery is done.

The modes cannot share a process (enable() hooks the interpreter), so each run is a subprocess
per mode; the modes alternate across repeats and medians are reported. An example's throughput
is that of its second half, after profiling and graph builds.

``python -m benchmarks.transparent`` prints the watcher's cost on this interpreter.
"""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
MODES = {"eager": [], "enable": ["--janus"], "jit": ["--jit"]}


def _throughput(name: str, flags: list[str], steps: int) -> float:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    out = subprocess.run([sys.executable, f"{name}.py", "--steps", str(steps), *flags], cwd=EXAMPLES, env=env,
                         check=True, capture_output=True, text=True).stdout  # fmt: skip
    return float(re.search(r"([\d.]+) examples/s in the second half", out).group(1))


def examples(quick: bool = False) -> dict:
    rows = []
    steps, repeats = (30, 1) if quick else (400, 3)
    for name in ("mnist_cnn", "rnn_lm", "subclassed_model", "recurrent_cell_enable"):
        samples: dict[str, list[float]] = {m: [] for m in MODES}
        for r in range(repeats):
            order = list(MODES)[r % 3 :] + list(MODES)[: r % 3]
            for mode in order:
                samples[mode].append(_throughput(name, MODES[mode], steps))
        med = {m: statistics.median(v) for m, v in samples.items()}
        rows.append({"example": name, "steps": steps, "examples_per_s": med,
                     "enable_over_eager": med["enable"] / med["eager"],
                     "enable_over_jit": med["enable"] / med["jit"]})  # fmt: skip
    return {"name": "enable_examples", "rows": rows}


# A loop of Python calls (user functions that use no TensorFlow, the standard library, eager TF
# ops, fresh containers for the garbage collector), timed in one process after a training step was
# routed and, on Python 3.11, discovery went quiet, with transparent mode's watcher on ("enable")
# and off ("plain": 3.12+ its sys.monitoring events off, 3.11 its gc callback removed), and on 3.11
# also watching every call ("watching": what pausing saves). Variants alternate; medians.
_WATCH_SCRIPT = """
import gc, json, statistics, sys, time
import tensorflow as tf
import janus
from janus import transparent

def step(w, x):
    with tf.GradientTape() as tape:
        tape.watch(w)
        loss = tf.reduce_sum(x * w)
    return tape.gradient(loss, w)

reduce_sum, ones = tf.reduce_sum, tf.ones  # work() names no tf: transparent mode leaves it alone

def record(i, log):
    log.append({"i": i, "pair": (i, str(i))})
    return len(log)

def work(n):
    log, total = [], 0
    for i in range(n):
        total += record(i, log) + len(json.dumps(log[-1]))
        if i % 50 == 0:
            total += int(reduce_sum(ones([4])))
    return total

janus.config.discovery_quiet_seconds = 0.2
janus.enable()
w = tf.ones([4])
for _ in range(10):
    step(w, w)
work(2000)
time.sleep(0.5)
step(w, w)  # a known call after a quiet window: Python 3.11's watcher pauses here
watcher = transparent._mode.watcher
monitoring = sys.version_info >= (3, 12)
assert [r.function for r in transparent.routed_functions()] == [step]
assert monitoring or not watcher.watching

def switch(variant, on):
    if variant == "plain" and monitoring:
        sys.monitoring.set_events(watcher.tool, sys.monitoring.events.PY_START if not on else 0)
    elif variant == "plain":
        gc.callbacks.append(watcher._on_gc) if not on else gc.callbacks.remove(watcher._on_gc)
    elif variant == "watching":
        janus.config.discovery_quiet_seconds = 1e9 if on else 0.2
        watcher._rearm("benchmark") if on else watcher.pause()

variants = ["plain", "enable"] + ([] if monitoring else ["watching"])
samples = {v: [] for v in variants}
for r in range(int(sys.argv[1])):
    for variant in variants[r % len(variants):] + variants[: r % len(variants)]:
        switch(variant, True)
        started = time.perf_counter()
        work(20000)
        samples[variant].append(time.perf_counter() - started)
        switch(variant, False)
        assert monitoring or not watcher.watching  # the stack samples found nothing new
print(json.dumps({v: statistics.median(t) for v, t in samples.items()}))
"""


def watch_overhead(rounds: int = 15) -> dict:
    """Seconds of the loop above with transparent mode's watcher on and off (and on 3.11 watching
    every call), once discovery is done: medians of interleaved rounds in one process."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "watch_overhead.py"  # a file: transparent mode needs the source of step()
        script.write_text(_WATCH_SCRIPT)
        out = subprocess.run([sys.executable, str(script), str(rounds)], env=env, check=True,
                             capture_output=True, text=True).stdout  # fmt: skip
    med = json.loads(out.strip().splitlines()[-1])
    return {"python": sys.version.split()[0], "seconds": med,
            **{f"{v}_over_plain": t / med["plain"] for v, t in med.items() if v != "plain"}}  # fmt: skip


if __name__ == "__main__":
    print(json.dumps(watch_overhead(), indent=1))
