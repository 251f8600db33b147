"""[enable] the recurrent-cell training loop of ``examples/recurrent_cell_enable.py``, three ways in
one process: eager, ``janus.enable()`` and a hand-written ``tf.function``.

A subclassed Keras model runs a hand-written tanh cell over 12 time steps of a batch of 16; the
training step counts steps in Python, appends each loss to a list and prints every 25 steps. Under
``janus.enable()`` the step and the model's ``call`` are routed through janus and every one of these
effects is kept (checked against eager over the first ``AGREEMENT_STEPS`` steps, prints included).
The hand-written ``tf.function`` compiles the step's math only; its Python loop keeps the counter,
the list and the print, as such code is written by hand.

The eager variant runs in the same process as the routed code: it calls the same functions with
``janus.config.disabled`` set, under which a routed function runs its original code (one extra
Python call per routed function, about a microsecond, against a step of milliseconds). The
timing starts once transparent mode has stopped watching calls (``config.discovery_quiet_seconds``
after the last new function): until then its trace hook slows every Python call, which is what the
second half of a short example run (``benchmarks/transparent.py``) still sees.
"""

from __future__ import annotations

import contextlib
import importlib.util
import itertools
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import tensorflow as tf

import janus
from benchmarks.harness import measure
from janus import transparent

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "recurrent_cell_enable.py"
AGREEMENT_STEPS = 60  # two of the example's log lines
DISCOVERY_PATIENCE = 30.0  # seconds of janus calls to wait for transparent mode to stop watching


def recurrent_cell(quick: bool = False) -> dict:
    """Times the three variants, interleaved, after checking that janus keeps eager's effects."""
    example = _load_example()
    data = example.batches(32)
    eager, routed = example.make_trainer(), example.make_trainer()
    baseline = _HandWritten(example, data)
    janus.enable()
    try:
        with _quiet_stderr():
            _check_agreement(eager, routed, data)
            settle = _settle(lambda: _step(routed, data))
            variants = {
                "eager": _eager(eager, data),
                "enable": _cycle(routed.train_step, data),
                "tf_function": _cycle(baseline, data),
            }
            m = measure("recurrent_cell", variants, unit="examples/s", items_per_step=example.BATCH,
                        warmup=3, repeats=3 if quick else 9, steps=5 if quick else 40)  # fmt: skip
            watching = transparent.is_watching()
        routed_names = sorted(r.jitted.fn.__qualname__ for r in transparent.routed_functions())
        stats = next(
            janus.stats(r.jitted) for r in transparent.routed_functions() if "train_step" in r.jitted.fn.__qualname__
        )
    finally:
        janus.disable()
    assert stats["graph_calls"] > 0.9 * stats["calls"], stats
    rate = {k: m.throughput(k) for k in variants}
    return {
        "name": "recurrent_cell_enable",
        "unit": "examples/s",
        "examples_per_s": rate,
        "ms_per_step": {k: v * 1e3 for k, v in m.per_step.items()},
        "enable_over_eager": m.ratio("enable", "eager"),
        "tf_function_over_eager": m.ratio("tf_function", "eager"),
        "enable_over_tf_function": m.ratio("enable", "tf_function"),
        "routed": routed_names,
        "train_step_stats": stats,
        "seconds_until_discovery_stopped": settle,
        "watching_while_timed": watching,
        "agreement_steps": AGREEMENT_STEPS,
    }


def _load_example():
    sys.path.insert(0, str(EXAMPLE.parent))  # the example imports its _common helpers from there
    spec = importlib.util.spec_from_file_location("recurrent_cell_enable", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _step(trainer, data: list) -> object:
    return trainer.train_step(*data[trainer.steps % len(data)])


def _cycle(step: Callable, data: list) -> Callable[[], object]:
    batches = itertools.cycle(data)
    return lambda: step(*next(batches))


def _eager(trainer, data: list) -> Callable[[], object]:
    batches = itertools.cycle(data)

    def run() -> object:
        janus.config.disabled = True  # the routed functions run their original code
        try:
            return trainer.train_step(*next(batches))
        finally:
            janus.config.disabled = False

    return run


def _check_agreement(eager, routed, data: list) -> None:
    """The first steps give eager's losses, weights, counter, history and log lines under enable()."""
    for n in range(AGREEMENT_STEPS):
        janus.config.disabled = True
        try:
            expected = float(_step(eager, data))
        finally:
            janus.config.disabled = False
        actual = float(_step(routed, data))
        assert abs(actual - expected) <= 1e-5 * max(1.0, abs(expected)), f"step {n}: loss {actual} != {expected}"
    assert routed.steps == eager.steps and len(routed.history) == len(eager.history) == AGREEMENT_STEPS
    np.testing.assert_allclose([float(v) for v in routed.history], [float(v) for v in eager.history], rtol=1e-5)
    for a, b in zip(routed.model.trainable_variables, eager.model.trainable_variables):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)


def _settle(step: Callable[[], object]) -> float:
    """Runs janus's steps until transparent mode stops watching calls; returns how long that took."""
    started = time.perf_counter()
    while transparent.is_watching():
        if time.perf_counter() - started > DISCOVERY_PATIENCE:
            raise AssertionError(f"transparent mode still watches calls after {DISCOVERY_PATIENCE} s")
        step()
    return time.perf_counter() - started


class _HandWritten:
    """The step written by hand: its math in a ``tf.function``, its bookkeeping in Python."""

    def __init__(self, example, data: list) -> None:
        self.trainer = trainer = example.make_trainer()
        model, optimizer = trainer.model, trainer.optimizer

        @tf.function
        def math(x, y):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.square(model(x) - y))
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
            return loss

        self.math = math
        with _quiet_stderr():
            self(*data[0])  # traced before janus.enable(): its Python is not seen by transparent mode

    def __call__(self, x, y):
        trainer = self.trainer
        loss = self.math(x, y)
        trainer.steps += 1
        trainer.history.append(loss)
        if trainer.steps % trainer.log_every == 0:
            tf.print("step", trainer.steps, "loss", loss)
        return loss


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """The steps' log lines (``tf.print`` writes to file descriptor 2) kept off the console."""
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def main() -> None:
    """``python -m benchmarks.recurrent_cell [--quick]``: prints the ratios, writes results/recurrent_cell.json."""
    import argparse

    from benchmarks.harness import write_json
    from benchmarks.report import recurrent_cell_markdown

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    result = recurrent_cell(parser.parse_args().quick)
    print(recurrent_cell_markdown(result))
    print(f"written: {write_json('recurrent_cell.json', result)}")


if __name__ == "__main__":
    main()
