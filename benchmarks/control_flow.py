"""[control-flow] benchmark: the PTB LSTM step eager, janus (unrolled and loop op) and tf.function."""

from __future__ import annotations

import janus
from benchmarks.harness import measure
from benchmarks.models import lstm


def _janus_step(unroll: bool):
    model = lstm.PTBModel(0)
    step = janus.jit(lstm.imperative_step(model, lstm.keras.optimizers.SGD(1.0)))
    previous = janus.config.unroll_loops
    janus.config.unroll_loops = unroll
    try:
        run = lstm.feeder(step, lstm.batches())
        for _ in range(janus.config.profile_calls + 1):  # profile and build under this setting
            run()
    finally:
        janus.config.unroll_loops = previous
    return run, step


def lstm_three_ways(quick: bool = False) -> dict:
    data = lstm.batches()
    eager = lstm.feeder(lstm.imperative_step(lstm.PTBModel(0), lstm.keras.optimizers.SGD(1.0)), data)
    symbolic = lstm.feeder(lstm.symbolic_step(lstm.PTBModel(0), lstm.keras.optimizers.SGD(1.0)), data)
    unrolled, unrolled_fn = _janus_step(unroll=True)
    looped, looped_fn = _janus_step(unroll=False)
    variants = {"imperative": eager, "janus": unrolled, "janus_loop_op": looped, "symbolic": symbolic}
    m = measure("lstm", variants, unit="words/s", items_per_step=lstm.BATCH * lstm.STEPS,
                warmup=2, repeats=3 if quick else 7, steps=2 if quick else 5)  # fmt: skip
    for fn in (unrolled_fn, looped_fn):
        assert janus.stats(fn)["graph_calls"] > 0, janus.explain(fn)
    return {
        "name": "lstm",
        "unit": "words/s",
        "imperative": m.throughput("imperative"),
        "janus": m.throughput("janus"),
        "janus_loop_op": m.throughput("janus_loop_op"),
        "symbolic": m.throughput("symbolic"),
        "ms_per_step": {k: v * 1e3 for k, v in m.per_step.items()},
        "janus_over_imperative": m.ratio("janus", "imperative"),
        "janus_over_symbolic": m.ratio("janus", "symbolic"),
        "unrl_effect": m.ratio("janus", "janus_loop_op"),
    }
