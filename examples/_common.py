"""Shared command line of the examples: ``--janus`` adds only ``janus.enable()``."""

from __future__ import annotations

import argparse
import atexit
import json
import time

import numpy as np


def parse(description: str, steps: int):
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--janus", action="store_true", help="run under janus.enable()")
    parser.add_argument("--jit", action="store_true", help="benchmarks only: wrap the step with @janus.jit instead")
    parser.add_argument("--steps", type=int, default=steps)
    parser.add_argument("--save", help="write final loss, weights and janus stats here (for tests)")
    args = parser.parse_args()
    if args.janus or args.jit:
        import janus

        atexit.register(lambda: print(janus.report()))  # what janus did, once the run is over
    if args.janus:
        janus.enable()
    return args


def jit_if_requested(fn):
    """For the benchmark's comparison only: ``--jit`` wraps the training step with ``janus.jit``."""
    import sys

    if "--jit" not in sys.argv:
        return fn
    import janus

    return janus.jit(fn)


class Meter:
    """Throughput over the whole run and over its second half (after profiling and graph builds)."""

    def __init__(self, steps: int) -> None:
        self.steps = steps
        self.start = time.perf_counter()
        self.examples = 0
        self.done = 0
        self.half: tuple[float, int] | None = None

    def step(self, examples: int) -> None:
        self.examples += examples
        self.done += 1
        if self.done == self.steps // 2:
            self.half = (time.perf_counter(), self.examples)

    def report(self, name: str, loss: float, args) -> None:
        now = time.perf_counter()
        rate = self.examples / (now - self.start)
        steady = (self.examples - self.half[1]) / (now - self.half[0]) if self.half else rate
        mode = "janus" if args.janus else "jit" if args.jit else "eager"
        print(f"{name} [{mode}]: {rate:.0f} examples/s, {steady:.0f} examples/s in the second half, "
              f"final loss {loss:.6f}")  # fmt: skip


def save(args, loss: float, weights: list) -> None:
    if not args.save:
        return
    payload = {"loss": loss, "weights": [np.asarray(w).tolist() for w in weights]}
    if args.janus:
        import janus
        from janus.transparent import routed_functions

        payload["stats"] = {r.jitted.fn.__qualname__: janus.stats(r.jitted) for r in routed_functions()}
    with open(args.save, "w") as out:
        json.dump(payload, out)
