"""[core] benchmarks: LeNet three ways, per-call overhead, and profiler overhead."""

from __future__ import annotations

import tensorflow as tf

import janus
from benchmarks.harness import measure
from benchmarks.models import lenet
from janus.profiler import Profile, observe, profiled_call


def lenet_three_ways(quick: bool = False) -> dict:
    data = lenet.batches()
    steps = {}
    for variant in ("imperative", "janus", "symbolic"):
        model, opt = lenet.build_model(0)
        if variant == "symbolic":
            step = lenet.symbolic_step(model, opt)
        else:
            step = lenet.imperative_step(model, opt)
            if variant == "janus":
                step = jitted = janus.jit(step)
        steps[variant] = lenet.feeder(step, data)
    m = measure(
        "lenet", steps, unit="images/s", items_per_step=lenet.BATCH,
        warmup=5, repeats=3 if quick else 9, steps=3 if quick else 10,
    )  # fmt: skip
    janus_stats = janus.stats(jitted)
    assert janus_stats["graph_calls"] > 0, janus.explain(jitted)
    return {
        "name": "lenet",
        "unit": "images/s",
        "imperative": m.throughput("imperative"),
        "janus": m.throughput("janus"),
        "symbolic": m.throughput("symbolic"),
        "janus_over_imperative": m.ratio("janus", "imperative"),
        "janus_over_symbolic": m.ratio("janus", "symbolic"),
        "janus_graph_calls": janus_stats["graph_calls"],
        "janus_calls": janus_stats["calls"],
    }


def per_call_overhead(quick: bool = False) -> dict:
    def three_ops(x):
        return x * 2.0 + 1.0 - x

    x = tf.constant(3.0)
    jitted = janus.jit(three_ops)
    traced = tf.function(three_ops, input_signature=[tf.TensorSpec([], tf.float32)], autograph=False)

    def one_op():
        return x + 1.0

    variants = {
        "eager_one_op": one_op,
        "eager": lambda: three_ops(x),
        "tf_function": lambda: traced(x),
        "janus": lambda: jitted(x),
    }
    m = measure("overhead", variants, unit="us/call", warmup=20,
                repeats=5 if quick else 15, steps=200 if quick else 1000)  # fmt: skip
    us = {k: v * 1e6 for k, v in m.per_step.items()}
    assert janus.stats(jitted)["graph_calls"] > 0
    return {
        "name": "per_call_overhead",
        "unit": "us/call",
        **{f"{k}_us": v for k, v in us.items()},
        "janus_over_tf_function": m.ratio("janus", "tf_function"),
    }


def profiler_overhead(quick: bool = False) -> dict:
    model, opt = lenet.build_model(0)
    step = lenet.imperative_step(model, opt)
    x, y = lenet.batches(1)[0]
    observed = (observe(x), observe(y))
    profile = Profile()
    variants = {
        "eager": lambda: step(x, y),
        "profiled": lambda: profiled_call(profile, step, (x, y), {}, observed),
    }
    m = measure("profiler", variants, unit="ms/step", warmup=2, repeats=3 if quick else 7, steps=2 if quick else 5)
    return {
        "name": "profiler_overhead",
        "unit": "ms/step",
        "eager_ms": m.per_step["eager"] * 1e3,
        "profiled_ms": m.per_step["profiled"] * 1e3,
        "profiled_over_eager": m.per_step["profiled"] / m.per_step["eager"],
    }
